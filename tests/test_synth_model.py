"""The numpy model of enc2, stage by stage: f16 arithmetic rounded once, the fragment layouts of the
PTX ISA, and each epilogue's formula from the reference document checked on its own. The GPU test
runs the synthetic enc2 on the CUDA backend against the whole model."""

from __future__ import annotations

import math
import subprocess
import sys
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from rr.numerics import fp8, half, rounding
from rr.numerics.mma import mma_exact
from rr.synth import layout as L
from rr.synth import model

F16 = np.float16


def exact_f16(x: Fraction) -> np.float16:
    """Round an exact rational to f16, nearest even, by brute force over the neighbours."""
    approx = F16(float(x))
    cands = {approx, np.nextafter(approx, F16(np.inf)), np.nextafter(approx, F16(-np.inf))}
    best = min(cands, key=lambda c: (abs(Fraction(float(c)) - x), int(c.view(np.uint16)) & 1))
    return best


def test_fma_rounds_once_including_ties_broken_by_a_tiny_addend():
    rng = np.random.default_rng(0)
    a = rng.normal(0, 4, 2000).astype(F16)
    b = rng.normal(0, 4, 2000).astype(F16)
    c = rng.normal(0, 4, 2000).astype(F16)
    # a tie: 1 + 2^-11 is halfway between 1 and 1 + 2^-10; a tiny c decides the direction
    a = np.append(a, [F16(1 + 2 ** -10), F16(1 + 2 ** -10)])
    b = np.append(b, [F16(1 + 2 ** -10), F16(1 + 2 ** -10)])
    c = np.append(c, [F16(2 ** -24), F16(-(2 ** -24))])
    got = half.fma(a, b, c)
    want = [exact_f16(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))) for x, y, z in zip(a, b, c)]
    assert np.array_equal(got.view(np.uint16), np.array(want, dtype=F16).view(np.uint16))


def _fma_f64(a, b, c):
    """f16 fma as rr.numerics computed it before it took f32 (the specification of its bits): the
    product exact in f64, the sum rounded to odd in f64, then to f16."""
    x, y, z = half.f16_as_f64(a), half.f16_as_f64(b), half.f16_as_f64(c)
    with np.errstate(invalid="ignore", over="ignore"):
        return half.f16_of_f64(rounding.round_to_odd_sum(x * y, z))


def test_fma_in_f32_gives_the_bits_of_fma_in_f64():
    """half.fma rounds the f32 sum of the exact f32 product to odd; the same bits as rounding to odd
    in f64, on: every pair of special and boundary operands (zeros, subnormals, the normal
    extremes, infinities, quiet and signalling NaNs with payloads, both signs) with every addend
    of them; every f16 bit pattern as a, against shifted b and c; random operands whose product
    and addend are 8 to 40 binades apart; and ties: f32 sums at an f16 midpoint that the bits f32
    drops break either way (counted, and where rounding the f32 sum gives another f16)."""
    special = np.array([0x0000, 0x0001, 0x0002, 0x03FF, 0x0400, 0x0401, 0x3BFF, 0x3C00, 0x3C01, 0x3E00,
                        0x4000, 0x7BFF, 0x7C00, 0x7C01, 0x7D55, 0x7E00, 0x7FFF, 0x1400, 0x2C01, 0x5800],
                       np.uint16)
    special = np.concatenate([special, special | np.uint16(0x8000)]).view(F16)
    a, b, c = (x.ravel() for x in np.meshgrid(special, special, special, indexing="ij"))
    assert np.array_equal(half.fma(a, b, c).view(np.uint16), _fma_f64(a, b, c).view(np.uint16))
    every = np.arange(1 << 16, dtype=np.uint16).view(F16)
    for shift, other in ((1, 777), (4099, 32768), (20000, 123)):
        b, c = np.roll(every, shift), np.roll(every, other)
        assert np.array_equal(half.fma(every, b, c).view(np.uint16), _fma_f64(every, b, c).view(np.uint16))
    rng = np.random.default_rng(21)
    n = 1 << 19
    a = (rng.integers(1, 2048, n) * 2.0 ** rng.integers(-24, 6, n) * rng.choice([-1, 1], n)).astype(F16)
    b = (rng.integers(1, 2048, n) * 2.0 ** rng.integers(-24, 5, n)).astype(F16)
    p = np.abs(a.astype(np.float64) * b.astype(np.float64))
    with np.errstate(over="ignore"):  # some addends past f16's range: infinite
        c = (p * 2.0 ** rng.integers(8, 41, n) * rng.uniform(1, 2, n) * rng.choice([-1, 1], n)).astype(F16)
    # ties: c = ±(1 + j·2^-10)·2^e and a·b = 2^(e-11)·(1 − k²·2^-20), (1 + k·2^-10)(1 − k·2^-10) scaled:
    # the f32 sum is the f16 midpoint next to c, the dropped −k²·2^(e−31) deciding the rounding
    e, j, k = rng.integers(-10, 13, n), rng.integers(0, 1024, n), rng.integers(1, 12, n)
    tie_c = ((1 + j * 2.0 ** -10) * 2.0 ** e * rng.choice([-1, 1], n)).astype(F16)
    s1 = (e - 11) // 2
    tie_a = ((1 + k * 2.0 ** -10) * 2.0 ** s1 * rng.choice([-1, 1], n)).astype(F16)
    tie_b = ((1 - k * 2.0 ** -10) * 2.0 ** (e - 11 - s1)).astype(F16)
    a, b, c = np.concatenate([a, tie_a]), np.concatenate([b, tie_b]), np.concatenate([c, tie_c])
    assert np.array_equal(half.fma(a, b, c).view(np.uint16), _fma_f64(a, b, c).view(np.uint16))
    x, y, z = half.f16_as_f32(a), half.f16_as_f32(b), half.f16_as_f32(c)
    with np.errstate(over="ignore", invalid="ignore"):
        s = x * y + z  # the f32 sum, nearest: a tie where it is an f16 midpoint (normal) and inexact
        inexact = s.astype(np.float64) != x.astype(np.float64) * y.astype(np.float64) + z.astype(np.float64)
    mid = ((s.view(np.uint32) & np.uint32(0x1FFF)) == 0x1000) & (np.abs(s) >= 2.0 ** -14) & np.isfinite(s)
    ties = inexact & mid
    assert np.count_nonzero(ties) > 100000
    assert np.count_nonzero(half.f16_of_f32(s[ties]).view(np.uint16) != half.fma(a[ties], b[ties], c[ties]).view(np.uint16)) > 10000


