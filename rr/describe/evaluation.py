"""Symbolic evaluation: the value of every register read in an entry, as a `rr.describe.values`
polynomial over typed factors — a pointer loaded from the parameter space, a scalar parameter,
`%ctaid`, `%tid`, a loop's trip index — with everything that depends on the lane folded into
per-lane coefficients, however NVVM spelt it (`mul`, `shl`, `or`, `bfi`, `prmt`, `and`, `shr`, …).

A register is evaluated through the definitions that *reach* its read (`rr.ptx.reaching`). A
register written inside a loop and read round its back edge is an induction variable when each
trip adds the same constant: its value is `init + step·trip`. Other merges (several definitions
reach through branches) stay opaque, or, for an if around one of two definitions, a `Selection`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rr.describe.kernel import Kernel
from rr.describe.values import (
    LANES,
    Ranges,
    Value,
    bit_field_extract,
    bit_field_insert,
    bitwise,
    cmap,
    permute,
    shift_right,
)
from rr.ptx.model import Addr, Imm, Reg, Sym, Vec, register_names
from rr.ptx.reaching import UNDEFINED

_LANE = Value.const(tuple(range(LANES)))
_BITS = {"8": 8, "16": 16, "32": 32, "64": 64}


def _width(opcode: str) -> tuple[int, bool]:
    """(bits, signed) of an instruction's operand type (its last type suffix)."""
    for part in reversed(opcode.split(".")):
        if part[:1] in "bus" and part[1:] in _BITS:
            return _BITS[part[1:]], part[0] == "s"
    return 32, False


@dataclass(frozen=True)
class Selection:
    """`register = guard ? when_true : when_false`, by an if around one of its definitions."""

    register: str
    guard: str  # the predicate register
    branch: int  # the branch statement that tests it
    when_true: int  # the definition that reaches when the guard holds
    when_false: int


@dataclass(frozen=True)
class InductionVariable:
    register: str
    loop: int
    update: int  # the statement that adds the step each trip
    step: int
    init: Value


