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
from rr.ptx.opcodes import Opcode, by_family
from rr.ptx.reaching import UNDEFINED

_LANE = Value.const(tuple(range(LANES)))
_BITS = {"8": 8, "16": 16, "32": 32, "64": 64}


def _width(code: Opcode) -> tuple[int, bool]:
    """(bits, signed) of an instruction's operand type (its last integer or bit type)."""
    for t in reversed(code.types):
        if t[:1] in "bus" and t[1:] in _BITS:
            return _BITS[t[1:]], t[0] == "s"
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
        code = s.code
        ops = self.operands(stmt)
        width, signed = _width(code)
        if code.base == "ld":
            at = self.param_address(stmt) if code.space == "param" else None
            if at is None:
                return opaque
            at += width // 8 * register_names(ops[0]).index(register)  # ld.param.v2.u16 {%rs1, %rs2}
            self.param_widths.setdefault(at, (width, signed))
            return Value.factor(("param", at))
        if isinstance(ops[0], Vec):  # a split: mov.b64 {%r1, %r2}, %rd1
            if code.base != "mov" or len(ops) != 2:
                return opaque
            names = register_names(ops[0])
            part = 64 // len(names) if code.bits == 64 else 32 // len(names)
            whole = self.value(ops[1], stmt)
            shifted = shift_right(whole, part * names.index(register), 64, self.ranges, False)
            if shifted is None:
                return opaque
            masked = bitwise("and", shifted, Value.const((1 << part) - 1), 64, self.ranges)
            return opaque if masked is None else masked
        args = [self.value(o, stmt) if not isinstance(o, Vec) else None for o in ops[1:]]
        v = self._arith(code, ops, args, width, signed, stmt)
        return opaque if v is None else v

    def _arith(self, code: Opcode, ops: tuple, args: list, width: int, signed: bool, stmt: int) -> Value | None:
        """The value an arithmetic or data-movement statement computes, by its family's rule
        (`_SYMBOLIC`), or None where no rule sees through it."""
        r = self.ranges
        if code.base in ("mov", "cvta", "cvt"):
            if len(args) != 1:
                return None
            if isinstance(ops[1], Vec):  # a join: mov.b32 %r, {%rs1, %rs2}
                parts = [self.value(x, stmt) for x in ops[1].items]
                bits = width // len(parts)
                out = Value(())
                for i, p in enumerate(parts):
                    if not r.disjoint([p], bits) or r.may_bits(p, 64) >> bits:
                        return None
                    out = out.plus(p.scaled(1 << (bits * i)))
                return out
            if code.base == "cvt":
                return _integer_conversion(code, args[0], r)
            return args[0]
        arity, rule = _SYMBOLIC.get(code.family.name, (None, None))
        if len(args) != arity or None in args:
            return None
        return rule(code, args, width, signed, r)

    def induction(self, register: str, reach: tuple) -> InductionVariable | None:
        """The induction variable a merge of definitions is: one write inside a loop, on every
        trip, that leaves the register's value at the top of the loop plus a constant (`add`, or
        `add` into another register and a `mov` back, as NVVM writes it), the rest entering the
        loop from outside (with one value, or with values whose differing part stays opaque:
        `_common_part`)."""
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
                step = self._step(register, reach, d, loop.number)
                if step is None:
                    break
                init = _common_part({self._defined(register, x) for x in outside},
                                    ("opaque", self.cfg.blocks[loop.header].first, register))
                iv = self._ivs[key] = InductionVariable(register, loop.number, d, step, init)
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
            if s.code.base == "bra" and s.guard is not None:
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


def _common_part(values: set, rest: tuple) -> Value:
    """One value for the values a register enters a loop with: the value, where there is one;
    else the simplest of them with the terms in which the others differ replaced by the factor
    `rest` — the base pointer and lane part of a pointer that a main loop, or the branch that
    skips it, hands to a remainder loop stay, what the main loop's trips added becomes `rest` —
    so that the loop's own advance, `step·trip`, is still seen."""
    if len(values) == 1:
        return next(iter(values))
    base = min(values, key=lambda v: (len(v.terms), repr(v)))
    diffs = [v.plus(base, -1) for v in values if v != base]
    varying = {f for d in diffs for f, _ in d.terms if f}
    lanes_differ = any(isinstance(d.constant, tuple) for d in diffs)
    kept = {f: c for f, c in base.terms if f not in varying and (f or not lanes_differ)}
    return Value.of(kept).plus(Value.factor(rest))


