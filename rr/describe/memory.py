"""Memory accesses: a load's or store's address, evaluated symbolically (`rr.describe.evaluation`),
split the way the reference document reports it — its base pointer (a pointer loaded from the
parameter space, or a declared variable's address), its lane part, its other terms (the `%tid.z`
slab among them) and its constant byte offset —, the global address an asynchronous copy reads
(`copy_source`), and which shared stores a shared load reads."""

from __future__ import annotations

import bisect
import functools
from dataclasses import dataclass

from rr.describe.evaluation import SymbolicValues
from rr.describe.kernel import Kernel
from rr.describe.sources import base_text
from rr.describe.values import LANES, Value, lane_text, lanes
from rr.ptx.model import Addr, Imm, Vec
from rr.ptx.opcodes import Opcode


@dataclass(frozen=True)
class Base:
    """The pointer an address starts from: loaded from byte `offset` of the parameter space
    (`space` "param"), or the address of the variable `symbol` accessed in state space `space`."""

    space: str
    offset: int | None = None
    symbol: str | None = None

    def as_json(self) -> dict:
        """The descriptor's value: `{"space": "param", "offset": 40}`, `{"space": "shared", "symbol": …}`."""
        return {"space": self.space, "offset": self.offset} if self.symbol is None else \
            {"space": self.space, "symbol": self.symbol}

    def __str__(self) -> str:
        return base_text(self.as_json())


@dataclass(frozen=True)
class Access:
    """A memory access's address, split the way the reference document reports it."""

    stmt: int
    space: str  # global, shared, param, const, local, …
    base: Base | None  # the pointer it goes through (None: no base pointer or variable)
    offset: int  # the constant byte offset from the base (lane 0's)
    lane_bytes: tuple | None  # what the lane part adds for lanes 0…31 (None: no lane part)
    terms: tuple  # ((factors, coefficient), …): every other term of the address
    width: int  # bytes accessed per lane

    @functools.cached_property
    def lane(self) -> str | None:
        """The lane part as the reference document spells it (`16·laneid`, `((laneid<<2)&12)`)."""
        return None if self.lane_bytes is None else lane_text(self.lane_bytes)

    @functools.cached_property
    def slab_stride(self) -> int | None:
        for f, c in self.terms:
            if f == (("sreg", "tid.z"),) and isinstance(c, int):
                return c
        return None

    @functools.cached_property
    def lane_linear(self) -> bool:
        """A per-lane fragment stride: the lane part is c·laneid with c > 0."""
        b = self.lane_bytes
        return b is not None and b[1] > 0 and all(v == b[1] * i for i, v in enumerate(b))

    def planes(self, block_z: int) -> set[int]:
        """The constant offsets this access can meet over the block's %tid.z planes."""
        return {self.offset + (self.slab_stride or 0) * z for z in range(block_z)}

    def unknown(self) -> list:
        """Factors of the address that no template can rebuild (opaque values, merges, inputs)."""
        return sorted({x for f, _ in self.terms for x in f if x[0] in ("opaque", "input")})


class Accesses:
    """The memory accesses of an entry, memoised per statement, and its shared-memory epochs."""

    def __init__(self, kernel: Kernel, values: SymbolicValues):
        self.statements, self.operands = kernel.statements, kernel.operands
        self.values = values
        self._accesses: dict[int, Access | None] = {}
        self.barriers = [s.stmt for s in self.statements if _block_barrier(s.code)]
        self.shared_stores = [s.stmt for s in self.statements if s.code.base == "st" and s.code.space == "shared"]

    def access(self, stmt: int) -> Access | None:
        if stmt not in self._accesses:
            self._accesses[stmt] = self._access(stmt)
        return self._accesses[stmt]

    def _access(self, stmt: int) -> Access | None:
        ops = self.operands(stmt)
        addr = next((o for o in ops if isinstance(o, Addr)), None)
        if addr is None:
            return None
        code = self.statements[stmt - 1].code
        data = ops[0] if code.base in ("ld", "atom", "tex") else ops[1] if len(ops) > 1 else ops[0]
        return self._split(stmt, addr, code.space or "generic", _bytes(code, data))

    def copy_source(self, stmt: int) -> Access | None:
        """The global address an asynchronous copy (`cp.async.ca.shared.global [dst], [src], n`)
        reads, its width the copy's size; None for any other statement."""
        code = self.statements[stmt - 1].code
        ops = self.operands(stmt)
        if code.base != "cp" or code.spaces[1:2] != ("global",) or len(ops) < 3 or not isinstance(ops[1], Addr):
            return None
        size = ops[2].value if isinstance(ops[2], Imm) and isinstance(ops[2].value, int) else 16
        return self._split(stmt, ops[1], "global", size)

    def _split(self, stmt: int, addr: Addr, space: str, width: int) -> Access:
        """An address operand's value split into base, lane part, other terms and offset."""
        if addr.base is None:
            v = Value.const(addr.offset)
        else:
            v = self.values.value(addr.base, stmt).plus(Value.const(addr.offset))
        terms = dict(v.terms)
        base = None
        for f, c in terms.items():
            if len(f) == 1 and c == 1 and (f[0][0] == "sym" or (f[0][0] == "param" and
                                                                self.values.param_widths.get(f[0][1], (64,))[0] == 64)):
                base = f[0]
                break
        if base is not None:
            terms.pop((base,))
            base = Base("param", offset=base[1]) if base[0] == "param" else Base(space, symbol=base[1])
        const = lanes(terms.pop((), 0))
        offset = const[0]
        lane_bytes = tuple(x - offset for x in const) if const.count(offset) < LANES else None
        return Access(stmt, space, base, offset, lane_bytes, tuple(sorted(terms.items())), width)

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


def _bytes(code: Opcode, data) -> int:
    """Bytes an access moves per lane: its type's (4 when it names none) times the vector's."""
    bits = code.bits
    return (bits // 8 if bits and bits >= 8 else 4) * (len(data.items) if isinstance(data, Vec) else 1)


def _block_barrier(code: Opcode) -> bool:
    """A barrier that the block's threads wait at (`bar.sync`, `barrier.sync`, `bar.cta.sync`)."""
    return code.family.name in ("bar", "barrier") and "sync" in code.mods and "warp" not in code.mods
