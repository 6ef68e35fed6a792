"""The arithmetic of the engine's kernels in numpy, rounded as the PTX rounds: f16 operations with
one correct rounding, the e4m3 packs (`cvt.rn.satfinite.e4m3x2.f16x2`), the `.approx.ftz` f32
functions, and the `mma` accumulation as a pluggable function.

The numpy model of the synthetic engine computes with these, and so does the CPU interpreter, so
the two agree byte for byte whenever they use the same `mma` model. The `.approx` functions are the
H200's MUFU (tables measured on it, rr/data/mufu_h200.npz) and `mma_sync` its tensor-core
arithmetic, both bit-exact on the H200's probes; docs/numerics.md says how each rule was found.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import ml_dtypes
import numpy as np

F16 = np.float16
E4M3 = ml_dtypes.float8_e4m3fn
E4M3_MAX = 448.0
E5M2 = ml_dtypes.float8_e5m2
E5M2_MAX = 57344.0

# f16 +, -, * and / of f16 operands computed in f32 and rounded to f16 are correctly rounded: f32
# has 24 >= 2*11 + 2 significant bits, so the double rounding is innocuous (Figueroa 1995).
#
# numpy casts to and from float16 one element at a time in software (several ns an element); these
# do it with tables and a few vector operations, bit for bit as numpy's casts: f16 → f32/f64 by a
# table of all 65536 values, and f32 → f16 by rounding to 11 significant bits in f32 (Veltkamp's
# split: x·(2^13 + 1) and back, which rounds once to nearest even) and reading the bits off a
# table indexed by the f32's top 19 bits, which an f16 value (or an f32 past f16's range: ±inf)
# determines. The tables are read with take(mode="wrap"): every index is in range by its type
# (16 bits into 2^16 entries, 8 into 2^8, a uint32 >> 13 into 2^19), and numpy's bounds check
# ("raise") costs a fifth of the lookup.


@functools.cache
def _f16_values() -> tuple[np.ndarray, np.ndarray]:
    every = np.arange(1 << 16, dtype=np.uint16).view(F16)
    return every.astype(np.float32), every.astype(np.float64)


@functools.cache
def _f16_of_top_bits() -> np.ndarray:
    """uint16 (2^19,): the f16 bits of the f32 whose top 19 bits (sign, exponent, 10 fraction
    bits) are the index and whose other bits are zero — numpy's own cast."""
    with np.errstate(over="ignore"):
        return (np.arange(1 << 19, dtype=np.uint32) << np.uint32(13)).view(np.float32).astype(F16).view(np.uint16)


def f16_as_f32(x) -> np.ndarray:
    """f16 values (or their bits as uint16) → f32, exactly (as `astype`, NaN payloads included)."""
    return _f16_values()[0].take(np.asarray(x, F16).view(np.uint16), mode="wrap")


def f16_as_f64(x) -> np.ndarray:
    return _f16_values()[1].take(np.asarray(x, F16).view(np.uint16), mode="wrap")


_SPLIT = {np.dtype(np.float32): np.float32(2.0 ** 13 + 1), np.dtype(np.float64): 2.0 ** 42 + 1}
_F16_PAST = 2.0 ** 17  # beyond f16's range, and small enough to split without overflow


def _split_f16(x: np.ndarray) -> np.ndarray:
    """Finite f32 or f64 below 2^17 → the same rounded to 11 significant bits, ties to even
    (Veltkamp's split: x·(2^(p − 11) + 1) and back; exact on every f32 of f16's normal range, by
    an exhaustive check). Past 2^(emax − p + 11) it overflows to NaN; a NaN stays NaN (callers
    that may meet those keep numpy's warnings off)."""
    p = x * _SPLIT[x.dtype]
    x = p - x
    p -= x  # p − (p − x), not (x − p) + p: that makes −0 of −0
    return p


def _f16_of_split(bits: np.ndarray) -> np.ndarray:
    """The f32 bits of values with at most 11 significant bits, which f16 holds (or rounds to
    ±inf past 65504, as 2^16 and more) → f16 bits (uint16), by their top 19 bits."""
    return _f16_of_top_bits().take(bits >> np.uint32(13), mode="wrap")


def f16_of_grid(x) -> np.ndarray:
    """`cvt.rn.f16.f32` of f32 values that are multiples of 2^-24 (sums and differences of f16,
    and their f32 roundings): below 2^-14 they have at most 10 significant bits and f16 holds
    them, so the 11-bit rounding is f16's everywhere; ±inf split as ±2^17, and a signalling NaN
    comes out quiet (a sum's never is one). Numpy's cast on every such f32, by an exhaustive check."""
    with np.errstate(invalid="ignore"):
        split = _split_f16(np.clip(np.asarray(x, np.float32), -_F16_PAST, _F16_PAST))
    return _f16_of_split(split.view(np.uint32)).view(F16)


_GRID = {np.dtype(np.float32): np.float32(0.75), np.dtype(np.float64): 1.5 * 2.0 ** 28}  # ulp 2^-24


def _f16_of_float(x: np.ndarray) -> np.ndarray:
    """f16 of f32 or f64 `x`, as numpy's cast: the 11-bit split's bits where they are above
    f16's smallest normal; at or below it (zeros included: |x| < 2^-13 there), f16's values are
    a fixed grid of 2^-24, to which |x| + 1.5·2^(23 or 52 − 24) rounds it (its ulp is 2^-24);
    numpy's cast itself where the result is ±inf or NaN (past f16's range, or past the split's: a
    signalling NaN stays signalling). Both are told by the split's f16 bits (half the bytes of
    x's)."""
    with np.errstate(invalid="ignore", over="ignore"):
        h = np.asarray(_f16_of_split(_split_f16(x).astype(np.float32, copy=False).view(np.uint32)))
    mag = h & np.uint16(0x7FFF)
    tiny = mag <= np.uint16(0x0400)
    special = mag >= np.uint16(0x7C00)
    if np.count_nonzero(tiny):
        at = np.flatnonzero(tiny)
        v = x.take(at)
        grid = np.abs(v) + _GRID[x.dtype]
        grid -= _GRID[x.dtype]  # a multiple of 2^-24 below 2^-13: k·2^-24, k at most 2048
        h.flat[at] = (grid * 2.0 ** 24).astype(np.uint16) | (np.signbit(v).astype(np.uint16) << np.uint16(15))
    if np.count_nonzero(special):
        at = np.flatnonzero(special)
        h.flat[at] = x.take(at).astype(F16).view(np.uint16)
    return h.view(F16)


