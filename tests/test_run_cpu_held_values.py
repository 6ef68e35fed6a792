"""The cpu backend's shortcuts of issue 36 compute what the code before them computed, bit for bit:
f16 registers held as their halves' f32 values between f16 instructions (rr.numerics.half's
`*_values`, Machine.halves), the e4m3 conversion of held values, the f16 mma with C added to held
values in the D registers' layout (rr.numerics.mma's `mma_sync_sums` and `add_c_values`), and a
kernel whose held values go through every kind of move and write."""

from __future__ import annotations

import numpy as np
import pytest
from run_kernels import PTX

from rr.numerics import fp8, half
from rr.numerics.mma import add_c_values, mma_sync_many, mma_sync_sums
from rr.run.cpu import run_cpu
from rr.run.launch import Buffer, Field, Launch, write_launch

EVERY_F16 = np.arange(1 << 16, dtype=np.uint16).view(np.float16)


def _operands(rng, n: int) -> np.ndarray:
    """Every f16 pattern (zeros, subnormals, infinities, NaN payloads), random patterns, and
    values of every binade: sums, products and fma of these reach f16's subnormals, its range's
    end and its ties."""
    scaled = rng.normal(0, 1, n) * 2.0 ** rng.integers(-26, 17, n)
    with np.errstate(over="ignore"):
        return np.concatenate([EVERY_F16, rng.integers(0, 1 << 16, n, dtype=np.uint16).view(np.float16),
                               scaled.astype(np.float16)])


def _same(values: np.ndarray, bits_result: np.ndarray) -> None:
    """`values` (f32) are exactly the f32 values of the f16 `bits_result`, NaN payloads included."""
    want = half.f16_as_f32(bits_result).view(np.uint32)
    got = np.asarray(values, np.float32).view(np.uint32)
    bad = np.flatnonzero(got != want)
    assert not bad.size, f"{bad.size} differ, first at {bad[:3]}: {got[bad[:3]]} for {want[bad[:3]]}"


@pytest.mark.parametrize("trial", range(3))
def test_f16_arithmetic_on_held_values_gives_the_values_of_the_bits_it_computed_before(trial):
    rng = np.random.default_rng(40 + trial)
    a = _operands(rng, 100_000)
    b, c = rng.permutation(a), np.roll(a, 7919 * (trial + 1))
    va, vb, vc = (half.f16_as_f32(x) for x in (a, b, c))
    with np.errstate(all="ignore"):
        _same(half.add_values(va, vb), half.add(a, b))
        _same(half.sub_values(va, vb), half.sub(a, b))
        _same(half.mul_values(va, vb), half.mul(a, b))
        _same(half.fma_values(va, vb, vc), half.fma(a, b, c))
        for minimum in (True, False):
            for nan in (False, True):
                _same(half.min_max_values(va, vb, minimum, nan), half.ptx_min_max(a, b, minimum, nan))
        for negate in (True, False):  # neg and abs give the canonical NaN for a NaN, on the H200
            want = np.where(np.isnan(a), np.uint16(0x7FFF).view(np.float16), -a if negate else np.abs(a))
            _same(half.sign_values(va, negate), want)


def test_fma_on_values_rounds_to_odd_only_the_sums_at_f16_midpoints_and_gives_fma():
    """fma_values rounds a*b + c to nearest in f32, and to odd only where that lands on a
    midpoint of f16's normals: calls of 32 operand sets with and without such sums, and one of
    them all, each give `fma`'s results."""
    rng = np.random.default_rng(8)
    a, b, c = (rng.permutation(_operands(rng, 200_000)) for _ in range(3))
    ways = set()
    with np.errstate(all="ignore"):
        _same(half.fma_values(*(half.f16_as_f32(v) for v in (a, b, c))), half.fma(a, b, c))
        for i in range(0, len(a), 32):
            x, y, z = (half.f16_as_f32(v[i:i + 32]) for v in (a, b, c))
            ways.add(bool(((x * y + z).view(np.uint32) & 0x1FFF == 0x1000).any()))
            _same(half.fma_values(x, y, z), half.fma(a[i:i + 32], b[i:i + 32], c[i:i + 32]))
    assert ways == {True, False}


