"""rr.run.compare.compare_values, which compares a chunk at a time, against the whole-array
comparison it replaced (`reference` below, its code before the chunks): every field equal bit for
bit, floats and NaNs included, on random and hostile buffers of each element type, and on buffers
longer than a chunk."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest

from rr.run import compare
from rr.run.compare import DTYPES, BufferComparison, as_numbers, compare_values


def reference(name, a, b, dtype=None):
    """compare_values as it was before the chunks: the specification."""
    ab, bb = np.ascontiguousarray(a).view(np.uint8).ravel(), np.ascontiguousarray(b).view(np.uint8).ravel()
    diff_bytes = int(np.count_nonzero(ab != bb))
    na, nb = as_numbers(a, dtype), as_numbers(b, dtype)
    raw_x, raw_y = na.ravel(), nb.ravel()
    x, y = raw_x.astype(np.float64), raw_y.astype(np.float64)
    width = raw_x.dtype.itemsize
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
    elif not (differ & ~finite).any():
        peak = max(float(np.max(np.abs(x[finite]), initial=0)), float(np.max(np.abs(y[finite]), initial=0)), 1e-30)
        mse = float(np.mean((x[finite] - y[finite]) ** 2))
        psnr = math.inf if mse == 0 else 10 * math.log10(peak * peak / mse)
    return BufferComparison(name, str(dtype or a.dtype), diff_bytes == 0, int(ab.size), diff_bytes,
                            diff_bytes / max(ab.size, 1), int(raw_x.size), int(np.count_nonzero(differ)), max_abs,
                            psnr, first_index, first_values)


def bits(value):
    """A field as something `==` compares bit for bit: floats (NaN, -0.0) as their 8 bytes."""
    if isinstance(value, float):
        return ("float", struct.pack("<d", value))
    if isinstance(value, tuple):
        return tuple(bits(v) for v in value)
    return (type(value).__name__, value)


def assert_same(a, b, dtype=None):
    want, got = reference("x", a, b, dtype), compare_values("x", a, b, dtype)
    assert [bits(v) for v in vars(got).values()] == [bits(v) for v in vars(want).values()], (got, want)
    return got


# one name of each element type, and the width of its bits
TYPES = {"e4m3": np.uint8, "e5m2": np.uint8, "f16": np.uint16, "f32": np.uint32, "bfloat16": np.uint16}
LONG = 5 * compare.VALUES + 37  # past several chunks, and past the pairwise sum's halving at multiples of 8


def test_every_element_type_of_dtypes_is_covered():
    assert {np.dtype(DTYPES[name]) for name in TYPES} == {np.dtype(t) for t in DTYPES.values()}


@pytest.mark.filterwarnings("ignore:invalid value encountered in cast")  # signalling NaNs, in both
@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("size", [1, 7, 130, LONG])
def test_random_bits_with_some_elements_changed(dtype, size):
    # every bit pattern: NaNs of several payloads, infinities, subnormals, both zeros
    rng = np.random.default_rng(size)
    u = TYPES[dtype]
    x = rng.integers(0, np.iinfo(u).max, size, dtype=u, endpoint=True)
    y = x.copy()
    changed = rng.random(size) < 0.3
    y[changed] = rng.integers(0, np.iinfo(u).max, int(changed.sum()), dtype=u, endpoint=True)
    assert_same(x.view(np.uint8), y.view(np.uint8), dtype)


def finite_pair(dtype, shape, rng):
    """Finite values of `dtype` over many magnitudes, and most of them an ulp or two off: the MSE's
    sum rounds differently in another order."""
    t = DTYPES[dtype]
    x = (rng.standard_normal(shape) * 2.0 ** rng.integers(-12, 12, shape)).astype(t)
    x[~np.isfinite(x.astype(np.float64))] = 1
    u = np.dtype(f"u{np.dtype(t).itemsize}")
    y = (x.view(u).astype(np.int64) + rng.integers(-2, 3, shape)).astype(u).view(t)
    stepped_off = ~np.isfinite(y.astype(np.float64))  # past the largest value, or below 0 into NaN bits
    y[stepped_off] = x[stepped_off]
    return x, y


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("shape", [(LONG,), (2, 3 * compare.VALUES + 5), (1_000_003,), (9, 17, 4), (3, 1, 2)])
def test_finite_buffers_an_ulp_or_two_apart(dtype, shape):
    x, y = finite_pair(dtype, shape, np.random.default_rng(len(shape)))
    got = assert_same(x, y, dtype)
    assert got.psnr_db is not None and 0 < got.differing_elements < got.elements


@pytest.mark.parametrize("dtype", TYPES)
def test_non_finite_values_where_both_agree_leave_the_psnr_over_the_rest(dtype):
    # the MSE over fewer values than the buffer has (not the chunks' ranges), across chunk boundaries
    rng = np.random.default_rng(3)
    x, y = finite_pair(dtype, (LONG,), rng)
    nan = np.array([np.nan]).astype(DTYPES[dtype])
    padding = rng.random(LONG) < 0.01
    padding[compare.VALUES - 1:compare.VALUES + 1] = True
    x[padding] = y[padding] = nan[0]
    got = assert_same(x, y, dtype)
    assert got.psnr_db is not None


@pytest.mark.parametrize("dtype", ["f16", "f32", "bfloat16", "e5m2"])
def test_infinities(dtype):
    t = DTYPES[dtype]
    inf = np.array([np.inf, -np.inf, 1.0, 2.0]).astype(t)
    both = np.tile(inf, 40)
    assert_same(both, both.copy(), dtype)  # equal
    other = both.copy()
    other[-2] = t(3.0)
    assert assert_same(both, other, dtype).psnr_db is not None  # the infinities agree
    other[0] = t(1.0)  # inf against a finite value
    assert assert_same(both, other, dtype).psnr_db is None
    other[0] = -both[0]  # inf against -inf
    assert_same(both, other, dtype)


@pytest.mark.parametrize("dtype", TYPES)
def test_hostile_small_buffers(dtype):
    t = DTYPES[dtype]
    u = TYPES[dtype]
    zeros = np.zeros(12, t)
    negative = -zeros  # -0.0 against 0.0: bytes differ, the values do not (MSE 0: PSNR inf)
    assert assert_same(zeros, negative, dtype).psnr_db == math.inf
    assert_same(np.zeros(0, t), np.zeros(0, t), dtype)  # empty
    ones = np.ones(1000, t)
    assert assert_same(ones, ones.copy(), dtype).identical  # all equal
    last = ones.copy()
    last[-1] = t(0.5)  # one differing element, the last
    assert assert_same(ones, last, dtype).first_index == (999,)
    nans = np.full(6, np.nan).astype(t)
    other = nans.view(u).copy()
    other[2] ^= 1 << 8 * other.itemsize - 1  # the NaN of the other sign: a differing pair not finite
    assert_same(nans, other.view(t), dtype)
    assert assert_same(nans, np.zeros(6, t), dtype).max_abs_diff is None  # no finite pair at all
    assert_same(np.array(0.5, t), np.array(0.25, t), dtype)  # 0-d


@pytest.mark.parametrize("dtype", TYPES)
def test_chunk_boundaries_and_a_difference_only_at_the_end(dtype):
    t = DTYPES[dtype]
    x = np.full((2, LONG), 1.5).astype(t)
    for at in (compare.VALUES - 1, compare.VALUES, 2 * LONG - 1):
        y = x.copy()
        y.flat[at] = t(1.75)
        assert assert_same(x, y, dtype).first_index == np.unravel_index(at, x.shape)


@pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning")
@pytest.mark.parametrize("a, b", [
    (np.arange(LONG, dtype=np.uint32), np.arange(LONG, dtype=np.uint32)[::-1].copy()),
    (np.linspace(-3, 3, 1000), np.linspace(-3, 3, 1000) + 1e-9),  # f64, as its own type
    (np.arange(10, dtype=np.complex128), np.arange(10, dtype=np.complex128) * 1j),  # 16 bytes an element
    (np.arange(24, dtype=np.float16).reshape(2, 3, 4).transpose(2, 0, 1),
     np.arange(24, dtype=np.float16).reshape(2, 3, 4).transpose(2, 0, 1) * 2),  # not contiguous
])
def test_buffers_read_as_their_own_type(a, b):
    assert_same(a, b)


def test_the_chunks_sums_added_in_numpys_pairwise_order_are_the_whole_arrays_sum():
    rng = np.random.default_rng(5)
    for n in (1, compare.VALUES, compare.VALUES + 1, 2 * compare.VALUES + 8, 3 * compare.VALUES + 15, 1_000_003):
        values = rng.random(n)
        sums = [np.add.reduce(values[start:stop]) for start, stop in compare._ranges(0, n)]
        assert compare._pairwise_total(n, iter(sums)) == np.add.reduce(values)
    assert sum(sums) != np.add.reduce(values)  # which a running sum of them is not
