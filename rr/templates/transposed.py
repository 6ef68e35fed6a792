"""The `direct` template's transposed construction (`params.construction: transposed`): a phase
whose operand is `transpose(D of phase p)`, built by `movmatrix` transposes of p's accumulators, has
p's GEMM computed transposed instead — Dᵀ = Bᵀ·Aᵀ — so that its chains end in the registers the
transposes wrote, and the transposes go. Nothing is added: on m16n8k32 fp8 fragments (g = lane>>2,
t = lane&3) the A fragment of Bᵀ for the 16 columns of two n-tiles x, y is {x.b0, y.b0, x.b1, y.b1}
and the B fragment of Aᵀ for the half h of an m-tile is {a_h, a_h+2}, in the same lane; and the
swapped mma's d0 holds D[16·m + 8h + 2t + {0, 1}][8x + g], which is what `movmatrix.trans` of x's
D register h gives each lane (d1 likewise for y). The number of mma is the same (per m-tile, two
n-tile pairs × two halves for four n-tiles).

What it cuts: from the first mma of the chains (which may run through several phases: NVVM splits
a GEMM's k-steps where it interleaves their operand loads) to the last transpose. The chains' mma
are replaced — each step of a transposed chain where the later of the two original steps it reads
stood, so that every operand register holds what it held there — and the transposes removed;
everything else in the cut (other phases, the epilogue) stays as it was, in its order.

Bit-safety by construction: each output is the same 32 products at the same k-slots (the k layout
of an A fragment's registers is a B fragment's), so each HMMA.16816 half sums what the original's
did, and the chain adds the same steps in the same order from zero: `rr.numerics.mma_sync` gives
mma(Bᵀ, Aᵀ, Cᵀ) = mma(A, B, C)ᵀ bit for bit (tests/test_numerics_mma.py). What cannot be made so is
refused with the reason: an accumulator other than f16 (`movmatrix` moves b16), a chain that does
not start from zero (its C would need transposing too), a D register read by anything but its one
transpose, an odd number of n-tiles to an m-tile, a cut that is not one basic block, a register
that does not hold at the new position what the original read.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from rr.describe.phases import is_mma, mma_operands
from rr.describe.dataflow import Dataflow
from rr.describe.provenance import Provenance
from rr.ptx.model import Imm, Instruction, emit_items
from rr.ptx.opcodes import Opcode, parse_opcode
from rr.templates import NotApplicable, TemplateError
from rr.templates.base import Cut, Entry, Spliced
from rr.templates.body import body_items, ranges, register_readers, register_types

MOVMATRIX = "movmatrix.sync.aligned.m8n8.trans.b16"  # the PTX ISA's spelling; modifiers may come in any order
_TRANSPOSE = parse_opcode(MOVMATRIX)
BIT_SAFETY = ("each output of the transposed chains is the same 32 products at the same k-slots as the "
              "original's (an A fragment's k layout is a B fragment's), added from zero in the same order: "
              "the same HMMA halves, the same bits (rr.numerics.mma_sync: mma(Bᵀ, Aᵀ, Cᵀ) = mma(A, B, C)ᵀ)")


@dataclass
class _Step:
    stmt: int
    d: tuple
    a: tuple
    b: tuple


def is_movmatrix(code: Opcode) -> bool:
    """`movmatrix.sync.aligned.m8n8.trans.b16`, its modifiers in any order."""
    return code.base == "movmatrix" and sorted(code.mods) == sorted(_TRANSPOSE.mods)


def _swapped_opcode(code: Opcode, stmt: int) -> str:
    """`mma.sync.aligned.m16n8k32.row.col.f16.A.B.f16` with A and B's types swapped."""
    if code.family.name != "mma" or code.mods[:5] != ("sync", "aligned", "m16n8k32", "row", "col") \
            or len(code.mods) != 9 or len(code.types) != 4:
        raise TemplateError(f"s{stmt} ({code.text}): not an m16n8k32 row.col mma")
    d, a, b, c = code.types
    if d != "f16" or c != "f16":
        raise TemplateError(f"s{stmt} ({code.text}): an {d} accumulator; movmatrix transposes b16, so only an "
                            "f16 chain's transposes can be removed")
    return code.with_types(d, b, a, c)


def _zero(flow: Dataflow, reg: str, stmt: int) -> bool:
    """Whether `reg` holds 0 at `stmt`: a `mov` of the immediate 0 reaches it."""
    d = flow.definition(reg, stmt)
    if d is None or flow.statements[d - 1].code.base != "mov":
        return False
    ops = flow.operands(d)
    return len(ops) == 2 and isinstance(ops[1], Imm) and ops[1].value == 0


