"""The `direct` template: a phase whose A or B operand is `pack(D of phase p)` or
`transpose(D of phase p)`, with the operand built straight from phase p's accumulator registers.

What it cuts. The description names the operand's source; the staging is then found from the
dataflow, not from counts in the recipe: the backward slice from the operand registers the phase's
mma read, through their reaching definitions, down to phase p's mma. Every statement of the slice
must be data movement — `movmatrix…trans.b16`, the fp8 packs `cvt.rn.satfinite{.relu}.{e4m3x2,
e5m2x2}.f16x2`, `mov` joins, splits and copies, `prmt` with an immediate selector — or the splice is
refused. A slice statement is removed when every value it writes is read only by other removed
statements or by the phase's mma (liveness over the reaching definitions of the whole entry), else
it is kept as it was. The cut runs from the first removed statement to the end of the phase; what it
holds besides (the epilogue's other work, the mma) is re-emitted verbatim, in its order.

What it emits. The slice is evaluated symbolically, per lane and byte: each byte of each operand
register is "the conversion c of half h of accumulator register R in lane L". That is the whole
fragment mapping. The template then builds exactly those register values from the accumulators:
one conversion per accumulator register and conversion (shared by every operand byte that needs
it), in-lane bytes gathered with `mov.b32 {…}` or `prmt`, and bytes from other lanes only where the
mapping puts them there — by `movmatrix` on 8×8 b16 tiles whose halves pair two converted bytes, so
one `movmatrix` moves four bytes (the staging it replaces moves two: it transposes f16 before the
pack), and a `prmt` restores the original byte order. A byte whose lanes follow neither pattern is
refused with the lane and the byte. The operand registers keep their names, so the mma statements
are unchanged.

Bit-safety by construction. The mma read registers that hold, in every lane and byte, what the
original staging put there (the emitted code is evaluated by the same symbolic evaluation and
compared, byte for byte and lane for lane, before the splice is written), so each mma multiplies
the same values at the same k: the k-slots that each of sm_90's two HMMA.16816 halves sums
(docs/numerics.md: the registers' low halfwords, k mod 4 ∈ {0,1}, then the high ones) are the
original's, and the product is bit-identical. Any other construction — a cheaper byte order that
permutes k — would change which k-slots are summed together, so none is attempted: a mapping that
cannot be rebuilt exactly is a refusal, with the reason.

Outlining. With `outline: phase` the phase's mma run in a `.func`, called as the isolate template
calls its phase; with `outline: construction` the construction and everything after it in the cut
do (`outlined`: the isolate template applied to that range of the entry as the direct splice
leaves it, a splice of a splice). ptxas allocates the entry's registers around a call
differently — in the synthetic enc2, isolating phase 8 is what lowered the kernel's spills (176 to
164 bytes) and its time — so the direct construction and the isolation can be had together.

Liveness. The construction is placed where the first removed statement stood (`place: staging`,
the default: the accumulators are read where the original read them) or just before the phase's
first mma (`place: phase`: the accumulators stay live across the rest of the epilogue instead of
the operand). Either way every accumulator register it reads must still hold phase p's value
there (its reaching definition is phase p's mma) and no kept statement may write a register the
construction defines; otherwise the splice is refused naming the register and the statement.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import NamedTuple

from rr.describe.phases import is_mma, mma_operands
from rr.describe.dataflow import Dataflow
from rr.describe.provenance import Provenance
from rr.ptx import linearise, parse
from rr.ptx.statements import operands as statement_operands
from rr.ptx.model import Imm, Instruction, Reg, Vec, emit_items
from rr.ptx.opcodes import Opcode, parse_opcode
from rr.ptx.reaching import UNDEFINED
from rr.splice.assemble import assemble
from rr.splice.recipe import Check
from rr.templates import NotApplicable, TemplateError
from rr.templates.base import Cut, Entry, Spliced
from rr.templates.body import body_items, ranges, register_readers, register_types
from rr.templates.isolate import isolate
from rr.templates.transposed import MOVMATRIX, is_movmatrix, transposed

# the modifiers of cvt.rn.satfinite{.relu}.{e4m3x2,e5m2x2}.f16x2: an f16 pair packed into fp8
_PACKS = frozenset(("rn", "satfinite", *relu, t, "f16x2") for relu in ((), ("relu",)) for t in ("e4m3x2", "e5m2x2"))
_MOVE = ("mov.b32", "mov.b16", "mov.u32", "mov.u16", "mov.s32", "mov.s16")
PLACES = ("staging", "phase")
OUTLINES = ("none", "phase", "construction")
# build: the operand built from the accumulators; transposed: the accumulators' GEMM computed
# transposed, ending in the registers its transposes wrote (rr.templates.transposed)
CONSTRUCTIONS = ("build", "transposed")
BIT_SAFETY = ("the mma statements are unchanged and read operand registers that hold, in every lane and byte, "
              "the same conversion of the same accumulator half as the original staging produced (both "
              "evaluated symbolically and compared before the splice is written): the same values at the same "
              "k, so each HMMA.16816 half sums the original's k-slots and the product is bit-identical")


class Byte(NamedTuple):
    """One byte of a register in one lane: byte `part` of f16 half `half` of accumulator `reg` in
    lane `lane` (conv ''), or that half converted by the pack `conv` (part 0)."""

    conv: str
    reg: str
    lane: int
    half: int
    part: int = 0

    def text(self) -> str:
        kind = parse_opcode(self.conv).types[0].removesuffix("x2") if self.conv else "f16"
        return f"{kind}({self.reg}.{'hi' if self.half else 'lo'})"


Lanes = tuple  # 32 lanes, each a tuple of Bytes (2 for a b16 register, 4 for a b32)


def accumulator(reg: str) -> Lanes:
    """An f16x2 accumulator register as its bytes: lane l, half h, byte b."""
    return tuple(tuple(Byte("", reg, l, h, b) for h in (0, 1) for b in (0, 1)) for l in range(32))


def movmatrix_source(lane: int, half: int) -> tuple[int, int]:
    """movmatrix.trans.m8n8.b16: the (lane, half) whose b16 element lands in half `half` of
    `lane` (lane l holds row l>>2, columns 2(l&3), 2(l&3)+1 of the 8×8 tile, before and after)."""
    g, t = lane >> 2, lane & 3
    return 4 * (2 * t + half) + (g >> 1), g & 1


def _movmatrix(a: Lanes) -> Lanes:
    out = []
    for lane in range(32):
        bytes_ = []
        for e in (0, 1):
            src, h = movmatrix_source(lane, e)
            bytes_ += a[src][2 * h:2 * h + 2]
        out.append(tuple(bytes_))
    return tuple(out)


def _pack(a: Lanes, opcode: str, where: str) -> Lanes:
    out = []
    for lane in a:
        halves = []
        for h in (0, 1):
            lo, hi = lane[2 * h], lane[2 * h + 1]
            if lo.conv or hi.conv or (lo.reg, lo.lane, lo.half, lo.part, hi.part) != (hi.reg, hi.lane, hi.half, 0, 1):
                raise TemplateError(f"{where}: converts something other than a whole f16 of an accumulator")
            halves.append(Byte(opcode, lo.reg, lo.lane, lo.half))
        out.append(tuple(halves))
    return tuple(out)


def _prmt(a: Lanes, b: Lanes | None, selector: int, where: str) -> Lanes:
    picks = []
    for i in range(4):
        nibble = (selector >> (4 * i)) & 0xF
        if nibble & 8:
            raise TemplateError(f"{where}: a prmt that replicates a sign bit is no data movement")
        if nibble >= 4 and b is None:
            raise TemplateError(f"{where}: a prmt that selects bytes of an immediate")
        picks.append(nibble)
    return tuple(tuple((a[l] + (b[l] if b is not None else ()))[p] for p in picks) for l in range(32))


def evaluate(code: Opcode, ops: tuple, read, where: str) -> dict[str, Lanes]:
    """What a data-movement statement writes (register name -> its bytes per lane), reading its
    source registers through `read(name)`; a TemplateError for anything that computes."""
    def value(op) -> Lanes:
        if isinstance(op, Reg) and not op.special and not op.negated:
            return read(op.name)
        raise TemplateError(f"{where}: reads {op}, not a register holding accumulator data")

    dest = ops[0] if ops else None
    opcode = code.text
    if is_movmatrix(code) and len(ops) == 2 and isinstance(dest, Reg):
        return {dest.name: _movmatrix(value(ops[1]))}
    if code.base == "cvt" and code.mods in _PACKS and len(ops) == 2 and isinstance(dest, Reg):
        return {dest.name: _pack(value(ops[1]), opcode, where)}
    if opcode in _MOVE and len(ops) == 2:
        if isinstance(ops[1], Vec) and isinstance(dest, Reg):  # a join: mov.b32 %r, {%rs1, %rs2}
            parts = [value(x) for x in ops[1].items]
            return {dest.name: tuple(sum((p[l] for p in parts), ()) for l in range(32))}
        if isinstance(dest, Vec):  # a split: mov.b32 {%rs1, %rs2}, %r
            whole = value(ops[1])
            width = len(whole[0]) // len(dest.items)
            return {str(x): tuple(lane[i * width:(i + 1) * width] for lane in whole)
                    for i, x in enumerate(dest.items) if isinstance(x, Reg)}
        if isinstance(dest, Reg):
            return {dest.name: value(ops[1])}
    if opcode == "prmt.b32" and len(ops) == 4 and isinstance(dest, Reg) and isinstance(ops[3], Imm) \
            and isinstance(ops[3].value, int):
        b = None if isinstance(ops[2], Imm) else value(ops[2])
        return {dest.name: _prmt(value(ops[1]), b, ops[3].value & 0xFFFF, where)}
    raise TemplateError(f"{where} ({opcode}) computes on the accumulator's values: the operand is no pure "
                        "pack or transpose of it")


# -- the original staging ------------------------------------------------------------------------


@dataclass
class Staging:
    """The staging slice of one phase's pack/transpose operands, evaluated."""

    flow: Dataflow
    source_phase: int
    source_mma: frozenset  # the statements of phase p's mma
    values: dict = field(default_factory=dict)  # (register, defining statement) -> Lanes
    slice: set = field(default_factory=set)  # statements of the staging
    leaves: dict = field(default_factory=dict)  # accumulator register -> its defining mma statement

    def value(self, reg: str, at: int) -> Lanes:
        reach = self.flow.reaching(reg, at)
        where = f"s{at}"
        if len(reach) != 1 or reach[0] == UNDEFINED:
            raise TemplateError(f"{where}: {reg} is reached by {'no definition' if not reach or reach == (UNDEFINED,) else 'several definitions'}"
                                " (a value through branches or from outside): not a staging of phase "
                                f"{self.source_phase}'s accumulator")
        d = reach[0]
        if d in self.source_mma:
            if self.leaves.setdefault(reg, d) != d:
                raise TemplateError(f"{where}: accumulator {reg} is read from two different mma of phase "
                                    f"{self.source_phase}")
            return accumulator(reg)
        key = (reg, d)
        if key not in self.values:
            s = self.flow.statements[d - 1]
            if is_mma(s.code):
                raise TemplateError(f"{where}: {reg} is the D of s{d}, not of phase {self.source_phase}")
            if s.guard is not None:
                raise TemplateError(f"s{d}: {reg} is written under a guard ({s.guard})")
            written = evaluate(s.code, self.flow.operands(d), lambda r: self.value(r, d), f"s{d}")
            self.slice.add(d)
            for name, v in written.items():
                self.values[(name, d)] = v
        return self.values[key]


