"""Rounding to a float format and between floats and integers, as `cvt` and the f64 arithmetic
round: `round_float` to f16, bf16, tf32, f32 or f64 in any rounding mode, the formats' bits and
values, `.ftz`, integers to floats and floats to integers (`round_integer`, `float_to_integer`),
and f64 `add` and `fma` rounded once in any mode (`sum_f64`, `fma_f64`, through rounding to odd)
with the H200's choice of NaN operand."""

from __future__ import annotations

import numpy as np

# (significant bits, minimum normal exponent, maximum exponent)
FLOAT_FORMATS = {"f16": (11, -14, 15), "bf16": (8, -126, 127), "tf32": (11, -126, 127),
                 "f32": (24, -126, 127), "f64": (53, -1022, 1023)}
CANONICAL_NAN = {"f16": 0x7FFF, "bf16": 0x7FFF, "tf32": 0x7FFFFFFF, "f32": 0x7FFFFFFF, "f64": 0x7FFFFFFFFFFFFFFF}
FORMAT_BITS = {"f16": np.uint16, "bf16": np.uint16, "tf32": np.uint32, "f32": np.uint32, "f64": np.uint64}
ROUNDINGS = {"rn": np.rint, "rz": np.trunc, "rm": np.floor, "rp": np.ceil,
          "rna": lambda q: np.copysign(np.floor(np.abs(q) + 0.5), q)}
INTEGER_ROUNDING = {"rni": "rn", "rzi": "rz", "rmi": "rm", "rpi": "rp"}


def max_finite(fmt: str) -> float:
    p, _, emax = FLOAT_FORMATS[fmt]
    return (2.0 - 2.0 ** (1 - p)) * 2.0 ** emax


def round_float(x, fmt: str, mode: str = "rn") -> np.ndarray:
    """Exact f64 values rounded to a float format as `cvt.<mode>` rounds: to its significant bits
    (fewer in the subnormal range), ties to even (rn) or away (rna), or toward zero/-inf/+inf;
    past the largest finite value to infinity or to that value, as the mode says. Returns f64
    values the format represents; infinities and NaNs pass through."""
    p, emin, _ = FLOAT_FORMATS[fmt]
    x = np.asarray(x, np.float64)
    lead = np.frexp(x)[1].astype(np.int64) - 1  # exponent of the leading bit
    scale = np.maximum(lead, emin) - (p - 1)  # exponent of the last significant bit kept
    r = np.ldexp(ROUNDINGS[mode](np.ldexp(x, -scale)), scale)
    big = max_finite(fmt)
    limit = {"rn": np.inf, "rna": np.inf, "rz": big, "rm": np.where(x > 0, big, np.inf),
             "rp": np.where(x < 0, big, np.inf)}[mode]
    r = np.where(np.abs(r) > big, np.copysign(limit, x), r)
    return np.where(np.isfinite(x), r, x)


def float_value(bits, fmt: str) -> np.ndarray:
    """Raw bits of a float format → exact f64."""
    b = np.asarray(bits)
    if fmt == "bf16":
        return (b.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)
    dt = {"f16": np.float16, "f32": np.float32, "tf32": np.float32, "f64": np.float64}[fmt]
    return b.astype(FORMAT_BITS[fmt], copy=False).view(dt).astype(np.float64)


def float_bits(x, fmt: str) -> np.ndarray:
    """f64 values the format represents → its raw bits (NaN → the canonical NaN)."""
    x = np.asarray(x, np.float64)
    if fmt == "f64":
        bits = x.view(np.uint64)
    elif fmt == "f16":
        bits = x.astype(np.float16).view(np.uint16)
    else:
        bits = x.astype(np.float32).view(np.uint32)
        if fmt == "bf16":
            bits = (bits >> np.uint32(16)).astype(np.uint16)
    ut = FORMAT_BITS[fmt]
    return np.where(np.isnan(x), ut(CANONICAL_NAN[fmt]), bits).astype(ut)


def quiet_nan_bits(x, fmt: str) -> np.ndarray:
    """The NaN an IEEE conversion of f64 NaNs gives in `fmt`: the sign, the quiet bit and the
    payload's leading bits (the H200 converts to and from f64 so; tf32 keeps f32's layout)."""
    b = np.asarray(x, np.float64).view(np.uint64)
    layout = "f32" if fmt == "tf32" else fmt
    width, mbits = {"f16": (16, 10), "bf16": (16, 7), "f32": (32, 23), "f64": (64, 52)}[layout]
    ut = FORMAT_BITS[fmt]
    payload = (b & np.uint64((1 << 52) - 1)) >> np.uint64(52 - mbits)
    if fmt == "tf32":
        payload &= np.uint64(~0x1FFF & ((1 << 23) - 1))
    exponent = np.uint64(((1 << (width - 1 - mbits)) - 1) << mbits)
    out = ((b >> np.uint64(63)) << np.uint64(width - 1)) | exponent | np.uint64(1 << (mbits - 1)) | payload
    return out.astype(ut)