def _integer_conversion(code: Opcode, v: Value, ranges: Ranges) -> Value | None:
    """cvt between integer types: a widening keeps the value; a narrowing keeps it when it fits,
    and is computed lane by lane for a lane-only value (floats, rounding, saturation: None)."""
    types = [t for t in code.types if _INT.match(t) or t[:1] in "fe" and t[1:].isdigit()]
    if len(types) != 2 or not all(_INT.match(t) for t in types) or "sat" in code.mods:
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


def _shift(code: Opcode, args: list, width: int, signed: bool, r: Ranges) -> Value | None:
    if not args[1].lane_only:
        return None
    # the shift amount is an unsigned 32-bit value; past the width the result is all shifted out
    k = cmap(lambda k: min(k & 0xFFFFFFFF, width), args[1].constant)
    if code.base == "shl":
        return args[0].scaled(cmap(lambda k: 1 << k if k < width else 0, k))
    return shift_right(args[0], k, width, r, signed)


def _bit_field(code: Opcode, args: list, width: int, signed: bool, r: Ranges) -> Value | None:
    """bfi f, a, b, pos, len and bfe d, a, pos, len with constant positions and lengths."""
    pos, length = args[-2], args[-1]
    if not (pos.lane_only and length.lane_only and isinstance(pos.constant, int)
            and isinstance(length.constant, int)):
        return None
    pos, length = pos.constant & 0xFF, length.constant & 0xFF
    if code.base == "bfi":
        return bit_field_insert(args[0], args[1], pos, length, width, r)
    return bit_field_extract(args[0], pos, length, width, r, signed)


def _permute(code: Opcode, args: list, width: int, signed: bool, r: Ranges) -> Value | None:
    sel = args[2].constant
    if code.mods != ("b32",) or not args[2].lane_only or not isinstance(sel, int):
        return None
    return permute(args[0], args[1], sel & 0xFFFF, r)


def _min_max(code: Opcode, args: list, width: int, signed: bool, r: Ranges) -> Value | None:
    minimum = code.base == "min"
    if args[0].lane_only and args[1].lane_only:
        return Value.const(cmap(min if minimum else max, args[0].constant, args[1].constant))
    (alo, ahi), (blo, bhi) = r.interval(args[0]), r.interval(args[1])
    first = ahi <= blo if minimum else alo >= bhi
    second = bhi <= alo if minimum else blo >= ahi
    return args[0] if first else args[1] if second else None


def _multiply_add(code: Opcode, args: list, width: int, signed: bool, r: Ranges) -> Value | None:
    if "hi" in code.mods:
        return None
    p = args[0].times(args[1])
    return p if p is None or len(args) == 2 else p.plus(args[2])


# What each family of integer arithmetic computes on symbolic values, by `Dataflow._arith`: family
# -> (its operand count, rule(code, args, width, signed, ranges) -> Value, None where it cannot tell)
_SYMBOLIC = by_family({
    "add": (2, lambda code, a, width, signed, r: a[0].plus(a[1])),
    "sub": (2, lambda code, a, width, signed, r: a[0].plus(a[1], -1)),
    "neg": (1, lambda code, a, width, signed, r: a[0].scaled(-1)),
    "not": (1, lambda code, a, width, signed, r: a[0].scaled(-1).plus(Value.const(-1))),
    "mul": (2, _multiply_add), "mul24": (2, _multiply_add), "mad": (3, _multiply_add), "mad24": (3, _multiply_add),
    "shl": (2, _shift), "shr": (2, _shift),
    **{family: (2, lambda code, a, width, signed, r: bitwise(code.base, a[0], a[1], width, r))
       for family in ("and", "or", "xor")},
    "bfi": (4, _bit_field), "bfe": (3, _bit_field),
    "prmt": (3, _permute),
    "min": (2, _min_max), "max": (2, _min_max),
    "selp": (3, lambda code, a, width, signed, r: a[0] if a[0] == a[1] else None),
})