def removable(flow: Dataflow, staging: set, operand_reads: set, users: dict) -> tuple[set, dict]:
    """The staging statements whose every value is read only by other removed statements or by the
    phase's mma (`operand_reads`: (mma statement, register) pairs) — the largest such set — and,
    for each one that must stay, (its register, the statement that reads it elsewhere)."""
    removed, kept = set(staging), {}
    changed = True
    while changed:
        changed = False
        for d in sorted(removed):
            for reg in flow.statements[d - 1].defs:
                readers = [u for u in users.get(reg, ()) if d in flow.reaching(reg, u)]
                outside = [u for u in readers if u not in removed and (u, reg) not in operand_reads]
                if outside:
                    removed.discard(d)
                    kept[d] = (reg, outside[0])
                    changed = True
                    break
    return removed, kept


# -- the construction ----------------------------------------------------------------------------


class _Builder:
    """Emits the construction: fresh registers, memoised conversions, joins and transposes."""

    def __init__(self, taken: set):
        for prefix in ("%rrd", "%rrdh"):
            if any(r.startswith(prefix) and r[len(prefix):].isdigit() for r in taken):
                raise TemplateError(f"the entry already has registers named {prefix}N, the template's own")
        self.lines: list[str] = []
        self.n32 = self.n16 = 0
        self._memo: dict = {}

    def _fresh(self, wide: bool) -> str:
        if wide:
            self.n32 += 1
            return f"%rrd{self.n32 - 1}"
        self.n16 += 1
        return f"%rrdh{self.n16 - 1}"

    def _once(self, key, wide: bool, instruction) -> str:
        """The register `instruction(dest)` writes, emitted the first time `key` is asked for."""
        if key not in self._memo:
            self._memo[key] = r = self._fresh(wide)
            self.lines.append(instruction(r))
        return self._memo[key]

    def converted(self, conv: str, reg: str) -> str:
        """The b16 register holding `conv` of both halves of accumulator `reg` (byte h = half h)."""
        return self._once(("cvt", conv, reg), False, lambda d: f"{conv} \t{d}, {reg};")

    def joined(self, lo: str, hi: str) -> str:
        return self._once(("join", lo, hi), True, lambda d: f"mov.b32 \t{d}, {{{lo}, {hi}}};")

    def transposed(self, x: str) -> str:
        return self._once(("movmatrix", x), True, lambda d: f"{MOVMATRIX} \t{d}, {x};")

    def gather(self, sources: list[tuple[str, int, bool]], dest: str | None = None) -> str:
        """A b32 register whose byte i is byte sources[i][1] of register sources[i][0] (wide:
        sources[i][2]); into `dest` when given, else a fresh (memoised) register."""
        key = ("gather", tuple(sources))
        if dest is None and key in self._memo:
            return self._memo[key]
        words = list(dict.fromkeys((w, wide) for w, _, wide in sources))
        narrow = [w for w, wide in words if not wide]
        if not any(wide for _, wide in words) and len(narrow) <= 2 and \
                [(w, i) for w, i, _ in sources] == [(narrow[0], 0), (narrow[0], 1), (narrow[-1], 0), (narrow[-1], 1)]:
            out = dest or self._fresh(True)
            self.lines.append(f"mov.b32 \t{out}, {{{narrow[0]}, {narrow[-1]}}};")
        elif len(words) == 1 and words[0][1] and [i for _, i, _ in sources] == [0, 1, 2, 3]:
            out = dest or self._fresh(True)
            self.lines.append(f"mov.b32 \t{out}, {words[0][0]};")
        else:
            # narrow words joined two by two, then prmt over at most two wide words at a time
            wide_of: dict[str, tuple[str, int]] = {}
            for i in range(0, len(narrow), 2):
                pair = narrow[i:i + 2]
                w = self.joined(pair[0], pair[-1])
                wide_of[pair[0]] = (w, 0)
                if len(pair) == 2:
                    wide_of[pair[1]] = (w, 2)
            picks = [(w, i) if wide else (wide_of[w][0], wide_of[w][1] + i) for w, i, wide in sources]
            order = list(dict.fromkeys(w for w, _ in picks))
            out = dest or self._fresh(True)
            acc, have = order[0], {(order[0], i): i for i in range(4)}
            rest = order[1:] or [order[0]]
            for n, other in enumerate(rest):
                sel = 0
                for pos, p in enumerate(picks):
                    if p in have:
                        nib = have[p]
                    elif p[0] == other:
                        nib = 4 + p[1]
                    else:
                        nib = 0  # a byte a later step fills
                    sel |= nib << (4 * pos)
                target = out if n == len(rest) - 1 else self._fresh(True)
                self.lines.append(f"prmt.b32 \t{target}, {acc}, {other}, 0x{sel:04X};")
                acc = target
                have = {p: pos for pos, p in enumerate(picks) if p in have or p[0] == other}
        if dest is None:
            self._memo[key] = out
        return out


