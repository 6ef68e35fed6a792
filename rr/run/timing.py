"""Timing a launch against another, in the manner of NVBench.

Each side is prepared as several instances (separately loaded modules, separately allocated
buffers), so that where a launch's code and memory happen to lie — an offset that is the same for
every round of one instance and that no statistic of its rounds can see — varies between instances
and enters the noise. The two sides of one instance pair share its buffers where they launch the
same buffers (the same files, as a splice and its reference do): each pair's rounds then compare
the two codes on one placement of the data, and the placements vary from pair to pair; each side
always loads its own modules. In the GPU worker the first side's instances are kept from one
timing of it to the next (a sweep times every splice against one reference), their buffers
restored from the files' bytes before each. After a short warm-up (every instance launched, at least 20 ms of
launches) the rounds visit the instance pairs in turn, each pair sampled A B, then B A at its next
visit, so that a slow drift (clocks, temperature) falls on both alike and neither side always goes
first. Before every sample the L2 cache is flushed by a memset of an L2-sized buffer; each sample
is the time between two CUDA events around the one launch. After each sample the SM clock is read
(NVML) and a sample taken while the clock was below 90 % of the highest seen is dropped and counted
as throttled, and so is the other sample of its round.

The ratio of one instance pair is the trimmed mean of its rounds' ratios (B's sample over A's,
both taken within microseconds of each other, so that what drifts cancels): a mean, not a median,
because the events tick in steps of tens of ns and the median of quantised ratios sticks to one
step; trimmed, so that a stray sample does not move it. Its noise is the spread of that mean over
a moving-block bootstrap of the pair's rounds (blocks of consecutive rounds keep the samples'
correlation in time). The ratio is the geometric mean of the pairs' ratios; its noise the larger
of the pairs' standard error (their spread over √pairs, widened by Student's t for the few pairs
there are) and what the bootstraps give. Sampling stops when that noise is under the target (and
there are enough rounds); or when the pairs' spread alone keeps it over the target while the
bootstraps' part is already small beside it — more rounds do not move where the instances happen
to lie, so the noise would stay where it is until the time limit (`stop` says which); or at the
time limit.
"""

from __future__ import annotations

import ctypes
import math
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from rr.records import Status
from rr.run.cuda import PreparedLaunch, Resident, device_info, directory_identity, file_identity, read_resident


class _Nvml:
    """The SM clock of the device being timed through libnvidia-ml, when it can be loaded. NVML
    ignores CUDA_VISIBLE_DEVICES, so the device is found by the UUID the CUDA driver gives it."""

    def __init__(self, uuid: str | None):
        self.handle = None
        try:
            self.lib = ctypes.CDLL("libnvidia-ml.so.1")
            if self.lib.nvmlInit_v2() != 0:
                return
            handle = ctypes.c_void_p()
            found = (self.lib.nvmlDeviceGetHandleByUUID(uuid.encode(), ctypes.byref(handle)) if uuid
                     else self.lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(handle)))
            if found == 0:
                self.handle = handle
        except OSError:
            pass

    def driver_version(self) -> str | None:
        if self.handle is None:
            return None
        buf = ctypes.create_string_buffer(96)
        return buf.value.decode() if self.lib.nvmlSystemGetDriverVersion(buf, 96) == 0 else None

    def sm_clock_mhz(self) -> int | None:
        if self.handle is None:
            return None
        mhz = ctypes.c_uint()
        ok = self.lib.nvmlDeviceGetClockInfo(self.handle, 1, ctypes.byref(mhz)) == 0  # 1 = SM clock
        return mhz.value if ok else None


@dataclass
class Series:
    median_ms: float
    min_ms: float
    max_ms: float
    noise: float  # standard error of the median / median
    samples: int
    throttled: int


def _series(samples: list[float], throttled: int) -> Series:
    n = len(samples)
    med = statistics.median(samples)
    sd = statistics.stdev(samples) if n > 1 else math.inf
    return Series(med, min(samples), max(samples), 1.2533 * sd / math.sqrt(n) / med if n > 1 else math.inf,
                  n, throttled)


class AllThrottled(RuntimeError):
    """No round of samples was taken at full clock."""


BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 0  # the same samples give the same noise
TRIM = 0.1  # the share of the rounds' ratios dropped at each end before their mean
INSTANCES = 8  # instance pairs per timing, fewer when the device has not the memory
# rounds before a timing may stop: the A/A series on the H200 stay within 1 ± 2·noise in 19–20 of
# 20 from 4 rounds a pair on (docs/benchmarks.md), the pairs' spread being most of the noise
MIN_ROUNDS_PER_PAIR = 4
MIN_ROUNDS = 32
WARMUP_S = 0.02  # at least this long of warm-up launches (and every instance once)
# Student's t at 97.5 % for 1..15 degrees of freedom, over the normal's 1.96: how much wider than
# one standard error a pairs' mean is uncertain when the spread comes from so few of them
_T_975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131)


def _trimmed_mean(x: np.ndarray, axis: int = -1) -> np.ndarray:
    k = int(TRIM * x.shape[axis])
    x = np.sort(x, axis=axis)
    return np.take(x, np.arange(k, x.shape[axis] - k), axis=axis).mean(axis=axis)


def paired_ratio(a: list[float], b: list[float], resamples: int = BOOTSTRAP_RESAMPLES,
                 seed: int = BOOTSTRAP_SEED) -> tuple[float, float]:
    """(ratio, relative noise) of one instance pair's rounds: the trimmed mean of b[i] / a[i], and
    the standard deviation of that mean over a moving-block bootstrap of the rounds, over the
    ratio. A block is n^(1/3) consecutive rounds (the usual length), or twice the series'
    correlation time where that is longer — (1 + ρ)/(1 − ρ) for the lag-1 autocorrelation ρ of the
    rounds' ratios, as for an AR(1) series — so that blocks hold what is correlated (at most a
    quarter of the rounds). Fewer than two rounds: the noise is infinite."""
    if len(a) != len(b) or not a:
        raise ValueError(f"paired samples of equal, non-zero length, not {len(a)} and {len(b)}")
    r = np.asarray(b, np.float64) / np.asarray(a, np.float64)
    ratio = float(_trimmed_mean(r))
    n = r.size
    if n < 2:
        return ratio, math.inf
    block = min(max(1, n // 4), max(round(n ** (1 / 3)), math.ceil(2 * _correlation_time(r))))
    starts = np.random.default_rng(seed).integers(0, n - block + 1, (resamples, -(-n // block)))
    index = (starts[:, :, None] + np.arange(block)).reshape(resamples, -1)[:, :n]
    means = _trimmed_mean(r[index], axis=1)
    return ratio, float(np.std(means, ddof=1) / ratio)


@dataclass(frozen=True)
class PairsNoise:
    """What the instance pairs' rounds say of the ratio (`pairs_noise`)."""

    ratio: float  # the geometric mean of the pairs' ratios
    between: float  # their standard error, Student-widened (0 for one pair: placement unseen)
    within: float  # the bootstraps' noise of their mean
    ratios: list  # each pair's ratio
    # what `between` would come to with endless rounds: the pairs' spread less what their rounds'
    # own noise adds to it (the pairs' variance is that of where they lie plus that of each mean)
    floor: float

    @property
    def noise(self) -> float:
        return max(self.between, self.within)

    def floored_over(self, target: float) -> bool:
        """Whether more rounds would leave the noise over `target`: the floor is over it, and the
        rounds' own noise is already under half the pairs' spread (so that the floor, estimated
        from that difference, is not a chance low reading of noisy rounds)."""
        return self.floor >= target and self.within <= 0.5 * self.between


def pairs_noise(pairs: list[tuple[list[float], list[float]]], resamples: int = BOOTSTRAP_RESAMPLES,
                seed: int = BOOTSTRAP_SEED) -> PairsNoise:
    """The ratio over instance pairs, each (a, b) its rounds' paired samples: the geometric mean of
    the pairs' ratios (`paired_ratio`); its noise the larger of their standard error — the spread of
    their logarithms over √pairs, times t(97.5 %)/1.96 for pairs − 1 degrees of freedom, so that
    ratio ± 2·noise is about a 95 % interval even from a few pairs — and the bootstraps' noise of
    the mean."""
    if not pairs:
        raise ValueError("no instance pairs")
    each = [paired_ratio(a, b, resamples, seed) for a, b in pairs]
    logs = np.log([r for r, _ in each])
    within = math.sqrt(sum(n * n for _, n in each)) / len(each)
    between = floor = 0.0
    if len(each) > 1:
        widen = _T_975[min(len(each) - 2, len(_T_975) - 1)] / 1.96
        between = float(np.std(logs, ddof=1) / math.sqrt(len(each)) * widen)
        floor = math.sqrt(max(0.0, between ** 2 - (widen * within) ** 2))
    return PairsNoise(float(np.exp(logs.mean())), between, within, [r for r, _ in each], floor)


def _correlation_time(x: np.ndarray) -> float:
    """(1 + ρ)/(1 − ρ) for the lag-1 autocorrelation ρ of x (taken in [0, 0.98]): how many
    consecutive samples count as one, were x an AR(1) series."""
    d = x - x.mean()
    var = float(d @ d)
    rho = min(max(float(d[1:] @ d[:-1]) / var, 0.0), 0.98) if var > 0 else 0.0
    return (1 + rho) / (1 - rho)


class _Side:
    """One side of a timing: its launch (or frame) read once; `instance()` makes one more copy of
    it ready on the device — its own module loads, and its own buffers unless given another
    instance's — to be launched again and again. The buffers' bytes are read and uploaded once
    (`Resident`, shared by both sides: what the two share as files is read once, and in the GPU
    worker what earlier jobs read is there already) and each instance's copied from there on the
    device."""

    def __init__(self, directory: str, resident: Resident):
        self.directory = directory
        self.frame, self.launch, self.arrays, self.sources = read_resident(directory, resident)
        self.buffers = (self.frame or self.launch).buffers
        # what the instances are made of, as it is now: the directory, every file in it and every
        # buffer file it names (which may lie elsewhere)
        self.key = (directory_identity(directory),
                    tuple(sorted((n, file_identity(Path(directory) / b.file)) for n, b in self.buffers.items())))

    def launches_buffers_of(self, other: "_Side") -> bool:
        """Whether this side launches the same buffers as `other`: the same names, files, roles and
        formats, holding the same bytes (one resident array: one file, as a splice's hard links
        and its reference's are)."""
        return self.buffers == other.buffers and all(self.arrays[n] is other.arrays[n] for n in self.buffers)

    def instance(self, device=None):
        from rr.run.cuda import DeviceBuffers, PreparedFrame

        device = device or DeviceBuffers(dict(self.arrays), self.sources)
        if self.frame:
            return PreparedFrame(self.directory, self.frame, device=device)
        return PreparedLaunch(self.directory, self.launch, device)


def _device_memory() -> tuple[int, int]:
    """(bytes free for new allocations, bytes taken): the driver's free memory and what cupy's
    pool holds unused — a long-lived worker keeps its pool's blocks from one job to the next —
    and what is allocated, in the pool or outside it (CUDA arrays, modules)."""
    import cupy
    from cupy.cuda import runtime

    pool = cupy.get_default_memory_pool()
    free, total = runtime.memGetInfo()
    return free + pool.free_bytes(), total - free - pool.free_bytes()


def _instance_pairs(sides: list[_Side], wanted: int, resident: Resident) -> tuple[list[list], int]:
    """Up to `wanted` instance pairs, as many as half the free device memory holds after the
    first (whose footprint is measured); the second side on the first's buffers where it launches
    the same ones. The first side's instances are those `resident` kept from earlier timings of
    it, their buffers restored, and those made here are kept for the next; also returns how many
    were kept ones."""
    import cupy

    shared = sides[1].launches_buffers_of(sides[0])
    kept = resident.kept(sides[0].key)
    had = len(kept.instances)

    def first(i: int):
        if i < had:  # launched by earlier timings: its buffers back to the files' bytes
            kept.instances[i].device.restore()
            return kept.instances[i]
        before = _device_memory()[1]
        a = sides[0].instance()
        kept.instances.append(a)
        kept.nbytes += max(_device_memory()[1] - before, 0)
        return a

    def pair(i: int):
        a = first(i)
        return [a, sides[1].instance(a.device if shared else None)]

    taken_before, kept_before = _device_memory()[1], kept.nbytes
    pairs = [pair(0)]
    free, taken = _device_memory()
    second = max(taken - taken_before - (kept.nbytes - kept_before), 1)  # the second side's footprint
    first_side = kept.nbytes / len(kept.instances)  # a first side's, made here or earlier
    room = 0.5 * free
    while len(pairs) < wanted:
        need = second + (first_side if len(pairs) >= had else 0)
        if need > room:
            break
        room -= need
        pairs.append(pair(len(pairs)))
    cupy.cuda.Device().synchronize()  # the copies ran on the null stream; the timing's stream does not wait for it
    return pairs, min(len(pairs), had)


def time_pair(dir_a: str, dir_b: str, noise_target: float = 0.005, time_limit_s: float = 30.0,
              warmup_s: float = WARMUP_S, min_samples: int = MIN_ROUNDS, instances: int = INSTANCES,
              resident: Resident | None = None, min_rounds_per_pair: int = MIN_ROUNDS_PER_PAIR) -> dict:
    import cupy
    from cupy.cuda import runtime

    info = device_info()
    resident = resident or Resident()
    sides = [_Side(dir_a, resident), _Side(dir_b, resident)]
    pairs, reused = _instance_pairs(sides, max(1, instances), resident)
    stream = cupy.cuda.Stream(non_blocking=True)
    l2 = cupy.empty(max(int(info.get("l2_bytes") or 0), 1 << 20) * 2, dtype=cupy.uint8)
    nvml = _Nvml(info["uuid"])
    # warm-up: every instance launched (its code loaded: modules load lazily), for at least warmup_s
    warm = time.perf_counter()
    while True:
        for pair in pairs:
            for p in pair:
                p.launch_async(stream.ptr)
        stream.synchronize()
        if time.perf_counter() - warm >= warmup_s:
            break
    # samples[e][i][k]: side i of instance pair e in that pair's k-th kept round
    samples: list[list[list[float]]] = [[[], []] for _ in pairs]
    throttled = [0, 0]
    clocks: list[int] = []
    peak = 0
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    t0 = time.perf_counter()
    rounds = 0
    check_at = max(min_samples, min_rounds_per_pair * len(pairs))
    while True:
        e, visit = rounds % len(pairs), rounds // len(pairs)
        order = (0, 1) if visit % 2 == 0 else (1, 0)  # each pair A B, then B A at its next visit
        rounds += 1
        taken = [0.0, 0.0]
        dropped = False
        for i in order:
            runtime.memsetAsync(l2.data.ptr, i + 1, l2.nbytes, stream.ptr)
            start.record(stream)
            pairs[e][i].launch_async(stream.ptr)
            end.record(stream)
            end.synchronize()
            taken[i] = cupy.cuda.get_elapsed_time(start, end)
            mhz = nvml.sm_clock_mhz()
            if mhz is not None:
                clocks.append(mhz)
                peak = max(peak, mhz)
                if mhz < 0.9 * peak:
                    throttled[i] += 1
                    dropped = True  # the round's pair goes with it
        if not dropped:
            for i in (0, 1):
                samples[e][i].append(taken[i])
        kept = sum(len(x[0]) for x in samples)
        # the bootstrap at 10 % more rounds each time: its cost stays a small share of the sampling
        if kept >= check_at and all(len(x[0]) >= 2 for x in samples):
            check_at = max(check_at + 1, math.ceil(kept * 1.1))
            noise = pairs_noise([tuple(x) for x in samples], resamples=200)
            if noise.noise < noise_target:
                stop = "noise target reached"
                break
            if noise.floored_over(noise_target):
                stop = "the instance pairs' spread is over the noise target"
                break
        if time.perf_counter() - t0 > time_limit_s:
            stop = "time limit reached"
            break
    measured = [tuple(x) for x in samples if x[0]]
    if not measured:
        raise AllThrottled(f"every one of the {rounds} rounds had a sample taken below 90 % of the highest SM "
                           f"clock seen ({peak} MHz): nothing to time")
    a, b = (_series([t for x in measured for t in x[i]], throttled[i]) for i in (0, 1))
    noise = pairs_noise(measured)
    return {
        "status": Status.OK, "backend": "cuda", "stop": stop, "noise_target": noise_target,
        "reference": asdict(a), "other": asdict(b), "ratio": noise.ratio, "ratio_noise": noise.noise,
        "ratio_noise_parts": {"between": noise.between, "within": noise.within, "floor": noise.floor},
        "rounds": sum(len(x[0]) for x in measured), "instances": len(pairs), "instance_ratios": noise.ratios,
        "instances_kept": reused,
        "shared_buffers": sides[1].launches_buffers_of(sides[0]),
        "ratio_method": ("geometric mean over instance pairs (each side's own module loads; the pair's buffers "
                         "shared where both sides launch the same) of the trimmed mean of their rounds' paired "
                         "ratios; noise: the larger of the pairs' standard error (Student-widened) and their "
                         "moving-block bootstraps'"),
        "device": {**info, "driver_version": nvml.driver_version()},
        "sm_clock_mhz": {"min": min(clocks), "max": max(clocks)} if clocks else None,
        "resident": dict(resident.counts),
        "wall_s": time.perf_counter() - t0,
    }
