"""f16 arithmetic as the PTX rounds it: `add`, `sub`, `mul`, `fma` with one correct rounding, `neg`,
the PTX's `min`/`max` (`fmin`, `fmax`; `ptx_min_max` for any float type), `cvt.rn.f16.{f32,f64}`
(`f16`), and the fast casts between f16 and f32/f64 that they are made of."""

from __future__ import annotations

import functools

import numpy as np

F16 = np.float16

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


def split_f16(x: np.ndarray) -> np.ndarray:
    """Finite f32 or f64 below 2^17 → the same rounded to 11 significant bits, ties to even
    (Veltkamp's split: x·(2^(p − 11) + 1) and back; exact on every f32 of f16's normal range, by
    an exhaustive check). Past 2^(emax − p + 11) it overflows to NaN; a NaN stays NaN (callers
    that may meet those keep numpy's warnings off)."""
    p = x * _SPLIT[x.dtype]
    x = p - x
    p -= x  # p − (p − x), not (x − p) + p: that makes −0 of −0
    return p


def split_f16_in_place(x: np.ndarray, out=None) -> np.ndarray:
    """`split_f16` of finite f64 below 2^17 that the caller lets go (x is overwritten), as
    Veltkamp wrote it, γ + (x − γ) with γ = x·(2^42 + 1): the same value but +0 for −0. `out`:
    where to put the result (an f32 array holds it exactly: 11 significant bits)."""
    p = x * _SPLIT[x.dtype]
    np.subtract(x, p, out=x)
    return np.add(p, x, out=p if out is None else out)


def f16_of_split(bits: np.ndarray) -> np.ndarray:
    """The f32 bits of values with at most 11 significant bits, which f16 holds (or rounds to
    ±inf past 65504, as 2^16 and more) → f16 bits (uint16), by their top 19 bits."""
    return _f16_of_top_bits().take(bits >> np.uint32(13), mode="wrap")


def f16_of_grid(x) -> np.ndarray:
    """`cvt.rn.f16.f32` of f32 values that are multiples of 2^-24 (sums and differences of f16,
    and their f32 roundings): below 2^-14 they have at most 10 significant bits and f16 holds
    them, so the 11-bit rounding is f16's everywhere; ±inf split as ±2^17, and a signalling NaN
    comes out quiet (a sum's never is one). Numpy's cast on every such f32, by an exhaustive check."""
    with np.errstate(invalid="ignore"):
        split = split_f16(np.clip(np.asarray(x, np.float32), -_F16_PAST, _F16_PAST))
    return f16_of_split(split.view(np.uint32)).view(F16)


_GRID = {np.dtype(np.float32): np.float32(0.75), np.dtype(np.float64): 1.5 * 2.0 ** 28}  # ulp 2^-24


def _f16_of_float(x: np.ndarray) -> np.ndarray:
    """f16 of f32 or f64 `x`, as numpy's cast: the 11-bit split's bits where they are above
    f16's smallest normal; at or below it (zeros included: |x| < 2^-13 there), f16's values are
    a fixed grid of 2^-24, to which |x| + 1.5·2^(23 or 52 − 24) rounds it (its ulp is 2^-24);
    numpy's cast itself where the result is ±inf or NaN (past f16's range, or past the split's: a
    signalling NaN stays signalling). Both are told by the split's f16 bits (half the bytes of
    x's)."""
    with np.errstate(invalid="ignore", over="ignore"):
        h = np.asarray(f16_of_split(split_f16(x).astype(np.float32, copy=False).view(np.uint32)))
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


# The same arithmetic on f16 values held as f32 (each exactly `f16_as_f32` of its f16), giving
# the f32 values of the f16 results — `f16_as_f32` of what the functions above give, bit for bit
# (NaN payloads included). The cpu backend keeps f16 registers so between f16 instructions and
# reads their bits (`f16_bits`) only where something else reads them: a table lookup each way
# fewer, the most of an f16 instruction's cost. The rounded value is the 11-bit split itself
# wherever f16 holds it; only the rest (past f16's range, NaN, and for `mul` and `fma` f16's
# subnormals, where its grid rounds instead) is taken from the bits-level function.

_F16_PAST_F32 = np.uint32(0x47800000)  # 2^16: an 11-bit value from here on is f16's infinity
_F16_NORMAL_F32 = np.uint32(0x38800000)  # 2^-14, f16's smallest normal


def f16_bits(v) -> np.ndarray:
    """The f16 bits (uint16) of f32 values that are f16 values (±inf and NaN included)."""
    return f16_of_split(np.asarray(v, np.float32).view(np.uint32))


def _settled(x, split: np.ndarray, rounded, subnormals: bool) -> np.ndarray:
    """The f32 values of `rounded(x)` (f16) given `split`, x rounded to 11 significant bits as
    `rounded` rounds it: `split` (overwritten) where f16 holds it, `rounded`'s own result past
    f16's range and at NaN, and (`subnormals`) at nonzero magnitudes up to 2^-14. `x`: an array,
    or a function of flat positions giving x there."""
    split = np.atleast_1d(split)
    mag = split.view(np.uint32) & np.uint32(0x7FFFFFFF)
    other = mag >= _F16_PAST_F32
    if subnormals:
        mag -= np.uint32(1)  # a zero wraps past everything: it is its own f16
        other |= mag < _F16_NORMAL_F32
    if np.count_nonzero(other):
        at = np.flatnonzero(other)
        split.flat[at] = f16_as_f32(rounded(x(at) if callable(x) else np.atleast_1d(x).take(at)))
    return split


def _on_grid(op, x, y) -> np.ndarray:
    """f16_of_grid's rounding of the f32 sum or difference `op` of f16 values, as values."""
    with np.errstate(invalid="ignore"):
        s = np.asarray(op(x, y), np.float32)
        return _settled(s, split_f16(np.clip(s, -_F16_PAST, _F16_PAST)), f16_of_grid, False)