def test_f16_casts_are_numpys_on_every_binade_and_tie():
    """half.f16_of_f32 / f16_of_f64 (an 11-bit split and a table, no element-wise f16 cast) give
    numpy's own cast: on every sign, exponent and 10-bit fraction of f32 with the lower 13 bits
    at a tie, either side of it, at the extremes and random — subnormal results, overflow to
    infinity, ±0 and NaNs included — and on f64 ties off by one f64 ulp. f16 → f32 and f64 as
    numpy's casts on all 65536 f16."""
    rng = np.random.default_rng(5)
    top = np.arange(1 << 19, dtype=np.uint32) << np.uint32(13)
    every = np.arange(1 << 16, dtype=np.uint16).view(F16)
    assert np.array_equal(half.f16_as_f32(every).view(np.uint32), every.astype(np.float32).view(np.uint32))
    assert np.array_equal(half.f16_as_f64(every).view(np.uint64), every.astype(np.float64).view(np.uint64))
    with np.errstate(over="ignore", invalid="ignore"):
        for low in (0, 1, 0x0FFF, 0x1000, 0x1001, 0x1FFF, rng.integers(0, 1 << 13, top.size, dtype=np.uint32)):
            x = (top | np.uint32(low) if np.isscalar(low) else top | low).view(np.float32)
            assert np.array_equal(half.f16_of_f32(x).view(np.uint16), x.astype(F16).view(np.uint16))
            x64 = x.astype(np.float64)
            for y in (x64, np.nextafter(x64, np.inf), np.nextafter(x64, -np.inf)):
                assert np.array_equal(half.f16_of_f64(y).view(np.uint16), y.astype(F16).view(np.uint16))


@pytest.mark.parametrize("op, exact", [(half.add, np.add), (half.sub, np.subtract), (half.mul, np.multiply)])
def test_f16_add_sub_mul_round_the_exact_result_once(op, exact):
    """Every f16 against shifted copies of every f16: the exact result (in f64) rounded once."""
    every = np.arange(1 << 16, dtype=np.uint16).view(F16)
    with np.errstate(over="ignore", invalid="ignore"):
        for shift in (1, 1000, 12345, 32768, 40000):
            other = np.roll(every, shift)
            want = exact(every.astype(np.float64), other.astype(np.float64)).astype(F16)
            got = op(every, other)
            same = (got.view(np.uint16) == want.view(np.uint16)) | (np.isnan(got) & np.isnan(want))
            assert same.all()


def test_e4m3_pack_saturates_and_rounds_to_nearest_even():
    x = np.array([500.0, -1e4, 448.0, 1.0625, 1.1875, 0.0], dtype=F16)
    got = fp8.from_e4m3(fp8.to_e4m3(x)).astype(np.float64)
    # 1.0625 is halfway between 1.0 and 1.125 (e4m3 has 3 mantissa bits): even is 1.0
    assert got.tolist() == [448.0, -448.0, 448.0, 1.0, 1.25, 0.0]


