"""The f32 `.approx` functions as the H200 computes them: `rcp_approx`, `rsqrt_approx`,
`sqrt_approx`, `ex2_approx`, `div_approx` (each with or without .ftz) and `ex2_approx_f16`, from
tables of its MUFU unit measured on it (rr/data/mufu_h200.npz), and the f32 `.ftz` multiply and
add around them (`mul_ftz`, `add_ftz`)."""

from __future__ import annotations

import functools

import numpy as np

from rr.numerics.half import F16

# ptxas -arch=sm_90 compiles rcp/rsqrt/sqrt/ex2 `.approx.ftz.f32` to one MUFU.RCP/RSQ/SQRT/EX2 and
# div.approx.ftz.f32 to MUFU.RCP and FMUL.FTZ; the forms without .ftz scale a subnormal input (or,
# for ex2, an input below -126) into range around the same MUFU and scale back with FMULs. The MUFU
# results are tables measured on the H200 (rr/data/mufu_h200.npz, from tools/approx_probes.py):
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

