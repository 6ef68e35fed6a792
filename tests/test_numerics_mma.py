"""The fp8 `mma` as the H200 computes it (`rr.numerics.mma_sync`, arch sm_90): two HMMA.16816 —
the k held in the registers' low halfwords first, then the high halfwords' accumulating on that,
each rounding once — and C added last. Pinned down by the H200's own outputs
(tests/data/probes/: 512 warps of random inputs) and by inputs whose result shows where the
roundings are."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from rr import numerics as nx
from rr.run.probe import replay

PROBES = Path(__file__).parent / "data/probes/mma_h200_random_512.npz"


def _probe_words():
    """The probe file as rr.run.probe reads a probe splice's words: (warps, 32, 10) uint32 — A's
    four registers, B's two, C's two, D's two — and the one mma's record."""
    z = np.load(PROBES)
    words = np.concatenate([np.ascontiguousarray(z[k]).view(np.uint32) for k in ("A", "B", "C", "D")], axis=-1)
    return words, {"mma": [{"A": [0, 1, 2, 3], "B": [4, 5], "C": [6, 7], "D": [8, 9]}]}


def test_the_sm90_model_is_bit_exact_on_every_h200_output_of_the_random_probes():
    words, record = _probe_words()
    result = replay(words, record, mma=nx.MMA_MODELS["sm_90"])
    assert result["elements"] == 512 * 128 and result["identical_share"] == 1.0, result
    # the data tells the models apart: one rounding of the whole sum does not match it
    exact = replay(words, record, mma=nx.mma_exact)
    assert exact["identical_share"] < 0.7 and exact["max_ulp"] >= 1, exact


def test_the_low_halfwords_are_summed_first():
    words, record = _probe_words()

    def high_first(a, b, c):  # the same two roundings, the halves the other way round
        return nx.mma_sync(a[..., _swap_halves()], b[..., _swap_halves(), :], c)

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
    d = nx.mma_sync(_codes(a), _codes(b), np.zeros((16, 8), dtype))
    assert d.dtype == dtype and d.shape == (16, 8)
    assert d[0, 0] == (1.0 if dtype == np.float16 else 1.0 + 2.0 ** -10)
    assert nx.mma_exact(_codes(a), _codes(b), np.zeros((16, 8), dtype))[0, 0] == 1.0 + 2.0 ** -10
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
    assert nx.mma_sync(_codes(a), _codes(b), c)[0, 0] == 1.0  # 1 + 2⁻¹¹: a tie, to even
    assert nx.mma_exact(_codes(a), _codes(b), c)[0, 0] == 1.0 + 2.0 ** -10


def test_batches_of_warps_and_refusals():
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 0x7E, (5, 16, 32), dtype=np.uint8), rng.integers(0, 0x7E, (5, 32, 8), dtype=np.uint8)
    c = rng.normal(size=(5, 16, 8)).astype(np.float16)
    whole = nx.mma_sync(a, b, c)
    assert whole.shape == (5, 16, 8)
    assert all(np.array_equal(whole[i].view(np.uint16), nx.mma_sync(a[i], b[i], c[i]).view(np.uint16)) for i in range(5))
    with pytest.raises(ValueError, match="sm_80"):
        nx.mma_sync(a, b, c, arch="sm_80")
    with pytest.raises(TypeError, match="int32"):
        nx.mma_sync(a, b, c.astype(np.int32))
