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


# Elements compared at a time: a chunk's f64 temporaries stay in the cache, where whole-buffer f64
# copies (a 4K frame's f16 buffers are 33M elements) took seconds a capture.
VALUES = 1 << 15


# np.mean of all the squared differences (the MSE) sums them pairwise: a range of more than 128 values
# is halved at a multiple of 8 and the halves' sums added. The chunks are the ranges of that halving no
# longer than VALUES, and their sums are added back in its order: the whole array's sum bit for bit,
# which a plain running sum of the chunks' sums is not, without the whole array.
def _halves(n: int) -> tuple[int, int]:
    half = n // 2 - n // 2 % 8
    return half, n - half


def _ranges(start: int, n: int):
    """The (start, stop) ranges, in order, that numpy's pairwise sum of `n` values from `start` halves into."""
    if n <= VALUES:
        yield start, start + n
    else:
        first, second = _halves(n)
        yield from _ranges(start, first)
        yield from _ranges(start + first, second)


def _pairwise_total(n: int, sums):
    """The sums of `_ranges(0, n)` (an iterator of them, in order) added as numpy's pairwise sum adds them."""
    if n <= VALUES:
        return next(sums)
    first, second = _halves(n)
    return _pairwise_total(first, sums) + _pairwise_total(second, sums)


def _in_f64(raw_x: np.ndarray, raw_y: np.ndarray):
    """Both buffers a range at a time: (start, the range's elements of each, those in f64, where both are finite)."""
    for start, stop in _ranges(0, raw_x.size):
        xs, ys = raw_x[start:stop], raw_y[start:stop]
        x, y = xs.astype(np.float64), ys.astype(np.float64)
        yield start, xs, ys, x, y, np.isfinite(x) & np.isfinite(y)


def compare_values(name: str, a: np.ndarray, b: np.ndarray, dtype: str | None = None) -> BufferComparison:
    """The comparison element by element, in f64: how many differ, where first, max |a-b|, PSNR.

    One pass a chunk at a time; a second only for the PSNR of buffers with non-finite values where both
    agree (the MSE is then over the other elements, whose pairwise ranges are not the chunks')."""
    na, nb = as_numbers(a, dtype), as_numbers(b, dtype)
    raw_x, raw_y = na.ravel(), nb.ravel()
    width = raw_x.dtype.itemsize
    # an element differs where its bits do (of another width: its bytes, compared as one void)
    bits = np.dtype(f"u{width}") if width in (1, 2, 4, 8) else np.dtype(f"V{width}")
    diff_bytes = differing = finite_pairs = 0
    first_index = first_values = max_abs = None
    peak, unequal_nonfinite, sums = 0.0, False, []
    for start, xs, ys, x, y, finite in _in_f64(raw_x, raw_y):
        diff_bytes += int(np.count_nonzero(xs.view(np.uint8) != ys.view(np.uint8)))
        differ = xs.view(bits) != ys.view(bits)
        count = int(np.count_nonzero(differ))
        if count and first_index is None:
            k = int(np.argmax(differ))
            first_index = tuple(int(i) for i in np.unravel_index(start + k, na.shape))
            first_values = (float(x[k]), float(y[k]))
        differing += count
        if not finite.all():
            unequal_nonfinite = unequal_nonfinite or bool((differ & ~finite).any())
            x, y = x[finite], y[finite]
        if x.size:
            finite_pairs += x.size
            peak = max(peak, float(np.max(np.abs(x))), float(np.max(np.abs(y))))
            d = np.abs(x - y)
            m = float(np.max(d))
            max_abs = m if max_abs is None else max(max_abs, m)
            sums.append(np.add.reduce(np.square(d, out=d)))  # the range's share of the MSE's sum
    psnr = None
    if diff_bytes == 0:
        psnr = math.inf
    elif not unequal_nonfinite:  # non-finite values (padding, sentinels) only where both agree
        if finite_pairs == raw_x.size:
            mse = float(_pairwise_total(finite_pairs, iter(sums)) / finite_pairs)
        else:
            mse = float(np.mean(np.concatenate([(x[f] - y[f]) ** 2 for *_, x, y, f in _in_f64(raw_x, raw_y)])))
        peak = max(peak, 1e-30)
        psnr = math.inf if mse == 0 else 10 * math.log10(peak * peak / mse)
    return BufferComparison(name, str(dtype or a.dtype), diff_bytes == 0, int(raw_x.nbytes), diff_bytes,
                            diff_bytes / max(raw_x.nbytes, 1), int(raw_x.size), differing, max_abs,
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