def flush_subnormal(x, fmt: str = "f32") -> np.ndarray:
    """`.ftz`: values below the format's smallest normal become zeros of the same sign."""
    x = np.asarray(x)
    tiny = 2.0 ** FLOAT_FORMATS[fmt][1]
    return np.where(np.abs(x) < tiny, np.copysign(np.zeros((), x.dtype), x), x)


def round_integer(v, p: int, mode: str) -> np.ndarray:
    """Integers (any width, int64/uint64 included) rounded to p significant bits as `cvt.<mode>`
    rounds them, exactly, as f64 (which holds the result for p <= 53)."""
    v = np.asarray(v)
    neg = v < 0
    mag = np.where(neg, np.uint64(0) - v.astype(np.int64).view(np.uint64), v.astype(np.uint64))
    hi = (mag >> np.uint64(32)).astype(np.float64)
    length = np.where(hi > 0, 32 + np.frexp(hi)[1],
                      np.frexp((mag & np.uint64(0xFFFFFFFF)).astype(np.float64))[1]).astype(np.int64)
    s = np.maximum(length - p, 0).astype(np.uint64)
    q = mag >> s
    rem = mag & ((np.uint64(1) << s) - np.uint64(1))
    half = np.where(s > 0, np.uint64(1) << np.maximum(s, np.uint64(1)) - np.uint64(1), np.uint64(0))
    inexact = rem != 0
    up = {"rn": inexact & ((rem > half) | ((rem == half) & ((q & np.uint64(1)) == 1))),
          "rna": inexact & (rem >= half), "rz": np.zeros_like(inexact),
          "rm": inexact & neg, "rp": inexact & ~neg}[mode]
    r = np.ldexp((q + up.astype(np.uint64)).astype(np.float64), s.astype(np.int64))
    return np.where(neg, -r, r)


def round_to_odd_sum(p, c) -> np.ndarray:
    """p + c (f64) rounded to odd: the f64 nearest, moved one step toward the exact sum's side
    where it is inexact and its last bit even. Rounding that to a format of at most 51 bits
    rounds the exact sum once (an fma's a*b + c with a*b exact in f64)."""
    p, c = np.asarray(p, np.float64), np.asarray(c, np.float64)
    with np.errstate(invalid="ignore"):
        s, err = _two_sum(p, c)  # s + err == p + c exactly (err NaN where s is not finite)
        if not np.count_nonzero(err):  # exact everywhere: most sums
            return s
        nudge = (err != 0) & ((s.view(np.uint64) & np.uint64(1)) == 0) & np.isfinite(s)
    if not np.count_nonzero(nudge):
        return s
    return np.where(nudge, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)


def _two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def zero_sign(r, x, y, mode: str, exact):
    """An exact zero sum x + y is +0 but under round-toward-minus -0 (IEEE 754), unless both
    terms are +0. `r` is the rounded sum, `exact` zero exactly where the sum is."""
    if mode != "rm":
        return r
    both_plus = (x == 0) & ~np.signbit(x) & (y == 0) & ~np.signbit(y)
    return np.where((exact == 0) & ~both_plus, np.copysign(np.zeros((), r.dtype), -1.0), r)


def _directed(s, err, mode: str, a, b):
    """A round-to-nearest f64 sum `s` of a and b with its exact error `err` rounded as `mode` says
    instead (and an overflow to infinity pulled back to the largest finite value where the mode
    says so)."""
    if mode == "rn":
        return s
    up = {"rp": err > 0, "rm": np.zeros_like(err, bool), "rz": (err != 0) & (s < 0) & (err > 0)}[mode]
    down = {"rp": np.zeros_like(err, bool), "rm": err < 0, "rz": (err != 0) & (s > 0) & (err < 0)}[mode]
    r = np.where(up, np.nextafter(s, np.inf), np.where(down, np.nextafter(s, -np.inf), s))
    big = np.finfo(np.float64).max
    over = np.isinf(s) & np.isfinite(a) & np.isfinite(b)
    keep_inf = {"rz": np.zeros_like(s, bool), "rm": s < 0, "rp": s > 0}[mode]
    return zero_sign(np.where(over & ~keep_inf, np.copysign(big, s), r), a, b, mode, np.where(err == 0, s, 1.0))


def nan_operand_f64(r, *preferred):
    """An f64 result that is NaN because an operand is: that operand's NaN, quieted, the first
    NaN of `preferred` (the H200's order: b before a for add, sub and mul; b, c, a for fma; x86
    and numpy take a first). NaNs made from no NaN operand stay as computed."""
    r = np.asarray(r, np.float64)
    bad = np.isnan(r)
    if not bad.any():
        return r
    out = r
    for x in reversed(preferred):
        x = np.asarray(x, np.float64)
        out = np.where(np.isnan(x), (x.view(np.uint64) | np.uint64(1 << 51)).view(np.float64), out)
    return np.where(bad, out, r)