def f16_of_f32(x) -> np.ndarray:
    """`cvt.rn.f16.f32`, as numpy's cast (on all 2^32 f32, by an exhaustive check)."""
    return _f16_of_float(np.asarray(x, np.float32))


def f16_of_f64(x) -> np.ndarray:
    """`cvt.rn.f16.f64`, as numpy's cast (one rounding: the 11-bit one in f64 is exact in f32)."""
    return _f16_of_float(np.asarray(x, np.float64))


# The f32 operands are temporaries, gone before the result is rounded: arrays of a few hundred
# KiB kept alive a step longer make glibc return the heap's top to the kernel and fault it back
# in at the next, three times the cost of the operation (a 130560-element mul: 1.3 ms, 0.4 ms).


def add(a, b):
    return f16_of_grid(f16_as_f32(a) + f16_as_f32(b))


def sub(a, b):
    return f16_of_grid(f16_as_f32(a) - f16_as_f32(b))


def mul(a, b):
    return f16_of_f32(f16_as_f32(a) * f16_as_f32(b))


def fma(a, b, c):
    """f16 `fma.rn`: a*b + c with one rounding. a*b is exact in f32 (11 + 11 significant bits,
    between 2^-48 and 2^32); the sum may not be, and where it is not it is rounded to odd
    (`_odd_sum_f32`), which f16's rounding of it then rounds as it would the exact sum
    (24 >= 11 + 2). The same bits as in f64 (`round_to_odd_sum` of the f64 values, 53 >= 11 + 2)
    at half the memory traffic: tests/test_synth_model.py checks the two on every class of
    operand, ties and NaN payloads included."""
    with np.errstate(invalid="ignore", over="ignore"):  # inf·0, inf − inf; an infinite sum splits to NaN
        return f16_of_f32(_odd_sum_f32(f16_as_f32(a) * f16_as_f32(b), f16_as_f32(c)))


def _odd_sum_f32(p, c) -> np.ndarray:
    """p + c of f32 rounded to odd: the nearest f32, moved one step toward the exact sum where it
    is inexact and its last bit even. Exact sums, and NaN and infinite ones, are as `p + c`.

    TwoSum's error is exact (f32 values of an f16 fma are multiples of 2^-48 below 2^33: no
    overflow, and no underflow in err · s either); it is NaN where the sum is not finite. The step
    is on the bits: +1 moves a magnitude away from zero, −1 toward it, so toward the exact sum is
    +1 where err and s have one sign (err · s > 0) and −1 where they differ (err · s < 0), none
    where err is 0 or NaN; a sum that is inexact is never 0."""
    s = p + c
    shape = np.shape(s)
    s = np.atleast_1d(s)  # arrays, written in place
    bb = s - p
    err = s - bb
    np.subtract(p, err, out=err)
    np.subtract(c, bb, out=bb)
    err += bb  # s + err == p + c exactly
    err *= s
    step = (err > 0).view(np.int8) - (err < 0).view(np.int8)
    bits = s.view(np.int32)
    even = ~bits
    even &= 1
    even *= step
    bits += even
    return s.reshape(shape)


def neg(a):
    return (-np.asarray(a, dtype=F16)).astype(F16)


def fmax(a, b):
    """f16 `max`: the PTX's, not numpy's (a NaN operand gives the other; +0 > -0)."""
    return ptx_min_max(np.asarray(a, dtype=F16), np.asarray(b, dtype=F16), False)


def fmin(a, b):
    """f16 `min`, as the PTX defines it."""
    return ptx_min_max(np.asarray(a, dtype=F16), np.asarray(b, dtype=F16), True)


_UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}
_INT = {2: np.int16, 4: np.int32, 8: np.int64}
_CANONICAL = {2: 0x7FFF, 4: 0x7FFFFFFF, 8: 0x7FFFFFFFFFFFFFFF}
_INFINITY = {2: 0x7C00, 4: 0x7F800000, 8: 0x7FF0000000000000}


def ptx_min_max(x, y, minimum: bool, nan: bool = False):
    """PTX `min`/`max` on float arrays of one dtype: a NaN operand gives the other operand, two
    NaNs (or one, with `.NaN`) the canonical NaN, and -0 < +0. f64 with two NaNs gives the first
    operand as it is, as the H200 does (the ISA says a NaN). Computed on the bits: a float's
    bits with the magnitude flipped when negative order like the float (numpy's f16 is slow)."""
    x, y = np.asarray(x), np.asarray(y)
    size = x.dtype.itemsize
    it, mag = _INT[size], _INT[size](_CANONICAL[size])
    sx, sy = x.view(it), y.view(it)
    kx, ky = sx ^ ((sx >> (8 * size - 1)) & mag), sy ^ ((sy >> (8 * size - 1)) & mag)
    r = np.where(kx <= ky if minimum else kx >= ky, x, y)
    nan_x, nan_y = (sx & mag) > _INFINITY[size], (sy & mag) > _INFINITY[size]
    if not (nan_x.any() or nan_y.any()):
        return r
    r = np.where(nan_x, y, np.where(nan_y, x, r))
    both = (nan_x | nan_y) if nan else (nan_x & nan_y)
    canonical = _UINT[size](_CANONICAL[size]).view(x.dtype)
    return np.where(both, x if (size == 8 and not nan) else canonical, r)


def f16(x):
    """`cvt.rn.f16.f32` / `cvt.rn.f16.f64` (numpy's cast, by `f16_of_f32` / `f16_of_f64`)."""
    x = np.asarray(x)
    return f16_of_f64(x) if x.dtype == np.float64 else f16_of_f32(x)


def bits16(x) -> np.ndarray:
    return np.asarray(x, dtype=F16).view(np.uint16)


def from_bits16(b) -> np.ndarray:
    return np.asarray(b, dtype=np.uint16).view(F16)


# -- cvt: rounding to a float format, float <-> integer ---------------------------------------------

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


