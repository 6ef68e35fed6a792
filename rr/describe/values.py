"""Symbolic integer values for address arithmetic: polynomials over typed factors, with per-lane
coefficients.

An address is evaluated into a `Value`: a sum of monomials, each a product of *factors* (special
registers such as `%ctaid.x`, a scalar kernel parameter, a pointer loaded from the parameter
space, a shared symbol, a loop's trip index, or an opaque value the analysis cannot see through)
times a *coefficient*. Everything that depends on the lane alone is folded into the coefficients:
a coefficient is an int, or a tuple of 32 ints — its value for lanes 0…31 — so `16·laneid`,
`((laneid<<2)&12)`, `(laneid>>2)·8 + (laneid&3)·4` and whatever else NVVM builds from `%laneid`
are all just vectors, whatever instructions spelt them.

Bit operations are arithmetic where the bits are disjoint: `or`/`xor`/`bfi`/`prmt` of values
whose possibly-set bits do not overlap are additions, `and` with a mask keeps or drops whole
monomials, `shr` divides monomials whose low bits are known zero. Which bits may be set follows
from each factor's range (`Ranges`: `%laneid` < 32, `%tid.x` < the block's extent, …). A value
that depends only on the lane is computed exactly, lane by lane, with the instruction's width.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Union

LANES = 32
Coef = Union[int, tuple]  # uniform, or one value per lane

# Factors are small tuples, ordered and hashable:
#   ("sreg", "tid.x")        a special register other than %laneid
#   ("param", 40)            the value a kernel parameter holds (bytes at that parameter-space offset)
#   ("pspace",)              the address of the parameter space itself (`mov.b64 %rd, kernel_param_0`)
#   ("sym", name)            the address of a declared variable (a .shared array, a .global table)
#   ("trip", 2)              loop 2's trip index: 0, 1, 2, … from entry into the loop
#   ("opaque", stmt, reg)    a value the analysis cannot see through (a load, a merge, mul.hi, …)


def lanes(c: Coef) -> tuple:
    return c if isinstance(c, tuple) else (c,) * LANES


def _norm(c: Coef) -> Coef:
    if isinstance(c, tuple) and c.count(c[0]) == len(c):
        return c[0]
    return c


def cmap(f, *cs: Coef) -> Coef:
    """Apply f lane by lane (uniform in, uniform out)."""
    if all(not isinstance(c, tuple) for c in cs):
        return f(*cs)
    return _norm(tuple(map(f, *map(lanes, cs))))


def _is_zero(c: Coef) -> bool:
    return c == 0 if not isinstance(c, tuple) else not any(c)


@dataclass(frozen=True, slots=True)
class Value:
    """sum of coefficient · product(factors); `terms` sorted by factors, no zero coefficients."""

    terms: tuple  # ((factors tuple, Coef), ...)

    @staticmethod
    def of(mapping: dict) -> "Value":
        return Value(tuple(sorted((f, c if type(c) is int else _norm(c)) for f, c in mapping.items()
                                  if (c if type(c) is int else not _is_zero(c)))))

    @staticmethod
    def const(c: Coef) -> "Value":
        return Value.of({(): c})

    @staticmethod
    def factor(f: tuple) -> "Value":
        return Value((((f,), 1),))

    @property
    def lane_only(self) -> bool:
        return all(not f for f, _ in self.terms)

    @property
    def constant(self) -> Coef:
        """The part that is no product of factors (the lane part and the constant)."""
        for f, c in self.terms:
            if not f:
                return c
        return 0

    def factors(self) -> set:
        return {x for f, _ in self.terms for x in f}

    def plus(self, other: "Value", sign: int = 1) -> "Value":
        """self + other, or self − other for sign −1."""
        if not other.terms:
            return self
        add = operator.add if sign == 1 else operator.sub if sign == -1 else lambda x, y: x + sign * y
        out = dict(self.terms)
        for f, c in other.terms:
            a = out.get(f, 0)
            # uniform coefficients (nearly all of them) without the per-lane machinery
            out[f] = a + sign * c if type(a) is int and type(c) is int else cmap(add, a, c)
        return Value.of(out)

    def scaled(self, c: Coef) -> "Value":
        if type(c) is int:
            if c == 1:
                return self
            return Value.of({f: v * c if type(v) is int else cmap(lambda x: x * c, v) for f, v in self.terms})
        return Value.of({f: cmap(lambda a, b: a * b, v, c) for f, v in self.terms})

    def times(self, other: "Value") -> "Value | None":
        """The product, or None when it would grow past a few monomials (then it is opaque)."""
        if len(self.terms) * len(other.terms) > 16:
            return None
        out: dict = {}
        for f, a in self.terms:
            for g, b in other.terms:
                key = tuple(sorted(f + g))
                if len(key) > 3:
                    return None
                out[key] = cmap(lambda x, y, z: x + y * z, out.get(key, 0), a, b)
        return Value.of(out)


class Ranges:
    """The interval each factor can take, for deciding which bits of a value may be set."""

    def __init__(self, ntid: tuple | None = None, param_widths: dict | None = None, symbols: dict | None = None):
        self.ntid = ntid  # the block's extents when the entry declares them exactly (.reqntid) or at most
        self.param_widths = param_widths or {}  # parameter-space offset -> (bits, signed)
        self.symbols = symbols or {}  # symbol -> (state space, alignment in bytes)

    def factor(self, f: tuple) -> tuple[int, int]:
        kind = f[0]
        if kind == "sreg":
            register, ops = special_register_parts(f[1])
            if register == "tid.x" and ops == [(">>", 5)]:  # the warp along x (%tid.x = laneid + 32·this)
                return 0, (self.ntid[0] // 32 if self.ntid else 32) - 1
            lo, hi = self._special(register)
            for op, k in ops:
                lo, hi = (0, min(hi, k)) if op == "&" else (lo >> k, hi >> k)
            return lo, hi
        if kind == "param":
            bits, signed = self.param_widths.get(f[1], (64, False))
            return (-(1 << bits - 1), (1 << bits - 1) - 1) if signed else (0, (1 << bits) - 1)
        if kind == "trip":
            return 0, 2 ** 31 - 1
        if kind == "sym" and self.symbols.get(f[1], ("global",))[0] == "shared":
            return 0, (1 << 18) - 1  # a shared-window address (228 KB at most on sm_90)
        if kind in ("pspace", "sym"):
            return 0, 2 ** 64 - 1
        return -(2 ** 63), 2 ** 64 - 1  # opaque: anything

    def _special(self, name: str) -> tuple[int, int]:
        base, _, axis = name.partition(".")
        i = "xyz".find(axis) if axis else -1
        if base == "tid":
            hi = (self.ntid[i] if self.ntid and i >= 0 else 1024) - 1
            return 0, max(hi, 0)
        if base == "ntid":
            return (1, self.ntid[i]) if self.ntid and i >= 0 else (1, 1024)
        if base in ("warpid", "nwarpid"):
            return 0, 1024
        return 0, 2 ** 31 - 1  # ctaid, nctaid, clusters, …

    def factor_zeros(self, f: tuple) -> int:
        """Low bits known to be zero."""
        if f[0] == "sym":
            a = self.symbols.get(f[1], ("global", 1))[1]
            return a.bit_length() - 1
        return 0

    def interval(self, v: Value) -> tuple[int, int]:
        lo = hi = 0
        for f, c in v.terms:
            vals = lanes(c)
            clo, chi = min(vals), max(vals)
            tlo, thi = clo, chi
            for x in f:
                a, b = self.factor(x)
                products = (tlo * a, tlo * b, thi * a, thi * b)
                tlo, thi = min(products), max(products)
            lo += tlo
            hi += thi
        return lo, hi

    def zeros(self, v: Value) -> int:
        """Low bits known to be zero in every lane (64 for the value 0)."""
        return min((_coefficient_zeros(c) + sum(self.factor_zeros(x) for x in f) for f, c in v.terms), default=64)

    def may_bits(self, v: Value, width: int) -> int:
        """A mask of the bits that may be set (all of `width` when the value may be negative)."""
        full = (1 << width) - 1
        lo, hi = self.interval(v)
        if lo == hi == 0:
            return 0
        low_zeros = ~((1 << min(self.zeros(v), width)) - 1)  # holds modulo 2^width, negatives too
        top = (1 << hi.bit_length()) - 1 if 0 <= lo and hi <= full else full
        return full & top & low_zeros

    def disjoint(self, values: list[Value], width: int) -> bool:
        seen = 0
        for v in values:
            m = self.may_bits(v, width)
            if seen & m:
                return False
            seen |= m
        return True


def monomials(v: Value) -> list[Value]:
    return [Value((t,)) for t in v.terms]


def bitwise(op: str, a: Value, b: Value, width: int, ranges: Ranges) -> Value | None:
    """`and`/`or`/`xor` of two values, when the bits say what it is; None otherwise."""
    mask = (1 << width) - 1
    if a.lane_only and b.lane_only:
        f = {"and": lambda x, y: x & y, "or": lambda x, y: x | y, "xor": lambda x, y: x ^ y}[op]
        return Value.const(cmap(lambda x, y: _signed(f(x & mask, y & mask), width, x, y), a.constant, b.constant))
    if op in ("or", "xor"):
        # disjoint bits (the values', or, where a value's range is too wide to tell, its monomials')
        if ranges.disjoint([a, b], width) or ranges.disjoint(monomials(a) + monomials(b), width):
            return a.plus(b)
        return None
    if not b.lane_only:
        a, b = b, a
    if not b.lane_only:
        return None
    return and_mask(a, b.constant, width, ranges)


def _signed(x: int, width: int, *inputs: int) -> int:
    """A lane value back into the signed range when the inputs were (keeps -1 & -1 == -1)."""
    if any(i < 0 for i in inputs) and x >> (width - 1) & 1:
        return x - (1 << width)
    return x


def and_mask(v: Value, m: Coef, width: int, ranges: Ranges) -> Value | None:
    """v & m: monomials whose bits lie inside the mask stay, those outside go; a lane-only part
    is masked lane by lane — valid when the monomials' bits are disjoint (no carries between)."""
    mask = (1 << width) - 1
    parts = monomials(v)
    if not ranges.disjoint(parts, width):
        return None
    keep = []
    for p in parts:
        bits = ranges.may_bits(p, width)
        if isinstance(m, int):
            if bits & ~m & mask == 0:
                keep.append(p)
                continue
            if bits & m == 0:
                continue
        if p.lane_only:
            keep.append(Value.const(cmap(lambda x, y: (x & mask) & (y & mask), p.constant, m)))
            continue
        derived = _derived(p, "&", m)
        if derived is None:
            return None
        keep.append(derived)
    out = Value(())
    for p in keep:
        out = out.plus(p)
    return out


