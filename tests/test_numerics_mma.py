"""The fp8 `mma` as the H200 computes it (`rr.numerics.mma.mma_sync`, arch sm_90): two HMMA.16816 —
the k held in the registers' low halfwords first, then the high halfwords' accumulating on that —
each aligning its products and the running T to the largest exponent, cutting them toward zero
25 bits below it and rounding once; C added last; NaN results canonical. Pinned down by the
H200's own outputs (tests/data/probes/: random inputs, and per adversarial design the warps that
tell the rules apart) and by inputs built so that their result shows one rule each."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from rr.numerics import fp8, rounding
from rr.numerics.mma import MMA_MODELS, SM90, HmmaRules, mma_exact, mma_hmma, mma_sync, mma_sync_many
from rr.run.probe import replay

DATA = Path(__file__).parent / "data/probes"
PROBES = DATA / "mma_h200_random_512.npz"
FORMS = {"f16": np.float16, "f32": np.float32}
BITS = {np.float16: np.uint16, np.float32: np.uint32}
# the model before the adversarial probes: each HMMA's sum exact, rounded to nearest, NaNs as IEEE
BEFORE = HmmaRules(width=None, f32="rn", canonical_nan=False)


def _probe_words():
    """The probe file as rr.run.probe reads a probe splice's words: (warps, 32, 10) uint32 — A's
    four registers, B's two, C's two, D's two — and the one mma's record."""
    z = np.load(PROBES)
    words = np.concatenate([np.ascontiguousarray(z[k]).view(np.uint32) for k in ("A", "B", "C", "D")], axis=-1)
    return words, {"mma": [{"A": [0, 1, 2, 3], "B": [4, 5], "C": [6, 7], "D": [8, 9]}]}


def test_the_sm90_model_is_bit_exact_on_every_h200_output_of_the_random_probes():
    words, record = _probe_words()
    result = replay(words, record, mma=MMA_MODELS["sm_90"])
    assert result["elements"] == 512 * 128 and result["identical_share"] == 1.0, result
    # the data tells the models apart: one rounding of the whole sum does not match it
    exact = replay(words, record, mma=mma_exact)
    assert exact["identical_share"] < 0.7 and exact["max_ulp"] >= 1, exact


def test_the_low_halfwords_are_summed_first():
    words, record = _probe_words()

    def high_first(a, b, c):  # the same two roundings, the halves the other way round
        return mma_sync(a[..., _swap_halves()], b[..., _swap_halves(), :], c)

    assert replay(words, record, mma=high_first)["identical_share"] < 0.9


def _swap_halves():
    """A k order that puts each register's high halfword where its low one was."""
    k = np.arange(32)
    return k ^ 2


def _codes(values) -> np.ndarray:
    return np.asarray(values, np.float32).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_each_hmma_rounds_before_the_next_one_adds_to_it(dtype):
    """Row 0: 1·1 at k = 0 and 2⁻⁹·2⁻² = 2⁻¹¹ at k = 1 (low halfwords), 2⁻¹¹ at k = 2 (high).
    The exact sum 1 + 2⁻¹⁰ is an f16; but 1 + 2⁻¹¹ is a tie that rounds to 1, and so is 1 + 2⁻¹¹
    again: the f16 form gives 1. In f32 nothing rounds: 1 + 2⁻¹⁰."""
    a = np.zeros((16, 32), np.float32)
    b = np.zeros((32, 8), np.float32)
    a[0, :3] = 1.0, 2.0 ** -9, 2.0 ** -9
    b[:3, 0] = 1.0, 0.25, 0.25
    d = mma_sync(_codes(a), _codes(b), np.zeros((16, 8), dtype))
    assert d.dtype == dtype and d.shape == (16, 8)
    assert d[0, 0] == (1.0 if dtype == np.float16 else 1.0 + 2.0 ** -10)
    assert mma_exact(_codes(a), _codes(b), np.zeros((16, 8), dtype))[0, 0] == 1.0 + 2.0 ** -10
    assert not d.ravel()[1:].any()


