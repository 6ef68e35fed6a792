"""The `regen` template: the phase re-emitted from its description alone.

Every A and B fragment and every C seed that the description traces to global memory is loaded
again from its derived address — base pointer, lane part, every other term (the `%tid.z` slab, the
block, scalar parameters, a loop's trip index) and byte offset — instead of reusing the registers
the engine loaded. Inside a loop the address is rebuilt per trip: the trip index comes from one of
the loop's induction registers, read as it stands at the cut. An A or B that came through shared
memory from global memory element by element (`cp.async` → `ldmatrix`, as Triton and CUTLASS
stage them: rr.describe.staging) is read again from its shared address at the cut
(rr.templates.reread: the read issued again, its bytes put together as the description says),
or, where that cannot be done, read as the kernel left it with the reason in the record. Operands
the epilogue before computed in registers (packs, transposes, other shared-memory reads, a C
chained from an earlier phase's D, a zero, an accumulator carried round a loop) are read from
those registers (live-ins): they are the epilogue's work, not the phase's. An operand traced to global memory that cannot be rebuilt (a
load under a guard, an address with a data-dependent term, several loads reaching through
branches) refuses the splice, naming the operand and the term; nothing is passed through
silently. The record says, per operand, which it was and why.

The chains are emitted in canonical order (m-tile, n-tile, then k) and each chain's last step
writes the register the rest of the kernel reads. If the spliced kernel's output is byte-identical
to the engine's, the description is complete.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from rr.describe.phases import is_mma, mma_operands
from rr.describe.dataflow import Dataflow
from rr.describe.memory import Access
from rr.describe.provenance import Provenance
from rr.describe.values import Value, bit_fields, lanes, special_register_parts
from rr.ptx.statements import Statement
from rr.ptx.model import Imm, Reg, Vec
from rr.ptx.opcodes import Opcode
from rr.ptx.reaching import UNDEFINED
from rr.splice.recipe import Check
from rr.templates import TemplateError
from rr.templates.base import Cut, Entry, Spliced
from rr.templates.body import register_types
from rr.templates.reread import reread

_GLOBAL = ("weight", "table")
_WIDTH_CLASS = {2: "b16", 4: "b32", 8: "b64"}
_PREFIX = {"b16": "%rrgh", "b32": "%rrg", "b64": "%rrgd"}


@dataclass
class Operand:
    """How regen obtains one mma operand."""

    role: str  # A, B or C
    stmt: int  # the mma statement
    registers: tuple
    how: str  # memory (rebuilt), shared (read again from shared memory), live-in (read as the epilogue
    # left it), chain (the previous step's D)
    reason: str = ""
    loads: list = field(default_factory=list)  # statements of the loads it was rebuilt from

    def as_dict(self) -> dict:
        return {"role": self.role, "stmt": self.stmt, "registers": list(self.registers), "from": self.how,
                "reason": self.reason, "loads": self.loads}


class _Emitter:
    """Fresh registers, and code computing address terms (memoised per term)."""

    def __init__(self, flow: Dataflow, params: list, first: int, types: dict):
        self.flow = flow
        self.types = types  # register -> declared type ('.b32', …)
        self.params = params
        self.first = first
        self.lines: list[str] = []
        self.counts = {"b16": 0, "b32": 0, "b64": 0}
        self._memo: dict = {}
        self.induction_reads: dict[int, str] = {}  # loop -> the induction register read

    def mark(self) -> tuple:
        return len(self.lines), dict(self._memo), dict(self.induction_reads)

    def back_to(self, mark: tuple) -> None:
        """Forget the code emitted since `mark` (and what it computed); its registers stay unused."""
        del self.lines[mark[0]:]
        self._memo, self.induction_reads = dict(mark[1]), dict(mark[2])

    def reg(self, cls: str) -> str:
        self.counts[cls] += 1
        return f"{_PREFIX[cls]}{self.counts[cls] - 1}"

    def param_at(self, offset: int) -> tuple[str, int]:
        for p in self.params:
            at = self.flow.params[p.name]
            if at <= offset < at + p.size:
                return p.name, offset - at
        raise TemplateError(f"no kernel parameter holds byte {offset} of the parameter space")

    def _once(self, key, build) -> str:
        if key not in self._memo:
            self._memo[key] = build()
        return self._memo[key]

    def _wide(self, reg32: str, signed: bool = False) -> str:
        out = self.reg("b64")
        self.lines.append(f"cvt.{'s64.s32' if signed else 'u64.u32'} \t{out}, {reg32};")
        return out

    def lane(self) -> str:
        def build():
            r = self.reg("b32")
            self.lines.append(f"mov.u32 \t{r}, %laneid;")
            return r
        return self._once("lane", build)

    def factor(self, f: tuple, what: str) -> str:
        """A 64-bit register holding one factor's value."""
        def build():
            kind = f[0]
            if kind == "sreg":  # %ctaid.x, or a part of one: tid.z&1, tid.x>>5
                register, ops = special_register_parts(f[1])
                r = self.reg("b32")
                self.lines.append(f"mov.u32 \t{r}, %{register};")
                for op, k in ops:
                    self.lines.append(f"{'and.b32' if op == '&' else 'shr.u32'} \t{r}, {r}, {k};")
                return self._wide(r)
            if kind == "param":
                bits, signed = self.flow.values.ranges.param_widths.get(f[1], (64, False))
                name, inner = self.param_at(f[1])
                if bits == 64:
                    r = self.reg("b64")
                    self.lines.append(f"ld.param.u64 \t{r}, [{name}+{inner}];")
                    return r
                r = self.reg("b32" if bits == 32 else "b16")
                self.lines.append(f"ld.param.{'s' if signed else 'u'}{bits} \t{r}, [{name}+{inner}];")
                if bits == 16:
                    w = self.reg("b64")
                    self.lines.append(f"cvt.{'s64.s16' if signed else 'u64.u16'} \t{w}, {r};")
                    return w
                return self._wide(r, signed)
            if kind == "trip":
                return self.trip(f[1], what)
            raise TemplateError(f"{what}: its address has the term {_describe_factor(f)}, which regen cannot rebuild")
        return self._once(("factor", f), build)

    def trip(self, loop: int, what: str) -> str:
        """Loop `loop`'s trip index as it stands at the cut, from one of its induction registers."""
        from rr.describe.loops import induction_variables

        flow = self.flow
        for iv in induction_variables(flow, flow.cfg.loop(loop)):
            v = flow.values.value(Reg(iv.register), self.first)
            step = dict(v.terms).get((("trip", loop),))
            rest = v.plus(Value.factor(("trip", loop)).scaled(step or 0), -1)
            if not isinstance(step, int) or not step or any(x[0] == "trip" for x in rest.factors()):
                continue
            try:
                base = self.value_of(rest, what)
            except TemplateError:
                continue
            if self.types.get(iv.register, ".b32")[-2:] == "64":
                r = self.reg("b64")
                self.lines.append(f"mov.b64 \t{r}, {iv.register};")
            else:
                r = self._wide(iv.register, signed=True)
            self.lines.append(f"sub.s64 \t{r}, {r}, {base};")
            if step != 1:
                self.lines.append(f"div.s64 \t{r}, {r}, {step};")
            self.induction_reads[loop] = iv.register
            return r
        raise TemplateError(f"{what}: its address advances with loop {loop}'s trips, and no induction "
                            f"register of loop {loop} gives the trip index at the cut")

    def lane_value(self, c, what: str) -> str:
        """A 64-bit register holding a per-lane coefficient, built from bit fields of the lane."""
        def build():
            vals = lanes(c)
            fields = bit_fields(c)
            if fields is None:
                raise TemplateError(f"{what}: its lane part {list(vals)} is not a sum of bit fields of the "
                                    "lane, which regen cannot rebuild")
            total = self.reg("b64")
            self.lines.append(f"mov.u64 \t{total}, {vals[0]};")
            lane = self.lane()
            for lo, n, weight in fields:
                t = self.reg("b32")
                self.lines.append(f"bfe.u32 \t{t}, {lane}, {lo}, {n};")
                self.lines.append(f"mad.wide.u32 \t{total}, {t}, {weight}, {total};" if weight > 0 else
                                  f"mad.wide.s32 \t{total}, {t}, {weight}, {total};")
            return total
        return self._once(("lane", lanes(c)), build)

    def value_of(self, value, what: str) -> str:
        """A 64-bit register holding a symbolic value (every term rebuilt)."""
        total = self.reg("b64")
        self.lines.append(f"mov.u64 \t{total}, 0;")
        for factors, c in value.terms:
            regs = [self.factor(f, what) for f in factors]
            if isinstance(c, tuple):
                regs.append(self.lane_value(c, what))
                c = 1
            if not regs:
                self.lines.append(f"add.s64 \t{total}, {total}, {c};")
                continue
            prod = regs[0]
            for r in regs[1:]:
                t = self.reg("b64")
                self.lines.append(f"mul.lo.s64 \t{t}, {prod}, {r};")
                prod = t
            if c != 1:
                self.lines.append(f"mad.lo.s64 \t{total}, {prod}, {c}, {total};")
            else:
                self.lines.append(f"add.s64 \t{total}, {total}, {prod};")
        return total

    def address(self, acc: Access, what: str) -> str:
        """A register holding the access's base pointer plus every term but the constant offset."""
        key = ("address", acc.base, acc.space, acc.lane_bytes, acc.terms)

        def build():
            base = acc.base
            if base is not None and base.offset is not None:  # a pointer from the parameter space
                name, inner = self.param_at(base.offset)
                ptr = self.reg("b64")
                self.lines.append(f"ld.param.u64 \t{ptr}, [{name}+{inner}];")
                if acc.space == "global":
                    self.lines.append(f"cvta.to.global.u64 \t{ptr}, {ptr};")
            elif base is not None and acc.space != "generic":  # a variable's address
                ptr = self.reg("b64")
                self.lines.append(f"mov.u64 \t{ptr}, {base.symbol};")
            else:
                raise TemplateError(f"{what}: loaded through no pointer regen can name "
                                    f"(base {str(base) if base is not None else None!r})")
            if acc.lane_bytes is not None:
                self.lines.append(f"add.s64 \t{ptr}, {ptr}, {self.lane_value(acc.lane_bytes, what)};")
            if acc.terms:
                self.lines.append(f"add.s64 \t{ptr}, {ptr}, {self.value_of(Value(acc.terms), what)};")
            return ptr
        return self._once(key, build)