def add_values(x, y) -> np.ndarray:
    """`add` of f16 values held as f32 (above)."""
    return _on_grid(np.add, x, y)


def sub_values(x, y) -> np.ndarray:
    return _on_grid(np.subtract, x, y)  # not x + (−y): a NaN y comes out of that with its sign flipped


def mul_values(x, y) -> np.ndarray:
    with np.errstate(invalid="ignore", over="ignore"):
        p = np.asarray(x * y, np.float32)
        return _settled(p, split_f16(p), f16_of_f32, True)


def fma_values(x, y, z) -> np.ndarray:
    """`fma` of f16 values held as f32: the product, exact in f32, and C summed rounded to nearest,
    and rounded to odd (as `fma` rounds them all) only where the sum lands on a midpoint of f16's
    normals (its low 13 bits 0x1000; a few in 10^4): rounding to nearest moves a sum past no f32
    (a midpoint is one), so f16's rounding of any other is f16's rounding of the exact sum. f16's
    subnormals, past its range and NaN are `_settled` from the sums rounded to odd."""
    with np.errstate(invalid="ignore", over="ignore"):
        p, z = np.asarray(x * y, np.float32), np.asarray(z, np.float32)
        s = np.atleast_1d(p + z)
        shape = s.shape

        def odd_sums(at):  # the sums at flat positions `at`, rounded to odd
            return _odd_sum_f32(*(np.broadcast_to(v, shape).reshape(-1).take(at) for v in (p, z)))
        mid = np.flatnonzero((s.view(np.uint32) & np.uint32(0x1FFF)) == np.uint32(0x1000))
        if mid.size:
            s.flat[mid] = odd_sums(mid)
        return _settled(odd_sums, split_f16(s), f16_of_f32, True)


def f16_values_of_f32(x) -> np.ndarray:
    """`f16_of_f32` (cvt.rn.f16.f32) as values."""
    with np.errstate(invalid="ignore", over="ignore"):
        x = np.asarray(x, np.float32)
        return _settled(x, split_f16(x), f16_of_f32, True)


_F16_CANONICAL_F32 = np.float32(np.uint32(0x7FFFE000).view(np.float32))  # f16's canonical NaN (0x7FFF)


def min_max_values(x, y, minimum: bool, nan: bool = False) -> np.ndarray:
    """`min` / `max` of f16 values held as f32, as `ptx_min_max` (the f32 order is the f16 order):
    numpy's minimum / maximum where the operands differ, the OR / AND of their bits where they
    are equal (−0 and +0: min −0, max +0), and `ptx_min_max` itself where a NaN is involved."""
    x, y = np.asarray(x, np.float32), np.asarray(y, np.float32)
    r = np.minimum(x, y) if minimum else np.maximum(x, y)  # a NaN operand gives NaN
    xb, yb = x.view(np.uint32), y.view(np.uint32)
    r = np.where(x == y, (xb | yb) if minimum else (xb & yb), r.view(np.uint32)).view(np.float32)
    odd = nan_bits(r)
    if np.count_nonzero(odd):
        r = np.atleast_1d(r)
        at = np.flatnonzero(odd)
        xs, ys = (np.broadcast_to(v, r.shape).reshape(-1).take(at) for v in (x, y))
        r.flat[at] = ptx_min_max(xs, ys, minimum, nan, _F16_CANONICAL_F32)
    return r


def sign_values(x, negate: bool) -> np.ndarray:
    """`neg` / `abs` of f16 values held as f32: a NaN gives f16's canonical NaN, as on the H200."""
    x = np.asarray(x, np.float32)
    r = np.negative(x) if negate else np.abs(x)
    nan = nan_bits(x)
    if np.count_nonzero(nan):
        r = np.where(nan, _F16_CANONICAL_F32, r)
    return r


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


def nan_bits(x: np.ndarray) -> np.ndarray:
    """Where a float array holds a NaN, told by its bits (numpy's isnan of f16 is slow)."""
    size = x.dtype.itemsize
    return (x.view(_UINT[size]) & _UINT[size](_CANONICAL[size])) > _UINT[size](_INFINITY[size])


def canonical_nan(dtype):
    """The canonical NaN of a float type (0x7FFF, 0x7FFFFFFF, …): the one the PTX's operations give."""
    size = np.dtype(dtype).itemsize
    return _UINT[size](_CANONICAL[size]).view(dtype)


def ptx_min_max(x, y, minimum: bool, nan: bool = False, canonical=None):
    """PTX `min`/`max` on float arrays of one dtype: a NaN operand gives the other operand, two
    NaNs (or one, with `.NaN`) the canonical NaN (of the dtype, or `canonical`: f16's as an f32
    for f16 values held as f32), and -0 < +0. f64 with two NaNs gives the first operand as it
    is, as the H200 does (the ISA says a NaN). Computed on the bits: a float's bits with the
    magnitude flipped when negative order like the float (numpy's f16 is slow)."""
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
    canonical = canonical_nan(x.dtype) if canonical is None else canonical
    return np.where(both, x if (size == 8 and not nan) else canonical, r)


def f16(x):
    """`cvt.rn.f16.f32` / `cvt.rn.f16.f64` (numpy's cast, by `f16_of_f32` / `f16_of_f64`)."""
    x = np.asarray(x)
    return f16_of_f64(x) if x.dtype == np.float64 else f16_of_f32(x)


def bits16(x) -> np.ndarray:
    return np.asarray(x, dtype=F16).view(np.uint16)


def from_bits16(b) -> np.ndarray:
    return np.asarray(b, dtype=np.uint16).view(F16)
