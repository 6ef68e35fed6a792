"""Where each phase's A, B and C operands come from, and at which byte offsets.

Every register read is resolved to the definitions that *reach* it through the control-flow graph
(`rr.ptx.reaching`), never to the last one above it in the text. Addresses are evaluated into
symbolic values (`rr.describe.values`): polynomials over typed factors — a pointer loaded from the
parameter space (`param+40`), a scalar parameter, `%ctaid`, `%tid`, a loop's trip index — with
everything that depends on the lane folded into per-lane coefficients, however NVVM spelt it
(`mul`, `shl`, `or`, `bfi`, `prmt`, `and`, `shr`, …). A load's address then splits into its base
pointer, its lane part, its other terms (the `%tid.z` slab among them) and its byte offset, as the
reference document reports them.

A register written inside a loop and read round its back edge is an induction variable when each
trip adds the same constant: its value is `init + step·trip`. Other merges (several definitions
reach through branches) stay merges: a source they reach is reported with all of them.

Operand sources, traced back through the reaching definitions:
`weight(param+N)` — global loads at a `c·laneid` lane stride; `table(param+N)` — global loads with
any other lane part; `shared(…)` — shared-memory loads, with what was staged there; `D(phase p)` —
a chained C; `pack(D of phase p)` — requantised packs (`cvt…e4m3x2`, `mov.b32 {…}`) of an earlier
phase's D; `transpose(D of phase p)` — `movmatrix`; `zero`; `input` — a register no statement
writes (or a parameter's value); `computed(epilogue e)` for anything else; `merge(… | …)` where
definitions of different sources reach.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections import Counter
from dataclasses import dataclass, field

from rr.describe.phases import Epilogue, Phase, is_mma, statement_fragments
from rr.describe.values import (
    LANES,
    Ranges,
    Value,
    bit_field_extract,
    bit_field_insert,
    bitwise,
    cmap,
    lane_text,
    lanes,
    permute,
    shift_right,
)
from rr.ptx.cfg import body_directives, control_flow
from rr.ptx.opcodes import Opcode, by_family
from rr.ptx.statements import Statement, linearise
from rr.ptx.statements import operands as statement_operands
from rr.ptx.model import Addr, Imm, Reg, Sym, Vec, register_names
from rr.ptx.reaching import UNDEFINED, ReachingDefinitions

_LANE = Value.const(tuple(range(LANES)))
_BITS = {"8": 8, "16": 16, "32": 32, "64": 64}


def _width(code: Opcode) -> tuple[int, bool]:
    """(bits, signed) of an instruction's operand type (its last integer or bit type)."""
    for t in reversed(code.types):
        if t[:1] in "bus" and t[1:] in _BITS:
            return _BITS[t[1:]], t[0] == "s"
    return 32, False


@dataclass(frozen=True)
class Access:
    """A memory access's address, split the way the reference document reports it."""

    stmt: int
    space: str  # global, shared, param, const, local, …
    base: str | None  # param+N (a pointer from the parameter space), shared:<symbol>, global:<symbol>
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


@dataclass
class Source:
    kind: str  # weight, table, shared, D, pack, transpose, zero, input, computed, merge
    detail: str = ""
    accesses: list = field(default_factory=list)
    phase: int | None = None  # for D, pack, transpose
    alternatives: list = field(default_factory=list)  # for merge
    defs: tuple = ()  # the definitions reaching the operand it comes from (0: the value on entry)

    def __str__(self) -> str:
        return f"{self.kind}({self.detail})" if self.detail else self.kind

    @property
    def key(self) -> tuple:
        return (self.kind, self.detail)

    def reached_by(self, defs: tuple) -> Source:
        """This source as the definitions `defs` give it (its lists shared, as a shallow copy's)."""
        return Source(self.kind, self.detail, self.accesses, self.phase, self.alternatives, defs)


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