def test_f32_to_f16_on_values_and_f16_bits_of_values_give_the_bits():
    rng = np.random.default_rng(3)
    spread_f32 = np.arange(0, 1 << 32, 4099, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = np.concatenate([spread_f32, (rng.normal(0, 1, 10**6) * 2.0 ** rng.integers(-30, 20, 10**6)).astype(np.float32)])
    with np.errstate(all="ignore"):
        _same(half.f16_values_of_f32(x), half.f16_of_f32(x))
    assert np.array_equal(half.f16_bits(half.f16_as_f32(EVERY_F16)), EVERY_F16.view(np.uint16))


def test_e4m3_of_held_values_is_the_e4m3_of_their_bits():
    with np.errstate(invalid="ignore"):
        assert np.array_equal(fp8.e4m3_of_values(half.f16_as_f32(EVERY_F16)), fp8.to_e4m3(EVERY_F16))


def _codes(rng, shape, top: int) -> np.ndarray:
    """e4m3 codes of magnitude below `top` (0x50: products that never reach the HMMA's cut), either sign."""
    return (rng.integers(0, top, shape, dtype=np.uint8) | (rng.integers(0, 2, shape, dtype=np.uint8) << 7))


def test_the_f16_mma_with_c_added_to_values_gives_mma_sync_many():
    """T of each mma of one A (mma_sync_sums) plus C as values (add_c_values) is D: B tiles
    shared by every warp, repeating every four warps (A shared by each four, or not), every warp
    its own, codes whose products may be cut and NaN codes, and C with infinities, NaN, the
    largest finite value and values whose sums pass f16's range (1100 warps: three chunks)."""
    rng = np.random.default_rng(36)
    n = 1100
    a_shared = np.repeat(_codes(rng, (n // 4, 16, 32), 0x58), 4, axis=0)
    bs = [np.tile(_codes(rng, (1, 32, 8), 0x48), (n, 1, 1)), np.tile(_codes(rng, (4, 32, 8), 0x48), (n // 4, 1, 1)),
          _codes(rng, (n, 32, 8), 0x48), rng.integers(0, 256, (n, 32, 8), dtype=np.uint8), _codes(rng, (n, 32, 8), 0x70)]
    bs[4][::13, 5, 3] = 0x7F
    cs = [rng.normal(0, 4, (n, 16, 8)).astype(np.float16) for _ in bs]
    cs[0].flat[::97], cs[1].flat[5::101], cs[2].flat[9::83] = np.inf, -np.inf, np.nan
    cs[3].flat[7::89] = np.float16(65504)
    cs[4].view(np.uint16).flat[11::79] = 0x7C01  # a signalling NaN
    for a in (a_shared, _codes(rng, (n, 16, 32), 0x58), rng.integers(0, 256, (n, 16, 32), dtype=np.uint8)):
        with np.errstate(all="ignore"):
            want = mma_sync_many(a, bs, cs)
            got = [add_c_values(t, half.f16_as_f32(c)) for t, c in zip(mma_sync_sums(a, bs), cs)]
        for g, w in zip(got, want):
            _same(g, w)


def test_held_f16_values_through_moves_packs_masked_writes_and_integer_reads(tmp_path):
    """rr_test_held_f16 (tests/ptx/held_f16.ptx): f16x2 and f16 arithmetic whose results are moved,
    unpacked, packed, contracted (a mul read only by an add: one fma), written under a divergent
    branch, read as integers (shl), converted to e4m3 and stored — every word is what numpy's
    f16 functions give."""
    rng = np.random.default_rng(7)
    lanes = 64
    halves = (rng.normal(0, 3, (lanes, 2, 2)) * 2.0 ** rng.integers(-12, 6, (lanes, 2, 2))).astype(np.float16)
    halves[3, 0, 0], halves[5, 1, 1], halves[8, 0, 1] = np.inf, np.nan, np.float16(6e-6)  # specials, a subnormal
    words = np.ascontiguousarray(halves).view(np.uint32).reshape(lanes, 2)
    launch = Launch(entry="rr_test_held_f16", module="kernel.ptx", grid=(1, 1, 1), block=(lanes, 1, 1), layout="list",
                    fields=(Field("buffer", buffer="inp"), Field("buffer", buffer="out")),
                    buffers={"inp": Buffer("inp", "inp.npy", "in"), "out": Buffer("out", "out.npy", "out")})
    write_launch(tmp_path / "l", launch, {"inp": words, "out": np.zeros((lanes, 6), np.uint32)}, PTX / "held_f16.ptx")
    record, out = run_cpu(tmp_path / "l")
    x, y = halves[:, 0], halves[:, 1]  # each (lanes, 2): a word's low and high half
    with np.errstate(all="ignore"):
        r4 = half.mul(x, y)
        h3 = half.add(r4[:, 0], r4[:, 1])
        r6 = np.stack([h3, r4[:, 0]], axis=1)
        r8 = half.fma(half.fmax(r6, x), y, r4)
        r14 = half.fma(x, y, r8)
        odd = (np.arange(lanes) % 2 == 1)[:, None]
        r8 = np.where(odd, half.sub(r8, x), r8)
        r10 = np.where(np.isnan(r8), np.uint16(0x7FFF).view(np.float16), -r8)
        r15 = half.fmin(r10, r14)
        e4m3 = fp8.to_e4m3(r15)
    word = lambda h: np.ascontiguousarray(h).view(np.uint32)[:, 0]  # noqa: E731
    want = np.stack([word(r8), word(r10), word(r8) << np.uint32(1), e4m3.view(np.uint16)[:, 0].astype(np.uint32),
                     word(r14), word(r15)], axis=1)
    assert np.array_equal(out["out"], want)
    assert record["unwritten_registers"] == []