def _classify(target: Lanes, reg: str) -> list:
    """Per byte of an operand register: ('lane', (conv, R, h)) when every lane takes it from its own
    accumulators, ('trans', e, column) when every lane takes it from the lane movmatrix puts there
    (half e), column = the (conv, R, h) the source lanes hold by their half g&1."""
    out = []
    for j in range(4):
        col = [target[l][j] for l in range(32)]
        if any(not c.conv for c in col):
            raise TemplateError(f"{reg}: byte {j} is an unconverted f16 byte; only fp8 packs are built")
        if all(c.lane == l for l, c in enumerate(col)):
            kinds = {(c.conv, c.reg, c.half) for c in col}
            if len(kinds) == 1:
                out.append(("lane", kinds.pop()))
                continue
        for e in (0, 1):
            if all(c.lane == movmatrix_source(l, e)[0] for l, c in enumerate(col)):
                by_q: dict[int, set] = {0: set(), 1: set()}
                for l, c in enumerate(col):
                    by_q[movmatrix_source(l, e)[1]].add((c.conv, c.reg, c.half))
                if all(len(v) == 1 for v in by_q.values()):
                    out.append(("trans", e, (by_q[0].pop(), by_q[1].pop())))
                    break
        else:
            bad = next(l for l, c in enumerate(col) if c.lane != l)
            raise TemplateError(
                f"{reg}: byte {j} of lane {bad} comes from lane {col[bad].lane} ({col[bad].text()}), a lane mapping "
                "that is neither in-lane nor one movmatrix transpose of 8×8 b16 tiles; the direct construction "
                "must reproduce the original operand bytes (any other byte order changes the k-slots each "
                "HMMA half sums: not bit-safe), and no such construction is known for this mapping")
    return out