class Dataflow:
    """Reaching definitions, symbolic values and memory accesses of one linearised entry."""

    def __init__(self, function, statements: list[Statement] | None = None, module=None):
        self.function = function
        self.statements = linearise(function) if statements is None else statements
        self.params = param_offsets(function.params)
        self.block = block_dims(function)
        self.block_z = self.block[2] if self.block else 4
        self.cfg = control_flow(function, self.statements)
        self.reach = ReachingDefinitions(self.cfg)
        self._param_widths: dict[int, tuple] = {}
        self._specials = {"%laneid": _LANE, "%tid.x": _tid_x(self.block)}
        self.ranges = Ranges(self.block, self._param_widths, _symbols(function, module))
        self._ops: dict[int, tuple] = {}
        self._fragments: dict[int, tuple | None] = {}
        self._values: dict[tuple, Value] = {}
        self._phis: dict[tuple, Value] = {}  # (register, reaching set) -> its value at the loop top
        self._ivs: dict[tuple, InductionVariable | None] = {}
        self._accesses: dict[int, Access | None] = {}
        self.barriers = [s.stmt for s in self.statements if _block_barrier(s.code)]
        self.shared_stores = [s.stmt for s in self.statements if s.code.base == "st" and s.code.space == "shared"]

    def operands(self, stmt: int) -> tuple:
        ops = self._ops.get(stmt)
        if ops is None:
            # registers named as in defs and uses (a block's re-declared `p` is `p@3`)
            ops = self._ops[stmt] = statement_operands(self.statements[stmt - 1])
        return ops

    def fragments(self, stmt: int) -> tuple | None:
        """An mma statement's (D, A, B, C) register names (`rr.describe.phases.mma_operands`)."""
        found = self._fragments.get(stmt, False)
        if found is False:
            found = self._fragments[stmt] = statement_fragments(self.statements[stmt - 1],
                                                                lambda s: self.operands(s.stmt))
        return found

    def reaching(self, register: str, stmt: int) -> tuple[int, ...]:
        return self.reach.of(register, stmt)

    def definition(self, register: str, before: int) -> int | None:
        """The one statement whose write of `register` reaches statement `before`, or None."""
        return self.reach.single(register, before)

    # -- symbolic values -------------------------------------------------------------------------

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
            self._param_widths.setdefault(at, (width, signed))
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

    # -- accesses ----------------------------------------------------------------------------------

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

    def access(self, stmt: int) -> Access | None:
        if stmt not in self._accesses:
            self._accesses[stmt] = self._access(stmt)
        return self._accesses[stmt]

    def _access(self, stmt: int) -> Access | None:
        s = self.statements[stmt - 1]
        ops = self.operands(stmt)
        addr = next((o for o in ops if isinstance(o, Addr)), None)
        if addr is None:
            return None
        code = s.code
        space = code.space or "generic"
        if addr.base is None:
            v = Value.const(addr.offset)
        else:
            v = self.value(addr.base, stmt).plus(Value.const(addr.offset))
        terms = dict(v.terms)
        base = None
        for f, c in terms.items():
            if len(f) == 1 and c == 1 and (f[0][0] == "sym" or (f[0][0] == "param" and
                                                                self._param_widths.get(f[0][1], (64,))[0] == 64)):
                base = f[0]
                break
        if base is not None:
            terms.pop((base,))
            base = f"param+{base[1]}" if base[0] == "param" else f"{space}:{base[1]}"
        const = lanes(terms.pop((), 0))
        offset = const[0]
        lane_bytes = tuple(x - offset for x in const) if const.count(offset) < LANES else None
        data = ops[0] if code.base in ("ld", "atom", "tex") else ops[1] if len(ops) > 1 else ops[0]
        return Access(stmt, space, base, offset, lane_bytes, tuple(sorted(terms.items())),
                      _bytes(code, data))

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


_INT = re.compile(r"[bsu](8|16|32|64)$")


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


