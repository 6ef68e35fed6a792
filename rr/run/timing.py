"""Timing a launch against another, in the manner of NVBench.

Both launches are prepared once; after a warm-up they are sampled interleaved, in A B B A order so
that a slow drift (clocks, temperature) falls on both alike. Before
every sample the L2 cache is flushed by a memset of an L2-sized buffer; each sample is the time
between two CUDA events around the one launch. After each sample the SM clock is read (NVML) and a
sample taken while the clock was below 90 % of the highest seen is dropped and counted as
throttled, and so is the other sample of its round.

The ratio is the median of the rounds' ratios (B's sample over A's, both taken within
microseconds of each other, so that what drifts cancels), and its noise is the spread of that
median over a moving-block bootstrap of the rounds: blocks of consecutive rounds keep the
samples' correlation in time, which the standard error of two independent medians ignored (its
0.03 % beside an A/A error of 0.1 %). Sampling stops when that noise is under the target (and
there are enough rounds), or at the time limit.
"""

from __future__ import annotations

import ctypes
import math
import statistics
import time
from dataclasses import asdict, dataclass

import numpy as np

from rr.run.cuda import PreparedLaunch, device_info


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


def paired_ratio(a: list[float], b: list[float], resamples: int = BOOTSTRAP_RESAMPLES,
                 seed: int = BOOTSTRAP_SEED) -> tuple[float, float]:
    """(ratio, relative noise) of rounds' paired samples: the median of b[i] / a[i], and the
    standard deviation of that median over a moving-block bootstrap of the rounds, over the
    median. A block is n^(1/3) consecutive rounds (the usual length), or twice the series'
    correlation time where that is longer — (1 + ρ)/(1 − ρ) for the lag-1 autocorrelation ρ of the
    rounds' ratios, as for an AR(1) series — so that blocks hold what is correlated (at most a
    quarter of the rounds). Fewer than two rounds: the noise is infinite."""
    if len(a) != len(b) or not a:
        raise ValueError(f"paired samples of equal, non-zero length, not {len(a)} and {len(b)}")
    r = np.asarray(b, np.float64) / np.asarray(a, np.float64)
    ratio = float(np.median(r))
    n = r.size
    if n < 2:
        return ratio, math.inf
    block = min(max(1, n // 4), max(round(n ** (1 / 3)), math.ceil(2 * _correlation_time(r))))
    starts = np.random.default_rng(seed).integers(0, n - block + 1, (resamples, -(-n // block)))
    index = (starts[:, :, None] + np.arange(block)).reshape(resamples, -1)[:, :n]
    medians = np.median(r[index], axis=1)
    return ratio, float(np.std(medians, ddof=1) / ratio)


def _correlation_time(x: np.ndarray) -> float:
    """(1 + ρ)/(1 − ρ) for the lag-1 autocorrelation ρ of x (taken in [0, 0.98]): how many
    consecutive samples count as one, were x an AR(1) series."""
    d = x - x.mean()
    var = float(d @ d)
    rho = min(max(float(d[1:] @ d[:-1]) / var, 0.0), 0.98) if var > 0 else 0.0
    return (1 + rho) / (1 - rho)


def _prepared(directory: str):
    """A launch, or a whole frame (rr.run.frame), made ready to be launched again and again."""
    from rr.run.frame import PreparedFrame, is_frame

    return PreparedFrame(directory) if is_frame(directory) else PreparedLaunch(directory)


def time_pair(dir_a: str, dir_b: str, noise_target: float = 0.005, time_limit_s: float = 30.0,
              warmup: int = 5, min_samples: int = 50) -> dict:
    import cupy
    from cupy.cuda import runtime

    info = device_info()
    launches = [_prepared(dir_a), _prepared(dir_b)]
    stream = cupy.cuda.Stream(non_blocking=True)
    l2 = cupy.empty(max(int(info.get("l2_bytes") or 0), 1 << 20) * 2, dtype=cupy.uint8)
    nvml = _Nvml(info["uuid"])
    for _ in range(warmup):
        for p in launches:
            p.launch_async(stream.ptr)
    stream.synchronize()
    samples: list[list[float]] = [[], []]  # samples[i][k]: launch i's in round k (kept rounds only)
    throttled = [0, 0]
    clocks: list[int] = []
    peak = 0
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    t0 = time.perf_counter()
    rounds = 0
    check_at = min_samples
    while True:
        order = (0, 1) if rounds % 2 == 0 else (1, 0)
        rounds += 1
        taken = [0.0, 0.0]
        dropped = False
        for i in order:
            p = launches[i]
            runtime.memsetAsync(l2.data.ptr, i + 1, l2.nbytes, stream.ptr)
            start.record(stream)
            p.launch_async(stream.ptr)
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
                samples[i].append(taken[i])
        # the bootstrap at 10 % more rounds each time: its cost stays a small share of the sampling
        if len(samples[0]) >= check_at:
            check_at = max(check_at + 1, math.ceil(len(samples[0]) * 1.1))
            if paired_ratio(*samples, resamples=200)[1] < noise_target:
                stop = "noise target reached"
                break
        if time.perf_counter() - t0 > time_limit_s:
            stop = "time limit reached"
            break
    if not samples[0]:
        raise AllThrottled(f"every one of the {rounds} rounds had a sample taken below 90 % of the highest SM "
                           f"clock seen ({peak} MHz): nothing to time")
    a, b = (_series(s, t) for s, t in zip(samples, throttled))
    ratio, ratio_noise = paired_ratio(*samples)
    return {
        "status": "ok", "backend": "cuda", "stop": stop, "noise_target": noise_target,
        "reference": asdict(a), "other": asdict(b), "ratio": ratio, "ratio_noise": ratio_noise,
        "rounds": len(samples[0]),
        "ratio_method": "median of the rounds' paired ratios; noise: moving-block bootstrap of the rounds",
        "device": {**info, "driver_version": nvml.driver_version()},
        "sm_clock_mhz": {"min": min(clocks), "max": max(clocks)} if clocks else None,
        "wall_s": time.perf_counter() - t0,
    }
