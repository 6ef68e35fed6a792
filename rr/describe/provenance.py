"""Where each phase's A, B and C operands come from, and at which byte offsets.

Addresses are evaluated symbolically: every register gets an affine value over named terms — a
pointer loaded from the parameter block (`param+40`), `laneid` (also `%tid.x & 31`, which is the
lane for the engine's 32-wide blocks), `tid.z`, and lane patterns that are not affine, named as
written (`((laneid<<2)&12)`). A load's address then splits into its base pointer, its lane term,
its `%tid.z` slab stride and its byte offset, as the reference document reports them.

Operand sources, traced back through the def/use chain:
`weight(param+N)` — fragment loads at a `k·laneid` lane stride; `table(param+N)` — per-column
loads with a non-affine lane pattern; `shared` — shared-memory loads; `D(phase p)` — a chained C;
`pack(D of phase p)` — requantised packs (`cvt…e4m3x2`, `mov.b32 {…}`) of an earlier phase's D;
`transpose(D of phase p)` — `movmatrix`; `zero`; `computed(epilogue e)` for anything else.
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field

from rr.describe.phases import Epilogue, Phase
from rr.ptx.linearise import Statement
from rr.ptx.model import Addr, Imm, Reg, Sym, Vec, register_names
from rr.ptx.operands import parse_instruction


@dataclass(frozen=True)
class Affine:
    terms: tuple  # sorted ((name, coefficient), …)
    const: int = 0

    @staticmethod
    def of(terms: dict, const: int = 0) -> "Affine":
        return Affine(tuple(sorted((k, v) for k, v in terms.items() if v)), const)

    def scaled(self, c: int) -> "Affine":
        return Affine.of({k: v * c for k, v in self.terms}, self.const * c)

    def plus(self, other: "Affine", sign: int = 1) -> "Affine":
        t = dict(self.terms)
        for k, v in other.terms:
            t[k] = t.get(k, 0) + sign * v
        return Affine.of(t, self.const + sign * other.const)


@dataclass
class Access:
    """A load's address, split the way the reference document reports it."""

    space: str  # global, shared, param, …
    base: str | None  # param+N, a shared symbol, or None
    offset: int
    lane: str | None  # 16·laneid, ((laneid<<2)&12), …
    slab_stride: int | None  # the %tid.z coefficient
    width: int  # bytes loaded per lane


@dataclass
class Source:
    kind: str  # weight, table, shared, D, pack, transpose, zero, computed, input
    detail: str = ""
    accesses: list = field(default_factory=list)

    def __str__(self) -> str:
        return f"{self.kind}({self.detail})" if self.detail else self.kind


_PASS = ("mov.", "cvta.", "cvt.u64.u32", "cvt.s64.s32", "cvt.u32.u64", "cvt.s32.s64", "cvt.u64.s32")
_LANE_SPECIALS = {"%laneid": "laneid", "%tid.x": "tid.x", "%tid.y": "tid.y", "%tid.z": "tid.z",
                  "%ctaid.x": "ctaid.x", "%ctaid.y": "ctaid.y", "%ctaid.z": "ctaid.z"}