def build(targets: dict[str, Lanes], builder: _Builder) -> dict[str, list[str]]:
    """Emit code giving every operand register its target bytes; returns each register's byte
    descriptions (for the record)."""
    described: dict[str, list[str]] = {}
    done: dict[Lanes, str] = {}
    columns: dict[tuple, tuple[str, int]] = {}  # column content -> (movmatrix input, its byte b)
    for reg, target in targets.items():
        if target in done:  # the same bytes as an operand built already (phase 7's A and B)
            builder.lines.append(f"mov.b32 \t{reg}, {done[target]};")
            described[reg] = [f"= {done[target]}"]
            continue
        kinds = _classify(target, reg)
        wanted = list(dict.fromkeys(k[2] for k in kinds if k[0] == "trans" and k[2] not in columns))
        for i in range(0, len(wanted), 2):
            pair = wanted[i:i + 2]
            cols = pair if len(pair) == 2 else [pair[0], pair[0]]
            # X byte 2q+b holds column b's content for the half q: (conv, R, h) -> converted(R) byte h
            srcs = [(builder.converted(cols[b][q][0], cols[b][q][1]), cols[b][q][2], False)
                    for q in (0, 1) for b in (0, 1)]
            x = builder.gather(srcs)
            for b, col in enumerate(pair):
                columns[col] = (x, b)
        sources, text = [], []
        for k in kinds:
            if k[0] == "lane":
                conv, r, h = k[1]
                sources.append((builder.converted(conv, r), h, False))
                text.append(Byte(conv, r, 0, h).text())
            else:
                e, col = k[1], k[2]
                x, b = columns[col]
                sources.append((builder.transposed(x), 2 * e + b, True))
                text.append("movmatrix(" + " | ".join(Byte(c, r, 0, h).text() for c, r, h in col)
                            + f") row 2t+{e}")
        builder.gather(sources, reg)
        done[target] = reg
        described[reg] = text
    return described