def test_c_is_added_after_both_products_in_the_accumulators_type():
    """C = 2⁻¹¹ beside a product of 1: added to 1 in one f16 rounding it is a tie (1); an
    accumulator that started from C would carry it into the next product's sum instead."""
    a = np.zeros((16, 32), np.float32)
    b = np.zeros((32, 8), np.float32)
    a[0, [0, 2]] = 1.0, 2.0 ** -9
    b[[0, 2], 0] = 1.0, 0.25  # low: 1; high: 2⁻¹¹ → 1 + 2⁻¹¹ → 1
    c = np.zeros((16, 8), np.float16)
    c[0, 0] = 2.0 ** -11
    assert mma_sync(_codes(a), _codes(b), c)[0, 0] == 1.0  # 1 + 2⁻¹¹: a tie, to even
    assert mma_exact(_codes(a), _codes(b), c)[0, 0] == 1.0 + 2.0 ** -10


def test_batches_of_warps_and_refusals():
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 0x7E, (5, 16, 32), dtype=np.uint8), rng.integers(0, 0x7E, (5, 32, 8), dtype=np.uint8)
    c = rng.normal(size=(5, 16, 8)).astype(np.float16)
    whole = mma_sync(a, b, c)
    assert whole.shape == (5, 16, 8)
    assert all(np.array_equal(whole[i].view(np.uint16), mma_sync(a[i], b[i], c[i]).view(np.uint16)) for i in range(5))
    with pytest.raises(ValueError, match="sm_80"):
        mma_sync(a, b, c, arch="sm_80")
    with pytest.raises(TypeError, match="int32"):
        mma_sync(a, b, c.astype(np.int32))


# -- the H200's probes of both forms, per input design (tools/mma_probes.py made them) -----

def _probes(form: str) -> dict:
    z = np.load(DATA / f"mma_h200_{form}.npz")
    return {k: z[k] for k in z.files}


def _wrong(p: dict, rules: HmmaRules = SM90) -> dict[str, int]:
    """Per design: the outputs whose bits the model with `rules` does not reproduce."""
    d = mma_hmma(p["A"], p["B"], p["C"], rules)
    bits = BITS[d.dtype.type]
    bad = (d.view(bits) != p["D"].view(bits)).reshape(len(d), -1).sum(1)
    return {str(name): int(bad[p["design"] == i].sum()) for i, name in enumerate(p["designs"]) if (p["design"] == i).any()}


@pytest.mark.parametrize("form", FORMS)
def test_the_sm90_model_is_bit_exact_on_every_design_of_the_h200_probes(form):
    p = _probes(form)
    assert len(set(p["design"].tolist())) == len(p["designs"]) == 11  # random and all ten adversarial designs
    d = mma_sync(p["A"], p["B"], p["C"])
    assert d.dtype == FORMS[form] and np.array_equal(d.view(BITS[d.dtype.type]), p["D"].view(BITS[d.dtype.type]))
    assert set(_wrong(p).values()) == {0}


@pytest.mark.parametrize("form", FORMS)
def test_the_model_before_the_adversarial_probes_fails_on_them(form):
    """Exact HMMA sums rounded to nearest and IEEE NaNs: right on random inputs, wrong on every
    design with NaNs and, in f32, on every design with wide exponent spreads."""
    wrong = _wrong(_probes(form), BEFORE)
    assert wrong["random"] == 0
    failing = {"all_codes", "overflow", "nan_inputs", "spread", "three_terms"} | \
        ({"two_terms", "big_and_small"} if form == "f32" else set())
    assert {name for name, n in wrong.items() if n} == failing, wrong