class SymbolicValues:
    """The values of an entry's registers, memoised per (register, defining statement)."""

    def __init__(self, kernel: Kernel):
        self.kernel = kernel
        # what the evaluation reads of the kernel, by the names it has always read them by
        self.statements, self.operands, self.reaching = kernel.statements, kernel.operands, kernel.reaching
        self.params, self.cfg = kernel.params, kernel.cfg
        self.param_widths: dict[int, tuple] = {}  # parameter-space offset -> (bits, signed) of its loads
        self._specials = {"%laneid": _LANE, "%tid.x": _tid_x(kernel.block)}
        self.ranges = Ranges(kernel.block, self.param_widths, kernel.symbols)
        self._values: dict[tuple, Value] = {}
        self._phis: dict[tuple, Value] = {}  # (register, reaching set) -> its value at the loop top
        self._ivs: dict[tuple, InductionVariable | None] = {}

    def value(self, op, at: int) -> Value:
        """The value of an operand read at statement `at`."""
        if isinstance(op, Imm):
            v = op.value
            return Value.const(int(v)) if isinstance(v, int) else Value.factor(("opaque", at, str(op)))
        if isinstance(op, Sym):
            if op.name in self.params:
                return Value.factor(("pspace",)).plus(Value.const(self.params[op.name]))
            return Value.factor(("sym", op.name))
        if not isinstance(op, Reg):
            return Value.factor(("opaque", at, str(op)))
        name = op.name
        if name in self._specials:
            return self._specials[name]
        if op.special:
            return Value.factor(("sreg", name[1:]))
        reach = self.reaching(name, at)
        if len(reach) == 1:
            return self._defined(name, reach[0])
        phi = self._phis.get((name, reach))
        if phi is not None:
            return phi
        iv = self.induction(name, reach)
        if iv is not None:
            return iv.init.plus(Value.factor(("trip", iv.loop)).scaled(iv.step))
        values = {self._defined(name, d) for d in reach}
        if len(values) == 1:
            return values.pop()
        return Value.factor(("opaque", at, name))

    def _defined(self, register: str, stmt: int) -> Value:
        if stmt == UNDEFINED:
            return Value.factor(("input", register))
        key = (register, stmt)
        v = self._values.get(key)
        if v is None:
            self._values[key] = Value.factor(("opaque", stmt, register))  # a cycle stays opaque
            v = self._values[key] = self._evaluate(stmt, register)
        return v

    def _evaluate(self, stmt: int, register: str) -> Value:
        try:
            return self._evaluated(stmt, register)
        except (ArithmeticError, ValueError):  # what no kernel computes (a mutant's): nothing to see through
            return Value.factor(("opaque", stmt, register))

    def _evaluated(self, stmt: int, register: str) -> Value:
        s = self.statements[stmt - 1]
        opaque = Value.factor(("opaque", stmt, register))
        if s.guard is not None:
            return opaque
        op = s.opcode
        base = op.split(".", 1)[0]
        ops = self.operands(stmt)
        width, signed = _width(op)
        if base == "ld":
            at = self.param_address(stmt) if ".param" in op else None
            if at is None:
                return opaque
            at += width // 8 * register_names(ops[0]).index(register)  # ld.param.v2.u16 {%rs1, %rs2}
            self.param_widths.setdefault(at, (width, signed))
            return Value.factor(("param", at))
        if isinstance(ops[0], Vec):  # a split: mov.b64 {%r1, %r2}, %rd1
            if base != "mov" or len(ops) != 2:
                return opaque
            names = register_names(ops[0])
            part = 64 // len(names) if op.endswith("64") else 32 // len(names)
            whole = self.value(ops[1], stmt)
            shifted = shift_right(whole, part * names.index(register), 64, self.ranges, False)
            if shifted is None:
                return opaque
            masked = bitwise("and", shifted, Value.const((1 << part) - 1), 64, self.ranges)
            return opaque if masked is None else masked
        args = [self.value(o, stmt) if not isinstance(o, Vec) else None for o in ops[1:]]
        v = self._arith(base, op, ops, args, width, signed, stmt)
        return opaque if v is None else v

    def _arith(self, base: str, op: str, ops: tuple, args: list, width: int, signed: bool, stmt: int) -> Value | None:
        r = self.ranges
        n = len(args)
        if base in ("mov", "cvta", "cvt") and n == 1:
            if isinstance(ops[1], Vec):  # a join: mov.b32 %r, {%rs1, %rs2}
                parts = [self.value(x, stmt) for x in ops[1].items]
                bits = width // len(parts)
                out = Value(())
                for i, p in enumerate(parts):
                    if not r.disjoint([p], bits) or r.may_bits(p, 64) >> bits:
                        return None
                    out = out.plus(p.scaled(1 << (bits * i)))
                return out
            if base == "cvt":
                return _integer_conversion(op, args[0], r)
            return args[0]
        if None in args:
            return None
        if base == "add" and n == 2:
            return args[0].plus(args[1])
        if base == "sub" and n == 2:
            return args[0].plus(args[1], -1)
        if base == "neg" and n == 1:
            return args[0].scaled(-1)
        if base in ("mul", "mul24") and n == 2 and ".hi" not in op:
            return args[0].times(args[1])
        if base in ("mad", "mad24") and n == 3 and ".hi" not in op:
            p = args[0].times(args[1])
            return None if p is None else p.plus(args[2])
        if base in ("shl", "shr") and n == 2 and args[1].lane_only:
            # the shift amount is an unsigned 32-bit value; past the width the result is all shifted out
            k = cmap(lambda k: min(k & 0xFFFFFFFF, width), args[1].constant)
            if base == "shl":
                return args[0].scaled(cmap(lambda k: 1 << k if k < width else 0, k))
            return shift_right(args[0], k, width, r, signed)
        if base in ("and", "or", "xor") and n == 2:
            return bitwise(base, args[0], args[1], width, r)
        if base == "not" and n == 1:
            return args[0].scaled(-1).plus(Value.const(-1))
        if base == "bfi" and n == 4 and args[2].lane_only and args[3].lane_only:
            pos, length = args[2].constant, args[3].constant
            if isinstance(pos, int) and isinstance(length, int):
                return bit_field_insert(args[0], args[1], pos & 0xFF, length & 0xFF, width, r)
        if base == "bfe" and n == 3 and args[1].lane_only and args[2].lane_only:
            pos, length = args[1].constant, args[2].constant
            if isinstance(pos, int) and isinstance(length, int):
                return bit_field_extract(args[0], pos & 0xFF, length & 0xFF, width, r, signed)
        if base == "prmt" and n == 3 and op in ("prmt.b32",) and args[2].lane_only:
            sel = args[2].constant
            if isinstance(sel, int):
                return permute(args[0], args[1], sel & 0xFFFF, r)
        if base in ("min", "max") and n == 2:
            if args[0].lane_only and args[1].lane_only:
                f = min if base == "min" else max
                return Value.const(cmap(f, args[0].constant, args[1].constant))
            (alo, ahi), (blo, bhi) = r.interval(args[0]), r.interval(args[1])
            first = ahi <= blo if base == "min" else alo >= bhi
            second = bhi <= alo if base == "min" else blo >= ahi
            return args[0] if first else args[1] if second else None
        if base == "selp" and n == 3 and args[0] == args[1]:
            return args[0]
        return None

    def induction(self, register: str, reach: tuple) -> InductionVariable | None:
        """The induction variable a merge of definitions is: one write inside a loop, on every
        trip, that leaves the register's value at the top of the loop plus a constant (`add`, or
        `add` into another register and a `mov` back, as NVVM writes it), the rest entering the
        loop from outside with one value."""
        key = (register, reach)
        if key in self._ivs:
            return self._ivs[key]
        self._ivs[key] = None
        if len(reach) < 2 or reach[0] == UNDEFINED and len(reach) == 2:
            return None  # only "whatever it held on entry" comes from outside: nothing to advance
        for d in reach:
            if d == UNDEFINED or self.statements[d - 1].guard is not None:
                continue
            for loop in self.cfg.loops_of(d):
                outside = [x for x in reach if x != d]
                if any(x != UNDEFINED and self.cfg.block_of(x) in loop.blocks for x in outside):
                    continue
                if not all(self.cfg.dominates(self.cfg.block_of(d), latch) for latch in loop.latches):
                    break
                inits = {self._defined(register, x) for x in outside}
                if len(inits) != 1:
                    break
                step = self._step(register, reach, d, loop.number)
                if step is None:
                    break
                iv = self._ivs[key] = InductionVariable(register, loop.number, d, step, inits.pop())
                return iv
        return None

    def _step(self, register: str, reach: tuple, update: int, loop: int) -> int | None:
        """What the write at `update` adds to the register's value at the top of the loop, if
        a constant: the write is evaluated with that value as a symbol."""
        top = Value.factor(("phi", register, loop))
        saved = self._values
        self._values = {}  # values under the hypothesis are not memoised beyond it
        self._phis[(register, reach)] = top
        try:
            after = self._defined(register, update)
        finally:
            del self._phis[(register, reach)]
            self._values = saved
        step = after.plus(top, -1)
        if step.lane_only and isinstance(step.constant, int) and step.constant:
            return step.constant
        return None

    def selection(self, register: str, at: int) -> Selection | None:
        """A register that two definitions reach through an if (or if/else) of one guarded branch:
        `register = guard ? when_true : when_false` at `at`. The branch's block dominates the read;
        a definition on one side lies in a block that only that edge of the branch enters (or, for
        an if without else, the other definition lies above the branch)."""
        reach = self.reaching(register, at)
        if len(reach) != 2 or UNDEFINED in reach:
            return None
        cfg = self.cfg
        read_block = cfg.block_of(at)
        blocks = [cfg.block_of(d) for d in reach]
        b = cfg.idom[read_block]
        while b is not None:
            branch = cfg.blocks[b].last
            s = self.statements[branch - 1]
            if s.opcode.startswith("bra") and s.guard is not None:
                found = self._sides(b, branch, reach, blocks)
                if found is not None:
                    when_taken, when_not = found
                    guard = s.guard.lstrip("!")
                    negated = s.guard.startswith("!")
                    true_def, false_def = (when_not, when_taken) if negated else (when_taken, when_not)
                    return Selection(register, guard, branch, true_def, false_def)
            b = cfg.idom[b]
        return None

    def _sides(self, b: int, branch: int, reach: tuple, blocks: list) -> tuple | None:
        """(the definition that reaches when the branch is taken, the one when it is not)."""
        cfg = self.cfg
        fall = cfg.block_of(branch + 1) if branch + 1 <= len(self.statements) else None
        taken = [cfg.block_of(t) for t in cfg.succ[branch - 1] if t != branch + 1 and t <= len(self.statements)]
        if not taken or fall is None:
            return None
        edges = {"taken": taken[0], "fall": fall}
        side = {}
        for d, block in zip(reach, blocks):
            for name, target in edges.items():
                if cfg.blocks[target].pred == (b,) and cfg.dominates(target, block):
                    side[d] = name
            if d not in side and (cfg.dominates(block, b) and (block != b or d < branch)):
                side[d] = "above"
        kinds = sorted(side.values())
        if len(side) != 2 or kinds not in (["fall", "taken"], ["above", "fall"], ["above", "taken"]):
            return None
        by = {v: k for k, v in side.items()}
        if "above" in by:
            other = "taken" if "fall" in by else "fall"
            by[other] = by.pop("above")
        return by["taken"], by["fall"]

    def param_address(self, stmt: int) -> int | None:
        """The parameter-space byte offset an `ld.param` reads: `[param_0+40]`, or `[%rd1+-32]`
        with %rd1 = param_0 + 80."""
        a = self.operands(stmt)[1] if len(self.operands(stmt)) > 1 else None
        if not isinstance(a, Addr) or a.base is None:
            return None
        v = self.value(a.base, stmt)
        if v.factors() == {("pspace",)} and dict(v.terms).get((("pspace",),)) == 1 and isinstance(v.constant, int):
            return v.constant + a.offset
        return None