def _derived(p: Value, op: str, k) -> Value | None:
    """2^s·f & m = 2^s·(f & (m >> s)), 2^s·f >> k = (f >> (k − s)) for one special-register factor f:
    a factor of its own (`tid.z&1`, `tid.x>>5`), which the templates can compute again."""
    if len(p.terms) != 1 or not isinstance(k, int):
        return None
    (factors, c), = p.terms
    if len(factors) != 1 or factors[0][0] != "sreg" or not isinstance(c, int) or c <= 0 or c & (c - 1):
        return None
    shift = c.bit_length() - 1
    name = factors[0][1]
    if op == "&":
        return Value.factor(("sreg", f"{name}&{k >> shift}")).scaled(c)
    if k <= shift:
        return Value.factor(("sreg", name)).scaled(c >> k)
    return Value.factor(("sreg", f"{name}>>{k - shift}"))


def special_register_parts(name: str) -> tuple[str, list]:
    """A special-register factor's register and the operations on it: 'tid.z&1' -> ('tid.z', [('&', 1)])."""
    import re

    base = re.match(r"[a-z_]+(?:\.[xyz])?", name).group()
    return base, [(op, int(v)) for op, v in re.findall(r"(&|>>)(\d+)", name[len(base):])]


def _coefficient_zeros(c: Coef) -> int:
    g = 0
    for x in lanes(c):
        g |= x
    return (g & -g).bit_length() - 1 if g else 64