# each rule of the model changed on its own, and the designs of each form on which the H200 tells
@pytest.mark.parametrize("form, change, failing", [
    ("f32", {"width": 24}, {"all_codes", "spread", "two_terms", "three_terms", "big_and_small"}),
    ("f32", {"width": 26}, {"all_codes", "spread", "two_terms", "three_terms", "big_and_small"}),
    ("f16", {"width": 24}, {"all_codes", "spread", "three_terms", "big_and_small"}),
    ("f16", {"width": 26}, {"all_codes", "spread", "three_terms"}),
    ("f32", {"exponent": "value"}, {"all_codes", "spread", "two_terms", "three_terms"}),
    ("f16", {"exponent": "value"}, {"spread"}),
    ("f32", {"cut": "rm"}, {"all_codes", "spread", "two_terms", "three_terms", "cancel"}),
    ("f16", {"cut": "rm"}, {"all_codes", "spread", "three_terms"}),
    ("f32", {"f32": "rn"}, {"all_codes", "spread", "two_terms", "three_terms", "big_and_small"}),
    ("f16", {"f16": "rz"}, {"all_codes", "spread", "two_terms", "three_terms", "big_and_small", "cancel",
                            "overflow", "subnormal", "nan_inputs", "c_dominates", "random"}),
    ("f32", {"canonical_nan": False}, {"all_codes", "overflow", "nan_inputs"}),
    ("f16", {"canonical_nan": False}, {"all_codes", "overflow", "nan_inputs"}),
], ids=lambda v: str(v) if not isinstance(v, set) else "")
def test_each_rule_is_what_the_h200_computes(form, change, failing):
    """The alignment width (25 bits below the largest exponent), a product's exponent (ea + eb),
    the cut (toward zero), the HMMA's rounding (toward zero in f32, to nearest in f16) and the
    canonical NaN: changing any one makes the model wrong on the designs that isolate it."""
    wrong = _wrong(_probes(form), dataclasses.replace(SM90, **change))
    assert {name for name, n in wrong.items() if n} == failing, wrong


@pytest.mark.parametrize("form", FORMS)
def test_a_nan_result_is_the_canonical_nan_whatever_nan_made_it(form):
    """NaN codes in A or B, NaN C of any sign and payload, inf - inf: D is 0x7FFF / 0x7FFFFFFF."""
    p = _probes(form)
    bits = BITS[FORMS[form]]
    nan = np.isnan(p["D"])
    c_payloads = np.unique(p["C"].view(bits)[np.isnan(p["C"])])
    assert nan.sum() > 1000 and len(c_payloads) >= 5 and np.isnan(p["C"][~nan]).sum() == 0
    assert set(np.unique(p["D"].view(bits)[nan]).tolist()) == {rounding.CANONICAL_NAN[form]}


def test_an_f16_hmma_sum_past_65504_is_infinite_before_the_second_half_adds():
    """The first HMMA's sum rounds to ±inf in f16 (no extra range carried to the second): where
    the high halfwords' products would bring the whole sum back below 65504, the H200 gives inf
    (or NaN with an opposite infinite C)."""
    p = _probes("f16")
    av, bv = fp8.e4m3_values(p["A"]), fp8.e4m3_values(p["B"])
    low = (np.arange(32) % 4) < 2
    first = np.matmul(av[..., low], bv[..., low, :])
    whole = first + np.matmul(av[..., ~low], bv[..., ~low, :])
    back = np.isfinite(whole) & (np.abs(first) >= 65520) & (np.abs(whole) < 65504) & np.isfinite(p["C"])
    assert back.sum() > 100
    assert np.isinf(p["D"][back]).all() and (np.sign(p["D"][back]) == np.sign(first[back])).all()


def _one_output(products_low, products_high=(), c=0.0, dtype=np.float32):
    """D[0, 0] for A row 0 and B column 0 holding the given (a, b) factor pairs at the low
    halfwords' k (0, 1, 4, 5, …) and the high ones' (2, 3, 6, 7, …); every other element zero."""
    a = np.zeros((16, 32), np.float32)
    b = np.zeros((32, 8), np.float32)
    ks = np.arange(32)
    for pairs, slots in ((products_low, ks[ks % 4 < 2]), (products_high, ks[ks % 4 >= 2])):
        for k, (x, y) in zip(slots, pairs):
            a[0, k], b[k, 0] = x, y
    cc = np.zeros((16, 8), dtype)
    cc[0, 0] = c
    return lambda rules=SM90: mma_hmma(_codes(a), _codes(b), cc, rules)[0, 0]


