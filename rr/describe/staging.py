"""Operands that come through shared memory, element by element (issue 38).

Kernels from Triton and CUTLASS move an mma's A and B from global memory into shared memory
(`cp.async`, a global load and `st.shared`, `stmatrix`) and from there into the warp's fragments
(`ldmatrix`, `ld.shared`), through XOR-swizzled addresses, rings of pipeline stages and
software-pipelined loops. Such an operand is followed here byte by byte.

Every warp of the block is evaluated on its own (`ThreadValues`: `%tid.x` is that warp's lanes, so
every thread-dependent value, a swizzle's XOR included, is a per-lane constant), and the innermost
loop round the operand's mma is unrolled for its first `TRIPS` trips: a register read inside it is
the definition of the same trip that comes before the read, the previous trip's round the back
edge, or, on the first trip, the one the loop is entered with; `setp` and `selp` of known values
are computed, which is how a ring's stage index cycles. Shared memory is replayed (`_Replay`):
every write of the block — each warp, each trip — in program order, byte by byte, records what the
byte then holds: a byte some lane loaded from global memory (its address a symbolic value: a
pointer parameter plus the block's terms plus a constant), a constant, or what a register held
(traced when it is read). A read (`ldmatrix` by the PTX ISA's fragment layout — lane 8·i + r
addresses row r of matrix i, register i of lane 4g + t holds elements 2t, 2t + 1 of row g, or
with `.trans` element g of rows 2t, 2t + 1 — or `ld.shared`) takes each byte from the last write
before it. Register moves between the read and the mma — splits and joins, byte shifts and
masks, `prmt`, integer narrowing, fp8 → f16 widening — move bytes, so each element of the operand
is a run of global bytes (or one fp8 byte, widened).

`Staged` is what it finds for one operand: the pointer parameter, the byte offset of every element
of every lane, per warp and per trip, and how each fragment was read from shared memory (`Slot`):
the instruction, the address of every lane, and its layout (`Slot.layout`) — a symbol, an offset,
the stage offset per trip (a ring of stages is periodic) and the swizzle as a GF(2)-linear map, one
XOR basis vector per bit of the lane and of the warp: address = symbol + offset + stage(trip) +
(⊕ lane bit i · lane[i] ⊕ warp bit j · warp[j]), Triton's linear layouts exactly (a plain strided
layout is the case of disjoint bits).

What the pointer arithmetic cannot say is assumed: the loop runs at least `TRIPS` trips, and a
copy whose `src-size` or guard depends on a parameter or on data copies all its bytes (`assumed`
lists each). An operand this cannot explain keeps the source the register tracing gives
(rr.describe.provenance).
"""

from __future__ import annotations

import bisect
import dataclasses
from dataclasses import dataclass, field

from rr.describe.evaluation import SymbolicValues
from rr.describe.kernel import Kernel
from rr.describe.loops import _ORDERS, _compare
from rr.describe.memory import Base
from rr.describe.values import LANES, Value, cmap, lanes
from rr.ptx.model import Addr, Imm, Reg, Sink, Vec
from rr.ptx.reaching import UNDEFINED

TRIPS = 6  # trips of the operand's loop unrolled: a ring of stages repeats within them
ZERO = ("zero",)
_INTEGER = {f"{k}{n}": (k, n) for k in "bsu" for n in (8, 16, 32, 64)}
_WIDENED = {"e4m3x2": "e4m3", "e5m2x2": "e5m2"}  # cvt.rn.f16x2.<fp8x2>: each byte one f16
_MATRICES = {"x1": 1, "x2": 2, "x4": 4}


