"""The timing's ratio and its noise from the A/B rounds themselves: per instance pair
(`rr.run.timing.paired_ratio`) the trimmed mean of the rounds' ratios and a moving-block bootstrap
of the rounds for its spread, so that samples correlated in time (clocks, temperature, a
neighbour's load) widen the noise instead of hiding in it; over instance pairs
(`pairs_noise`) their geometric mean, with their spread in the noise, so that an offset fixed
by where one pair's memory and code lie is seen. Series here are simulated; the A/A series on the
H200 is a benchmark (benchmarks/timing_noise.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rr.run.timing import paired_ratio, pairs_noise


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


def _placed_pairs(seed: int, pairs: int, rounds: int, placement: float = 0.001, step_ms: float = 3.2e-5):
    """A/A rounds of a 95 µs launch on `pairs` instance pairs: each instance its own fixed offset
    (placement, relative sd `placement`), each sample 0.02 % of noise, events ticking in `step_ms`."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(pairs):
        offset = 1 + rng.normal(0, placement, 2)
        a, b = (np.round(0.095 * offset[i] * (1 + rng.normal(0, 2e-4, rounds)) / step_ms) * step_ms for i in (0, 1))
        out.append((list(a), list(b)))
    return out


def test_an_offset_fixed_per_instance_pair_enters_the_noise_of_the_pairs_mean():
    """What the H200's A/A series showed: each pair of allocations and module loads has its own
    offset of about 0.1 %, the same in all its rounds. One pair's bootstrap cannot see it (1 ± 2·noise
    in fewer than half of the series); eight pairs' spread does (in about 95 %)."""
    single = sum(abs(r - 1) <= 2 * n for r, n in (paired_ratio(*_placed_pairs(s, 1, 400)[0]) for s in range(100)))
    eight = [pairs_noise(_placed_pairs(s, 8, 50)) for s in range(100)]
    assert single < 50
    assert sum(abs(n.ratio - 1) <= 2 * n.noise for n in eight) >= 90
    assert all(len(n.ratios) == 8 for n in eight)


def test_a_ratio_below_the_timers_step_is_resolved_not_rounded_to_it():
    # events ticking in 0.5 % of the launch: the median of the rounds' ratios sticks to 1, the mean does not
    rng = np.random.default_rng(4)
    step = 0.0005
    a = np.round(0.1 * (1 + rng.normal(0, 0.004, 2000)) / step) * step
    b = np.round(0.1 * 1.002 * (1 + rng.normal(0, 0.004, 2000)) / step) * step
    ratio, noise = paired_ratio(list(a), list(b))
    assert float(np.median(b / a)) == 1.0
    assert abs(ratio - 1.002) < 3 * noise and noise < 0.0005


def test_one_instance_pair_gives_its_own_bootstrap_and_none_is_refused():
    (a, b), = _placed_pairs(3, 1, 100)
    one = pairs_noise([(a, b)])
    assert (one.ratio, one.noise, one.ratios) == (*paired_ratio(a, b), [paired_ratio(a, b)[0]])
    with pytest.raises(ValueError, match="no instance pairs"):
        pairs_noise([])


def test_the_floor_is_the_spread_of_where_pairs_lie_not_the_noise_of_their_rounds():
    """What stops a timing that more rounds cannot help: with each pair's placement offset of 1 %
    (the layer alone's spread on the H200 was 0.8 %) the pairs' standard error stays near
    1 %·t/√8 however many rounds there are (0.30–0.55 % in these series), and the floor finds it
    from 50 rounds a pair as from 400; with no placement offsets and noisy rounds the spread is the rounds' own noise, and the
    floor is a small share of it — a timing goes on sampling."""
    placed = [pairs_noise(_placed_pairs(s, 8, rounds, placement=0.01)) for s in range(20) for rounds in (50, 400)]
    for n in placed:
        assert n.floor >= 0.8 * n.between and n.within < 0.2 * n.between
        assert n.floored_over(0.002) and not n.floored_over(1.01 * n.floor)
    noisy = []
    for s in range(20):
        rng = np.random.default_rng(100 + s)
        noisy.append(pairs_noise([tuple(list(0.095 * (1 + rng.normal(0, 0.02, 50))) for _ in (0, 1)) for _ in range(8)]))
    assert np.median([n.floor / n.between for n in noisy]) < 0.5
    assert not any(n.floored_over(1e-6) for n in noisy)  # however low the target: more rounds help
    assert all(n.noise == max(n.between, n.within) for n in placed + noisy)