class Dataflow:
    """Reaching definitions and symbolic values over one linearised entry."""

    def __init__(self, statements: list[Statement], params: dict[str, int], block_z: int = 4):
        """`params`: each kernel parameter's byte offset in the parameter space (`param_offsets`);
        `block_z`: how many %tid.z planes share a block's shared memory (for matching staged
        stores to loads; from `.maxntid`/`.reqntid`, else the engine's 4)."""
        self.statements = statements
        self.params = params
        self.block_z = block_z
        self.defs_at: dict[str, list[int]] = {}  # register -> statement numbers that define it
        for s in statements:
            for d in s.defs:
                self.defs_at.setdefault(d, []).append(s.stmt)
        self._ops: dict[int, tuple] = {}
        self._values: dict[tuple, Affine | None] = {}
        self.barriers = [s.stmt for s in statements if s.opcode.startswith(("bar.sync", "barrier.sync", "bar.cta.sync"))]
        self.shared_stores = [s.stmt for s in statements if s.opcode.startswith("st.shared")]

    def operands(self, stmt: int) -> tuple:
        if stmt not in self._ops:
            self._ops[stmt] = parse_instruction(self.statements[stmt - 1].text)[2]
        return self._ops[stmt]

    def definition(self, register: str, before: int) -> int | None:
        """The statement that last defined `register` before statement `before`."""
        best = None
        for s in self.defs_at.get(register, ()):
            if s < before:
                best = s
            else:
                break
        return best

    def param_address(self, stmt: int) -> int | None:
        """The parameter-space byte offset an `ld.param` reads: `[param_0+40]`, or `[%rd1+-32]`
        with %rd1 = param_0 + 80."""
        a = self.operands(stmt)[1]
        if not isinstance(a, Addr):
            return None
        base = Affine.of({a.base.name: 1}) if isinstance(a.base, Sym) else self.value(a.base, stmt)
        if base and len(base.terms) == 1 and base.terms[0][1] == 1 and base.terms[0][0] in self.params:
            return self.params[base.terms[0][0]] + base.const + a.offset
        return None

    def pointer_base(self, stmt: int) -> str | None:
        """The parameter pointer (`param+N`) a memory access's address derives from, followed through
        moves and 64-bit adds even where the offset is not affine (a computed index)."""
        addr = next((o for o in self.operands(stmt) if isinstance(o, Addr)), None)
        if addr is None or not isinstance(addr.base, Reg):
            return None
        return self._pointer(addr.base.name, stmt, 0)

    def _pointer(self, register: str, at: int, depth: int) -> str | None:
        d = self.definition(register, at)
        if d is None or depth > 32:
            return None
        s = self.statements[d - 1]
        if s.opcode.startswith("ld.param"):
            off = self.param_address(d)
            return None if off is None else f"param+{off}"
        ops = self.operands(d)
        if s.opcode.startswith(_PASS) and len(ops) == 2 and isinstance(ops[1], Reg):
            return self._pointer(ops[1].name, d, depth + 1)
        if s.opcode.startswith(("add.s64", "add.u64", "sub.s64", "sub.u64")):
            found = {self._pointer(o.name, d, depth + 1) for o in ops[1:] if isinstance(o, Reg)} - {None}
            return found.pop() if len(found) == 1 else None
        return None

    def store_epoch(self, load: int) -> list[int]:
        """The shared stores a shared load at statement `load` reads: those after the last barrier
        before it (a warp's own staging), else the last run of stores that a barrier closes."""
        i = bisect.bisect_left(self.barriers, load)
        bounds = [0] + self.barriers[:i] + [load]
        for lo, hi in zip(reversed(bounds[:-1]), reversed(bounds[1:])):
            a, b = bisect.bisect_right(self.shared_stores, lo), bisect.bisect_left(self.shared_stores, hi)
            if a < b:
                return self.shared_stores[a:b]
        return []

    # -- symbolic values -------------------------------------------------------------------------

    def value(self, op, at: int) -> Affine | None:
        if isinstance(op, Imm):
            v = op.value
            return Affine((), int(v)) if isinstance(v, int) else None
        if isinstance(op, Sym):
            return Affine.of({op.name: 1})  # a parameter, or the address of a .shared/.global symbol
        if not isinstance(op, Reg):
            return None
        if op.name in _LANE_SPECIALS:
            return Affine.of({_LANE_SPECIALS[op.name]: 1})
        d = self.definition(op.name, at)
        if d is None:
            return None
        key = (op.name, d)
        if key not in self._values:
            self._values[key] = None  # cycles (loops) resolve to unknown
            self._values[key] = self._evaluate(d)
        return self._values[key]

    def _evaluate(self, stmt: int) -> Affine | None:
        s = self.statements[stmt - 1]
        op, ops = s.opcode, self.operands(stmt)
        if op.startswith("ld.param"):
            at = self.param_address(stmt)
            return None if at is None else Affine.of({f"param+{at}": 1})
        if op.startswith(_PASS) and len(ops) == 2 and not isinstance(ops[1], (Vec, Addr)):
            return self.value(ops[1], stmt)
        if len(ops) != 3:
            return None
        x, y = self.value(ops[1], stmt), self.value(ops[2], stmt)
        if x is None or y is None:
            return None
        if op.startswith("add."):
            return x.plus(y)
        if op.startswith("sub."):
            return x.plus(y, -1)
        if op.startswith(("mul.lo.", "mul.wide.")):
            if not y.terms:
                return x.scaled(y.const)
            if not x.terms:
                return y.scaled(x.const)
            return None
        if op.startswith("shl.") and not y.terms:
            return _shift_mask(x, y.const) or x.scaled(1 << y.const)
        if op.startswith("and.") and not y.terms and not x.const:
            return _mask(x, y.const)
        return None

    # -- accesses ----------------------------------------------------------------------------------

    def access(self, stmt: int) -> Access | None:
        s = self.statements[stmt - 1]
        ops = self.operands(stmt)
        addr = next((o for o in ops if isinstance(o, Addr)), None)
        if addr is None:
            return None
        space = s.opcode.split(".")[1] if s.opcode.count(".") else ""
        if space in ("weak", "volatile", "relaxed", "acquire"):
            space = s.opcode.split(".")[2]
        base_value = self.value(addr.base, stmt) if isinstance(addr.base, Reg) else (
            Affine.of({addr.base.name: 1}) if isinstance(addr.base, Sym) else Affine((), 0))
        if base_value is None:
            return None
        terms = dict(base_value.terms)
        base = next((k for k in terms if k not in _LANEISH and not k.startswith("((")), None)
        if base is not None and terms[base] == 1:
            terms.pop(base)
        else:
            base = None
        slab = terms.pop("tid.z", None)
        lane = " + ".join(k if v == 1 and k.startswith("((") else f"{v}·{k}"
                          for k, v in sorted(terms.items())) or None
        width = _width(s.opcode, ops[0])
        return Access(space, base, base_value.const + addr.offset, lane, slab, width)