class ThreadValues(SymbolicValues):
    """The symbolic values of one warp's registers, thread by thread, with `loop` unrolled: a read
    inside it is evaluated at a trip (`at_trip`)."""

    def __init__(self, kernel: Kernel, warp: int, loop):
        super().__init__(kernel)
        self._specials["%tid.x"] = Value.const(tuple(32 * warp + i for i in range(LANES)))
        self.loop = loop
        blocks = kernel.cfg.blocks
        self.inside = frozenset(st for b in loop.blocks for st in range(blocks[b].first, blocks[b].last + 1)) \
            if loop is not None else frozenset()
        self.trip: int | None = None  # the trip of the statement being evaluated (None: outside the loop)
        self._at_trip: dict[tuple, Value] = {}

    def trip_of(self, stmt: int, trip: int | None) -> int | None:
        return trip if stmt in self.inside else None

    def at_trip(self, op, at: int, trip: int | None) -> Value:
        """The value of operand `op` read at statement `at` on `trip` of the loop."""
        saved, self.trip = self.trip, self.trip_of(at, trip)
        try:
            if isinstance(op, Addr):
                v = Value.const(op.offset)
                return v if op.base is None else self.value(op.base, at).plus(v)
            return self.value(op, at)
        finally:
            self.trip = saved

    def reached(self, register: str, at: int, trip: int | None) -> list[tuple[int, int | None]]:
        """(definition, its trip) of each definition of `register` that reaches its read at `at`
        on `trip`: inside the loop the same trip's (above the read) or the previous trip's (round
        the back edge); from outside it, only on the first trip."""
        reach = self.reaching(register, at)
        if trip is None or at not in self.inside:
            return [(d, None) for d in reach]
        outside = [(d, None) for d in reach if d == UNDEFINED or d not in self.inside]
        before = [(d, trip) for d in reach if d != UNDEFINED and d in self.inside and d < at]
        after = [(d, trip - 1) for d in reach if d != UNDEFINED and d in self.inside and d >= at]
        if before:  # written on this trip above the read (what else reaches comes round a branch)
            return before + outside
        if after:  # round the back edge: the value the loop is entered with on the first trip
            return outside if trip == 0 else after
        return outside  # written only before the loop: the same on every trip

    def value(self, op, at: int) -> Value:
        if self.trip is None or not isinstance(op, Reg) or op.special or op.name in self._specials:
            return super().value(op, at)
        found = {self.defined(op.name, d, t) for d, t in self.reached(op.name, at, self.trip)}
        return found.pop() if len(found) == 1 else Value.factor(("opaque", at, op.name))

    def defined(self, register: str, stmt: int, trip: int | None) -> Value:
        """What statement `stmt` writes to `register` on `trip` (None: it is outside the loop)."""
        saved = self.trip
        if trip is None:
            self.trip = None
            try:
                return self._defined(register, stmt)
            finally:
                self.trip = saved
        key = (register, stmt, trip)
        v = self._at_trip.get(key)
        if v is None:
            self._at_trip[key] = Value.factor(("opaque", stmt, register))  # a cycle stays opaque
            self.trip = trip
            try:
                v = self._at_trip[key] = self._evaluate(stmt, register)
            finally:
                self.trip = saved
        return v

    def _arith(self, code, ops, args, width, signed, stmt):
        """Also `setp`, `selp` and `not.pred` of known values (a ring's stage index)."""
        if code.family.name == "setp" and len(args) == 2 and isinstance(ops[0], Reg) \
                and code.compare in _ORDERS and args[0].lane_only and args[1].lane_only:
            kind, bits = _INTEGER.get(code.type or "", (None, None))
            if kind is None:
                return None
            return Value.const(cmap(lambda x, y: int(_compare(code.compare, kind, bits, x, y)),
                                    args[0].constant, args[1].constant))
        if code.base == "selp" and len(args) == 3 and args[2].lane_only:
            a, b, p = args
            if isinstance(ops[3], Reg) and ops[3].negated:
                a, b = b, a
            chosen = lanes(p.constant)
            if all(chosen):
                return a
            if not any(chosen):
                return b
            if a.lane_only and b.lane_only:
                return Value.const(cmap(lambda x, y, c: x if c else y, a.constant, b.constant, p.constant))
            return None
        if code.base == "not" and "pred" in code.types and len(args) == 1 and args[0].lane_only:
            return Value.const(cmap(lambda x: 0 if x else 1, args[0].constant))
        return super()._arith(code, ops, args, width, signed, stmt)


@dataclass(frozen=True)
class GlobalRead:
    """What one warp read from global memory at statement `stmt` (on `trip`): the address of each
    lane, a symbolic value."""

    stmt: int
    trip: int | None
    warp: int
    address: Value