def test_the_f32_hmma_cuts_25_bits_below_the_largest_products_exponent_toward_zero():
    """256·256 − 240·256 + 1.5·2⁻⁹ = 4096 + 1.5·2⁻⁹ (an f32): the largest product's exponent is
    8 + 8, so the small term is cut to a multiple of 2^(16 − 25) = 2⁻⁹: 4096 + 2⁻⁹; negative, it
    is cut toward zero: 4096 − 2⁻⁹ (toward −inf would give 4096 − 2⁻⁸)."""
    small = (1.5 * 2.0 ** -5, 2.0 ** -4)
    d = _one_output([(256.0, 256.0), (-240.0, 256.0), small])
    assert d() == 4096 + 2.0 ** -9
    assert d(dataclasses.replace(SM90, width=26)) == d(BEFORE) == 4096 + 1.5 * 2.0 ** -9
    assert d(dataclasses.replace(SM90, width=24)) == 4096
    neg = _one_output([(256.0, 256.0), (-240.0, 256.0), (-small[0], small[1])])
    assert neg() == 4096 - 2.0 ** -9 and neg(dataclasses.replace(SM90, cut="rm")) == 4096 - 2.0 ** -8


def test_a_products_exponent_is_the_sum_of_its_factors_exponents():
    """448·448 = 1.53·2¹⁷ has factors of exponent 8: it aligns at 2¹⁶, not at its leading bit 2¹⁷.
    With −448·448 beside it only the small 1.5·2⁻⁹ is left, cut at 2⁻⁹ (at 2⁻⁸ it would vanish)."""
    d = _one_output([(448.0, 448.0), (-448.0, 448.0), (1.5 * 2.0 ** -5, 2.0 ** -4)])
    assert d() == 2.0 ** -9 and d(dataclasses.replace(SM90, exponent="value")) == 0


def test_the_running_t_is_aligned_and_cut_with_the_second_hmmas_products():
    """The first HMMA's T = 1.5·2⁻⁹ enters the second HMMA as one more term: cut at 2⁻⁹ beside
    256·256 − 240·256, not added exactly afterwards."""
    d = _one_output([(1.5 * 2.0 ** -5, 2.0 ** -4)], [(256.0, 256.0), (-240.0, 256.0)])
    assert d() == 4096 + 2.0 ** -9 and d(BEFORE) == 4096 + 1.5 * 2.0 ** -9


def test_the_f32_hmma_rounds_toward_zero_and_the_f16_one_to_nearest():
    """2¹⁶ + 1.5·2⁻⁸ is 2¹⁶ and 0.75 of an f32 ulp (2⁻⁷): cut down to 2¹⁶. 240·256 + 240·0.25 =
    61440 + 60 is 61440 and 1.875 of an f16 ulp (32): to nearest, 61504 (toward zero 61472)."""
    f32 = _one_output([(256.0, 256.0), (1.5 * 2.0 ** -4, 2.0 ** -4)])
    assert f32() == 65536 and f32(dataclasses.replace(SM90, f32="rn")) == 65536 + 2.0 ** -7
    f16 = _one_output([(240.0, 256.0), (240.0, 0.25)], dtype=np.float16)
    assert f16() == 61504 and f16(dataclasses.replace(SM90, f16="rz")) == 61472


def test_nan_and_infinity_rules_on_built_inputs():
    nan16, nan32 = rounding.CANONICAL_NAN["f16"], rounding.CANONICAL_NAN["f32"]
    payload = np.uint32(0xFFC00001).view(np.float32)  # a negative NaN with a payload
    assert _one_output([(1.0, 1.0)], c=payload)().view(np.uint32) == nan32
    big = [(448.0, 448.0)] * 16  # the first f16 HMMA: 3.2e6 → +inf
    assert _one_output(big, dtype=np.float16)() == np.inf
    assert _one_output(big, c=-np.inf, dtype=np.float16)().view(np.uint16) == nan16  # inf − inf
    back = _one_output(big, [(-448.0, 448.0)] * 16, dtype=np.float16)
    assert back() == np.inf  # the second half's −3.2e6 does not bring it back to 0
    a, b = _codes([[448.0] * 32] + [[0.0] * 32] * 15), _codes([[448.0] * 8 if k % 4 < 2 else [-448.0] * 8 for k in range(32)])
    assert mma_exact(a, b, np.zeros((16, 8), np.float16))[0, 0] == 0  # one rounding of the whole sum: 0