def test_mma_exact_is_the_exact_sum_rounded_once():
    rng = np.random.default_rng(1)
    a = fp8.to_e4m3(rng.normal(0, 2, (16, 32)).astype(F16))
    b = fp8.to_e4m3(rng.normal(0, 2, (32, 8)).astype(F16))
    c = rng.normal(0, 8, (16, 8)).astype(F16)
    got = mma_exact(a, b, c)
    av, bv = fp8.e4m3_values(a), fp8.e4m3_values(b)
    for i in range(16):
        for j in range(8):
            s = sum(Fraction(av[i, k]) * Fraction(bv[k, j]) for k in range(32)) + Fraction(float(c[i, j]))
            assert got[i, j].view(np.uint16) == exact_f16(s).view(np.uint16)


def test_sigma_is_the_a_fragment_order_of_packed_accumulators():
    """PTX ISA m16n8k32 e4m3: a0 holds row g, k = 4t…4t+3; packing accumulator n-tiles j, j+1
    (columns 8j+2t, 8j+2t+1 each) into one word must land on exactly those k."""
    assert sorted(L.SIGMA) == list(range(32))
    for t in range(4):
        word0 = [L.SIGMA[8 * j + 2 * t + e] for j in (0, 1) for e in (0, 1)]
        word2 = [L.SIGMA[8 * j + 2 * t + e] for j in (2, 3) for e in (0, 1)]
        assert word0 == [4 * t + i for i in range(4)]
        assert word2 == [16 + 4 * t + i for i in range(4)]