def _chain(flow: Dataflow, final: int, users: dict) -> list[_Step]:
    """The k-steps of the chain that ends at mma `final`, first to last: back through C while C is
    the D of another mma read by nothing else, to a C of zero."""
    statements = flow.statements
    steps, stmt = [], final
    while True:
        d, a, b, c = mma_operands(statements[stmt - 1].code, flow.operands(stmt))
        steps.append(_Step(stmt, d, a, b))
        defs = {flow.definition(r, stmt) for r in c}
        if len(defs) == 1 and (prev := next(iter(defs))) is not None and is_mma(statements[prev - 1].code):
            pd = mma_operands(statements[prev - 1].code, flow.operands(prev))[0]
            if tuple(pd) != tuple(c):
                raise TemplateError(f"s{stmt} reads as C {', '.join(c)}, not the whole D of s{prev}")
            extra = {u for r in pd for u in users.get(r, ()) if u != stmt}
            if extra:
                raise TemplateError(f"s{prev}'s D is also read by s{min(extra)}: the chain's partial sums are used "
                                    "elsewhere, which a transposed chain would not have")
            stmt = prev
            continue
        if not all(_zero(flow, r, stmt) for r in c):
            raise TemplateError(f"the chain ending at s{final} starts at s{stmt} from C = {', '.join(c)}, not zero: "
                                "its transpose would need transposing too")
        return steps[::-1]