def _small_codes(rng, shape, top: int) -> np.ndarray:
    """Random e4m3 codes of both signs with magnitude codes below `top` (no NaN)."""
    return (rng.integers(0, top, shape, dtype=np.uint8) | (rng.integers(0, 2, shape, dtype=np.uint8) << 7)).astype(np.uint8)


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_where_no_product_can_reach_the_cut_each_hmma_is_its_exact_sum_rounded(dtype):
    """Codes below 2^3·1.875 in A and 2^1·1.875 in B: every product's exponent ea + eb <= 4, under
    width - 18 = 7, so nothing is cut and D is the exact low-halfword sum rounded to the
    accumulator's type (f16 nearest, f32 toward zero), plus the high halfwords' products, rounded
    again, plus C rounded to nearest — computed here output by output, for a batch of 1300 warps
    (the model takes them 512 at a time)."""
    rng = np.random.default_rng(7)
    a, b = _small_codes(rng, (1300, 16, 32), 0x58), _small_codes(rng, (1300, 32, 8), 0x48)
    c = rng.normal(0, 40, (1300, 16, 8)).astype(dtype)
    av, bv = fp8.e4m3_values(a), fp8.e4m3_values(b)
    low = (np.arange(32) % 4) < 2

    def rounded(s):
        r = s.astype(dtype)
        if dtype == np.float32:  # toward zero
            r = np.where(np.abs(r.astype(np.float64)) > np.abs(s), np.nextafter(r, dtype(0)), r)
        return r.astype(np.float64)
    t = rounded(np.einsum("wik,wkj->wij", av[..., low], bv[:, low]) + 0.0)
    t = rounded(np.einsum("wik,wkj->wij", av[..., ~low], bv[:, ~low]) + t + 0.0)
    want = (t + c.astype(np.float64)).astype(dtype)
    got = mma_sync(a, b, c)
    assert np.array_equal(got.view(BITS[dtype]), want.view(BITS[dtype]))


def test_warps_whose_products_may_be_cut_and_warps_whose_cannot_give_what_each_gives_alone():
    """A batch mixing warps of small codes (each HMMA one exact matmul) with warps of the full
    range, NaN codes and a C past the f16 range: every warp's D is what it gives on its own."""
    rng = np.random.default_rng(8)
    small = (_small_codes(rng, (600, 16, 32), 0x50), _small_codes(rng, (600, 32, 8), 0x50))
    full = (rng.integers(0, 256, (600, 16, 32), dtype=np.uint8), rng.integers(0, 256, (600, 32, 8), dtype=np.uint8))
    a, b = np.concatenate([small[0], full[0]]), np.concatenate([small[1], full[1]])
    order = rng.permutation(1200)
    a, b = a[order], b[order]
    c = rng.normal(0, 4, (1200, 16, 8)).astype(np.float16)
    c[::7, 3, 5] = np.inf
    whole = mma_sync(a, b, c)
    alone = np.stack([mma_sync(a[i], b[i], c[i]) for i in range(0, 1200, 37)])
    assert np.array_equal(whole[::37].view(np.uint16), alone.view(np.uint16))