def shift_right(v: Value, k: Coef, width: int, ranges: Ranges, signed: bool) -> Value | None:
    """v >> k for a constant k: exact division of monomials with k low zero bits; a lane-only
    part shifted lane by lane (when the parts do not carry into each other)."""
    mask = (1 << width) - 1
    if v.lane_only:
        def sh(x, s):
            s = min(s, width)
            x &= mask
            if signed and x >> (width - 1) & 1:
                x -= 1 << width
            return x >> s if s < width else (-1 if x < 0 else 0)
        return Value.const(cmap(sh, v.constant, k))
    if not isinstance(k, int):
        return None
    lo, _ = ranges.interval(v)
    if lo < 0 and not signed:
        return None
    parts = monomials(v)
    # a monomial divides exactly when its coefficient has k low zero bits (a factor's alignment
    # alone would leave a fraction of the factor, which no monomial can hold)
    if all(_coefficient_zeros(c) >= k for _, c in v.terms):
        return Value.of({f: cmap(lambda c: c >> k, c) for f, c in v.terms})
    if not ranges.disjoint(parts, width):
        return None
    out = Value(())
    for p in parts:
        if _coefficient_zeros(p.terms[0][1]) >= k:
            out = out.plus(Value.of({f: cmap(lambda c: c >> k, c) for f, c in p.terms}))
        elif p.lane_only:
            out = out.plus(Value.const(cmap(lambda x: (x & mask) >> k, p.constant)))
        else:
            derived = _derived(p, ">>", k)
            if derived is None:
                return None
            out = out.plus(derived)
    return out


