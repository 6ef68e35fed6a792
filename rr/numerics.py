"""The arithmetic of the engine's kernels in numpy, rounded as the PTX rounds: f16 operations with
one correct rounding, the e4m3 packs (`cvt.rn.satfinite.e4m3x2.f16x2`), the `.approx.ftz` f32
functions, and the `mma` accumulation as a pluggable function.

The numpy model of the synthetic engine computes with these, and so does the CPU interpreter, so
the two agree byte for byte whenever they use the same `mma` model. Where the hardware's result is
not known exactly (the `.approx` functions, the tensor core's accumulation) the function here is
the correctly rounded one, and the difference to the GPU is measured, not assumed away.
"""

from __future__ import annotations

from collections.abc import Callable

import ml_dtypes
import numpy as np

F16 = np.float16
E4M3 = ml_dtypes.float8_e4m3fn
E4M3_MAX = 448.0
E5M2 = ml_dtypes.float8_e5m2
E5M2_MAX = 57344.0

# f16 +, -, * and / of f16 operands computed in f32 and rounded to f16 are correctly rounded: f32
# has 24 >= 2*11 + 2 significant bits, so the double rounding is innocuous (Figueroa 1995).


def _f32(*xs):
    return [np.asarray(x, dtype=F16).astype(np.float32) for x in xs]


def add(a, b):
    x, y = _f32(a, b)
    return (x + y).astype(F16)


def sub(a, b):
    x, y = _f32(a, b)
    return (x - y).astype(F16)


def mul(a, b):
    x, y = _f32(a, b)
    return (x * y).astype(F16)


def fma(a, b, c):
    """f16 `fma.rn`: a*b + c with one rounding. a*b is exact in f64; the sum may not be, so its
    exact error (TwoSum) decides the rare case where the f64 sum sits on an f16 rounding midpoint."""
    p = np.asarray(a, dtype=F16).astype(np.float64) * np.asarray(b, dtype=F16).astype(np.float64)
    c = np.asarray(c, dtype=F16).astype(np.float64)
    s = p + c
    bp = s - p
    err = (p - (s - bp)) + (c - bp)
    r = s.astype(F16)
    # is s exactly halfway between two f16 values? then the sign of err breaks the tie
    lo = r.astype(np.float64)
    other = np.where(s > lo, np.nextafter(r, F16(np.inf)), np.nextafter(r, F16(-np.inf))).astype(np.float64)
    tie = (err != 0) & (s != lo) & (np.abs(s - lo) == np.abs(other - s))
    if np.any(tie):
        nudged = np.nextafter(s, np.where(err > 0, np.inf, -np.inf))
        r = np.where(tie, nudged.astype(F16), r)
    return r


def neg(a):
    return (-np.asarray(a, dtype=F16)).astype(F16)


def fmax(a, b):
    return np.maximum(np.asarray(a, dtype=F16), np.asarray(b, dtype=F16))


def fmin(a, b):
    return np.minimum(np.asarray(a, dtype=F16), np.asarray(b, dtype=F16))


def f16(x):
    """`cvt.rn.f16.f32` / `cvt.rn.f16.f64`."""
    return np.asarray(x).astype(F16)


def bits16(x) -> np.ndarray:
    return np.asarray(x, dtype=F16).view(np.uint16)


def from_bits16(b) -> np.ndarray:
    return np.asarray(b, dtype=np.uint16).view(F16)


# -- e4m3 ---------------------------------------------------------------------------------------

def _to_fp8(x, fp8, finite_max: float) -> np.ndarray:
    """`cvt.rn.satfinite.<fp8>x2.f16x2` per element: round to nearest even, saturate to the
    largest finite value (NaN stays NaN). Returns the fp8 bytes."""
    v = np.asarray(x, dtype=F16).astype(np.float32)
    v = np.where(np.isnan(v), v, np.clip(v, -finite_max, finite_max))
    return v.astype(fp8).view(np.uint8)


def to_e4m3(x) -> np.ndarray:
    """`cvt.rn.satfinite.e4m3x2.f16x2` per element (saturates to ±448)."""
    return _to_fp8(x, E4M3, E4M3_MAX)


def to_e5m2(x) -> np.ndarray:
    """`cvt.rn.satfinite.e5m2x2.f16x2` per element (saturates to ±57344)."""
    return _to_fp8(x, E5M2, E5M2_MAX)


def from_e4m3(b) -> np.ndarray:
    """`cvt.rn.f16x2.e4m3x2` per element (exact)."""
    return np.asarray(b, dtype=np.uint8).view(E4M3).astype(F16)


def from_e5m2(b) -> np.ndarray:
    """`cvt.rn.f16x2.e5m2x2` per element (exact)."""
    return np.asarray(b, dtype=np.uint8).view(E5M2).astype(F16)


def e4m3_values(b) -> np.ndarray:
    return np.asarray(b, dtype=np.uint8).view(E4M3).astype(np.float64)


# -- f32 .approx.ftz functions ------------------------------------------------------------------

def _ftz(x):
    x = np.asarray(x, dtype=np.float32)
    return np.where(np.abs(x) < np.finfo(np.float32).tiny, np.float32(0) * np.sign(x), x).astype(np.float32)


def rcp_approx(x):
    with np.errstate(divide="ignore"):
        return _ftz((1.0 / _ftz(x).astype(np.float64)).astype(np.float32))


def rsqrt_approx(x):
    with np.errstate(divide="ignore", invalid="ignore"):
        return _ftz((1.0 / np.sqrt(_ftz(x).astype(np.float64))).astype(np.float32))


def ex2_approx(x):
    with np.errstate(over="ignore"):
        return _ftz(np.exp2(_ftz(x).astype(np.float64)).astype(np.float32))


def div_approx(a, b):
    with np.errstate(divide="ignore", invalid="ignore"):
        return _ftz((_ftz(a).astype(np.float64) / _ftz(b).astype(np.float64)).astype(np.float32))


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
    gives the same f64 value (48 significant bits at most)."""
    s = np.matmul(e4m3_values(a), e4m3_values(b)) + np.asarray(c, dtype=F16).astype(np.float64)
    return s.astype(F16)


MMA_MODELS: dict[str, MmaModel] = {"exact": mma_exact}


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