# -- e4m3 ---------------------------------------------------------------------------------------

def _to_fp8(x, fp8, finite_max: float) -> np.ndarray:
    """`cvt.rn.satfinite.<fp8>x2.f16x2` per element: round to nearest even, saturate to the
    largest finite value (NaN stays NaN). Returns the fp8 bytes."""
    v = np.asarray(x, dtype=F16).astype(np.float32)
    v = np.where(np.isnan(v), v, np.clip(v, -finite_max, finite_max))
    return v.astype(fp8).view(np.uint8)


# Every f16 bit pattern's fp8 byte, and every fp8 byte's value: a table lookup is several times
# faster than ml_dtypes' element-wise casts, and is the same function (the tables are made by them).
_ALL_F16 = np.arange(1 << 16, dtype=np.uint16).view(F16)
with np.errstate(invalid="ignore"):  # the NaN patterns cast to fp8 NaN, as they should
    _F16_TO_E4M3 = _to_fp8(_ALL_F16, E4M3, E4M3_MAX)
    _F16_TO_E5M2 = _to_fp8(_ALL_F16, E5M2, E5M2_MAX)
_E4M3_F64 = np.arange(256, dtype=np.uint8).view(E4M3).astype(np.float64)


_E4M3_F16 = np.arange(256, dtype=np.uint8).view(E4M3).astype(F16)
_E5M2_F16 = np.arange(256, dtype=np.uint8).view(E5M2).astype(F16)


def to_e4m3(x) -> np.ndarray:
    """`cvt.rn.satfinite.e4m3x2.f16x2` per element (saturates to ±448)."""
    return _F16_TO_E4M3.take(np.asarray(x, dtype=F16).view(np.uint16), mode="wrap")


def to_e5m2(x) -> np.ndarray:
    """`cvt.rn.satfinite.e5m2x2.f16x2` per element (saturates to ±57344)."""
    return _F16_TO_E5M2.take(np.asarray(x, dtype=F16).view(np.uint16), mode="wrap")


def from_e4m3(b) -> np.ndarray:
    """`cvt.rn.f16x2.e4m3x2` per element (exact)."""
    return _E4M3_F16.take(np.asarray(b, dtype=np.uint8), mode="wrap")


def from_e5m2(b) -> np.ndarray:
    """`cvt.rn.f16x2.e5m2x2` per element (exact)."""
    return _E5M2_F16.take(np.asarray(b, dtype=np.uint8), mode="wrap")


def e4m3_values(b) -> np.ndarray:
    """e4m3 bytes → their values in f64 (exact; NaN for 0x7F and 0xFF)."""
    return _E4M3_F64[np.asarray(b, dtype=np.uint8)]


# -- f32 .approx functions: the H200's MUFU ---------------------------------------------------------
#
# ptxas -arch=sm_90 compiles rcp/rsqrt/sqrt/ex2 `.approx.ftz.f32` to one MUFU.RCP/RSQ/SQRT/EX2 and
# div.approx.ftz.f32 to MUFU.RCP and FMUL.FTZ; the forms without .ftz scale a subnormal input (or,
# for ex2, an input below -126) into range around the same MUFU and scale back with FMULs. The MUFU
# results are tables measured on the H200 (rr/data/mufu_h200.npz, from benchmarks/approx_probes.py):
# rcp over the mantissas of [1, 2), rsqrt and sqrt over [1, 4), ex2 over the fractions k·2⁻²³ of
# [0, 1); each is exponent-independent, so the exponent only shifts the table's value. ex2 takes its
# input as a sign and a magnitude cut toward zero to 23 fraction bits: 2^(n + k·2⁻²³) = 2^n·T[k], and
# for a negative input 2^-(n + k·2⁻²³) = 2^(-n-1)·T[2²³ - 1 - k] (the fraction's ones' complement),
# or exactly 2^-n where k = 0. The MUFU flushes subnormal inputs and results to zeros (docs/numerics.md).

MUFU_TABLES = "mufu_h200.npz"
_F32_TINY = np.float32(np.finfo(np.float32).tiny)
_NAN32 = np.uint32(0x7FFFFFFF)


@functools.cache
def mufu_table(name: str) -> np.ndarray:
    """A MUFU table (rcp, rsqrt, sqrt, ex2: uint32 result bits; ex2_f16: uint16 at every input),
    read-only: decoded from the package's first word and int8 differences, once per machine
    (`rr.tables`: a process maps the decoded table from the cache)."""
    from rr.tables import table

    return table(MUFU_TABLES, name)


def _f32_fields(x):
    u = np.asarray(x, np.float32).view(np.uint32)
    return u, (u >> np.uint32(31)).astype(bool), ((u >> np.uint32(23)) & np.uint32(0xFF)).astype(np.int64), u & np.uint32(0x7FFFFF)


def _from_fields(negative, bits):
    """Result bits as int64 (a value's exponent field shifted in) → f32: exponent fields at or
    below 0 flush to zero, at or above 255 are infinite; the sign from `negative`."""
    field = bits >> 23
    bits = np.where(field <= 0, 0, np.where(field >= 255, 0x7F800000, bits))
    return (bits.astype(np.uint32) | (np.asarray(negative, np.uint32) << np.uint32(31))).view(np.float32)


def _special(r, x, table):
    """`r` where x is normal; (result for ±0, ±inf, NaN, negative) as `table` gives, by x."""
    x = np.asarray(x, np.float32)
    zero, inf, nan = np.abs(x) < _F32_TINY, np.isinf(x), np.isnan(x)
    for where, value in ((zero, table["zero"]), (inf, table["inf"]), (nan, _NAN32.view(np.float32))):
        r = np.where(where, value(x) if callable(value) else value, r)
    if "negative" in table:
        r = np.where((x < 0) & ~zero, _NAN32.view(np.float32), r)
    return r.astype(np.float32)


def _mufu_rcp(x):
    u, neg, e, m = _f32_fields(x)
    with np.errstate(over="ignore"):
        r = _from_fields(neg, mufu_table("rcp")[m].astype(np.int64) + ((127 - e) << 23))
    return _special(r, x, {"zero": lambda v: np.copysign(np.float32(np.inf), v), "inf": lambda v: np.copysign(np.float32(0), v)})