_LANEISH = {"laneid", "tid.x", "tid.y", "tid.z", "ctaid.x", "ctaid.y", "ctaid.z"}


def _mask(x: Affine, mask: int) -> Affine | None:
    """`(c·lane) & mask` for a lane register scaled by a power of two."""
    if len(x.terms) != 1:
        return None
    name, c = x.terms[0]
    if name not in ("laneid", "tid.x") or c <= 0 or c & (c - 1):
        return None
    s = c.bit_length() - 1
    if mask == 31 << s:
        return Affine.of({"laneid": c})  # (lane << s) & (31 << s) = (lane & 31) << s
    if mask & ~(31 << s) == 0 and mask:
        return Affine.of({f"((laneid<<{s})&{mask})": 1})
    return None


def _shift_mask(x: Affine, k: int) -> Affine | None:
    """`((laneid<<s)&m) << k` is `((laneid<<s+k)&(m<<k))`: keep the document's spelling."""
    if x.const or len(x.terms) != 1 or x.terms[0][1] != 1 or not x.terms[0][0].startswith("((laneid<<"):
        return None
    inner = x.terms[0][0][len("((laneid<<"):-1]
    s, m = inner.split(")&")
    return Affine.of({f"((laneid<<{int(s) + k})&{int(m) << k})": 1})