def check(lines: list[str], targets: dict[str, Lanes], accumulators: set) -> None:
    """Evaluate the emitted lines as the original staging was evaluated and require every operand
    register's bytes to be its target's: the construction's bit-safety, checked on its text."""
    text = (".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry rr_direct_check()\n{\n"
            + "".join(f"\t{line}\n" for line in lines) + "\tret;\n}\n")
    statements = linearise(parse(text, "<direct construction>").function("rr_direct_check"))
    values: dict[str, Lanes] = {}

    def read(reg: str) -> Lanes:
        if reg in values:
            return values[reg]
        if reg in accumulators:
            return accumulator(reg)
        raise TemplateError(f"internal: the construction reads {reg} before writing it")

    for s in statements[:-1]:
        values.update(evaluate(s.code, statement_operands(s), read, f"construction line {s.stmt}"))
    for reg, target in targets.items():
        if values.get(reg) != target:
            raise TemplateError(f"internal: the construction of {reg} differs from the original staging")


# -- the template --------------------------------------------------------------------------------


class Lead(NamedTuple):
    """Where a range of a replacement begins: after `statements` of its statements, `items` of its
    entries (an instruction, or a { } block kept whole)."""

    statements: int
    items: int


@dataclass
class Built:
    """The build construction's splice (with the cut it chose), and where in its replacement the
    construction and the phase begin (the ranges outlining moves into a `.func`)."""

    spliced: Spliced
    construction: Lead
    phase: Lead