def _bytes(code: Opcode, data) -> int:
    """Bytes an access moves per lane: its type's (4 when it names none) times the vector's."""
    bits = code.bits
    return (bits // 8 if bits and bits >= 8 else 4) * (len(data.items) if isinstance(data, Vec) else 1)


def _block_barrier(code: Opcode) -> bool:
    """A barrier that the block's threads wait at (`bar.sync`, `barrier.sync`, `bar.cta.sync`)."""
    return code.family.name in ("bar", "barrier") and "sync" in code.mods and "warp" not in code.mods


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


_DECLARATION = re.compile(r"\.(shared|global|const|local)\b(?:.*?\.align\s+(\d+))?.*?([A-Za-z_$][\w$]*)\s*(?:\[|;|=)", re.S)


def _symbols(function, module) -> dict:
    """symbol -> (state space, alignment in bytes) of every variable declared at module level or
    in the body."""
    texts = [item.text for item in (module.items if module is not None else ())
             if getattr(item, "kind", None) in ("shared", "global", "const", "local", "extern", "visible")]
    out = {}
    for text in texts + body_directives(function):
        m = _DECLARATION.search(text)
        if m:
            out[m.group(3)] = (m.group(1), int(m.group(2) or 1))
    return out


def _tid_x(block: tuple | None) -> Value:
    """%tid.x as the lane plus 32 per warp along x — true when the block's x extent is a multiple
    of 32 (the lanes of a warp are consecutive threads), which is assumed where the entry does
    not declare its block; otherwise %tid.x is a factor of its own."""
    if block is not None and block[0] % 32:
        return Value.factor(("sreg", "tid.x"))
    if block is not None and block[0] == 32:
        return _LANE
    return _LANE.plus(Value.factor(("sreg", "tid.x>>5")).scaled(32))


def block_dims(function) -> tuple | None:
    """The block's extents the entry declares (`.reqntid`, else `.maxntid`), padded to 3."""
    for key in ("reqntid", "maxntid"):
        dims = function.directives.get(key)
        if dims:
            return tuple(dims) + (1,) * (3 - len(dims))
    return None


def block_z(function) -> int:
    """The %tid.z extent the entry declares (`.reqntid`/`.maxntid`), else the engine's 4."""
    dims = block_dims(function)
    return dims[2] if dims else 4


def param_offsets(params) -> dict[str, int]:
    """Byte offset of each parameter in the parameter space, laid out in order with alignment."""
    out, at = {}, 0
    for p in params:
        align = p.align or max(1, min(p.size, 8))
        at = -(-at // align) * align
        out[p.name] = at
        at += p.size
    return out


# -- operand sources ---------------------------------------------------------------------------------


class _Tracer:
    """Traces registers back to their sources, memoised per (register, statement)."""

    def __init__(self, flow: Dataflow, phases: list[Phase], epilogues: list[Epilogue]):
        self.flow = flow
        self.phase_of: dict[int, int] = {}
        for p in phases:
            for st in range(p.first_stmt, p.last_stmt + 1):
                if is_mma(flow.statements[st - 1].code):
                    self.phase_of[st] = p.phase
        self.epilogues = _Epilogues(epilogues)
        self._memo: dict[tuple, Source] = {}
        self._operands: dict[tuple, Source] = {}
        self._stored: dict[tuple, str] = {}  # shared stores -> what they stored (`_staged`)
        self._store_planes: dict[int, set] = {}  # a shared store -> the offsets its planes meet

    def operand(self, regs: tuple, at: int, skip: frozenset = frozenset()) -> Source:
        """The source of an operand's registers read at `at` (definitions in `skip` ignored)."""
        reach = self.flow.reach.of
        if skip:
            reaches = tuple((r, tuple(d for d in reach(r, at) if d not in skip)) for r in dict.fromkeys(regs))
        else:  # A and B, read by most mma
            reaches = tuple((r, reach(r, at)) for r in dict.fromkeys(regs))
        found = self._operands.get(reaches)
        if found is None:  # an A quad read by many mma of a phase is traced once
            found = self._operands[reaches] = _combine([self._reached(r, reach) for r, reach in reaches])
        return found

    def register(self, reg: str, at: int, skip: frozenset = frozenset()) -> Source:
        return self._reached(reg, tuple(d for d in self.flow.reaching(reg, at) if d not in skip))

    def _reached(self, reg: str, reach: tuple) -> Source:
        if not reach:
            return Source("input")
        return _combine([self.definition(reg, d, 0).reached_by((d,)) for d in reach])

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
        return Source("computed", self.epilogues.of(stmt))

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
                    if isinstance(o, Sym) and flow.ranges.symbols.get(o.name, ("",))[0] == "shared":
                        symbols.add(o.name)
                work.extend((u, d) for u in s.uses)
        if not symbols:
            return Source("computed", self.epilogues.of(at))
        return Source("shared", "descriptor of " + ", ".join(sorted(symbols)))

    def _uses(self, stmt: int, depth: int) -> list[Source]:
        s = self.flow.statements[stmt - 1]
        out = []
        for u in s.uses:
            if s.guard and u == s.guard.lstrip("!"):
                continue
            reach = self.flow.reaching(u, stmt)
            out.append(_combine([self.definition(u, d, depth + 1) for d in reach]))
        return out

    def _trace(self, reg: str, stmt: int, depth: int) -> Source:
        flow = self.flow
        s = flow.statements[stmt - 1]
        code = s.code
        phase = self.phase_of.get(stmt)
        if phase is not None:
            return Source("D", f"phase {phase}", phase=phase)
        if code.family.name in ("wmma.load", "ldmatrix"):  # a warp's fragment load: its layout is the instruction's
            acc = flow.access(stmt)
            if acc is not None and acc.space == "shared" or code.base == "ldmatrix":
                return Source("shared", self._staged(stmt, acc, depth), [acc] if acc else [])
            return Source("weight", acc.base or "?", [acc]) if acc is not None else self._computed(stmt)
        if code.base == "ld":
            acc = flow.access(stmt)
            if code.space == "shared" or (acc is not None and acc.space == "shared"):
                return Source("shared", self._staged(stmt, acc, depth), [acc] if acc else [])
            if acc is None:
                return self._computed(stmt)
            if acc.space == "param":
                return Source("input", "", [acc])
            kind = "weight" if acc.lane_linear else "table"
            return Source(kind, acc.base or "?", [acc])
        mov = code.base == "mov"
        ops = flow.operands(stmt) if mov else ()  # only a mov's operands decide anything below
        if mov and not s.uses and len(ops) == 2 and isinstance(ops[1], Imm):
            return Source("zero") if ops[1].value == 0 else self._computed(stmt)
        if depth >= 40:
            return self._computed(stmt)
        if mov and len(ops) == 2 and isinstance(ops[1], Reg) and not ops[1].special \
                and isinstance(ops[0], Reg) and s.guard is None:
            return _combine(self._uses(stmt, depth))  # a copy is what it copies
        if mov and len(ops) == 2 and (isinstance(ops[1], Vec) or isinstance(ops[0], Vec)):
            # joins and splits of halves carry what the parts were: loads stay loads, packs packs
            inner = self._uses(stmt, depth)
            merged = _combine(inner)
            if merged.kind in ("weight", "table", "pack", "transpose", "D", "zero"):
                return merged if merged.kind not in ("D", "transpose") else _packed(merged, False)
            if merged.kind == "computed":
                return merged
            return self._computed(stmt)
        if code.base in ("cvt", "mov", "movmatrix"):
            transpose = code.base == "movmatrix"
            phases = set()
            for inner in self._uses(stmt, depth):
                if inner.kind in ("pack", "transpose", "D"):
                    transpose = transpose or inner.kind == "transpose"
                    phases.add(inner.phase)
                elif inner.kind == "computed":
                    return inner  # a repack names the epilogue that computed the values
                else:
                    return self._computed(stmt)
            if len(phases) == 1:
                p = phases.pop()
                return Source("transpose" if transpose else "pack", f"D of phase {p}", phase=p)
        return self._computed(stmt)

    def _staged(self, stmt: int, load: Access | None, depth: int) -> str:
        """What the shared stores a shared load reads had stored: the stores of its epoch
        (`Dataflow.store_epoch`); of those, the ones with the same base and lane part at an address
        some %tid.z plane of the block can meet, when the addresses can be compared at all."""
        flow = self.flow
        stores = flow.store_epoch(stmt)
        if load is not None:
            wanted = load.planes(flow.block_z)
            matching = []
            for st in stores:
                acc = flow.access(st)
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

    def _stored_sources(self, stores: list[int], depth: int) -> str:
        """The sources of the values the shared stores wrote, joined by " + "."""
        flow = self.flow
        found = set()
        for st in stores:
            data = flow.operands(st)[1]
            for r in (data.items if isinstance(data, Vec) else (data,)):
                if not isinstance(r, Reg):
                    found.add("computed")
                    continue
                reach = flow.reaching(r.name, st)
                found.add(str(_combine([self.definition(r.name, d, depth + 1) for d in reach])))
        return " + ".join(sorted(found))


_TRACING = Source("tracing")  # a definition's memo entry while its trace is under way


def _packed(src: Source, transpose: bool) -> Source:
    return Source("transpose" if transpose or src.kind == "transpose" else "pack", f"D of phase {src.phase}",
                  phase=src.phase)


def _combine(found: list[Source]) -> Source:
    """One source for several registers or reaching definitions: the same source (accesses
    joined), or a merge of the different ones."""
    if not found:
        return Source("input")
    if len(found) == 1:
        return found[0]
    first = found[0]
    if first.kind != "merge" and all(s.kind == first.kind and s.detail == first.detail for s in found):
        # one source (an A quad's four registers from one load, say): its accesses and definitions joined
        return Source(first.kind, first.detail, [a for s in found for a in s.accesses], first.phase,
                      defs=tuple(sorted({d for s in found for d in s.defs})))
    distinct: dict[tuple, Source] = {}
    for s in found:
        for a in (s.alternatives if s.kind == "merge" else (s,)):
            into = distinct.setdefault(a.key, Source(a.kind, a.detail, [], a.phase))
            into.accesses.extend(a.accesses)
            into.defs = tuple(sorted(set(into.defs) | set(a.defs)))
    if len(distinct) == 1:
        return next(iter(distinct.values()))
    alts = sorted(distinct.values(), key=str)
    return Source("merge", " | ".join(map(str, alts)), [a for s in alts for a in s.accesses], alternatives=alts,
                  defs=tuple(sorted({d for a in alts for d in a.defs})))


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


def phase_operands(flow: Dataflow, phase: Phase, tracer: _Tracer) -> dict[str, list[Source]]:
    """Per role, the source of every A and B operand of the phase's mma statements and of every
    accumulator chain's seed C (a C that is the D of an mma of the same phase — the chain going
    on, also round a loop's back edge — is no separate source)."""
    sources: dict[str, list[Source]] = {"A": [], "B": [], "C": []}
    own = frozenset(st for st in range(phase.first_stmt, phase.last_stmt + 1) if tracer.phase_of.get(st) == phase.phase)
    for stmt in sorted(own):
        ops = flow.fragments(stmt)
        if ops is None:
            continue
        d, a, b, c = ops
        for role, regs in (("A", a), ("B", b)):
            if regs and len(regs) == 1 and tracer.flow.statements[stmt - 1].code.base == "wgmma":
                sources[role].append(tracer.descriptor(regs[0], stmt))
            elif regs:
                sources[role].append(tracer.operand(regs, stmt))
        if c is None:
            sources["C"].append(Source("zero"))
            continue
        chained = all(set(flow.reaching(r, stmt)) <= own for r in c)
        if not chained:
            sources["C"].append(tracer.operand(c, stmt, own))
    return sources


def operand_sources(flow: Dataflow, phases: list[Phase], epilogues: list[Epilogue]) -> list[dict]:
    """Per phase: a_source, b_source, c_source (the seed of each accumulator chain), their
    offsets, the slab stride, the lane terms of its loads, and the structured `operands`."""
    tracer = _Tracer(flow, phases, epilogues)
    out = []
    for p in phases:
        sources = phase_operands(flow, p, tracer)
        row = {}
        for name, found in sources.items():
            kinds = Counter(str(s) for s in found)
            row[f"{name.lower()}_source"] = " + ".join(k for k, _ in kinds.most_common())
        for name in ("A", "B", "C"):
            row[f"{name.lower()}_offsets"] = sorted({acc.offset for s in sources[name] for acc in s.accesses})
        # the %tid.z stride of the phase's weight loads: B's, or C's where B reads no weights (phase 7)
        slabs = {acc.slab_stride for s in sources["B"] for acc in s.accesses if acc.slab_stride} or \
            {acc.slab_stride for s in sources["C"] for acc in s.accesses if acc.slab_stride}
        row["slab_stride"] = next(iter(slabs)) if len(slabs) == 1 else None
        row["slab_strides"] = sorted(slabs)  # more than one would be a mixed-slab B operand
        row["lane_terms"] = sorted({acc.lane for n in "ABC" for s in sources[n] for acc in s.accesses if acc.lane})
        row["operands"] = {name: operand_json(found, flow) for name, found in sources.items()}
        row["loop"] = loop_json(flow, p)
        out.append(row)
    return out


def factor_json(f: tuple) -> dict:
    kind = f[0]
    if kind == "sreg":
        return {"kind": f[1]}
    if kind == "param":
        return {"kind": "param", "offset": f[1]}
    if kind == "trip":
        return {"kind": "induction", "loop": f[1]}
    if kind == "sym":
        return {"kind": "symbol", "name": f[1]}
    if kind == "pspace":
        return {"kind": "param_space"}
    if kind == "input":
        return {"kind": "input", "register": f[1]}
    return {"kind": "value", "stmt": f[1], "register": f[2]}


def term_json(factors: tuple, coefficient) -> dict:
    out = {"coefficient": coefficient if isinstance(coefficient, int) else None,
           "factors": [factor_json(x) for x in factors]}
    if not isinstance(coefficient, int):
        out["lane_coefficients"] = list(coefficient)
    return out


def _source_json(src: Source) -> dict:
    accs = src.accesses
    bases = sorted({a.base for a in accs if a.base}) if accs else []
    lane_parts = {a.lane_bytes for a in accs}
    terms = sorted({(f, c) for a in accs for f, c in a.terms}, key=repr)
    return {
        "source": str(src), "kind": src.kind,
        "base": bases[0] if len(bases) == 1 else None,
        "phase": src.phase,
        "offsets": sorted({a.offset for a in accs}),
        "lane_bytes": list(next(iter(lane_parts))) if len(lane_parts) == 1 and None not in lane_parts else None,
        "terms": [term_json(f, c) for f, c in terms],
    }


def _definitions_json(flow: Dataflow, defs: tuple) -> list[dict]:
    """Where the definitions of a merge come from: statement, basic block, innermost loop."""
    out = []
    for d in defs:
        if d == UNDEFINED:
            out.append({"stmt": None, "block": None, "loop": None, "entry": True})
            continue
        loops = flow.cfg.loops_of(d)
        out.append({"stmt": d, "block": flow.cfg.block_of(d), "loop": loops[0].number if loops else None})
    return out


def operand_json(found: list[Source], flow: Dataflow) -> dict | None:
    """One role's sources over the phase as plain data (see docs/formats.md)."""
    if not found:
        return None
    merged = _combine(found)
    out = _source_json(merged)
    if len({s.key for s in found}) > 1 and merged.kind != "merge":
        out["source"] = " + ".join(k for k, _ in Counter(str(s) for s in found).most_common())
    if merged.kind == "merge":
        out["alternatives"] = [{**_source_json(a), "definitions": _definitions_json(flow, a.defs)}
                               for a in merged.alternatives]
    return out


def loop_json(flow: Dataflow, phase: Phase) -> dict | None:
    from rr.describe.loops import describe_loop

    loops = flow.cfg.loops_of(phase.first_stmt)
    return describe_loop(flow, loops[0], phase) if loops else None