def transposed(entry: Entry, phase: int) -> Spliced:
    """The transposed construction for `phase`, with the cut it chose; NotApplicable where no
    operand is a transpose, a TemplateError why it cannot be built."""
    flow, phases = entry.flow, entry.phases
    if any(r.startswith("%rrt") and r[4:].isdigit() for r in register_types(entry.function)):
        raise TemplateError("the entry already has registers named %rrtN, the template's own")
    p = phases[phase - 1]
    provenance = Provenance(flow, phases, entry.epilogues)
    sources = provenance.phase_operands(p)
    roles = {role: found[0] for role, found in sources.items() if role in ("A", "B") and found
             and {(s.kind, s.phase) for s in found} == {("transpose", found[0].phase)}}
    if not roles:
        what = "; ".join(f"{r} is {' + '.join(dict.fromkeys(str(s) for s in sources[r])) or 'nothing'}"
                         for r in ("A", "B"))
        raise NotApplicable(f"{what}: no operand is a transpose of an earlier phase's accumulator")
    src = next(iter(roles.values())).phase
    statements = flow.statements
    users = register_readers(statements)
    # the transposes of phase src's accumulators, by the accumulator register they read
    moves: dict[str, tuple[int, str]] = {}
    for s in statements:
        if is_movmatrix(s.code) and s.stmt < p.first_stmt:
            dest, source = s.defs[0], s.uses[0]
            d = flow.definition(source, s.stmt)
            if d is not None and provenance.phase_of.get(d) == src:
                moves[source] = (s.stmt, dest)
    if not moves:
        raise TemplateError(f"phase {phase}'s operand is a transpose of phase {src}'s D, but no movmatrix.trans "
                            f"reads phase {src}'s accumulators: nothing to remove")
    finals = sorted({flow.definition(r, stmt) for r, (stmt, _) in moves.items()})
    chains = []
    for f in finals:
        steps = _chain(flow, f, users)
        for r in steps[-1].d:
            if r not in moves:
                raise TemplateError(f"s{f}'s accumulator {r} is not transposed: only a chain whose every D "
                                    "register has its movmatrix can end in them")
            readers = set(users.get(r, ())) - {moves[r][0]}
            if readers:
                raise TemplateError(f"s{f}'s accumulator {r} is also read by s{min(readers)} "
                                    f"({statements[min(readers) - 1].opcode}), not only by its movmatrix")
        chains.append(steps)
    if len({len(c) for c in chains}) != 1:
        raise TemplateError(f"phase {src}'s chains have {sorted({len(c) for c in chains})} k-steps: not one GEMM")
    # chains of one m-tile read the same A registers at every step; their n-tiles are paired in order
    tiles: dict[tuple, list] = {}
    for c in sorted(chains, key=lambda c: c[0].stmt):
        tiles.setdefault(tuple(s.a for s in c), []).append(c)
    for a, group in tiles.items():
        if len(group) % 2:
            raise TemplateError(f"the m-tile reading {', '.join(a[0])} has {len(group)} n-tiles: an odd count "
                                "cannot be paired into the 16 rows of a transposed A")
    mma_stmts = {s.stmt for c in chains for s in c}
    first = min(mma_stmts)
    last = max(stmt for stmt, _ in moves.values())
    cfg = flow.cfg
    if cfg.block_of(first) != cfg.block_of(last):
        raise TemplateError(f"s{first}–s{last} is not one basic block: the chains' new positions would not "
                            "dominate the transposes' readers by position alone")
    removed = mma_stmts | {stmt for stmt, _ in moves.values()}
    dests = {dest: stmt for stmt, dest in moves.values()}
    # the emitted chains: per m-tile, n-tile pair and half, one mma per k-step
    fresh = iter(range(1, 1 << 30))
    at: dict[int, list[str]] = {}
    for group in tiles.values():
        for x, y in zip(group[::2], group[1::2]):
            for h in (0, 1):
                c = ("%rrt0", "%rrt0")
                for k, (sx, sy) in enumerate(zip(x, y)):
                    where = max(sx.stmt, sy.stmt)
                    a = (sx.b[0], sy.b[0], sx.b[1], sy.b[1])
                    b = (sx.a[h], sx.a[h + 2])
                    for reg, read in [(r, sx.stmt) for r in (sx.b + sx.a)] + [(r, sy.stmt) for r in sy.b]:
                        if flow.reaching(reg, where) != flow.reaching(reg, read):
                            raise TemplateError(f"{reg} does not hold at s{where} what s{read} read: the step "
                                                "cannot be placed after both of the steps it joins")
                    last_step = k == len(x) - 1
                    d = ((moves[x[-1].d[h]][1], moves[y[-1].d[h]][1]) if last_step
                         else (f"%rrt{next(fresh)}", f"%rrt{next(fresh)}"))
                    opcode = statements[sx.stmt - 1].opcode
                    if statements[sy.stmt - 1].opcode != opcode:  # one A' holds both B pairs: one type
                        raise TemplateError(f"s{sx.stmt} and s{sy.stmt}, whose B pairs a transposed step joins, are "
                                            f"{opcode} and {statements[sy.stmt - 1].opcode}")
                    opcode = _swapped_opcode(statements[sx.stmt - 1].code, sx.stmt)
                    at.setdefault(where, []).append(
                        f"{opcode} \t{{{d[0]}, {d[1]}}}, {{{', '.join(a)}}}, {{{', '.join(b)}}}, {{{c[0]}, {c[1]}}};")
                    c = d
    zero_at = min(at)
    at[zero_at].insert(0, "mov.b32 \t%rrt0, 0;")
    used = next(fresh)  # %rrt0 … %rrt(used - 1)
    kept = [s for s in statements[first - 1:last] if s.stmt not in removed]
    for s in kept:
        if set(s.defs) & set(dests):
            raise TemplateError(f"s{s.stmt} ({s.opcode}) writes {', '.join(sorted(set(s.defs) & set(dests)))}, "
                                "which the transposed chains now write")
        early = {r for r in s.uses if r in dests and s.stmt < dests[r]}
        if early:
            raise TemplateError(f"s{s.stmt} reads {', '.join(sorted(early))} before its movmatrix wrote it")
    replacement, emitted = [], 0
    for a_, b_, item in body_items(flow.function):
        if b_ < first or a_ > last:
            continue
        gone = [x for x in range(a_, b_ + 1) if x in removed]
        if type(item) is Instruction:
            if gone:
                replacement += at.get(a_, [])
                emitted += len(at.get(a_, []))
            else:
                replacement.append(statements[a_ - 1].text)
        elif not gone:
            text: list = []
            emit_items([item], text)
            replacement.append("".join(text).strip())
        else:
            raise TemplateError(f"the {{ }} block s{a_}–s{b_} holds a statement the construction replaces "
                                f"(s{gone[0]}): it cannot be cut in part")
    if emitted != sum(len(v) for v in at.values()):
        raise TemplateError("a transposed step's position lies inside a { } block")
    removed_ops = Counter(statements[d - 1].opcode for d in removed)
    record = {
        "construction": "transposed",
        "operands": [{"role": role, "source": str(s), "phase": s.phase} for role, s in roles.items()],
        "producer": {"phases": sorted({provenance.phase_of.get(s) for s in mma_stmts}), "chains": len(chains),
                     "k_steps": len(chains[0]), "m_tiles": len(tiles)},
        "removed": {"statements": len(removed), "ranges": ranges(removed), "ops": dict(sorted(removed_ops.items()))},
        "kept_in_cut": {"statements": len(kept)},
        "added": {"instructions": emitted, "mma": emitted - 1, "mov": 1},
        "mapping": {"rule": ("the A of a transposed step is {x.b0, y.b0, x.b1, y.b1} of two n-tiles' B pairs, its B "
                             "{a_h, a_h+2} of the m-tile's A quad; its last D are the movmatrix destinations of x's "
                             "and y's D register h"),
                    "pairs": sum(len(g) // 2 for g in tiles.values())},
        "k_slots": "unchanged: an A fragment's k layout is a B fragment's",
        "bit_safety": BIT_SAFETY,
    }
    declarations = [f".reg .b32 \t%rrt<{used}>;"]
    return Spliced(replacement, declarations, record=record, cut=Cut(entry, first, last, phase))