def build_construction(entry: Entry, phase: int, place: str) -> Built:
    """The build construction for `phase`; NotApplicable where no operand is a pack or transpose,
    a TemplateError saying why it cannot be built."""
    flow, phases, types = entry.flow, entry.phases, register_types(entry.function)
    p = phases[phase - 1]
    provenance = Provenance(flow, phases, entry.epilogues)
    sources = provenance.phase_operands(p)
    roles, reasons = {}, []
    for role in ("A", "B"):
        found = sources[role]
        kinds = {(s.kind, s.phase) for s in found}
        what = " + ".join(dict.fromkeys(str(s) for s in found)) or "nothing"
        if len(kinds) == 1 and next(iter(kinds))[0] in ("pack", "transpose"):
            roles[role] = found[0]
        else:
            reasons.append(f"{role} is {what}")
    if not roles:
        raise NotApplicable(f"{' and '.join(reasons)}: neither operand is a pack or transpose of an earlier "
                            "phase's accumulator, so there is no staging to build directly")
    statements = flow.statements
    mmas = [st for st in range(p.first_stmt, p.last_stmt + 1) if provenance.phase_of.get(st) == phase]
    # the operand registers each mma reads, per role, in order of first read
    operand_reads: set = set()
    regs: dict[str, str] = {}  # operand register -> role
    for st in mmas:
        _, a, b, _ = mma_operands(statements[st - 1].code, flow.operands(st))
        for role, names in (("A", a), ("B", b)):
            if role in roles:
                for r in names:
                    operand_reads.add((st, r))
                    regs.setdefault(r, role)
    targets: dict[str, Lanes] = {}
    stagings: dict[int, Staging] = {}
    for reg, role in regs.items():
        src = roles[role].phase
        if src not in stagings:
            own = frozenset(s for s, q in provenance.phase_of.items() if q == src)
            stagings[src] = Staging(flow, src, own)
        at = next(st for st, r in sorted(operand_reads) if r == reg)
        value = stagings[src].value(reg, at)
        if len(value[0]) != 4:
            raise TemplateError(f"{reg}: a {8 * len(value[0])}-bit operand register, not a b32 fragment word")
        targets[reg] = value
    staging = set().union(*(s.slice for s in stagings.values()))
    removed, kept_staging = removable(flow, staging, operand_reads, register_readers(statements))
    if not removed:
        # name a read from outside the staging, not a staging statement kept because of one
        d, (reg, u) = min(kept_staging.items(), key=lambda kv: (kv[1][1] in staging, kv[0]))
        raise TemplateError(f"every staging statement's value is also read outside the operand (s{d}'s {reg} by "
                            f"s{u}, {statements[u - 1].opcode}): nothing to remove")
    # operands whose last staging statement stays (its value is read elsewhere) keep theirs
    for reg in list(targets):
        d = flow.definition(reg, next(st for st, r in sorted(operand_reads) if r == reg))
        if d not in removed:
            del targets[reg]
    # the cut holds whole body-level items (NVVM wraps inline asm, cuda_fp8.h's packs among it, in
    # { } blocks): from the one that holds the first removed statement
    items = body_items(flow.function)
    first = next(a for a, b, _ in items if a <= min(removed) <= b)
    last = p.last_stmt
    if statements[last - 1].scope:
        raise TemplateError(f"the phase ends inside a {{ }} block (s{last}): no cut can end there")
    inside = [q.phase for q in phases if q.phase != phase and first <= q.last_stmt and q.first_stmt <= last]
    if inside:
        raise TemplateError(f"the staging begins at s{first}, before phase {inside[-1]}: the cut would hold "
                            "two phases")
    cfg = flow.cfg
    if cfg.block_of(first) != cfg.block_of(last):
        raise TemplateError(f"s{first}–s{last} is not one basic block (a branch or label between the staging "
                            "and the phase): the construction cannot be placed by position")
    at = min(removed) if place == "staging" else p.first_stmt
    leaves = {r: (d, s.source_phase) for s in stagings.values() for r, d in s.leaves.items()}
    for reg, (d, src) in leaves.items():
        if any(reg in statements[x - 1].defs for x in removed):
            raise TemplateError(f"accumulator {reg} is also written by the staging")
        if flow.reaching(reg, at) != (d,):
            raise TemplateError(f"accumulator {reg} of phase {src} no longer holds s{d}'s value at s{at} (the code "
                                "reuses the register): a construction there would read another value")
    builder = _Builder(set(types))
    described = build(targets, builder)
    check(builder.lines, targets, set(leaves))
    written = set(targets) | {w for line in builder.lines for w in re.findall(r"%rrdh?\d+", line)}
    kept = [s for s in statements[first - 1:last] if s.stmt not in removed]
    for s in kept:
        clash = written & (set(s.defs) | set(s.uses))
        if clash and not (is_mma(s.code) and s.stmt in mmas and not clash & set(s.defs)):
            raise TemplateError(f"s{s.stmt} ({s.opcode}) kept in the cut touches {', '.join(sorted(clash))}, "
                                "which the construction writes")
    replacement, lead, phase_lead, count = [], None, None, 0  # count: the replacement's statements so far
    for a, b, item in items:
        if b < first or a > last:
            continue
        if a <= at <= b:
            lead = Lead(count, len(replacement))
            replacement += builder.lines
            count += len(builder.lines)
        if phase_lead is None and a >= p.first_stmt:
            phase_lead = Lead(count, len(replacement))
        gone = [x for x in range(a, b + 1) if x in removed]
        if type(item) is Instruction:
            replacement += [] if gone else [statements[a - 1].text]
            count += not gone
        elif not gone:  # a block kept whole, as it was written
            text: list = []
            emit_items([item], text)
            replacement.append("".join(text).strip())
            count += b - a + 1
        elif len(gone) != b - a + 1:
            raise TemplateError(f"the {{ }} block s{a}–s{b} holds staging (s{gone[0]}) and other statements: it "
                                "cannot be cut in part")
    declarations = ([f".reg .b32 \t%rrd<{builder.n32}>;"] if builder.n32 else []) + \
        ([f".reg .b16 \t%rrdh<{builder.n16}>;"] if builder.n16 else [])
    added = Counter(line.split()[0] for line in builder.lines)
    removed_ops = Counter(statements[d - 1].opcode for d in removed)
    in_lane = sum(1 for d in described.values() for t in d if not t.startswith(("movmatrix", "=")))
    moved = sum(1 for d in described.values() for t in d if t.startswith("movmatrix"))
    record = {
        "operands": [{"role": role, "source": str(src), "phase": src.phase,
                      "registers": sorted(r for r, q in regs.items() if q == role),
                      "built": sorted(r for r in targets if regs[r] == role)} for role, src in roles.items()],
        "refused_roles": reasons,
        "staging": {"statements": len(staging), "kept": ranges(kept_staging)},
        "removed": {"statements": len(removed), "ranges": ranges(removed), "ops": dict(sorted(removed_ops.items()))},
        "kept_in_cut": {"statements": len(kept), "mma": len(mmas)},
        "added": {"instructions": len(builder.lines), "ops": dict(sorted(added.items()))},
        "place": place, "at_stmt": at,
        "accumulators": {"phase": sorted({s.source_phase for s in stagings.values()}), "registers": len(leaves),
                         "live_at_construction": True},
        "mapping": {
            "in_lane_bytes": in_lane, "movmatrix_bytes": moved,
            "rule": ("each operand byte is the fp8 conversion of one accumulator half; in-lane bytes are "
                     "gathered by mov.b32/prmt, bytes of other lanes by movmatrix on b16 pairs of two converted "
                     "bytes (four bytes per movmatrix) and put back in the original order by prmt"),
            "registers": described,
        },
        "k_slots": "unchanged: the operand registers are bit-identical to the original staging's",
        "bit_safety": BIT_SAFETY,
    }
    spliced = Spliced(replacement, declarations, record=record, cut=Cut(entry, first, last, phase))
    return Built(spliced, lead, phase_lead)