def _mufu_root(x, name: str):
    """MUFU.RSQ / MUFU.SQRT: the table over [1, 4) by the exponent's parity, shifted by half the
    rest of the exponent."""
    u, neg, e, m = _f32_fields(x)
    odd = (e - 127) & 1
    half = (e - 127 - odd) // 2
    sign = -1 if name == "rsqrt" else 1
    r = _from_fields(False, mufu_table(name)[(odd << 23) | m.astype(np.int64)].astype(np.int64) + sign * (half << 23))
    zero = (lambda v: np.copysign(np.float32(np.inf), v)) if name == "rsqrt" else (lambda v: np.copysign(np.float32(0), v))
    return _special(r, x, {"zero": zero, "inf": np.float32(0 if name == "rsqrt" else np.inf), "negative": True})


def _mufu_ex2(x):
    x = np.asarray(x, np.float32)
    with np.errstate(invalid="ignore"):
        mag = np.minimum(np.abs(x.astype(np.float64)), 512.0)  # past ±128 it saturates anyway
        q = np.where(np.isnan(mag) | (mag < _F32_TINY), 0, np.trunc(mag * 2.0 ** 23)).astype(np.int64)
    n, k = q >> 23, q & ((1 << 23) - 1)
    neg = x < 0
    table = mufu_table("ex2")  # indexed, then widened: not the 2^23-entry table widened at each call
    ones = (1 << 23) - 1
    bits = np.where(~neg, table[k].astype(np.int64) + (n << 23),
                    np.where(k == 0, (127 - n) << 23, table[ones - k].astype(np.int64) + ((-n - 1) << 23)))
    return _special(_from_fields(False, bits), x, {"zero": np.float32(1), "inf": lambda v: np.where(v > 0, np.float32(np.inf), np.float32(0))})


def _scaled(mufu, x, below, scale_in, scale_out, ftz: bool):
    """The non-.ftz forms' code around a MUFU: where `below(x)`, x·scale_in into the MUFU's range
    and its result ·scale_out back (an FMUL, which keeps subnormals; scale_out None: squared)."""
    x = np.asarray(x, np.float32)
    if ftz:
        return mufu(x)
    with np.errstate(invalid="ignore", over="ignore"):  # both sides of the where are computed
        low = below(x)
        r = mufu(np.where(low, x * np.float32(scale_in), x))
        back = r * r if scale_out is None else r * np.float32(scale_out)
    return np.where(low, back, r).astype(np.float32)


def rcp_approx(x, ftz: bool = True):
    """`rcp.approx[.ftz].f32`: MUFU.RCP (without .ftz a subnormal x is scaled by 2²⁴ first, and
    |x| > 2¹²⁶ by 2⁻²; the result then by the same factor)."""
    x = np.asarray(x, np.float32)
    if ftz:
        return _mufu_rcp(x)
    with np.errstate(invalid="ignore"):
        s = np.where(np.abs(x) < _F32_TINY, np.float32(2.0 ** 24), np.where(np.abs(x) > 2.0 ** 126, np.float32(0.25), np.float32(1)))
    with np.errstate(over="ignore", invalid="ignore"):
        return (_mufu_rcp(x * s) * s).astype(np.float32)


def rsqrt_approx(x, ftz: bool = True):
    """`rsqrt.approx[.ftz].f32`: MUFU.RSQ (without .ftz: a subnormal x ·2²⁴, the result ·2¹²)."""
    return _scaled(lambda v: _mufu_root(v, "rsqrt"), x, lambda v: np.abs(v) < _F32_TINY, 2.0 ** 24, 2.0 ** 12, ftz)


def sqrt_approx(x, ftz: bool = True):
    """`sqrt.approx[.ftz].f32`: MUFU.SQRT (without .ftz: a subnormal x ·2²⁴, the result ·2⁻¹²)."""
    return _scaled(lambda v: _mufu_root(v, "sqrt"), x, lambda v: np.abs(v) < _F32_TINY, 2.0 ** 24, 2.0 ** -12, ftz)


def ex2_approx(x, ftz: bool = True):
    """`ex2.approx[.ftz].f32`: MUFU.EX2 (without .ftz: below -126, of x/2, squared)."""
    return _scaled(_mufu_ex2, x, lambda v: v < -126, 0.5, None, ftz)


def ex2_approx_f16(x):
    """`ex2.approx.f16`: MUFU.EX2.F16, the H200's result at every f16 input."""
    return mufu_table("ex2_f16")[np.asarray(x, F16).view(np.uint16)].view(F16)


def div_approx(a, b, ftz: bool = True):
    """`div.approx[.ftz].f32`: a · MUFU.RCP(b), one FMUL(.FTZ) (without .ftz a subnormal b scales
    a and b by 2²⁴ first). |b| > 2¹²⁶ gives ±0: its reciprocal is flushed. A NaN is canonical."""
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        if ftz:
            r = mul_ftz(a, _mufu_rcp(b))
        else:
            low = np.abs(b) < _F32_TINY
            s = np.where(low, np.float32(2.0 ** 24), np.float32(1))
            r = (a * s) * _mufu_rcp(b * s)
    return np.where(np.isnan(r), _NAN32.view(np.float32), r).astype(np.float32)


def _ftz(x):
    x = np.asarray(x, dtype=np.float32)
    return np.where(np.abs(x) < _F32_TINY, np.copysign(np.float32(0), x), x).astype(np.float32)


def mul_ftz(a, b):
    return _ftz(_ftz(a) * _ftz(b))


def add_ftz(a, b):
    return _ftz(_ftz(a) + _ftz(b))


# -- mma ----------------------------------------------------------------------------------------