_INT = re.compile(r"[bsu](8|16|32|64)$")


def _integer_conversion(op: str, v: Value, ranges: Ranges) -> Value | None:
    """cvt between integer types: a widening keeps the value; a narrowing keeps it when it fits,
    and is computed lane by lane for a lane-only value (floats, rounding, saturation: None)."""
    parts = op.split(".")[1:]
    types = [p for p in parts if _INT.match(p) or p[:1] in "fe" and p[1:].isdigit()]
    if len(types) != 2 or not all(_INT.match(t) for t in types) or "sat" in parts:
        return None
    dst, src = types
    bits = int(dst[1:])
    if bits >= int(src[1:]):
        return v
    lo, hi = ranges.interval(v)
    if (0 <= lo and hi < 1 << bits) if dst[0] != "s" else (-(1 << bits - 1) <= lo and hi < 1 << bits - 1):
        return v
    if v.lane_only:
        def narrow(x):
            x &= (1 << bits) - 1
            return x - (1 << bits) if dst[0] == "s" and x >> (bits - 1) else x
        return Value.const(cmap(narrow, v.constant))
    return None


def _tid_x(block: tuple | None) -> Value:
    """%tid.x as the lane plus 32 per warp along x — true when the block's x extent is a multiple
    of 32 (the lanes of a warp are consecutive threads), which is assumed where the entry does
    not declare its block; otherwise %tid.x is a factor of its own."""
    if block is not None and block[0] % 32:
        return Value.factor(("sreg", "tid.x"))
    if block is not None and block[0] == 32:
        return _LANE
    return _LANE.plus(Value.factor(("sreg", "tid.x>>5")).scaled(32))
