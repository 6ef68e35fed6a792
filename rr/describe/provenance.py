"""Where each phase's A, B and C operands come from, and at which byte offsets.

Every register read is resolved to the definitions that *reach* it through the control-flow graph
(`rr.ptx.reaching`), never to the last one above it in the text, and traced back through them to a
source (`rr.describe.sources`): `weight` — global loads at a `c·laneid` lane stride, through their
base pointer (`param+40`, a pointer loaded from the parameter space); `table` — global loads with
any other lane part; `shared` — shared-memory loads, with what was staged there; `D` — a chained
C; `pack` — requantised packs (`cvt…e4m3x2`, `mov.b32 {…}`) of an earlier phase's D; `transpose`
— `movmatrix`; `zero`; `input` — a register no statement writes (or a parameter's value);
`computed` (in an epilogue) for anything else; `merge` where definitions of different sources
reach. A load's address is split into base, lane part, other terms and byte offset by
`rr.describe.memory`, over the symbolic values of `rr.describe.evaluation`. An A or B operand that
came through shared memory from global memory element by element (`cp.async` or a global load
and `st.shared`, then `ldmatrix` or `ld.shared`, XOR swizzles, rings of stages, software
pipelining: what Triton and CUTLASS make) is `shared(global(param+N))`, its elements' offsets
and shared layout found byte by byte by `rr.describe.staging` (`Provenance.staged`).

`Provenance` is the tracing, for the descriptor (`operand_sources`) and for the templates, which
ask it for a phase's operands (`phase_operands`) or one operand's source (`operand`).
"""

from __future__ import annotations

import bisect

from rr.describe.dataflow import Dataflow
from rr.describe.memory import Access
from rr.describe.operand_json import loop_json, operand_json
from rr.describe.phases import Epilogue, Phase, is_mma
from rr.describe.sources import Source, combine, most_common, sources_text
from rr.describe.staging import Staging, element_bytes
from rr.ptx.model import Imm, Reg, Sym, Vec
from rr.ptx.reaching import UNDEFINED