def bit_field_insert(a: Value, b: Value, pos: int, length: int, width: int, ranges: Ranges) -> Value | None:
    """bfi: a's low `length` bits into b at `pos` — b + (a << pos) when b is zero there and a
    fits the field."""
    if length <= 0:
        return b
    field = ((1 << length) - 1) << pos
    if a.lane_only and b.lane_only:
        mask = (1 << width) - 1
        return Value.const(cmap(lambda x, y: ((y & mask) & ~field | ((x << pos) & field)) & mask, a.constant, b.constant))
    # a's bits above the field must be zero — unless the field reaches the top of the word, where
    # they fall off as they would from `a << pos` (the value model wraps no shift either)
    fits = pos + length >= width or ranges.may_bits(a, width) & ~((1 << length) - 1) == 0
    if ranges.may_bits(b, width) & field == 0 and fits:
        return b.plus(a.scaled(1 << pos))
    return None


def bit_field_extract(a: Value, pos: int, length: int, width: int, ranges: Ranges, signed: bool) -> Value | None:
    """bfe: `length` bits of a from `pos` (sign-extended for .s)."""
    if a.lane_only:
        def bfe(x):
            x &= (1 << width) - 1
            if length == 0:
                return 0
            field = (x >> pos) & ((1 << length) - 1) if pos < width else 0
            if signed:
                top = (x >> min(pos + length - 1, width - 1)) & 1
                if top:
                    field |= ~((1 << length) - 1)
            return field
        return Value.const(cmap(bfe, a.constant))
    if signed:
        return None
    shifted = shift_right(a, pos, width, ranges, False)
    return None if shifted is None else and_mask(shifted, (1 << length) - 1, width, ranges)


def permute(a: Value, b: Value, selector: int, ranges: Ranges) -> Value | None:
    """prmt.b32 in its default mode: output byte i is byte `sel_i & 7` of {b, a} (a is 0–3), or
    that byte's sign replicated when bit 3 of sel_i is set. As arithmetic: each source moved
    whole by one byte shift, when every byte it may have set is selected, in place."""
    sels = [(selector >> (4 * i)) & 0xF for i in range(4)]
    if a.lane_only and b.lane_only:
        def prmt(x, y):
            src = (x & 0xFFFFFFFF) | ((y & 0xFFFFFFFF) << 32)
            out = 0
            for i, s in enumerate(sels):
                byte = (src >> (8 * (s & 7))) & 0xFF
                if s & 8:
                    byte = 0xFF if byte & 0x80 else 0
                out |= byte << (8 * i)
            return out
        return Value.const(cmap(prmt, a.constant, b.constant))
    if any(s & 8 for s in sels):
        return None
    out = Value(())
    for src, offset in ((a, 0), (b, 4)):
        placed = {i: s - offset for i, s in enumerate(sels) if offset <= s < offset + 4}  # out byte -> byte
        bits = ranges.may_bits(src, 32)
        needed = [j for j in range(4) if bits >> (8 * j) & 0xFF]
        shifts = {i - j for i, j in placed.items() if j in needed}
        if not shifts:
            continue  # only bytes that are zero are selected, or none
        if len(shifts) != 1:
            return None
        shift = shifts.pop()
        for j in needed:
            if j + shift < 0:
                return None  # a byte that may be set would be dropped below the word
            if j + shift <= 3 and placed.get(j + shift) != j:
                return None  # (bytes moved past the top fall off, as from `src << 8·shift`)
        moved = src.scaled(1 << (8 * shift)) if shift >= 0 else shift_right(src, -8 * shift, 32, ranges, False)
        if moved is None:
            return None
        out = out.plus(moved)
    return out


def lane_text(c: Coef) -> str | None:
    """The reference document's spelling of a lane part: `16·laneid`, `((laneid<<2)&12)`, or
    `lane[…]` listing the values when it is neither (None when there is no lane part)."""
    vals = lanes(c)
    base = vals[0]
    rel = [v - base for v in vals]
    if not any(rel):
        return None
    step = rel[1]
    if all(v == step * i for i, v in enumerate(rel)):
        return f"{step}·laneid"
    union = 0
    for v in rel:
        union |= v
    for s in range(0, 8):
        if all(v == ((i << s) & union) for i, v in enumerate(rel)):
            return f"((laneid<<{s})&{union})"
    return "lane[" + ",".join(map(str, rel)) + "]"


def bit_fields(c: Coef) -> list[tuple[int, int, int]] | None:
    """A lane part as a sum of bit fields of the lane: [(lowest bit, bits, weight), …] with
    value(lane) = value(0) + Σ weight·((lane >> lowest) & (2^bits − 1)); None when the lane part
    is not such a sum (not linear in the lane's bits)."""
    vals = lanes(c)
    w = [vals[1 << b] - vals[0] for b in range(5)]
    if any(vals[i] - vals[0] != sum(w[b] for b in range(5) if i >> b & 1) for i in range(LANES)):
        return None
    fields = []
    b = 0
    while b < 5:
        if w[b] == 0:
            b += 1
            continue
        start, n = b, 1
        while start + n < 5 and w[start + n] == w[start] << n:
            n += 1
        fields.append((start, n, w[start]))
        b = start + n
    return fields