def encode_b(matrix: np.ndarray, phase: int, image: np.ndarray, slab: int = 0) -> None:
    """Write a (32k, 8n) matrix (k in fragment order) into the weight image the way the PTX ISA
    lays out B fragments: lane (g, t) holds column g, k = 4t+i (b0) and 16+4t+i (b1)."""
    lay = L.PHASES[phase]
    for s in range(lay.k):
        for nt in range(lay.n):
            tile = lay.b_tile(s, nt // 2)
            for lane in range(32):
                g, t = divmod(lane, 4)
                at = lay.b_offset + slab + 512 * tile + 16 * lane + 8 * (nt % 2)
                for i in range(4):
                    image[at + i] = matrix[32 * s + 4 * t + i, 8 * nt + g]
                    image[at + 4 + i] = matrix[32 * s + 16 + 4 * t + i, 8 * nt + g]


@pytest.mark.parametrize("phase", [1, 9, 13, 37, 38])
def test_b_operand_decodes_the_fragment_layout(phase):
    lay = L.PHASES[phase]
    rng = np.random.default_rng(phase)
    want = rng.integers(0, 256, (32 * lay.k, 8 * lay.n), dtype=np.uint8)
    image = np.zeros(L.WEIGHT_BYTES, np.uint8)
    encode_b(want, phase, image, lay.b_slab)
    assert np.array_equal(model.b_operand(image, phase, lay.b_slab), want)


def test_gemm_multiplies_in_channel_order_whatever_the_fragment_order():
    rng = np.random.default_rng(3)
    a = rng.integers(-3, 4, (16, 96)).astype(F16)
    w = rng.integers(-2, 3, (96, 32)).astype(F16)  # small integers: every sum exact in f16
    got = model.gemm(fp8.to_e4m3(a), model.to_fragment_order(fp8.to_e4m3(w), -2), F16(0), mma_exact)
    assert np.array_equal(got.astype(np.int64), a.astype(np.int64) @ w.astype(np.int64))


def test_row_sum_follows_the_lane_tree_then_the_butterfly():
    x = np.random.default_rng(4).normal(0, 100, 96).astype(F16)
    lane = [[x[8 * j + 2 * t + e] for j in range(12)] for t in range(4) for e in range(2)]
    v = {}
    for t in range(4):
        for e in range(2):
            vals = lane[2 * t + e]
            while len(vals) > 1:
                vals = [half.add(vals[i], vals[i + 1]) for i in range(0, len(vals) - 1, 2)] + \
                       ([vals[-1]] if len(vals) % 2 else [])
            v[t, e] = vals[0]
    halves = [half.add(half.add(v[0, e], v[1, e]), half.add(v[2, e], v[3, e])) for e in range(2)]
    assert model.row_sum(x).view(np.uint16) == half.add(halves[0], halves[1]).view(np.uint16)
    small = np.arange(96, dtype=F16) % 7
    assert float(model.row_sum(small)) == float(small.astype(np.float64).sum())


def test_rms_norm_has_no_mean_and_no_one_over_n():
    """A constant row: a mean-subtracting norm gives 0; this one gives gain·a/√(96a²+2^-13)."""
    x = np.full((1, 96), 0.5, F16)
    gain = np.full(96, 2.0, F16)
    out = model.rms_norm(x, gain).astype(np.float64)
    assert np.allclose(out, 2.0 * 0.5 / math.sqrt(96 * 0.25 + 2 ** -13), rtol=2e-3)


def test_cubic_exponent_is_the_documents_formula():
    x = np.array([-1e4, -20.0, -3.0, 0.0, 1.0, 7.5, 31.0, 1e4], dtype=F16)
    got = model.cubic_exponent(x).astype(np.float64)
    for xi, gi in zip(x.astype(np.float64), got):
        m = min(max(float(F16(xi * float(F16(np.float32(0.017186790704727173))))), -0.55615234375), 0.55615234375)
        t = float(F16(m * -m + 0.92724609375))
        u = float(F16(m * t + 1.375))
        frac_bits = int(F16(u).view(np.uint16)) & 0x3FF
        e, f = frac_bits >> 5, frac_bits & 31
        assert gi == 2.0 ** (e - 15) * (1 + f / 32)
    # no row maximum: shifting every score shifts nothing back — saturated rows stay saturated
    assert got[-1] == got[-2] or got[-1] > 0


def test_clamped_cubic_matches_the_document():
    x = np.array([-5.0, -2.0, -0.5, 0.0, 0.75, 2.0, 9.0], dtype=F16)
    got = model.clamped_cubic(x).astype(np.float64)
    assert got[0] == 0.0 and got[1] == 0.0  # g(−2) = 0
    assert got[5] == 2.0 and got[6] == 9.0  # g(+2) = 1: identity above 2
    y = 0.75
    assert abs(got[4] - 0.75 * (0.5 + y * (0.412109375 - 0.0810546875 * y))) < 2e-3


def test_score_bias_is_tile_major():
    image = np.zeros(L.WEIGHT_BYTES, np.uint8)
    # tile (m=1, n=3): 512·(4·(3>>1) + 1) = 2560 bytes in; word 2·(3&1) + 0 = 2 of lane (g=0, t=0)
    at = L.SCORE_BIAS + 2560 + 4 * 2
    image[at:at + 2] = np.array([3.5], F16).view(np.uint8)
    b = model.score_bias(image, 0)
    assert b[16 * 1 + 0, 8 * 3 + 0] == 3.5 and np.count_nonzero(b) == 1


def test_forward_is_deterministic_and_finite_on_a_partial_window():
    from rr.synth.inputs import frame_inputs, weight_image

    w = weight_image()
    img, tex = frame_inputs(13, 10)  # partial windows at the right and bottom edges
    a = model.forward(model.Enc2Inputs(w, img, tex))
    b = model.forward(model.Enc2Inputs(w, img, tex))
    for name in a:
        assert np.array_equal(a[name], b[name])
    assert a["arena"].shape == (3, 10, 13, 32) and a["half_out"].shape == (4, 5, 6, 32)
    for name in ("surface0", "surface1"):
        v = a[name].astype(np.float64)
        assert np.isfinite(v).all() and np.unique(v).size > 100
    vals = a["arena"].view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    assert np.isfinite(vals).all() and np.unique(vals).size > 50


@pytest.mark.gpu
def test_enc2_on_the_gpu_agrees_with_the_model(tmp_path, gpu):
    from rr.run.compare import compare_buffer
    from rr.run.launch import load_buffers, read_launch
    from rr.synth.inputs import write_enc2

    d = write_enc2(tmp_path / "e", (24, 16))
    r = subprocess.run([sys.executable, "-m", "rr.cli", "run", str(d / "launch"), "--backend", "cuda",
                        "-o", str(tmp_path / "gpu")], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    launch = read_launch(d / "launch")
    inp, gpu = load_buffers(d / "launch", launch), load_buffers(tmp_path / "gpu", launch)
    inputs = model.Enc2Inputs(inp["weights"], inp["input"], inp["texture"])
    ref = model.forward(inputs)  # the H200's mma and .approx functions (rr.numerics' defaults)
    exact = model.forward(inputs, mma=mma_exact)
    for name in ("arena", "half_out"):
        same, same_exact = float((gpu[name] == ref[name]).mean()), float((gpu[name] == exact[name]).mean())
        assert same > same_exact and same > 0.9, (name, same, same_exact)
    for name in ("surface0", "surface1", "surface2"):
        c = compare_buffer(name, gpu[name], ref[name], "float16")
        assert c.psnr_db is not None and c.psnr_db > 35, (name, c.psnr_db)