def outlined(entry: Entry, direct: Built, outline: str) -> Spliced:
    """The direct splice with its phase (`outline: phase`) or its construction and all that follows
    it in the cut (`construction`) moved into a `.func`: the isolate template applied to that range
    of the entry as the direct splice leaves it. The range ends the replacement, so the result is
    the direct splice's replacement up to the range, then the call."""
    spliced, cut = direct.spliced, direct.spliced.cut
    name = f"rr_{entry.function.name}_phase{cut.phase}_direct"
    changed = assemble(entry.text, entry.function.name, cut.first, cut.last, spliced.replacement, spliced.declarations,
                       entry.source, function=entry.function, statements=entry.statements)
    after = Entry(changed.text, entry.function.name, entry.source)
    lead = direct.phase if outline == "phase" else direct.construction
    # the phase's last mma ends the replacement
    moved = Cut(after, cut.first + lead.statements, cut.first + changed.inserted - 1, cut.phase)
    call = isolate(after, moved, name)
    live = moved.live
    record = {**spliced.record, "outline": {
        "what": outline, "function": name, "statements": moved.last - moved.first + 1, "live_in": len(live.live_in),
        "live_out": len(live.live_out), "predicates_in": len(live.predicates_in),
        "predicates_out": len(live.predicates_out)}}
    return Spliced(spliced.replacement[:lead.items] + call.replacement, spliced.declarations,
                   functions=call.functions, record=record, cut=cut)