def _describe_factor(f: tuple) -> str:
    kind = f[0]
    if kind == "opaque":
        return f"{f[2]} (the value of s{f[1]}, which the analysis cannot see through)"
    if kind == "input":
        return f"{f[1]} (a register no statement writes)"
    return repr(f)


def regen(entry: Entry, at: Cut) -> Spliced:
    """The phase's cut `at` (one phase) re-emitted from the description of `entry`."""
    flow, first, last, live_out = entry.flow, at.first, at.last, at.live.live_out
    cut = flow.statements[first - 1:last]
    mmas = [s for s in cut if is_mma(s.code)]
    others = [s for s in cut if not is_mma(s.code)]
    if not mmas or any(s.code.base != "mma" for s in mmas):
        raise TemplateError(f"regen re-emits mma.sync phases; the cut s{first}–s{last} has "
                            f"{(mmas or cut)[0].opcode}")
    provenance = Provenance(flow, entry.phases, entry.epilogues)
    own = frozenset(s.stmt for s in mmas)
    em = _Emitter(flow, entry.function.params, first, register_types(flow.function))
    planned: dict[tuple, tuple] = {}  # (operand registers, mma statement) -> the registers to use
    operands: list[Operand] = []
    fresh_of_load: dict[int, list[str]] = {}  # load statement -> fresh registers (all its elements)

    def load(d: int, what: str, guard: str | None = None) -> list[str]:
        """Fresh registers holding what load statement d loads (under `guard`: a load of its own)."""
        if guard is None and d in fresh_of_load:
            return fresh_of_load[d]
        s = flow.statements[d - 1]
        acc = flow.memory.access(d)
        per = acc.width // max(len(s.defs), 1)
        cls = _WIDTH_CLASS.get(per)
        if cls is None:
            raise TemplateError(f"{what}: loaded {per} bytes per register at s{d}, which regen does not rebuild")
        ptr = em.address(acc, what)
        regs = [em.reg(cls) for _ in s.defs]
        vec = f".v{len(regs)}" if len(regs) > 1 else ""
        dest = "{" + ", ".join(regs) + "}" if len(regs) > 1 else regs[0]
        em.lines.append(f"{'@' + guard + ' ' if guard else ''}ld.{acc.space}{vec}.b{8 * per} \t{dest}, [{ptr}+{acc.offset}];")
        if guard is None:
            fresh_of_load[d] = regs
        return regs

    def rebuild(reg: str, at: int, what: str, loads: list) -> str:
        """A fresh register holding what `reg` holds at `at`, from memory; TemplateError if not."""
        reach = flow.reaching(reg, at)
        if len(reach) == 1 and reach[0] != UNDEFINED:
            return written(reg, reach[0], what, loads)
        sel = flow.values.selection(reg, at)
        if sel is None:
            where = ", ".join("entry" if d == UNDEFINED else f"s{d}" for d in reach)
            raise TemplateError(f"{what}: {reg} is reached by several definitions ({where}), which regen "
                                "cannot choose between")
        if flow.reaching(sel.guard, first) != flow.reaching(sel.guard, sel.branch):
            raise TemplateError(f"{what}: {reg} is chosen by the if at s{sel.branch} on {sel.guard}, which is "
                                "written again before the phase")
        out = written(reg, sel.when_false, what, loads)
        fresh = em.reg(_class_of(out))
        em.lines.append(f"mov.b{_bits(out)} \t{fresh}, {out};")
        written(reg, sel.when_true, what, loads, guard=sel.guard, into=fresh)
        return fresh

    def written(reg: str, d: int, what: str, loads: list, guard: str | None = None, into: str | None = None) -> str:
        """What statement d writes to `reg`, rebuilt (under `guard`, into register `into`)."""
        s = flow.statements[d - 1]
        ops = flow.operands(d)
        g = f"@{guard} " if guard else ""
        acc = flow.memory.access(d) if s.code.base == "ld" else None
        if acc is not None and acc.space in ("global", "const", "generic", "shared"):
            if s.guard is not None:
                raise TemplateError(f"{what}: {reg} is loaded under the guard @{s.guard} (s{d}), which regen "
                                    "cannot rebuild")
            unknown = acc.unknown()
            if unknown:
                raise TemplateError(f"{what}: the address of s{d} has the term {_describe_factor(unknown[0])}, "
                                    "which regen cannot rebuild")
            loads.append(d)
            value = load(d, what, guard)[list(s.defs).index(reg)]
        elif s.code.base == "mov" and len(ops) == 2 and isinstance(ops[1], Vec) and s.guard is None:
            parts = [rebuild(str(p), d, what, loads) for p in ops[1].items]
            value = em.reg(_WIDTH_CLASS[s.code.bits // 8])
            em.lines.append(f"{s.opcode} \t{value}, {{{', '.join(parts)}}};")
        elif s.code.base == "mov" and len(ops) == 2 and isinstance(ops[1], Imm) and s.guard is None:
            value = into or em.reg(_WIDTH_CLASS.get((s.code.bits or 32) // 8, "b32"))
            em.lines.append(f"{g}{s.opcode} \t{value}, {ops[1]};")
            return value
        else:
            raise TemplateError(f"{what}: {reg} is traced to global memory but written by s{d} ({s.opcode}), "
                                "which regen does not rebuild")
        if into is not None:
            em.lines.append(f"{g}mov.b{_bits(value)} \t{into}, {value};")
            return into
        return value

    reread_of: dict[tuple, tuple] = {}  # (registers, their definitions) -> the registers re-read

    def reread_staged(role: str, regs: tuple, stmt: int, through, what: str) -> tuple:
        """An operand that came through shared memory, read there again (rr.templates.reread), or,
        where it cannot be, read as the kernel left it, saying why."""
        key = (regs, tuple(flow.reaching(r, stmt) for r in regs))
        if key in reread_of:  # an A that several mma read: read again once
            operands.append(Operand(role, stmt, regs, "shared", str(through), reread_of[key][1]))
            return reread_of[key][0]
        mark = em.mark()
        try:
            fresh, reads = reread(em, provenance.staging, through.staged, first, what)
        except TemplateError as e:
            em.back_to(mark)
            operands.append(Operand(role, stmt, regs, "live-in", f"{through}; not read again from shared memory: {e}"))
            return regs
        reread_of[key] = fresh, reads
        operands.append(Operand(role, stmt, regs, "shared", str(through), reads))
        return fresh

    def obtain(role: str, regs: tuple, stmt: int, skip: frozenset = frozenset()) -> tuple:
        key = (regs, stmt, role)
        if key in planned:
            return planned[key]
        what = f"{role} of s{stmt}"
        source = provenance.operand(regs, stmt, skip)
        if role != "C":
            through = provenance.staged(regs, stmt, role, source)
            if through.staged is not None:
                planned[key] = reread_staged(role, regs, stmt, through, what)
                return planned[key]
        staged = source.kind == "shared" and _reloadable_from_shared(flow, regs, stmt, first)
        traced_to_global = source.kind in _GLOBAL or (source.kind == "merge" and
                                                      any(a.kind in _GLOBAL for a in source.alternatives))
        if staged or traced_to_global:
            loads: list = []
            mark = em.mark(), dict(fresh_of_load)
            try:
                mapping = {r: rebuild(r, stmt, what, loads) for r in dict.fromkeys(regs)}
            except TemplateError as e:
                if traced_to_global:
                    raise
                # shared memory is the epilogue's staging: what cannot be loaded again is read as it was
                em.back_to(mark[0])
                fresh_of_load.clear()
                fresh_of_load.update(mark[1])
                planned[key] = regs
                operands.append(Operand(role, stmt, regs, "live-in", f"{source}; not loaded again: {e}"))
                return regs
            planned[key] = tuple(mapping[r] for r in regs)
            operands.append(Operand(role, stmt, regs, "memory", str(source), sorted(set(loads))))
        else:
            planned[key] = regs
            operands.append(Operand(role, stmt, regs, "live-in", str(source)))
        return planned[key]

    chain_of_d: dict[tuple, int] = {}
    chains: list[list[tuple]] = []  # per chain: (statement, d, a, b, c)
    for s in mmas:
        d, a, b, c = mma_operands(s.code, flow.operands(s.stmt))
        idx = chain_of_d.get(c)
        if idx is None:
            idx = len(chains)
            chains.append([])
        chains[idx].append((s, d, a, b, c))
        chain_of_d[d] = idx
    a_ids, b_ids = {}, {}
    for chain in chains:
        for _, _, a, b, _ in chain:
            a_ids.setdefault(a, len(a_ids))
            b_ids.setdefault(b, len(b_ids))
    order = sorted(range(len(chains)), key=lambda i: (a_ids[chains[i][0][2]], b_ids[chains[i][0][3]]))
    mma_lines = []
    for i in order:
        chain = chains[i]
        head, seed = chain[0][0], chain[0][4]
        carried = [r for r in seed if set(flow.reaching(r, head.stmt)) & own]
        if carried:  # the chain goes on from an mma of this phase: round a loop's back edge
            acc = seed
            operands.append(Operand("C", head.stmt, seed, "chain",
                                    f"accumulator carried round loop {_loop_of(flow, head.stmt)}"))
        else:
            acc = obtain("C", seed, head.stmt, own)
        for step, (s, d, a, b, _) in enumerate(chain):
            fa, fb = obtain("A", a, s.stmt), obtain("B", b, s.stmt)
            if step:
                operands.append(Operand("C", s.stmt, chain[step][4], "chain", "the previous step's D"))
            out = d if step == len(chain) - 1 else tuple(em.reg("b32") for _ in d)
            mma_lines.append(f"{s.opcode}\n\t{{{', '.join(out)}}},\n\t{{{', '.join(fa)}}},\n"
                             f"\t{{{', '.join(fb)}}}, {{{', '.join(acc)}}};")
            acc = out
    # what the cut keeps besides its mma (grouped phases): statements whose results outlive it or
    # that compute an operand read as a live-in
    read = {r for o in operands if o.how == "live-in" for r in o.registers}
    kept = _kept(others, set(live_out) | read)
    missing = [r for r in live_out if not any(r in chain[-1][1] for chain in chains) and
               not any(r in s.defs for s in kept)]
    if missing:
        raise TemplateError(f"live-out {', '.join(missing)} is not a chain's final D: an intermediate D "
                            "is read after the phase")
    declarations = [f".reg .{cls} \t{_PREFIX[cls]}<{n}>;" for cls, n in em.counts.items() if n]
    counts = Counter(o.how for o in operands)
    record = {
        "operands_rebuilt": counts["memory"], "operands_reread": counts["shared"], "operands_live_in": counts["live-in"],
        "operands_chained": counts["chain"],
        "by_role": {role: dict(Counter(o.how for o in operands if o.role == role)) for role in "ABC"},
        "induction_registers_read": {f"loop {k}": v for k, v in em.induction_reads.items()},
        "kept_statements": [s.stmt for s in kept],
        "operands": [o.as_dict() for o in operands],
    }
    return Spliced([s.text for s in kept] + em.lines + mma_lines, declarations, record=record)


class Regen:
    """The template (no params)."""

    checks = (Check.IDENTICAL_OUTPUT,)

    def apply(self, entry: Entry, cut: Cut, params: dict) -> Spliced:
        return regen(entry, cut)


def _writes_shared(code: Opcode) -> bool:
    """Whether a statement may change shared memory or let another thread change it: a store, an
    atomic or a reduction there, an asynchronous copy, a stmatrix, a barrier."""
    if code.base in ("st", "atom", "red") and code.space == "shared":
        return True
    return code.base in ("cp", "stmatrix", "bar", "barrier") or (code.base == "st" and "async" in code.mods)


def _reloadable_from_shared(flow: Dataflow, regs: tuple, at: int, first: int) -> bool:
    """Whether an operand loaded from shared memory can be loaded again at the cut: each register
    written once by an `ld.shared` above the cut, with no shared store and no barrier between
    (nothing else can have changed the bytes it read)."""
    for r in regs:
        d = flow.definition(r, at)
        loaded = flow.statements[d - 1].code if d is not None else None
        if loaded is None or loaded.base != "ld" or loaded.space != "shared" or d >= first:
            return False
        if any(_writes_shared(flow.statements[i - 1].code) for i in range(d + 1, first)):
            return False
        if flow.cfg.block_of(d) != flow.cfg.block_of(first):
            return False
    return True


def _class_of(reg: str) -> str:
    return next(cls for cls, prefix in sorted(_PREFIX.items(), key=lambda kv: -len(kv[1])) if reg.startswith(prefix))


def _bits(reg: str) -> int:
    return int(_class_of(reg)[1:])


def _loop_of(flow: Dataflow, stmt: int):
    loops = flow.cfg.loops_of(stmt)
    return loops[0].number if loops else "?"


def _kept(others: list[Statement], wanted: set) -> list[Statement]:
    """The non-mma statements of a grouped cut that compute a wanted register, with what they
    read from each other (in their order)."""
    needed = set(wanted)
    kept = []
    for s in reversed(others):
        if needed & set(s.defs):
            kept.append(s)
            needed |= set(s.uses)
    return kept[::-1]
