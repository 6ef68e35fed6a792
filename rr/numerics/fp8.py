"""The fp8 formats of the engine's kernels: e4m3 and e5m2 bytes from f16 as
`cvt.rn.satfinite.{e4m3x2,e5m2x2}.f16x2` rounds them (`to_e4m3`, `to_e5m2`), and back (`from_e4m3`,
`from_e5m2`, exact), and every e4m3 code's value in f64 (`E4M3_F64`, `e4m3_values`)."""

from __future__ import annotations

import functools

import ml_dtypes
import numpy as np

from rr.numerics.half import F16, f16_of_split

E4M3 = ml_dtypes.float8_e4m3fn
E4M3_MAX = 448.0
E5M2 = ml_dtypes.float8_e5m2
E5M2_MAX = 57344.0


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
E4M3_F64 = np.arange(256, dtype=np.uint8).view(E4M3).astype(np.float64)


_E4M3_F16 = np.arange(256, dtype=np.uint8).view(E4M3).astype(F16)
_E5M2_F16 = np.arange(256, dtype=np.uint8).view(E5M2).astype(F16)


def to_e4m3(x) -> np.ndarray:
    """`cvt.rn.satfinite.e4m3x2.f16x2` per element (saturates to ±448)."""
    return _F16_TO_E4M3.take(np.asarray(x, dtype=F16).view(np.uint16), mode="wrap")


@functools.cache
def _f16_top_bits_to_e4m3() -> np.ndarray:
    """uint8 (2^19,): `to_e4m3` of the f16 whose value as an f32 has these top 19 bits."""
    return _F16_TO_E4M3[f16_of_split(np.arange(1 << 19, dtype=np.uint32) << np.uint32(13))]


def e4m3_of_values(v) -> np.ndarray:
    """`to_e4m3` of f16 values held as f32 (rr.numerics.half's `*_values`): one lookup by the
    f32's top 19 bits, which an f16 value determines, instead of its f16 bits and then theirs."""
    return _f16_top_bits_to_e4m3().take(np.asarray(v, np.float32).view(np.uint32) >> np.uint32(13), mode="wrap")


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
    return E4M3_F64[np.asarray(b, dtype=np.uint8)]