MmaModel = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def mma_exact(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """One `mma.sync.m16n8k32 … .f16.e4m3.e4m3.f16` step for any number of rows and columns:
    `a` (…, M, 32) e4m3 bytes in fragment k order, `b` (…, 32, N) e4m3 bytes, `c` (…, M, N) f16.
    The exact sum of the 32 products and C, rounded once to f16. Exact in f64: every product is a
    multiple of 2^-18 below 2^18 and C a multiple of 2^-24 below 2^16, so any summation order
    gives the same f64 value (48 significant bits at most). An f32 `c` is the `.f32` form
    (`mma_exact_f32`)."""
    if np.asarray(c).dtype == np.float32:
        return mma_exact_f32(a, b, c)
    s = np.matmul(e4m3_values(a), e4m3_values(b)) + np.asarray(c, dtype=F16).astype(np.float64)
    return s.astype(F16)


# Hopper has no fp8 path for `mma.sync`: ptxas -arch=sm_90 unpacks each A and B register's two
# halfwords to f16x2 (F2FP.F16.E4M3.UNPACK_B) and issues two HMMA.16816 — first the k held in
# the registers' low halfwords (k mod 4 in {0, 1}) with C = 0, then the high halfwords' k
# accumulating on that result — and adds C last, with HADD2 (or FADD for the .f32 form).
_LOW_HALF_K = (np.arange(32) % 4) < 2
_NO_EXPONENT = -1000  # a zero (or NaN) term's exponent: it never sets the alignment


@dataclass(frozen=True)
class HmmaRules:
    """How one HMMA.16816 adds its 16 products and the running accumulator T (docs/numerics.md
    says how each was established on the H200).

    `width`: each term is aligned to the largest exponent of the sum and cut to a multiple of
    2^(emax - width) (None: summed exactly); `exponent`: a product's exponent is "factors" ea + eb,
    the sum of its f16 factors' exponents (its significand lies in [1, 4)), or "value" its
    leading bit's; T's is its own. `cut`: "rz" toward zero (sign and magnitude) or "rm" toward
    -inf (two's complement). `f32` / `f16`: how the sum is rounded to the accumulator's type
    ("rz" toward zero, "rn" to nearest even). `canonical_nan`: a NaN D is the canonical NaN
    (0x7FFF, 0x7FFFFFFF) whatever NaN made it."""
    width: int | None = 25
    exponent: str = "factors"
    cut: str = "rz"
    f32: str = "rz"
    f16: str = "rn"
    canonical_nan: bool = True


SM90 = HmmaRules()


def _exponents(codes) -> np.ndarray:
    """e4m3 codes → the exponent of their f16 value's leading bit (e4m3 subnormals are f16
    normals); _NO_EXPONENT for zeros and NaNs."""
    v = _E4M3_F64
    e = np.frexp(v)[1].astype(np.int32) - 1
    return np.where((v == 0) | np.isnan(v), _NO_EXPONENT, e)[np.asarray(codes, np.uint8)]


_E4M3_EXPONENT = _exponents(np.arange(256))
_BELOW_ALL = np.int32(1 << 20)
# a magnitude code's exponent where it is the smallest nonzero one; none (_BELOW_ALL) for 0, NaN
_LEAST_EXPONENT = np.where((np.arange(256) == 0) | (np.arange(256) & 0x7F == 0x7F), _BELOW_ALL, _E4M3_EXPONENT)


def _round_sum(s: np.ndarray, dtype, mode: str) -> np.ndarray:
    """An exact f64 sum rounded to f16 or f32, to nearest even or toward zero."""
    with np.errstate(over="ignore", invalid="ignore"):  # past the type's largest finite value: ±inf
        r = s.astype(dtype)
    if mode == "rz":
        r = np.where(np.abs(r.astype(np.float64)) > np.abs(s), np.nextafter(r, dtype(0)), r).astype(dtype)
    return r


def _leading_exponent(x: np.ndarray) -> np.ndarray:
    e = np.frexp(x)[1].astype(np.int32) - 1
    return np.where((x == 0) | ~np.isfinite(x), _NO_EXPONENT, e)


_CUT = {"rz": np.trunc, "rm": np.floor}


_T_FRACTION_BITS = {np.float16: 10, np.float32: 23}


def _cut_is_exact(amag, bmag, t, te, grain, dtype) -> np.ndarray:
    """(N, 16, 8): where no term has a bit below 2^grain (grain >= emax − width, emax bounded
    above as in _hmma), so that the cut removes nothing and the exact sum is the HMMA's. A
    nonzero product's lowest bit is at least 2^(ea + eb − 6) (three fraction bits a factor; an
    e4m3 subnormal's is higher than its leading exponent says), T's at least 2^(te − 10) in f16,
    2^(te − 23) in f32. Most outputs of real layers have terms within 19 binades of each other,
    so only the rest is summed term by term."""
    # the smallest nonzero finite magnitude has the smallest exponent: codes are ordered by |value|
    amin = _LEAST_EXPONENT[np.where(amag == 0, 0x7F, amag).min(-1)]
    bmin = _LEAST_EXPONENT[np.where(bmag == 0, 0x7F, bmag).min(-2)]
    low = np.minimum(amin[..., :, None] + bmin[..., None, :], _BELOW_ALL) - 6
    exact = low >= grain
    if t is not None:
        exact &= (t == 0) | (te - _T_FRACTION_BITS[dtype] >= grain)
    return exact


def _hmma(ah, bh, t, dtype, rules: HmmaRules) -> np.ndarray:
    """One HMMA.16816 on (N, 16, 16) A and (N, 16, 8) B e4m3 codes and the running T (N, 16, 8)
    or None: the 16 products and T aligned and cut as `rules` say, summed, rounded to the
    accumulator's type.

    Every term is a multiple of 2^-18 (an e4m3 product; T is a rounding of sums of them), so
    while emax <= width - 18 the cut removes nothing and the exact sum (one matmul, exact in
    f64) is the answer; only the outputs whose largest exponent may pass that are summed term by
    term. Where T is NaN or infinite the exact sum already is the result."""
    av, bv = _E4M3_F64[ah], _E4M3_F64[bh]
    with np.errstate(invalid="ignore"):
        s = np.matmul(av, bv) if t is None else np.matmul(av, bv) + t
    if rules.width is not None:
        te = None if t is None else _leading_exponent(t)
        # >= every product's exponent (ea + eb, or its leading bit's: one more at most); the
        # largest magnitude code has the largest exponent (a row with a NaN sums to NaN anyway)
        amag, bmag = ah & np.uint8(0x7F), bh & np.uint8(0x7F)
        bound = (_E4M3_EXPONENT[amag.max(-1)][..., :, None] + _E4M3_EXPONENT[bmag.max(-2)][..., None, :]
                 + (rules.exponent == "value"))
        if te is not None:
            bound = np.maximum(bound, te)
        slow = bound > rules.width - 18
        if rules.exponent == "factors" and slow.any():
            slow &= ~_cut_is_exact(amag, bmag, t, te, bound - rules.width, dtype)
        w, i, j = np.nonzero(slow)
        if w.size:
            terms = av[w, i, :] * bv[w, :, j]
            exps = (_E4M3_EXPONENT[ah[w, i, :]] + _E4M3_EXPONENT[bh[w, :, j]] if rules.exponent == "factors"
                    else _leading_exponent(terms))
            if t is not None:
                terms = np.concatenate([terms, t[w, i, j][:, None]], axis=1)
                exps = np.concatenate([exps, te[w, i, j][:, None]], axis=1)
            scale = (rules.width - exps.max(axis=1, keepdims=True)).astype(np.int32)
            with np.errstate(invalid="ignore"):
                s[w, i, j] = np.ldexp(_CUT[rules.cut](np.ldexp(terms, scale)), -scale).sum(axis=1)
    s += 0.0  # a zero sum is +0 (the aligned sum is fixed point: it has no -0)
    return _round_sum(s, dtype, rules.f32 if dtype == np.float32 else rules.f16)


@functools.cache
def _pair_values() -> np.ndarray:
    """(65536, 2) f64: the values of a halfword's two e4m3 codes (low byte first). A register's
    halfword holds two consecutive k of one HMMA, so one gather fetches both."""
    u = np.arange(1 << 16)
    return np.stack([_E4M3_F64[u & 0xFF], _E4M3_F64[u >> 8]], axis=-1)


def _half_values(pairs: np.ndarray) -> np.ndarray:
    """(…, R, 8) halfwords of e4m3 code pairs → (…, R, 16) their values (f64)."""
    v = _pair_values().take(pairs, axis=0, mode="wrap")
    return v.reshape(*v.shape[:-2], -1)


def _both_halves(a16: np.ndarray) -> np.ndarray:
    """(…, 16) halfwords of A's rows → (2, …, 16) f64: the values of each HMMA's k (the even
    halfwords, then the odd ones), both gathered at once."""
    v = _pair_values().take(np.moveaxis(a16.reshape(*a16.shape[:-1], 8, 2), -1, 0), axis=0, mode="wrap")
    return v.reshape(*v.shape[:-2], 16)


def _top_exponent(codes: np.ndarray) -> int | None:
    """The exponent of the largest magnitude among e4m3 codes (_NO_EXPONENT if all are zero);
    None where a NaN code is among them (its row's bound is not the largest code's)."""
    top = int(np.maximum.reduce(np.bitwise_and(codes, np.uint8(0x7F)), axis=None, initial=0))
    return None if top == 0x7F else int(_E4M3_EXPONENT[top])


def _below(t: np.ndarray, exponent: int) -> bool:
    """Is every element of t (f64) finite with its leading bit below 2^(exponent + 1)?"""
    return bool(np.maximum.reduce(np.abs(t), axis=None, initial=0.0) < 2.0 ** (exponent + 1))  # NaN: False


def _rows_times(av: np.ndarray, bv: np.ndarray) -> np.ndarray:
    """(G, M, 16) @ (G, 16, Q) in f64, M cut into blocks of rows small enough (rows · 16 · Q at
    most 2^17) that OpenBLAS keeps each product to one thread: its threads cost more than they
    save on these sizes, more so on a busy machine."""
    g, m, _ = av.shape
    rows = max(1, (1 << 13) // bv.shape[-1])
    if m <= rows:
        return np.matmul(av, bv)
    whole = m - m % rows
    s = np.matmul(av[:, :whole].reshape(g, whole // rows, rows, 16), bv[:, None]).reshape(g, whole, -1)
    return s if whole == m else np.concatenate([s, np.matmul(av[:, whole:], bv)], axis=1)


def _a_values(a16: np.ndarray, sharing: tuple, prep: dict) -> np.ndarray:
    """(2, …) f64: A's values for both HMMA, laid out as `_half_products` multiplies them for
    the chunk's sharing (every warp's A in order; each group's shared A once; or the warps
    w % P == j together), gathered once and kept in `prep` for a caller that passes the same A
    again."""
    n, period, shared_a = sharing
    key = "own" if period in (1, n) else ("shared", period) if shared_a else ("periodic", period)
    av = prep.get(key)
    if av is None:
        if key == "own":
            av = _both_halves(a16)  # (2, N, M, 16)
        elif shared_a:
            av = _both_halves(a16[::period])  # (2, N/P, M, 16)
        else:
            av = _both_halves(a16.reshape(-1, period, *a16.shape[1:]).transpose(1, 0, 2, 3))  # (2, P, N/P, M, 16)
        prep[key] = av
    return av


def _half_products(av, bt16, half: int, n: int, period: int, shared_a: bool) -> np.ndarray:
    """(N, M, Q) f64: each of N warps' exact sum of one HMMA's products (A's values `av` of the
    half, as `_a_values` lays them out, and halfwords `half` of Bᵀ's (…, Q, 16) code pairs), one
    matmul exact in f64. `period` P: warp w's B is bt16[w % P] (P = N: every warp its own);
    `shared_a`: warps w and w + 1 … w + P − 1 (w a multiple of P) share A, and av holds each
    group's once. Shared tiles are gathered once and their warps multiplied as one product of
    many rows."""
    m, q = av.shape[-2], bt16.shape[-2]
    bv = _half_values(bt16[..., half::2])  # (P, Q, 16): Bᵀ
    if period == n:  # every warp its own A and B (numpy's batched matmul is faster on a contiguous B)
        return np.matmul(av, np.ascontiguousarray(np.swapaxes(bv, -1, -2)))
    if shared_a:  # one A a group, its warps' B side by side: (N/P · M, 16) @ (16, P · Q)
        bv = np.ascontiguousarray(bv.reshape(1, -1, 16).transpose(0, 2, 1))  # numpy's BLAS path wants it so
        s = _rows_times(av.reshape(1, -1, 16), bv)
        return s.reshape(-1, m, period, q).transpose(0, 2, 1, 3).reshape(n, m, q)
    # warps w % P == j: (P, N/P · M, 16) @ (P, 16, Q)
    s = _rows_times(av.reshape(period, -1, 16), np.ascontiguousarray(np.swapaxes(bv, -1, -2)))
    return s.reshape(period, -1, m, q).transpose(1, 0, 2, 3).reshape(n, m, q)


def _hmma_pairs(av, bt16, half: int, t, dtype, rules: HmmaRules, small: bool, sharing: tuple, out=None):
    """One HMMA where no term can reach the cut (the caller has bounded every exponent): the
    exact sum of the half's products and T, rounded to the accumulator's type and returned as
    f64 (or in `out`, an f32 array, for the f16 sum of a small one). `small`: every sum is below
    2^15 (no f16 overflow)."""
    s = _half_products(av, bt16, half, *sharing)  # a new array: rounded in place
    if small and dtype == np.float16 and rules.f16 == "rn":
        # a multiple of 2^-18 below 2^15: below f16's normals it has at most 4 significant bits
        # and f16 holds it, so the 11-bit rounding is f16's; a zero sum comes out +0 (the
        # aligned sum is fixed point: it has no -0)
        if t is not None:
            s += t
        return _split_f16_in_place(s, out)
    if t is None:
        s += 0.0  # a zero sum is +0
    else:
        s += t  # T is never -0, so neither is the sum
    return _round_sum(s, dtype, rules.f32 if dtype == np.float32 else rules.f16).astype(np.float64)


def _split_f16_in_place(x: np.ndarray, out=None) -> np.ndarray:
    """`_split_f16` of finite f64 below 2^17 that the caller lets go (x is overwritten), as
    Veltkamp wrote it, γ + (x − γ) with γ = x·(2^42 + 1): the same value but +0 for −0. `out`:
    where to put the result (an f32 array holds it exactly: 11 significant bits)."""
    p = x * _SPLIT[x.dtype]
    np.subtract(x, p, out=x)
    return np.add(p, x, out=p if out is None else out)


def _sharing(a16: np.ndarray, bt16: np.ndarray) -> tuple[int, bool]:
    """How a chunk's warps share their tiles (the interpreter's warps are blocks of consecutive
    warps, whose weight tiles repeat from block to block): the least period P among 1, 2, 4, 8
    (dividing N) with warp w's B that of warp w % P, else N; and whether each group of P
    consecutive warps shares one A (P > 1)."""
    n = len(bt16)
    for p in (1, 2, 4, 8) if n >= 16 else ():  # a few warps gain nothing by it
        if n % p == 0 and bt16[p].tobytes() == bt16[0].tobytes() \
                and (bt16.reshape(-1, p, *bt16.shape[1:]) == bt16[:p]).all():
            shared_a = p > 1 and a16[1].tobytes() == a16[0].tobytes() \
                and (a16.reshape(-1, p, *a16.shape[1:]) == a16[::p, None]).all()
            return p, bool(shared_a)
    return n, False


_MMA_CHUNK = 512  # warps at a time: the f64 temporaries of a chunk stay in the caches


def mma_hmma(a: np.ndarray, b: np.ndarray, c: np.ndarray, rules: HmmaRules = SM90) -> np.ndarray:
    """The e4m3 `mma` as ptxas compiles it for sm_90 (two HMMA.16816, then C added), with the
    HMMA's arithmetic as `rules` say: `mma_sync`'s model, and its variants that the tests show
    the H200 does not compute."""
    c = np.asarray(c)
    if c.dtype not in (np.float16, np.float32):
        raise TypeError(f"c must be float16 or float32, not {c.dtype}")
    a, b = np.asarray(a, np.uint8), np.asarray(b, np.uint8)
    if a.ndim == b.ndim == c.ndim == 3 and a.shape[0] == b.shape[0] == c.shape[0] <= _MMA_CHUNK:
        return _mma_warps(a, b, c, rules)  # the interpreter's warps of a small chunk
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2], c.shape[:-2])
    a = np.broadcast_to(a, batch + a.shape[-2:]).reshape(-1, *a.shape[-2:])
    b = np.broadcast_to(b, batch + b.shape[-2:]).reshape(-1, *b.shape[-2:])
    cc = np.broadcast_to(c, batch + c.shape[-2:]).reshape(-1, *c.shape[-2:])
    d = np.empty(cc.shape, c.dtype)
    for i in range(0, len(d), _MMA_CHUNK):
        part = slice(i, i + _MMA_CHUNK)
        d[part] = _mma_warps(a[part], b[part], cc[part], rules)
    return d.reshape(batch + d.shape[-2:])


def mma_hmma_many(a: np.ndarray, bs: list, cs: list, rules: HmmaRules = SM90) -> list:
    """`mma_hmma(a, b, c)` for each (b, c) of `bs` and `cs`, one A: (N, 16, 32), (N, 32, 8) and
    (N, 16, 8) (a run of the interpreter's `mma` that multiply one A register set by several B).
    Chunk by chunk of warps, A's values are gathered once for all of them, while in the caches."""
    a = np.asarray(a, np.uint8)
    bs, cs = [np.asarray(b, np.uint8) for b in bs], [np.asarray(c) for c in cs]
    for b, c in zip(bs, cs):
        if c.dtype not in (np.float16, np.float32):
            raise TypeError(f"c must be float16 or float32, not {c.dtype}")
        if not (a.ndim == b.ndim == c.ndim == 3 and a.shape[0] == b.shape[0] == c.shape[0]):
            raise ValueError("mma_hmma_many takes (N, 16, 32), (N, 32, 8) and (N, 16, 8) operands of one N")
    ds = [np.empty(c.shape, c.dtype) for c in cs]
    for i in range(0, len(a), _MMA_CHUNK):
        part = slice(i, i + _MMA_CHUNK)
        prep: dict = {}
        for b, c, d in zip(bs, cs, ds):
            d[part] = _mma_warps(a[part], b[part], c[part], rules, prep)
    return ds


def _mma_warps(a, b, c, rules: HmmaRules, prep: dict | None = None) -> np.ndarray:
    """mma_hmma on (N, M, 32), (N, 32, Q) and (N, M, Q) (a warp's M, Q: 16, 8). Where no product
    of the batch and no T can reach 2^(width - 18) (real layers' operands: the largest codes'
    exponents bound every product's), nothing is cut, and each HMMA is one exact matmul on the
    registers' halfword pairs; otherwise `_hmma` decides output by output.

    `prep`: a dict kept for these warps' A, where what is derived from A alone is kept for a call
    with the same A (mma_hmma_many)."""
    dtype = c.dtype.type
    prep = {} if prep is None else prep
    limit = None if rules.width is None else rules.width - 18  # an exponent past it may be cut
    ea = eb = 0
    if limit is not None:
        if "ea" not in prep:
            prep["ea"] = _top_exponent(a)
        ea = prep["ea"]
    uncut = False
    if ea is not None:  # (N, 16, 16) and Bᵀ (N, 8, 16) halfwords: the even ones hold the first HMMA's k
        a16 = prep.get("a16")
        if a16 is None:
            a16 = prep["a16"] = np.ascontiguousarray(a).view(np.uint16)
        bt16 = np.ascontiguousarray(np.swapaxes(b, -1, -2)).view(np.uint16)
        period, shared_a = _sharing(a16, bt16)
        sharing = (len(a16), period, shared_a)
        bt16 = bt16[:period]
        if limit is not None:  # every warp's B is one of the period's tiles
            eb = _top_exponent(bt16.view(np.uint8))
        uncut = limit is None or (eb is not None and ea + eb + (rules.exponent == "value") <= limit)
    if uncut:
        av = _a_values(a16, sharing, prep)
    # bounded: products below 2^(limit + 2) <= 2^10, sixteen of them and T below 2^15
    small = limit is not None and limit <= 8
    # each product is below 2^(ea + eb + 2), sixteen of them below 2^(ea + eb + 6), and T (their
    # sum rounded) at most that: where that is at most 2^limit, T is below 2^(limit + 1) unlooked
    t_bounded = limit is None or (uncut and ea + eb + 6 <= limit)
    t = None  # the running accumulator, as f64 values of its type
    for h, half in enumerate((_LOW_HALF_K, ~_LOW_HALF_K)):
        if uncut and (t is None or t_bounded or _below(t, limit)):
            out = np.empty(c.shape, np.float32) if h == 1 and dtype == np.float16 else None  # T for HADD2
            t = _hmma_pairs(av[h], bt16, h, t, dtype, rules, small, sharing, out)
        else:
            t = _hmma(a[..., half], b[..., half, :], t, dtype, rules).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf, and sums past the largest finite value
        if dtype == np.float16:  # HADD2: correctly rounded (f32, as `add`); an infinite C splits to NaN
            s = t if t.dtype == np.float32 else t.astype(np.float32)
            s += f16_as_f32(c)
            d = _f16_of_split(_split_f16(s).view(np.uint32)).view(F16)
        else:  # FADD: 53 >= 2·24 + 2
            d = (t + c.astype(np.float64)).astype(np.float32)
    size = d.dtype.itemsize
    nan = (d.view(_UINT[size]) & _UINT[size](_CANONICAL[size])) > _UINT[size](_INFINITY[size])
    if np.count_nonzero(nan):
        if dtype == np.float16:  # the sums that are ±inf or NaN, cast as they are
            at = np.flatnonzero(nan)
            d.flat[at] = s.take(at).astype(F16)
        if rules.canonical_nan:
            d = np.where(np.isnan(d), _UINT[size](_CANONICAL[size]).view(d.dtype), d)
    return d


def mma_sync(a: np.ndarray, b: np.ndarray, c: np.ndarray, *, arch: str = "sm_90") -> np.ndarray:
    """`mma.sync.aligned.m16n8k32.row.col.{f16,f32}.e4m3.e4m3.{f16,f32}` as the hardware of `arch`
    computes it: `a` uint8 e4m3 codes (…, 16, 32), `b` (…, 32, 8), `c` float16 or float32
    (…, 16, 8), all in matrix form (fragments: rr.run.fragments); D has c's dtype.

    sm_90: the two HMMA of ptxas's code (above), each aligning its 16 products and T to the
    largest exponent, cutting them toward zero 25 bits below it and rounding the sum (toward
    zero to f32, to nearest to f16); then T + C rounded to nearest; a NaN D is the canonical NaN.
    Bit-exact on all 4 194 304 H200 outputs of the random and adversarial probes of both forms
    (docs/numerics.md)."""
    if arch != "sm_90":
        raise ValueError(f"no mma model for {arch!r}: the model is established for sm_90 only")
    return mma_hmma(a, b, c, SM90)


def mma_sync_many(a: np.ndarray, bs: list, cs: list, *, arch: str = "sm_90") -> list:
    """`mma_sync(a, b, c)` for each (b, c) of `bs` and `cs`, one A of (N, 16, 32) (`mma_hmma_many`)."""
    if arch != "sm_90":
        raise ValueError(f"no mma model for {arch!r}: the model is established for sm_90 only")
    return mma_hmma_many(a, bs, cs, SM90)


# name → model: the cpu backend's `mma` (run records name it) and probe replay's
MMA_MODELS: dict[str, MmaModel] = {"exact": mma_exact, "sm_90": mma_sync}
# What the cpu backend, probe replay and the synthetic engine's model compute with unless told
# otherwise: the H200's own arithmetic (bit-exact on the probes, docs/numerics.md), so that model,
# cpu backend and GPU agree; `exact` stays as the order-free reference.
DEFAULT_MMA = "sm_90"


def pairwise(xs: list, op) -> object:
    """Reduce a list by adding neighbours, level by level ((x0+x1), (x2+x3), …; an odd last one
    is carried up): the in-lane reduction tree the engine's kernels use."""
    xs = list(xs)
    while len(xs) > 1:
        nxt = [op(xs[i], xs[i + 1]) for i in range(0, len(xs) - 1, 2)]
        if len(xs) % 2:
            nxt.append(xs[-1])
        xs = nxt
    return xs[0]


def mma_exact_f32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """The f32-accumulating e4m3 `mma`: the sum of the products and C in f64 (exact unless C spans
    more than 53 bits beyond the products), rounded once to f32."""
    s = np.matmul(e4m3_values(a), e4m3_values(b)) + np.asarray(c, dtype=np.float32).astype(np.float64)
    return s.astype(np.float32)