@pytest.mark.parametrize("period, shared_a", [(1, False), (4, False), (4, True), (8, True)])
def test_warps_that_share_b_or_a_tiles_give_what_each_gives_alone(period, shared_a):
    """The interpreter's warps come in blocks whose weight tiles repeat from block to block (B of
    warp w is that of w mod P, one tile for all at P = 1) and whose warps may share one A: the
    model multiplies such warps as one product of many rows, and every warp's D is still what it
    gives on its own (1100 warps: the last chunk of 512 is short)."""
    rng = np.random.default_rng(9 + period)
    n = 1100 if period == 1 else 1104
    b = np.tile(_small_codes(rng, (period, 32, 8), 0x50), (n // period, 1, 1))
    a = _small_codes(rng, (n // period if shared_a else n, 16, 32), 0x58)
    a = np.repeat(a, period, axis=0) if shared_a else a
    c = rng.normal(0, 4, (n, 16, 8)).astype(np.float16)
    whole = mma_sync(a, b, c)
    alone = np.stack([mma_sync(a[i], b[i], c[i]) for i in range(0, n, 23)])
    assert np.array_equal(whole[::23].view(np.uint16), alone.view(np.uint16))


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_one_a_times_several_b_gives_what_each_mma_gives(dtype):
    """`mma_sync_many` (the cpu backend's runs of mma with one A): A's values gathered once for
    several (B, C) — B tiles shared by all warps, repeating every four warps (with A shared by
    each four, or not), every warp its own, codes whose products may be cut, NaN codes, an
    infinite C —
    give each D that `mma_sync` gives (1100 warps: three chunks, the last short)."""
    rng = np.random.default_rng(12)
    n = 1100
    a = np.repeat(_small_codes(rng, (n // 4, 16, 32), 0x58), 4, axis=0)
    bs = [np.tile(_small_codes(rng, (1, 32, 8), 0x48), (n, 1, 1)),
          np.tile(_small_codes(rng, (4, 32, 8), 0x48), (n // 4, 1, 1)),
          _small_codes(rng, (n, 32, 8), 0x48),
          rng.integers(0, 256, (n, 32, 8), dtype=np.uint8),
          _small_codes(rng, (n, 32, 8), 0x70)]
    cs = [rng.normal(0, 4, (n, 16, 8)).astype(dtype) for _ in bs]
    cs[2][::9, 1, 2] = np.inf
    bs[4][::13, 5, 3] = 0x7F
    mixed = np.where(rng.random((n, 1, 1)) < 0.1, rng.integers(0, 256, (n, 16, 32), dtype=np.uint8), a)
    for a_ in (a, _small_codes(rng, (n, 16, 32), 0x58), mixed):
        many = mma_sync_many(a_, bs, cs)
        for b, c, d in zip(bs, cs, many):
            assert d.dtype == dtype
            assert np.array_equal(d.view(BITS[dtype]), mma_sync(a_, b, c).view(BITS[dtype]))


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_a_zero_sum_of_negative_products_is_plus_zero(dtype):
    """Products that are all −0 (A's −0 codes times B's positive ones) sum to +0 in each HMMA
    (the aligned sum is fixed point: it has no −0), so D = +0 + C is +0 for C = −0 — for one warp
    and for a batch whose warps share B (the matmul path of every chunk)."""
    for n in (1, 600):
        a = np.full((n, 16, 32), 0x80, np.uint8)
        b = np.full((n, 32, 8), 0x38, np.uint8)  # 1.0
        c = np.full((n, 16, 8), -0.0, dtype)
        d = mma_sync(a, b, c)
        assert not np.signbit(d).any() and not d.any()
        many = mma_sync_many(a, [b, b], [c, c])
        assert all(not np.signbit(x).any() and not x.any() for x in many)


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_swapped_and_transposed_operands_give_the_transposed_d_bit_for_bit(dtype):
    # D' = Bᵀ·Aᵀ + Cᵀ over a 16-column B (two n-tiles: Bᵀ fills an A) and each 8-row half of A
    # (Aᵀ's half is a B): every output is the same 32 products at the same k, so the same HMMA
    # halves and the same bits — wide spreads (e4m3 of normals at 0.01–30) and C up to ±inf
    rng = np.random.default_rng(11)
    for trial in range(40):
        scale = (0.01, 1.0, 30.0)[trial % 3]
        a, b = ((rng.standard_normal(s) * scale).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
                for s in ((16, 32), (32, 16)))
        c = (rng.standard_normal((16, 16)) * 100 * scale).astype(np.float16).astype(dtype)
        c[trial % 16, 3] = np.inf
        d = np.concatenate([mma_sync(a, b[:, :8], c[:, :8]), mma_sync(a, b[:, 8:], c[:, 8:])], axis=1)
        for h in (0, 1):
            rows = slice(8 * h, 8 * h + 8)
            swapped = mma_sync(np.ascontiguousarray(b.T), np.ascontiguousarray(a[rows].T),
                               np.ascontiguousarray(c[rows].T))
            assert np.array_equal(swapped.view(BITS[dtype]), np.ascontiguousarray(d[rows].T).view(BITS[dtype]))