def sum_f64(a, b, mode: str = "rn") -> np.ndarray:
    """a + b of f64 rounded once as `mode` says (TwoSum's exact error decides)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    s, err = _two_sum(a, b)
    return nan_operand_f64(_directed(s, np.where(np.isfinite(s), err, 0.0), mode, a, b), b, a)


def fma_f64(a, b, c, mode: str = "rn") -> np.ndarray:
    """f64 `fma` rounded once (Boldo and Melquiond's emulation through rounding to odd: the exact
    product as two f64 by Dekker's split, the sum of three terms rounded to odd, then rounded as
    asked). Operands whose product or split could overflow or lose bits below the normals, and
    non-finite ones, are computed exactly one by one."""
    a, b, c = (np.asarray(v, np.float64) for v in (a, b, c))
    a, b, c = np.broadcast_arrays(a, b, c)
    with np.errstate(all="ignore"):
        p = a * b
        zero = (a == 0) | (b == 0)
        safe = np.isfinite(a) & np.isfinite(b) & np.isfinite(c) & (np.abs(a) < 2.0 ** 995) & (np.abs(b) < 2.0 ** 995) \
            & (np.abs(p) < 2.0 ** 1000) & (np.abs(c) < 2.0 ** 1000) & (zero | (np.abs(p) > 2.0 ** -960)) \
            & ((c == 0) | (np.abs(c) > 2.0 ** -960))
        split = 134217729.0  # 2^27 + 1
        ta, tb = split * a, split * b
        ah, bh = ta - (ta - a), tb - (tb - b)
        al, bl = a - ah, b - bh
        pe = ((ah * bh - p) + ah * bl + al * bh) + al * bl  # p + pe == a * b exactly
        th, tl = _two_sum(c, p)
        v = round_to_odd_sum(tl, pe)
        s, err = _two_sum(th, v)
        err = np.where(np.isfinite(s), err, 0.0)
        r = zero_sign(_directed(s, err, mode, th, v), p, c, mode, np.where(err == 0, s, 1.0))  # a*b + c == 0: by p, c
        r = np.where(zero, zero_sign(p + c, p, c, mode, p + c), r)  # an exact zero product: the sum's signed zeros
        safe &= zero | (r == 0) | (np.abs(r) > 2.0 ** -960)  # no result near the subnormals
    if not safe.all():
        r = r.copy()
        for i in np.flatnonzero(~safe):
            r.flat[i] = _fma_exact_scalar(float(a.flat[i]), float(b.flat[i]), float(c.flat[i]), mode)
    return nan_operand_f64(r, b, c, a)  # DFMA: b's NaN, else c's, else a's (probed on the H200)


def _fma_exact_scalar(a: float, b: float, c: float, mode: str) -> float:
    """One fma from exact rationals (the rare operands the vector path cannot take)."""
    import math
    from fractions import Fraction

    if math.isfinite(a) and math.isfinite(b) and math.isinf(c):
        return c  # a finite product, however large, leaves an infinite addend as it is
    if not (math.isfinite(a) and math.isfinite(b) and math.isfinite(c)):
        with np.errstate(all="ignore"):
            return float(np.float64(a) * np.float64(b) + np.float64(c))
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:  # the signed zero of the sum, by the mode
        p = np.float64(a) * np.float64(b)
        return float(zero_sign(np.asarray(p + np.float64(c)), p, np.float64(c), mode, 0.0))
    big = float(np.finfo(np.float64).max)
    if abs(exact) > Fraction(big):  # past the largest finite value: infinity, or that value, by the mode
        to_inf = {"rn": abs(exact) >= Fraction(big) + Fraction(2) ** 970, "rz": False,
                  "rm": exact < 0, "rp": exact > 0}[mode]
        return math.copysign(math.inf if to_inf else big, -1.0 if exact < 0 else 1.0)
    nearest = float(exact)  # correctly rounded to nearest, subnormals included
    err = exact - Fraction(nearest)
    return float(_directed(np.float64(nearest), np.float64(1.0 if err > 0 else -1.0 if err < 0 else 0.0), mode,
                           np.float64(a), np.float64(c)))


def float_to_integer(x, bits: int, signed: bool, mode: str, nan: int = 0) -> np.ndarray:
    """`cvt.<irnd>.<int>.<float>`: round to an integer as asked, clamp to the destination's
    range; a NaN gives `nan` (the ISA says 0). x is exact f64; the result has the destination's
    numpy type."""
    r = ROUNDINGS[mode](np.asarray(x, np.float64))
    lo, hi = (-(2.0 ** (bits - 1)), 2.0 ** (bits - 1)) if signed else (0.0, 2.0 ** bits)
    it = {8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}[bits] if signed else \
        {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}[bits]
    info = np.iinfo(it)
    inside = np.where(np.isnan(r) | (r < lo) | (r >= hi), 0.0, r)
    return np.where(np.isnan(r), np.array(nan, np.uint64).astype(it), np.where(r < lo, it(info.min), np.where(r >= hi, it(info.max),
                    inside.astype(np.int64 if signed else np.uint64).astype(it))))