def _width(opcode: str, dest) -> int:
    bits = {"u8": 1, "s8": 1, "b8": 1, "u16": 2, "s16": 2, "b16": 2, "f16": 2, "u32": 4, "s32": 4,
            "b32": 4, "f32": 4, "u64": 8, "s64": 8, "b64": 8, "f64": 8}
    n = bits.get(opcode.rsplit(".", 1)[-1], 4)
    return n * (len(dest.items) if isinstance(dest, Vec) else 1)


def block_z(function) -> int:
    """The %tid.z extent the entry declares (`.reqntid`/`.maxntid`), else the engine's 4."""
    for key in ("reqntid", "maxntid"):
        dims = function.directives.get(key)
        if dims and len(dims) == 3:
            return dims[2]
    return 4


def param_offsets(params) -> dict[str, int]:
    """Byte offset of each parameter in the parameter space, laid out in order with alignment."""
    out, at = {}, 0
    for p in params:
        align = p.align or max(1, min(p.size, 8))
        at = -(-at // align) * align
        out[p.name] = at
        at += p.size
    return out


def operand_sources(flow: Dataflow, phases: list[Phase], epilogues: list[Epilogue]) -> list[dict]:
    """Per phase: a_source, b_source, c_source (the seed of each accumulator chain), b_offsets,
    c_offsets, slab_stride and the lane terms of its loads."""
    d_of: dict[str, int] = {}  # D register -> phase
    epilogues = _Epilogues(epilogues)
    out = []
    for p in phases:
        sources = {"A": [], "B": [], "C": []}
        chained: set[tuple] = set()  # D tuples of this phase: a C among them continues a chain
        for stmt in range(p.first_stmt, p.last_stmt + 1):
            d, a, b, c = flow.operands(stmt)[:4]
            sources["A"].append(_source(flow, a, stmt, p.phase, d_of, epilogues))
            sources["B"].append(_source(flow, b, stmt, p.phase, d_of, epilogues))
            if register_names(c) not in chained:
                sources["C"].append(_source(flow, c, stmt, p.phase, d_of, epilogues))
            chained.add(register_names(d))
            for r in d.items:
                d_of[str(r)] = p.phase
        row = {}
        for name, found in sources.items():
            kinds = Counter(str(s) for s in found)
            row[f"{name.lower()}_source"] = " + ".join(k for k, _ in kinds.most_common())
        for name in ("B", "C"):
            offsets = sorted({acc.offset for s in sources[name] for acc in s.accesses})
            row[f"{name.lower()}_offsets"] = offsets
        # the %tid.z stride of the phase's weight loads: B's, or C's where B reads no weights (phase 7)
        slabs = {acc.slab_stride for s in sources["B"] for acc in s.accesses if acc.slab_stride} or \
            {acc.slab_stride for s in sources["C"] for acc in s.accesses if acc.slab_stride}
        row["slab_stride"] = next(iter(slabs)) if len(slabs) == 1 else None
        row["slab_strides"] = sorted(slabs)  # more than one would be a mixed-slab B operand
        row["lane_terms"] = sorted({acc.lane for n in "ABC" for s in sources[n] for acc in s.accesses if acc.lane})
        out.append(row)
    return out


def _source(flow: Dataflow, operand, stmt: int, phase: int, d_of: dict, epilogues) -> Source:
    regs = [str(r) for r in (operand.items if isinstance(operand, Vec) else (operand,))]
    if all(r in d_of for r in regs) and all(flow.definition(r, stmt) is not None and
                                            flow.statements[flow.definition(r, stmt) - 1].opcode.startswith("mma.")
                                            for r in regs):
        return Source("D", f"phase {d_of[regs[0]]}")
    defs = {flow.definition(r, stmt) for r in regs}
    if None in defs:
        return Source("input")
    kinds = [_trace(flow, d, d_of, epilogues, depth=0) for d in sorted(defs)]
    first = kinds[0]
    if all(k.kind == first.kind and k.detail == first.detail for k in kinds):
        return Source(first.kind, first.detail, [a for k in kinds for a in k.accesses])
    return Source("computed", ", ".join(sorted({str(k) for k in kinds})))


def _trace(flow: Dataflow, stmt: int, d_of: dict, epilogues, depth: int) -> Source:
    s = flow.statements[stmt - 1]
    op = s.opcode
    if op.startswith("ld."):
        acc = flow.access(stmt)
        if acc is None and op.startswith("ld.shared"):
            return Source("shared", _staged_source(flow, stmt, None, d_of, epilogues, depth))
        if acc is None:
            return Source("computed", epilogues.of(stmt))
        if acc.space == "shared":
            staged = _staged_source(flow, stmt, acc, d_of, epilogues, depth)
            return Source("shared", staged, [acc])
        if acc.space == "param":
            return Source("input", "", [acc])
        kind = "weight" if acc.lane and "·laneid" in acc.lane and "&" not in acc.lane else "table"
        return Source(kind, acc.base or "?", [acc])
    if op.startswith("mov.") and not s.uses:
        ops = flow.operands(stmt)
        if isinstance(ops[1], Imm) and ops[1].value == 0:
            return Source("zero")
    if depth < 40 and (op.startswith(("cvt.", "mov.b32", "mov.b64", "movmatrix", "mov.u32", "mov.b16"))):
        phases = set()
        transpose = op.startswith("movmatrix")
        for u in s.uses:
            if u in d_of and flow.statements[flow.definition(u, stmt) - 1].opcode.startswith("mma."):
                phases.add(d_of[u])
                continue
            d = flow.definition(u, stmt)
            if d is None:
                continue
            inner = _trace(flow, d, d_of, epilogues, depth + 1)
            if inner.kind in ("pack", "transpose", "D"):
                transpose = transpose or inner.kind == "transpose"
                phases.add(int(inner.detail.rsplit(" ", 1)[-1]))
            elif inner.kind == "computed":
                return inner  # a repack names the epilogue that computed the values
            else:
                return Source("computed", epilogues.of(stmt))
        if len(phases) == 1:
            return Source("transpose" if transpose else "pack", f"D of phase {phases.pop()}")
    return Source("computed", epilogues.of(stmt))


def _addresses(acc: Access, planes: int) -> set[int]:
    return {acc.offset + (acc.slab_stride or 0) * z for z in range(planes)}


def _staged_source(flow: Dataflow, stmt: int, load: Access | None, d_of: dict, epilogues, depth: int) -> str:
    """What the shared stores a shared load reads had stored: the stores of its epoch
    (`Dataflow.store_epoch`); of those, the ones with the same base and lane term at an address
    some %tid.z plane of the block can meet, when the addresses can be compared at all."""
    stores = flow.store_epoch(stmt)
    if load is not None:
        wanted = _addresses(load, flow.block_z)
        matching = []
        for st in stores:
            acc = flow.access(st)
            if acc is not None and acc.base == load.base and acc.lane == load.lane \
                    and wanted & _addresses(acc, flow.block_z):
                matching.append(st)
        stores = matching or stores
    found = set()
    for st in stores:
        data = flow.operands(st)[1]
        regs = data.items if isinstance(data, Vec) else (data,)
        for r in regs:
            d = flow.definition(str(r), st)
            found.add("?" if d is None else str(_trace(flow, d, d_of, epilogues, depth + 1)))
    return " + ".join(sorted(found))


class _Epilogues:
    """Which epilogue holds a statement, by bisection (epilogues are in statement order)."""

    def __init__(self, epilogues: list[Epilogue]):
        self.nonempty = [e for e in epilogues if e.stmts]
        self.starts = [e.first_stmt for e in self.nonempty]

    def of(self, stmt: int) -> str:
        i = bisect.bisect_right(self.starts, stmt) - 1
        if i >= 0 and stmt <= self.nonempty[i].last_stmt:
            return f"epilogue {self.nonempty[i].epilogue}"
        return "?"