@dataclass
class Slot:
    """One shared-memory read feeding an operand: the read statement's opcode, and per warp and
    trip of the mma the statement that read (with its trip) and every lane's address (relative to
    `symbol`)."""

    opcode: str
    symbol: str | None
    reads: dict = field(default_factory=dict)  # (warp, trip) -> (statement, its trip)
    addresses: dict = field(default_factory=dict)  # (warp, trip) -> 32 addresses
    touched: dict = field(default_factory=dict)  # (warp, trip) -> the shared bytes it read

    def layout(self, warps: int, trips: list) -> dict | None:
        """The addresses as a map, checked on every lane, warp and trip: address(lane, warp, trip)
        = stages[trip mod period] + (offset ⊕ X) — or offset + X, `combine` says which — where X
        is the XOR of the basis vectors `lane[i]` and `warp[j]` of the lane's and the warp's set
        bits; None where the addresses are no such map."""
        first = trips[0]
        a00 = self.addresses[(0, first)][0]
        stages = [self.addresses[(0, t)][0] - a00 for t in trips]
        within = {(w, lane): self.addresses[(w, first)][lane] for w in range(warps) for lane in range(LANES)}
        for (w, t), addrs in self.addresses.items():
            if any(a - stages[trips.index(t)] != within[(w, lane)] for lane, a in enumerate(addrs)):
                return None
        warp_bits = max(warps - 1, 0).bit_length()
        if warps != 1 << warp_bits:
            return None
        period = next((p for p in range(1, max(len(stages) // 2, 1) + 1)
                       if all(s == stages[i % p] for i, s in enumerate(stages))), None)
        for combine, rel in (("xor", lambda a: a ^ a00), ("add", lambda a: a - a00)):
            lane_basis = [rel(within[(0, 1 << i)]) for i in range(5)]
            warp_basis = [rel(within[(1 << j, 0)]) for j in range(warp_bits)]
            if all(rel(a) == _xor(lane, lane_basis) ^ _xor(w, warp_basis) for (w, lane), a in within.items()):
                return {"symbol": self.symbol, "offset": a00, "combine": combine,
                        "stages": stages[:period] if period else stages, "period": period,
                        "lane": lane_basis, "warp": warp_basis}
        return None


def _xor(bits: int, basis: list) -> int:
    """The XOR of the basis vectors of the set bits."""
    out = 0
    for i, v in enumerate(basis):
        if bits >> i & 1:
            out ^= v
    return out


@dataclass
class Staged:
    """An mma operand that came through shared memory from global memory, element by element."""

    stmt: int  # the mma
    registers: tuple
    base: Base  # the pointer parameter every element is read through
    element_bytes: int  # bytes of global memory per element (1: an fp8 byte widened)
    converted: str | None  # the type widened from (e4m3, e5m2), or None
    terms: tuple  # the address's other terms ((factors, coefficient), …), the same for every element
    offsets: dict  # (warp, trip) -> per lane, per element, the constant byte offset from the pointer
    loop: int | None  # the loop unrolled (None: the mma is in none)
    trips: list  # the trips looked at ([None] outside a loop)
    warps: int
    slots: list  # [Slot]: the shared-memory reads feeding the operand, in the order of its bytes
    # per byte of the operand's registers: (slot, register of the read, its byte, widened type or None,
    # which half of the widened f16), the same for every lane, warp and trip (None where it is not)
    pattern: tuple | None
    loads: tuple  # the statements that read the elements from global memory (cp.async, ld.global)
    assumed: tuple  # what the description assumed (a copy's size taken as whole, …)

    @property
    def offset(self) -> int:
        """The lowest element offset of warp 0 on the first trip."""
        return min(min(row) for row in self.offsets[(0, self.trips[0])])

    def decomposed(self) -> tuple[list | None, int | None]:
        """(bytes added per warp, bytes added per trip) when offsets(warp, trip) = offsets(0, 0) +
        warp_bytes[warp] + trip·trip_bytes for every lane and element; None for a part that
        does not hold."""
        first = self.trips[0]
        base = self.offsets[(0, first)]

        def shift(table) -> int | None:
            d = {x - y for row, row0 in zip(table, base) for x, y in zip(row, row0)}
            return d.pop() if len(d) == 1 else None
        warp_bytes = [shift(self.offsets[(w, first)]) for w in range(self.warps)]
        trip_bytes = None
        if self.loop is not None and len(self.trips) > 1:
            step = shift(self.offsets[(0, self.trips[1])])
            if step is not None and all(
                    shift(self.offsets[(w, t)]) == (warp_bytes[w] or 0) + step * t
                    for w in range(self.warps) for t in self.trips):
                trip_bytes = step
        return (None if None in warp_bytes else warp_bytes), trip_bytes


def element_bytes(code, role: str) -> int | None:
    """Bytes of one A or B element of an mma statement, by its types (D, A, B, C)."""
    types = code.types
    t = types[1] if role == "A" and len(types) >= 3 else types[2] if len(types) >= 3 else None
    return {"f16": 2, "bf16": 2, "tf32": 4, "e4m3": 1, "e5m2": 1, "s8": 1, "u8": 1, "f64": 8}.get(t)


def _shared(v: Value, symbols: dict) -> tuple | None:
    """(shared symbol or None, the 32 lanes' addresses from it) of a shared address, or None."""
    terms = dict(v.terms)
    const = lanes(terms.pop((), 0))
    if not terms:
        return None, const
    if len(terms) == 1:
        (f, c), = terms.items()
        if len(f) == 1 and f[0][0] == "sym" and c == 1 and symbols.get(f[0][1], ("",))[0] == "shared":
            return f[0][1], const
    return None if terms else (None, const)


def _pad(row: tuple, n: int) -> tuple:
    return row[:n] if len(row) >= n else row + (ZERO,) * (n - len(row))


def _strip(byte: tuple) -> tuple:
    """A byte without the reads it went through."""
    while byte[0] == "read":
        byte = byte[5]
    return byte


class _Replay:
    """Shared memory of one block over the unrolled loop: per byte, its writes in program order."""

    def __init__(self, unrolled: _Unrolled):
        self.unrolled = unrolled
        self.history: dict[tuple, list] = {}  # (symbol, address) -> [(key, byte)], in key order
        self.keys: dict[tuple, list] = {}
        self.clobbers: list = []  # keys of writes whose bytes cannot be told (atomics, bulk copies)
        self.assumed: set = set()
        self.ok = True
        u = unrolled
        flow, loop = u.flow, u.loop
        events = []
        for s in flow.statements:
            kind = _write_kind(s.code)
            if kind is None:
                continue
            loops = flow.cfg.loops_of(s.stmt)
            if loops and (loop is None or loops[0].number != loop.number):
                self.ok = False  # a write in another loop: its trips are not unrolled
                return
            for t in (range(TRIPS) if loops else (None,)):
                for w in range(u.warps):
                    events.append((u.key(s.stmt, t), w, s, kind))
        events.sort(key=lambda e: (e[0], e[1]))
        for key, w, s, kind in events:
            self._write(key, w, s, kind)

    def _put(self, symbol, address: int, key: tuple, byte: tuple) -> None:
        self.history.setdefault((symbol, address), []).append((key, byte))
        self.keys.setdefault((symbol, address), []).append(key)

    def _write(self, key: tuple, w: int, s, kind: str) -> None:
        u = self.unrolled
        tv = u.values(w)
        ops = u.flow.operands(s.stmt)
        trip = key[1] if key[0] == 1 else None
        if kind == "clobber":
            self.clobbers.append(key)
            return
        where = _shared(tv.at_trip(ops[0], s.stmt, trip), u.flow.symbols)
        generic = kind == "store" and s.code.space != "shared"
        if where is None or (generic and where[0] is None):
            if not generic:  # (a generic store to no shared variable writes global memory)
                self.clobbers.append(key)
            return
        symbol, addrs = where
        active = self._active(tv, s, trip)
        if kind == "copy":
            self._copy(key, w, s, ops, trip, symbol, addrs, active)
        elif kind == "store":
            items = ops[1].items if isinstance(ops[1], Vec) else (ops[1],)
            size = (s.code.bits or 32) // 8
            for lane in range(LANES):
                if active[lane]:
                    for i, item in enumerate(items):
                        for b in range(size):
                            byte = (("reg", w, s.stmt, trip, item.name, lane, b) if isinstance(item, Reg)
                                    else _constant_byte(item, b))
                            self._put(symbol, addrs[lane] + i * size + b, key, byte)
        else:  # stmatrix: ldmatrix's layout the other way
            form = _matrix_form(s.code)
            items = ops[1].items if isinstance(ops[1], Vec) else (ops[1],)
            if form is None or len(items) != form[0]:
                self.clobbers.append(key)
                return
            count, trans = form
            for i in range(count):
                for r in range(8):
                    for c in range(8):  # element c of row r of matrix i, from the fragment's (g, e)
                        g, e = (c, r) if trans else (r, c)
                        lane, half = 4 * g + e // 2, e % 2
                        for b in range(2):
                            self._put(symbol, addrs[8 * i + r] + 2 * c + b, key,
                                      ("reg", w, s.stmt, trip, items[i].name, lane, 2 * half + b))

    def _active(self, tv: ThreadValues, s, trip) -> list:
        """The lanes a (guarded) write writes: all, where the guard is not a known value."""
        if s.guard is None:
            return [True] * LANES
        g = tv.at_trip(Reg(s.guard.lstrip("!")), s.stmt, trip)
        if not g.lane_only:
            self.assumed.add(f"s{s.stmt} writes under @{s.guard}, taken as true")
            return [True] * LANES
        return [bool(x) != s.guard.startswith("!") for x in lanes(g.constant)]

    def _copy(self, key, w, s, ops, trip, symbol, addrs, active) -> None:
        u = self.unrolled
        tv = u.values(w)
        size = int(ops[2].value) if isinstance(ops[2], Imm) else 16
        filled = [size] * LANES
        if len(ops) > 3 and isinstance(ops[3], (Reg, Imm)):
            v = tv.at_trip(ops[3], s.stmt, trip)
            predicate = isinstance(ops[3], Reg) and u.staging.is_predicate(ops[3].name)
            if v.lane_only:
                filled = [(0 if x else size) if predicate else min(max(x, 0), size) for x in lanes(v.constant)]
            else:
                self.assumed.add(f"s{s.stmt} copies all {size} bytes ({'ignore-src' if predicate else 'src-size'} "
                                 f"{ops[3]} depends on parameters or data)")
        read = u.global_read(s.stmt, trip, w, tv.at_trip(ops[1], s.stmt, trip))
        for lane in range(LANES):
            if active[lane]:
                for b in range(size):
                    self._put(symbol, addrs[lane] + b, key, ("global", read, lane, b) if b < filled[lane] else ZERO)

    def byte(self, symbol, address: int, key: tuple) -> tuple | None:
        """(the byte at `address` just before the statement of `key`, the key of its write), or
        None when no write of it is known (or a write that cannot be told came between)."""
        keys = self.keys.get((symbol, address))
        if not keys:
            return None
        i = bisect.bisect_left(keys, key) - 1
        if i < 0:
            return None
        written, byte = self.history[(symbol, address)][i]
        if any(written < c < key for c in self.clobbers):
            return None
        return byte, written


def _constant_byte(item, b: int) -> tuple:
    if isinstance(item, Imm) and isinstance(item.value, int):
        x = (item.value >> (8 * b)) & 0xFF
        return ("const", x) if x else ZERO
    return ("unknown",)


def _write_kind(code) -> str | None:
    """How a statement changes shared memory: a copy from global (cp.async), a store of
    registers, a stmatrix, a write whose bytes cannot be told (clobber), or None."""
    base = code.base
    if base == "cp":
        if code.mods[:1] == ("async",) and code.mods[1:2] in (("ca",), ("cg",)) and code.spaces == ("shared", "global"):
            return "copy"
        return "clobber" if code.spaces[:1] == ("shared",) else None
    if base == "st":
        if "async" in code.mods:
            return "clobber"
        return "store" if code.space in ("shared", None) else None
    if base == "stmatrix":
        return "matrix"
    if base in ("atom", "red") and code.space == "shared":
        return "clobber"
    return None


def _matrix_form(code) -> tuple[int, bool] | None:
    """(matrices, transposed) of an m8n8 .b16 ldmatrix or stmatrix."""
    count = next((_MATRICES[x] for x in code.mods if x in _MATRICES), None)
    if "m8n8" not in code.mods or code.type != "b16" or count is None:
        return None
    return count, "trans" in code.mods


def _names(op) -> list:
    """The registers a destination operand names, None for a sink `_`."""
    items = op.items if isinstance(op, Vec) else (op,)
    return [x.name if isinstance(x, Reg) else None for x in items]


class Staging:
    """The byte-by-byte provenance of an entry's operands through shared memory: one unrolling
    per loop an operand's mma is in (or none)."""

    def __init__(self, flow):
        self.flow = flow
        block = flow.block
        self.warps = block[0] // 32 if block and block[0] % 32 == 0 and block[1] == block[2] == 1 else 0
        self._unrolled: dict = {}
        self._predicates: set | None = None

    def is_predicate(self, register: str) -> bool:
        if self._predicates is None:
            self._predicates = set()
            for item in self.flow.function.body or ():
                if getattr(item, "kind", None) == "reg" and ".pred" in item.text.split():
                    self._predicates.update(item.register_names())
        return register in self._predicates

    def unrolled(self, loop_number: int | None) -> _Unrolled:
        u = self._unrolled.get(loop_number)
        if u is None:
            loop = None if loop_number is None else self.flow.cfg.loop(loop_number)
            u = self._unrolled[loop_number] = _Unrolled(self, loop)
        return u

    def loop_of(self, stmt: int) -> int | None:
        loops = self.flow.cfg.loops_of(stmt)
        return loops[0].number if loops else None

    def operand(self, registers: tuple, at: int, element: int) -> Staged | None:
        """The staging of the mma operand `registers` read at statement `at` (elements of
        `element` bytes), or None where its bytes are not all global memory through shared."""
        if not self.warps:
            return None
        return self.unrolled(self.loop_of(at)).operand(registers, at, element)

    def intact(self, staged: Staged, at: int) -> str | None:
        """Why the shared bytes the operand was read from may differ, at statement `at`, from
        what the reads read (None: on every warp and trip they are the same)."""
        if self.loop_of(at) != staged.loop:
            return f"s{at} is not in the loop the operand's mma is in"
        return self.unrolled(staged.loop).intact(staged, at)


class _Unrolled:
    """One loop unrolled (or none): the warps' values, the shared-memory replay and the bytes of
    every register traced, each memoised."""

    def __init__(self, staging: Staging, loop):
        self.staging, self.flow, self.loop, self.warps = staging, staging.flow, loop, staging.warps
        self.first = loop.first_stmt(self.flow.cfg) if loop is not None else None
        self.trips = list(range(TRIPS)) if loop is not None else [None]
        self._values = [ThreadValues(self.flow, w, loop) for w in range(self.warps)]
        self._bytes: dict[tuple, tuple | None] = {}
        self._reads: dict[tuple, list] = {}  # (warp, statement, trip, register) -> per lane the addresses read
        self.globals: list[GlobalRead] = []
        self._global_index: dict[tuple, int] = {}
        self._replay: _Replay | None = None
        self._splits: dict[int, tuple | None] = {}
        self._operands: dict[tuple, Staged | None] = {}

    def values(self, warp: int) -> ThreadValues:
        return self._values[warp]

    @property
    def replay(self) -> _Replay:
        if self._replay is None:
            self._replay = _Replay(self)
        return self._replay

    def key(self, stmt: int, trip: int | None) -> tuple:
        """Program order over the unrolled loop: before it, its trips, after it."""
        if trip is not None:
            return (1, trip, stmt)
        return (0, 0, stmt) if self.first is None or stmt < self.first else (2, 0, stmt)

    def global_read(self, stmt: int, trip, warp: int, address: Value) -> int:
        key = (stmt, trip, warp)
        i = self._global_index.get(key)
        if i is None:
            i = self._global_index[key] = len(self.globals)
            self.globals.append(GlobalRead(stmt, trip, warp, address))
        return i

    # -- registers, byte by byte ------------------------------------------------------------------

    def register(self, warp: int, register: str, at: int, trip) -> tuple | None:
        """The bytes of `register` as statement `at` reads it on `trip`: per lane, a tuple of byte
        sources (shorter than the register: zeros above), or None where they cannot be told."""
        tv = self.values(warp)
        found = None
        for d, t in tv.reached(register, at, tv.trip_of(at, trip)):
            if d == UNDEFINED:
                return None
            got = self._written(warp, register, d, t)
            if got is None or (found is not None and got != found):
                return None
            found = got
        return found

    def _written(self, warp: int, register: str, d: int, trip) -> tuple | None:
        key = (warp, register, d, trip)
        if key not in self._bytes:
            self._bytes[key] = None  # a cycle: unknown
            self._bytes[key] = self._traced(warp, register, d, trip)
        return self._bytes[key]

    def _operand(self, warp: int, op, at: int, trip, n: int) -> tuple | None:
        """An operand's bytes, n of them per lane."""
        if isinstance(op, Reg) and not op.special:
            got = self.register(warp, op.name, at, trip)
            return None if got is None else tuple(_pad(row, n) for row in got)
        if isinstance(op, Imm) and isinstance(op.value, int):
            return (tuple(_constant_byte(op, b) for b in range(n)),) * LANES
        return None

    def _uniform(self, warp: int, op, at: int, trip) -> int | None:
        v = self.values(warp).at_trip(op, at, trip)
        return v.constant if v.lane_only and isinstance(v.constant, int) else None

    def _traced(self, warp: int, register: str, d: int, trip) -> tuple | None:
        """What statement d (on `trip`) writes to `register`, byte by byte."""
        s = self.flow.statements[d - 1]
        code, ops = s.code, self.flow.operands(d)
        if s.guard is not None:
            return None
        base = code.base
        n = (code.bits or 32) // 8
        if base == "ldmatrix":
            regs = self._ldmatrix(warp, d, trip)
            names = _names(ops[0])
            return regs[names.index(register)] if regs is not None and register in names else None
        if base == "ld":
            return self._load(warp, register, d, trip, s, ops)
        if base == "mov" and len(ops) == 2:
            if isinstance(ops[0], Vec):  # a split: mov.b32 {%rs1, %rs2}, %r1
                whole = self._operand(warp, ops[1], d, trip, n)
                names = _names(ops[0])
                part, i = n // len(names), names.index(register)
                return None if whole is None else tuple(row[i * part:(i + 1) * part] for row in whole)
            if isinstance(ops[1], Vec):  # a join: mov.b32 %r1, {%rs1, %rs2}
                part = n // len(ops[1].items)
                pieces = [self._operand(warp, x, d, trip, part) for x in ops[1].items]
                if None in pieces:
                    return None
                return tuple(sum((p[lane] for p in pieces), ()) for lane in range(LANES))
            return self._operand(warp, ops[1], d, trip, n)
        if base == "cvt" and len(ops) == 2:
            return self._converted(warp, d, trip, code, ops)
        if base in ("shl", "shr") and len(ops) == 3 and code.type and code.type[0] in "bu":
            k = self._uniform(warp, ops[2], d, trip)
            src = self._operand(warp, ops[1], d, trip, n)
            if src is None or k is None or k % 8:
                return None
            k = min(k // 8, n)
            if base == "shl":
                return tuple((ZERO,) * k + row[:n - k] for row in src)
            return tuple(row[k:] + (ZERO,) * k for row in src)
        if base in ("and", "or", "xor", "add") and len(ops) == 3 and code.type and code.type[0] in "bsu":
            return self._combined(base, *(self._operand(warp, x, d, trip, n) for x in ops[1:3]))
        if base == "prmt" and code.mods == ("b32",) and len(ops) == 4:
            sel = self._uniform(warp, ops[3], d, trip)
            a, b = (self._operand(warp, x, d, trip, 4) for x in ops[1:3])
            if sel is None or a is None or b is None:
                return None
            picks = [(sel >> (4 * i)) & 0xF for i in range(4)]
            if any(p & 8 for p in picks):
                return None  # a sign replicated: no byte of either
            return tuple(tuple((ra + rb)[p] for p in picks) for ra, rb in zip(a, b))
        return None

    @staticmethod
    def _combined(base: str, a, b) -> tuple | None:
        """and/or/xor/add of byte rows that, byte by byte, keep one side: the other is zero (an
        and: the other is all ones)."""
        if a is None or b is None:
            return None
        out = []
        for ra, rb in zip(a, b):
            row = []
            for x, y in zip(ra, rb):
                if base == "and":
                    kept = [z for z in (x, y) if z != ("const", 0xFF)]
                    row.append(ZERO if ZERO in (x, y) else kept[0] if len(kept) == 1 else None)
                else:
                    row.append(y if x == ZERO else x if y == ZERO else None)
            if None in row:
                return None
            out.append(tuple(row))
        return tuple(out)

    def _converted(self, warp, d, trip, code, ops) -> tuple | None:
        if len(code.types) != 2:
            return None
        dst, src = code.types
        if dst in ("f16x2", "bf16x2") and src in _WIDENED:
            got = self._operand(warp, ops[1], d, trip, 2)
            fmt = _WIDENED[src]
            return None if got is None else tuple(
                tuple(("cvt", fmt, row[j], h) for j in range(2) for h in range(2)) for row in got)
        if dst in _INTEGER and src in _INTEGER and "sat" not in code.mods:
            (_, dn), (sk, sn) = _INTEGER[dst], _INTEGER[src]
            if dn > sn and sk == "s":
                return None  # sign extension: bytes that are no byte of the source
            got = self._operand(warp, ops[1], d, trip, sn // 8)
            return None if got is None else tuple(row[:min(dn, sn) // 8] for row in got)
        return None

    def _load(self, warp, register, d, trip, s, ops) -> tuple | None:
        code = s.code
        size = (code.bits or 32) // 8
        names = _names(ops[0])
        if (code.type and code.type[0] == "s" and size < 4) or register not in names:
            return None  # (a signed narrow load is sign-extended into its register)
        i = names.index(register)
        tv = self.values(warp)
        t = tv.trip_of(d, trip)
        address = tv.at_trip(ops[1], d, t)
        where = _shared(address, self.flow.symbols)
        if code.space == "shared" or (code.space is None and where is not None and where[0] is not None):
            if where is None:
                return None
            symbol, addrs = where
            return self._read(warp, d, t, [[(symbol, addrs[lane] + i * size + b) for b in range(size)]
                                           for lane in range(LANES)], i)
        if code.space not in ("global", "const", None):
            return None
        read = self.global_read(d, t, warp, address)
        return tuple(tuple(("global", read, lane, i * size + b) for b in range(size)) for lane in range(LANES))

    def _read(self, warp, d, trip, addresses: list, register: int) -> tuple | None:
        """The bytes at `addresses` (per lane, the register's) as read by statement `d`, each
        tagged with the read: ("read", statement, trip, register, byte, what it held)."""
        replay = self.replay
        if not replay.ok:
            return None
        key = self.key(d, trip)
        out = []
        for row in addresses:
            got = []
            for b, (symbol, a) in enumerate(row):
                found = replay.byte(symbol, a, key)
                byte = None if found is None else self._resolved(found[0])
                if byte is None:
                    return None
                got.append(("read", d, trip, register, b, byte))
            out.append(tuple(got))
        self._reads[(warp, d, trip, register)] = addresses
        return tuple(out)

    def _resolved(self, byte: tuple) -> tuple | None:
        """A stored register's byte as the register held it (a store records the register)."""
        if byte[0] != "reg":
            return None if byte[0] == "unknown" else byte
        _, w, stmt, trip, name, lane, b = byte
        got = self.register(w, name, stmt, trip)
        return None if got is None else _pad(got[lane], b + 1)[b]

    def _ldmatrix(self, warp: int, d: int, trip) -> tuple | None:
        key = (warp, "ldmatrix", d, trip)
        if key in self._bytes:
            return self._bytes[key]
        self._bytes[key] = None
        s = self.flow.statements[d - 1]
        form = _matrix_form(s.code)
        ops = self.flow.operands(d)
        tv = self.values(warp)
        t = tv.trip_of(d, trip)
        where = _shared(tv.at_trip(ops[1], d, t), self.flow.symbols) if form else None
        if where is None or len(_names(ops[0])) != form[0]:
            return None
        (count, trans), (symbol, rows) = form, where
        regs = []
        for i in range(count):
            addresses = []
            for lane in range(LANES):
                g, q = lane >> 2, lane & 3
                if trans:  # element g of rows 2q and 2q + 1
                    addresses.append([(symbol, rows[8 * i + 2 * q + h] + 2 * g + b) for h in range(2) for b in range(2)])
                else:  # elements 2q and 2q + 1 of row g
                    addresses.append([(symbol, rows[8 * i + g] + 4 * q + b) for b in range(4)])
            got = self._read(warp, d, t, addresses, i)
            if got is None:
                return None
            regs.append(got)
        self._bytes[key] = tuple(regs)
        return self._bytes[key]

    # -- operands -----------------------------------------------------------------------------------

    def operand(self, registers: tuple, at: int, element: int) -> Staged | None:
        """(Staging.operand.) An A read by several mma from the same definitions is traced once."""
        key = (registers, element, tuple(self.flow.reaching(r, at) for r in registers))
        found = self._operands.get(key, False)
        if found is False:
            found = self._operands[key] = self._operand_staged(registers, at, element)
        return found if found is None or found.stmt == at else dataclasses.replace(found, stmt=at)

    def _operand_staged(self, registers: tuple, at: int, element: int) -> Staged | None:
        if not self.replay.ok:
            return None
        offsets, slots, patterns, used = {}, [], set(), set()
        found_base = found_terms = kind = None
        for w in range(self.warps):
            widths = self.values(w).param_widths
            for t in self.trips:
                rows = [()] * LANES
                for r in registers:
                    got = self.register(w, r, at, t)
                    if got is None:
                        return None
                    rows = [row + _pad(g, 4) for row, g in zip(rows, got)]
                found = _elements(rows, element)
                if found is None or (kind is not None and found[1] != kind):
                    return None
                elements, kind = found
                table = []
                for lane_elements in elements:
                    row = []
                    for read, lane, k in lane_elements:
                        used.add(read)
                        split = self._split(read, widths)
                        if split is None:
                            return None
                        base, terms, const = split
                        if found_base is None:
                            found_base, found_terms = base, terms
                        elif (base, terms) != (found_base, found_terms):
                            return None
                        row.append(const[lane] + k)
                    table.append(tuple(row))
                offsets[(w, t)] = tuple(table)
                patterns.add(self._slots(rows, w, t, slots))
        pattern = patterns.pop() if len(patterns) == 1 else None
        return Staged(at, tuple(registers), Base("param", offset=found_base[1]), kind[1], kind[0] or None,
                      found_terms, offsets, None if self.loop is None else self.loop.number, self.trips,
                      self.warps, slots, pattern, tuple(sorted({self.globals[r].stmt for r in used})),
                      tuple(sorted(self.replay.assumed)))

    def _split(self, read: int, widths: dict) -> tuple | None:
        """(pointer factor, other terms, the 32 lanes' constants) of a global read's address (`_pointer`)."""
        found = self._splits.get(read, False)
        if found is False:
            address = self.globals[read].address
            const = lanes(address.constant)
            found = _pointer(address.plus(Value.const(const), -1), widths)
            found = self._splits[read] = None if found is None else (found[0], found[1], const)
        return found

    def _slots(self, rows: list, w: int, t, slots: list) -> tuple | None:
        """Records, in `slots`, the reads feeding the operand on (warp, trip) in the order of its
        bytes; returns the pattern of its bytes, (slot, register, byte, widened type, half) each
        (None where the reads differ from those of another warp or trip)."""
        order: dict = {}
        patterns = set()
        for row in rows:
            pattern = []
            for byte in row:
                fmt = half = None
                if byte[0] == "cvt":
                    fmt, half, byte = byte[1], byte[3], byte[2]
                if byte[0] != "read":
                    return None
                _, d, trip, reg, b, _ = byte
                pattern.append((order.setdefault((d, trip), len(order)), reg, b, fmt, half))
            patterns.add(tuple(pattern))
        for (d, trip), i in order.items():
            s = self.flow.statements[d - 1]
            if i == len(slots):
                slots.append(Slot(s.opcode, None))
            slot = slots[i]
            where = _shared(self.values(w).at_trip(self.flow.operands(d)[1], d, trip), self.flow.symbols)
            if slot.opcode != s.opcode or where is None:
                return None
            slot.symbol = where[0]
            slot.reads[(w, t)] = (d, trip)
            slot.addresses[(w, t)] = where[1]
            slot.touched[(w, t)] = sorted({a for r in range(4) for row in self._reads.get((w, d, trip, r), ())
                                           for a in row})
        return patterns.pop() if len(patterns) == 1 and len(order) == len(slots) else None

    def intact(self, staged: Staged, at: int) -> str | None:
        replay = self.replay
        inside = self.values(0).inside
        for slot in staged.slots:
            for (w, t), (d, trip) in slot.reads.items():
                read, cut = self.key(d, trip), self.key(at, t if at in inside else None)
                if not read < cut:
                    return f"the read s{d} comes after s{at}"
                for symbol, a in slot.touched[(w, t)]:
                    then, now = replay.byte(symbol, a, read), replay.byte(symbol, a, cut)
                    if then != now:
                        by = f"s{now[1][2]}" if now else "a write that cannot be told"
                        return (f"byte {a} of shared memory that s{d} read is written again by {by} before "
                                f"s{at} (warp {w}{'' if t is None else f', trip {t}'})")
        return None


def _elements(rows: list, element: int) -> tuple | None:
    """Per lane the operand's elements as (global read, lane, byte), and (widened type or "",
    bytes of global memory per element); None where an element is no run of global bytes."""
    out, kinds = [], set()
    for row in rows:
        items = []
        for e in range(0, len(row), element):
            raw = [_strip(b) for b in row[e:e + element]]
            first = raw[0]
            if first[0] == "global" and all(b[0] == "global" and b[1:3] == first[1:3] and b[3] == first[3] + j
                                            for j, b in enumerate(raw)):
                items.append(first[1:])
                kinds.add(("", element))
            elif element == 2 and all(b[0] == "cvt" for b in raw) and raw[0][1:3] == raw[1][1:3] \
                    and (raw[0][3], raw[1][3]) == (0, 1) and _strip(raw[0][2])[0] == "global":
                items.append(_strip(raw[0][2])[1:])
                kinds.add((raw[0][1], 1))
            else:
                return None
        out.append(items)
    return (out, kinds.pop()) if len(kinds) == 1 else None


def _pointer(address: Value, widths: dict) -> tuple | None:
    """(the pointer factor, the other non-constant terms, the constant) of a global address that
    goes through a 64-bit pointer parameter with coefficient 1."""
    terms = dict(address.terms)
    const = terms.pop((), 0)
    if not isinstance(const, int):
        return None
    base = next((f[0] for f, c in terms.items() if len(f) == 1 and c == 1 and f[0][0] == "param"
                 and widths.get(f[0][1], (64,))[0] == 64), None)
    if base is None or any(not isinstance(c, int) for c in terms.values()):
        return None
    terms.pop((base,))
    return base, tuple(sorted(terms.items())), const