class Provenance:
    """Traces registers back to their sources, memoised per (register, statement)."""

    def __init__(self, flow: Dataflow, phases: list[Phase], epilogues: list[Epilogue]):
        self.flow = flow
        self.phase_of: dict[int, int] = {}  # an mma statement -> its phase
        for p in phases:
            for st in range(p.first_stmt, p.last_stmt + 1):
                if is_mma(flow.statements[st - 1].code):
                    self.phase_of[st] = p.phase
        self.epilogues = _Epilogues(epilogues)
        self._memo: dict[tuple, Source] = {}
        self._operands: dict[tuple, Source] = {}
        self._stored: dict[tuple, tuple] = {}  # shared stores -> the sources of what they stored (`_staged`)
        self._store_planes: dict[int, set] = {}  # a shared store -> the offsets its planes meet
        self.staging = Staging(flow)
        # whether the kernel moves matrices through shared memory the way generators do (then
        # every operand not traced to a load or a D is looked for there)
        self._moves = any(_moves_matrices(s.code) for s in flow.statements)

    def operand(self, regs: tuple, at: int, skip: frozenset = frozenset()) -> Source:
        """The source of an operand's registers read at `at` (definitions in `skip` ignored)."""
        reach = self.flow.reach.of
        if skip:
            reaches = tuple((r, tuple(d for d in reach(r, at) if d not in skip)) for r in dict.fromkeys(regs))
        else:  # A and B, read by most mma
            reaches = tuple((r, reach(r, at)) for r in dict.fromkeys(regs))
        found = self._operands.get(reaches)
        if found is None:  # an A quad read by many mma of a phase is traced once
            found = self._operands[reaches] = combine([self._reached(r, reach) for r, reach in reaches])
        return found

    def phase_operands(self, phase: Phase) -> dict[str, list[Source]]:
        """Per role, the source of every A and B operand of the phase's mma statements and of every
        accumulator chain's seed C (a C that is the D of an mma of the same phase — the chain going
        on, also round a loop's back edge — is no separate source)."""
        flow = self.flow
        sources: dict[str, list[Source]] = {"A": [], "B": [], "C": []}
        own = frozenset(st for st in range(phase.first_stmt, phase.last_stmt + 1)
                        if self.phase_of.get(st) == phase.phase)
        for stmt in sorted(own):
            ops = flow.fragments(stmt)
            if ops is None:
                continue
            d, a, b, c = ops
            for role, regs in (("A", a), ("B", b)):
                if regs and len(regs) == 1 and flow.statements[stmt - 1].code.base == "wgmma":
                    sources[role].append(self.descriptor(regs[0], stmt))
                elif regs:
                    sources[role].append(self.staged(regs, stmt, role, self.operand(regs, stmt)))
            if c is None:
                sources["C"].append(Source("zero"))
                continue
            chained = all(set(flow.reaching(r, stmt)) <= own for r in c)
            if not chained:
                sources["C"].append(self.operand(c, stmt, own))
        return sources

    def staged(self, regs: tuple, stmt: int, role: str, found: Source) -> Source:
        """`found`, the register tracing's source of the A or B operand `regs` of mma `stmt` — or,
        where the operand came through shared memory from global memory element by element,
        `shared(global(param+N))` with what rr.describe.staging found (`Source.staged`)."""
        if not self._worth_staging(found):
            return found
        size = element_bytes(self.flow.statements[stmt - 1].code, role)
        staged = self.staging.operand(regs, stmt, size) if size else None
        if staged is None:
            return found
        fields = {"widened": staged.converted} if staged.converted else {}
        return Source("shared", [], staged=staged, stored=(Source("global", base=staged.base.as_json()),), **fields)

    def _worth_staging(self, found: Source) -> bool:
        """Whether an operand may have come through shared memory element by element: in a kernel
        that moves matrices there, any not traced to a load or a D; elsewhere, shared-memory loads
        of what global loads stored."""
        if found.kind in ("weight", "table", "D", "pack", "transpose", "zero"):
            return False
        if self._moves:
            return True
        stored = found.fields.get("stored") if found.kind == "shared" else None
        return bool(stored) and all(x.kind in ("weight", "table") for x in stored)

    def _reached(self, reg: str, reach: tuple) -> Source:
        if not reach:
            return Source("input")
        return combine([self.definition(reg, d, 0).reached_by((d,)) for d in reach])

    def definition(self, reg: str, stmt: int, depth: int) -> Source:
        if stmt == UNDEFINED:
            return Source("input")
        key = (reg, stmt)
        found = self._memo.get(key)
        if found is None:
            self._memo[key] = _TRACING
            found = self._memo[key] = self._trace(reg, stmt, depth)
        elif found is _TRACING:  # a cycle back to a definition being traced: what it computes
            return self._computed(stmt)
        return found

    def _computed(self, stmt: int) -> Source:
        return Source("computed", epilogue=self.epilogues.of(stmt))

    def descriptor(self, reg: str, at: int) -> Source:
        """A wgmma matrix descriptor: the shared variables its computation starts from."""
        flow = self.flow
        symbols, seen = set(), set()
        work = [(reg, at)]
        while work:
            r, st = work.pop()
            for d in flow.reaching(r, st):
                if d == UNDEFINED or d in seen:
                    continue
                seen.add(d)
                s = flow.statements[d - 1]
                if s.code.base == "ld":
                    continue
                for o in flow.operands(d)[1:]:
                    if isinstance(o, Sym) and flow.symbols.get(o.name, ("",))[0] == "shared":
                        symbols.add(o.name)
                work.extend((u, d) for u in s.uses)
        if not symbols:
            return self._computed(at)
        return Source("shared", descriptor_of=tuple(sorted(symbols)))

    def _uses(self, stmt: int, depth: int) -> list[Source]:
        s = self.flow.statements[stmt - 1]
        out = []
        for u in s.uses:
            if s.guard and u == s.guard.lstrip("!"):
                continue
            reach = self.flow.reaching(u, stmt)
            if len(reach) == 1:
                out.append(self.definition(u, reach[0], depth + 1))
            else:  # a merge here: each alternative with the definition it comes by
                out.append(combine([self.definition(u, d, depth + 1).reached_by((d,)) for d in reach]))
        return out

    def _trace(self, reg: str, stmt: int, depth: int) -> Source:
        flow = self.flow
        s = flow.statements[stmt - 1]
        code = s.code
        phase = self.phase_of.get(stmt)
        if phase is not None:
            return Source("D", phase=phase)
        if code.family.name in ("wmma.load", "ldmatrix"):  # a warp's fragment load: its layout is the instruction's
            acc = flow.memory.access(stmt)
            if acc is not None and acc.space == "shared" or code.base == "ldmatrix":
                return Source("shared", [acc] if acc else [], stored=self._staged(stmt, acc, depth))
            return _loaded("weight", acc) if acc is not None else self._computed(stmt)
        if code.base == "ld":
            acc = flow.memory.access(stmt)
            if code.space == "shared" or (acc is not None and acc.space == "shared"):
                return Source("shared", [acc] if acc else [], stored=self._staged(stmt, acc, depth))
            if acc is None:
                return self._computed(stmt)
            if acc.space == "param":
                return Source("input", [acc])
            return _loaded("weight" if acc.lane_linear else "table", acc)
        mov = code.base == "mov"
        ops = flow.operands(stmt) if mov else ()  # only a mov's operands decide anything below
        if mov and not s.uses and len(ops) == 2 and isinstance(ops[1], Imm):
            return Source("zero") if ops[1].value == 0 else self._computed(stmt)
        if depth >= 40:
            return self._computed(stmt)
        if mov and len(ops) == 2 and isinstance(ops[1], Reg) and not ops[1].special \
                and isinstance(ops[0], Reg) and s.guard is None:
            return combine(self._uses(stmt, depth))  # a copy is what it copies
        if mov and len(ops) == 2 and (isinstance(ops[1], Vec) or isinstance(ops[0], Vec)):
            # joins and splits of halves carry what the parts were: loads stay loads, packs packs;
            # halves that are merges (packs made on either side of a branch, joined after it)
            # are the merge of what each side's halves were
            merged = combine(self._uses(stmt, depth))
            found = _joined(merged)
            if found is not None:
                return found
            if merged.kind == "merge":
                alternatives = [_joined(a) for a in merged.alternatives]
                if all(a is not None and a.kind != "computed" for a in alternatives):
                    return combine(alternatives)
            return self._computed(stmt)
        if code.base == "selp":  # a choice between two values: the merge of what each is
            return combine([self._operand_source(o, stmt, depth) for o in flow.operands(stmt)[1:3]])
        if code.base in ("cvt", "mov", "movmatrix"):
            transpose = code.base == "movmatrix"
            uses = self._uses(stmt, depth)
            if len(uses) == 1 and uses[0].kind == "merge":  # a repack of a merge: the merge of the repacks
                alternatives = [_repacked(a, transpose) for a in uses[0].alternatives]
                return combine(alternatives) if all(alternatives) else self._computed(stmt)
            phases = set()
            for inner in uses:
                if inner.kind in ("pack", "transpose", "D"):
                    transpose = transpose or inner.kind == "transpose"
                    phases.add(inner.phase)
                elif inner.kind == "computed":
                    return inner  # a repack names the epilogue that computed the values
                else:
                    return self._computed(stmt)
            if len(phases) == 1:
                return Source("transpose" if transpose else "pack", phase=phases.pop())
        return self._computed(stmt)

    def _operand_source(self, op, stmt: int, depth: int) -> Source:
        """The source of one operand read at `stmt`: a register's reaching definitions, an
        immediate's value (zero or computed)."""
        if isinstance(op, Reg) and not op.special:
            return combine([self.definition(op.name, d, depth + 1) for d in self.flow.reaching(op.name, stmt)])
        if isinstance(op, Imm) and op.value == 0:
            return Source("zero")
        return self._computed(stmt)

    def _staged(self, stmt: int, load: Access | None, depth: int) -> tuple:
        """What the shared stores a shared load reads had stored: the stores of its epoch
        (`Accesses.store_epoch`); of those, the ones with the same base and lane part at an address
        some %tid.z plane of the block can meet, when the addresses can be compared at all."""
        flow = self.flow
        stores = flow.memory.store_epoch(stmt)
        if load is not None:
            wanted = load.planes(flow.block_z)
            matching = []
            for st in stores:
                acc = flow.memory.access(st)
                if acc is not None and acc.base == load.base and acc.lane_bytes == load.lane_bytes \
                        and not wanted.isdisjoint(self._planes(st, acc)):
                    matching.append(st)
            stores = matching or stores
        key = tuple(stores)
        if key not in self._stored:  # the loads of one staging read the same stores
            self._stored[key] = self._stored_sources(stores, depth)
        return self._stored[key]

    def _planes(self, stmt: int, acc: Access) -> set[int]:
        """`acc.planes` of the access at `stmt`, once: every load of a staging tests every store of it."""
        found = self._store_planes.get(stmt)
        if found is None:
            found = self._store_planes[stmt] = acc.planes(self.flow.block_z)
        return found

    def _stored_sources(self, stores: list[int], depth: int) -> tuple:
        """The sources of the values the shared stores wrote, one of each, in the order of their text."""
        flow = self.flow
        found: dict[str, Source] = {}
        for st in stores:
            data = flow.operands(st)[1]
            for r in (data.items if isinstance(data, Vec) else (data,)):
                if not isinstance(r, Reg):
                    src = Source("computed")  # an immediate stored
                else:
                    src = combine([self.definition(r.name, d, depth + 1) for d in flow.reaching(r.name, st)])
                found.setdefault(src.key, src)
        return tuple(found[k] for k in sorted(found))


