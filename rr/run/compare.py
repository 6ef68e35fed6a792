"""Comparing two runs buffer by buffer: byte identity, how many bytes and elements differ, and the
numeric difference (max |a-b| and PSNR) in the buffer's own number type.

PSNR is taken against the larger peak |value| of the two buffers: a fresh launch's output buffer
is all zeros, so the peak of one side alone can be 0 (and the PSNR a meaningless -600 dB).

Two buffers that are one file (a capture's hard link to its reference's file, `rr run
--reference`) are identical without comparing their bytes: `identical_buffer` gives what
`compare_buffer` would for a buffer against itself, reading no more of it than it needs."""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass

import ml_dtypes
import numpy as np

# Names a launch description may give a buffer's element type, and the numpy type they read as.
DTYPES = {
    "e4m3": ml_dtypes.float8_e4m3fn,
    "e5m2": ml_dtypes.float8_e5m2,
    "float16": np.float16,
    "f16": np.float16,
    "float32": np.float32,
    "f32": np.float32,
    "bfloat16": ml_dtypes.bfloat16,
}


@dataclass(frozen=True)
class BufferComparison:
    buffer: str
    dtype: str
    identical: bool
    bytes: int
    differing_bytes: int
    differing_share: float  # of the bytes
    elements: int  # in the buffer's number type
    differing_elements: int
    max_abs_diff: float | None  # over elements where both are finite; None if no such pair differs
    psnr_db: float | None  # inf when identical; None when a differing pair is not finite
    first_index: tuple | None  # of the first differing element
    first_values: tuple | None  # (a, b) there

    def as_dict(self) -> dict:
        d = asdict(self)
        for k in ("psnr_db", "max_abs_diff"):
            if d[k] is not None and math.isinf(d[k]):
                d[k] = "inf"
        return d


def as_numbers(a: np.ndarray, dtype: str | None) -> np.ndarray:
    """The array's bytes read as `dtype` (an element type name of DTYPES or a numpy dtype)."""
    if dtype is None:
        return a
    t = DTYPES.get(dtype, dtype)
    return np.ascontiguousarray(a).view(np.uint8).view(t)


CHUNK = 1 << 24  # bytes compared at a time: a difference ends the scan early, and no temporary is large


def bytes_equal(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two byte arrays of one size are equal, compared a chunk at a time."""
    return all(np.array_equal(a[i:i + CHUNK], b[i:i + CHUNK]) for i in range(0, a.size, CHUNK))


def compare_buffer(name: str, a: np.ndarray, b: np.ndarray, dtype: str | None = None) -> BufferComparison:
    ab, bb = np.ascontiguousarray(a).view(np.uint8).ravel(), np.ascontiguousarray(b).view(np.uint8).ravel()
    if ab.size != bb.size:
        raise ValueError(f"buffer {name!r}: {ab.size} bytes against {bb.size}: the runs are not of the same launch")
    if bytes_equal(ab, bb):
        # what compare_values gives for equal bytes, without its f64 copies of both (a 4K frame's
        # buffers took 10 s a capture that way, most of them the reference's own bytes)
        return identical_buffer(name, a, dtype)
    return compare_values(name, a, b, dtype)


def compare_values(name: str, a: np.ndarray, b: np.ndarray, dtype: str | None = None) -> BufferComparison:
    """The comparison element by element, in f64: how many differ, where first, max |a-b|, PSNR."""
    ab, bb = np.ascontiguousarray(a).view(np.uint8).ravel(), np.ascontiguousarray(b).view(np.uint8).ravel()
    diff_bytes = int(np.count_nonzero(ab != bb))
    na, nb = as_numbers(a, dtype), as_numbers(b, dtype)
    raw_x, raw_y = na.ravel(), nb.ravel()
    x, y = raw_x.astype(np.float64), raw_y.astype(np.float64)
    width = raw_x.dtype.itemsize  # bytes per element (not -1: an empty buffer has no shape to infer)
    differ = raw_x.view(np.uint8).reshape(raw_x.size, width) != raw_y.view(np.uint8).reshape(raw_y.size, width)
    differ = differ.any(axis=1)
    first_index = first_values = None
    if differ.any():
        k = int(np.argmax(differ))
        first_index = tuple(int(i) for i in np.unravel_index(k, na.shape))
        first_values = (float(x[k]), float(y[k]))
    finite = np.isfinite(x) & np.isfinite(y)
    max_abs = float(np.max(np.abs(x[finite] - y[finite]))) if finite.any() else None
    psnr = None
    if diff_bytes == 0:
        psnr = math.inf
    elif not (differ & ~finite).any():  # non-finite values (padding, sentinels) only where both agree
        peak = max(float(np.max(np.abs(x[finite]), initial=0)), float(np.max(np.abs(y[finite]), initial=0)), 1e-30)
        mse = float(np.mean((x[finite] - y[finite]) ** 2))
        psnr = math.inf if mse == 0 else 10 * math.log10(peak * peak / mse)
    return BufferComparison(name, str(dtype or a.dtype), diff_bytes == 0, int(ab.size), diff_bytes,
                            diff_bytes / max(ab.size, 1), int(raw_x.size), int(np.count_nonzero(differ)), max_abs,
                            psnr, first_index, first_values)


def same_file(a, b) -> bool:
    """Whether two paths are one file (a hard link, the same path); False where either is missing."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


FIRST_SCAN, SCAN = 1 << 12, 1 << 22  # elements looked at for a finite one: the first few, then in chunks


def identical_buffer(name: str, a: np.ndarray, dtype: str | None = None) -> BufferComparison:
    """`compare_buffer(name, a, a, dtype)` without comparing `a` with itself: no byte differs, so
    PSNR is inf and max |a-b| is 0 — or None when no element is finite, the one thing read of the
    buffer (up to its first finite element; `a` may be a memory map)."""
    numbers = as_numbers(a, dtype).ravel()
    finite = False
    for start, stop in ((0, FIRST_SCAN), *((i, i + SCAN) for i in range(FIRST_SCAN, numbers.size, SCAN))):
        if np.isfinite(numbers[start:stop].astype(np.float64)).any():
            finite = True
            break
    return BufferComparison(name, str(dtype or a.dtype), True, int(a.nbytes), 0, 0.0, int(numbers.size), 0,
                            0.0 if finite else None, math.inf, None, None)
