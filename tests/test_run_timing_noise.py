"""The timing's ratio and its noise from the A/B rounds themselves (`rr.run.timing.paired_ratio`):
the median of the rounds' ratios, and a moving-block bootstrap of the rounds for its spread, so
that samples correlated in time (clocks, temperature, a neighbour's load) widen the noise instead
of hiding in it. Series here are simulated; the A/A series on the H200 is a benchmark
(benchmarks/timing_noise.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rr.run.timing import paired_ratio


def _rounds(n: int, seed: int, ratio: float = 1.0, phi: float = 0.8, jitter: float = 0.004):
    """n rounds of two launches of 1 ms (the second `ratio` times as long): a slow drift both
    share, and on each launch its own AR(1) noise of correlation phi from one sample to the next."""
    rng = np.random.default_rng(seed)
    drift = 1 + 0.02 * np.sin(np.linspace(0, 3, n)) + np.cumsum(rng.normal(0, 2e-4, n))

    def ar1():
        e = np.empty(n)
        e[0] = rng.normal(0, jitter)
        for i in range(1, n):
            e[i] = phi * e[i - 1] + rng.normal(0, jitter * math.sqrt(1 - phi ** 2))
        return e

    return list(drift * (1 + ar1())), list(ratio * drift * (1 + ar1()))


def test_an_a_a_ratio_is_one_within_twice_its_noise_in_nine_of_ten_series():
    """Calibrated, not merely small: over 100 simulated A/A series with correlated samples
    (lag-1 correlation 0.5), ratio ± 2·noise holds 1 in about 90 % (a normal's 2σ: 95 %; the
    moving-block bootstrap of a median is known to run a little short, more so the more the
    rounds are correlated: 87 % at 0.8 in the same simulation)."""
    hits = sum(abs(ratio - 1) <= 2 * noise for ratio, noise in (paired_ratio(*_rounds(400, seed, phi=0.5))
                                                                 for seed in range(100)))
    assert hits >= 85


def test_correlated_samples_widen_the_noise_that_independent_ones_would_have():
    a, b = _rounds(400, 1, phi=0.9)
    shuffled = np.random.default_rng(2).permutation(400)
    _, correlated = paired_ratio(a, b)
    _, independent = paired_ratio(list(np.asarray(a)[shuffled]), list(np.asarray(b)[shuffled]))
    assert correlated > 1.5 * independent


def test_a_ratio_of_two_is_found_and_its_noise_shrinks_with_more_rounds():
    few = paired_ratio(*_rounds(100, 5, ratio=2.0, phi=0.0))
    many = paired_ratio(*_rounds(1600, 5, ratio=2.0, phi=0.0))
    for ratio, noise in (few, many):
        assert abs(ratio - 2) <= 3 * noise * ratio and 0 < noise < 0.01
    assert many[1] < few[1] / 2  # 16 times the rounds: about a quarter of the noise


def test_the_same_rounds_give_the_same_noise_and_bad_input_is_refused():
    a, b = _rounds(300, 7)
    assert paired_ratio(a, b) == paired_ratio(a, b)
    assert paired_ratio([1.0], [1.5]) == (1.5, math.inf)
    with pytest.raises(ValueError, match="3 and 2"):
        paired_ratio([1.0, 1.0, 1.0], [1.0, 1.0])
    with pytest.raises(ValueError):
        paired_ratio([], [])