_TRACING = Source("tracing")  # a definition's memo entry while its trace is under way


def _moves_matrices(code) -> bool:
    """cp.async into shared memory, ldmatrix, stmatrix."""
    return code.base in ("ldmatrix", "stmatrix") or (code.base == "cp" and code.spaces[:1] == ("shared",))


def _loaded(kind: str, acc: Access) -> Source:
    """A weight or table load through the access's base pointer."""
    return Source(kind, [acc], base=None if acc.base is None else acc.base.as_json())


def _joined(src: Source) -> Source | None:
    """What a join or split of halves whose source is `src` is: loads stay loads, packs packs, a D
    or a transpose's halves a pack (or transpose) of that phase, a computed value what it was;
    None for anything else (a merge among them)."""
    if src.kind in ("weight", "table", "pack", "zero", "computed"):
        return src
    if src.kind in ("D", "transpose"):
        return _packed(src).reached_by(src.defs)
    return None


def _repacked(src: Source, transpose: bool) -> Source | None:
    """A conversion or transpose of a D, pack or transpose of phase p: a pack (a transpose where
    one is involved) of phase p, with the definitions that reach for it; None otherwise."""
    if src.kind not in ("pack", "transpose", "D"):
        return None
    kind = "transpose" if transpose or src.kind == "transpose" else "pack"
    return Source(kind, defs=src.defs, phase=src.phase)