class Direct:
    """The template: `params.construction` build (default; with `place` and `outline`) or
    transposed (rr.templates.transposed). It finds its cut itself, from the description."""

    checks = (Check.IDENTICAL_OUTPUT,)

    def apply(self, entry: Entry, cut: Cut, params: dict) -> Spliced:
        if cut.widened:
            raise TemplateError("the direct template finds the statements it cuts from the description: a recipe "
                                "for it gives no with_epilogue_before / with_epilogue_after")
        construction = params.get("construction", "build")
        if construction not in CONSTRUCTIONS:
            raise TemplateError(f"params.construction: {construction!r} is not one of {', '.join(CONSTRUCTIONS)}")
        outline = params.get("outline", "none")
        if construction == "transposed":
            if outline != "none":
                raise TemplateError("params.outline: the transposed construction is not outlined (outline: none)")
            if "place" in params:  # its steps stand where the steps they replace stood
                raise TemplateError("params.place: the transposed construction places each step itself; give no "
                                    "place")
            return transposed(entry, cut.phase)
        place = params.get("place", "staging")
        if place not in PLACES:
            raise TemplateError(f"params.place: {place!r} is not one of {', '.join(PLACES)}")
        if outline not in OUTLINES:
            raise TemplateError(f"params.outline: {outline!r} is not one of {', '.join(OUTLINES)}")
        direct = build_construction(entry, cut.phase, place)
        return direct.spliced if outline == "none" else outlined(entry, direct, outline)