def _packed(src: Source) -> Source:
    """A join or split of a D's or a transpose's halves: a pack of that phase's D (a transpose stays one)."""
    return Source("transpose" if src.kind == "transpose" else "pack", phase=src.phase)


class _Epilogues:
    """Which epilogue holds a statement, by bisection (epilogues are in statement order)."""

    def __init__(self, epilogues: list[Epilogue]):
        self.nonempty = [e for e in epilogues if e.stmts]
        self.starts = [e.first_stmt for e in self.nonempty]

    def of(self, stmt: int) -> int | None:
        """The epilogue holding `stmt`; None for a statement inside a phase."""
        i = bisect.bisect_right(self.starts, stmt) - 1
        if i >= 0 and stmt <= self.nonempty[i].last_stmt:
            return self.nonempty[i].epilogue
        return None


def operand_sources(flow: Dataflow, phases: list[Phase], epilogues: list[Epilogue]) -> list[dict]:
    """Per phase: a_source, b_source, c_source (for people: the seed of each accumulator chain),
    `sources` (per role, the structured values they show), their offsets, the slab stride, the
    lane terms of its loads, and the structured `operands`."""
    provenance = Provenance(flow, phases, epilogues)
    out = []
    for p in phases:
        sources = provenance.phase_operands(p)
        distinct = {name: most_common(found) for name, found in sources.items()}
        row = {}
        for name, found in distinct.items():
            row[f"{name.lower()}_source"] = sources_text([s.value for s in found])
        for name in ("A", "B", "C"):
            row[f"{name.lower()}_offsets"] = sorted({acc.offset for s in sources[name] for acc in s.accesses} |
                                                    {s.staged.offset for s in sources[name] if s.staged is not None})
        # the %tid.z stride of the phase's weight loads: B's, or C's where B reads no weights (phase 7)
        slabs = {acc.slab_stride for s in sources["B"] for acc in s.accesses if acc.slab_stride} or \
            {acc.slab_stride for s in sources["C"] for acc in s.accesses if acc.slab_stride}
        row["slab_stride"] = next(iter(slabs)) if len(slabs) == 1 else None
        row["slab_strides"] = sorted(slabs)  # more than one would be a mixed-slab B operand
        row["lane_terms"] = sorted({acc.lane for n in "ABC" for s in sources[n] for acc in s.accesses if acc.lane})
        row["sources"] = {name: [s.value for s in found] for name, found in distinct.items()}
        row["operands"] = {name: operand_json(found, flow) for name, found in sources.items()}
        row["loop"] = loop_json(flow, p)
        out.append(row)
    return out
