"""Timing a launch against another, in the manner of NVBench.

Both launches are prepared once; after a warm-up they are sampled interleaved, in A B B A order so
that a slow drift (clocks, temperature) falls on both alike. Before
every sample the L2 cache is flushed by a memset of an L2-sized buffer; each sample is the time
between two CUDA events around the one launch. After each sample the SM clock is read (NVML) and a
sample taken while the clock was below 90 % of the highest seen is dropped and counted as
throttled. Sampling stops when the relative noise of both medians (standard error of the median
over the median) is under the target, or at the time limit.
"""

from __future__ import annotations

import ctypes
import math
import statistics
import time
from dataclasses import asdict, dataclass

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
    samples: list[list[float]] = [[], []]
    throttled = [0, 0]
    clocks: list[int] = []
    peak = 0
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    t0 = time.perf_counter()
    rounds = 0
    while True:
        order = (0, 1) if rounds % 2 == 0 else (1, 0)
        rounds += 1
        for i in order:
            p = launches[i]
            runtime.memsetAsync(l2.data.ptr, i + 1, l2.nbytes, stream.ptr)
            start.record(stream)
            p.launch_async(stream.ptr)
            end.record(stream)
            end.synchronize()
            ms = cupy.cuda.get_elapsed_time(start, end)
            mhz = nvml.sm_clock_mhz()
            if mhz is not None:
                clocks.append(mhz)
                peak = max(peak, mhz)
                if mhz < 0.9 * peak:
                    throttled[i] += 1
                    continue
            samples[i].append(ms)
        enough = all(len(s) >= min_samples for s in samples)
        if enough and all(_series(s, 0).noise < noise_target for s in samples):
            stop = "noise target reached"
            break
        if time.perf_counter() - t0 > time_limit_s:
            stop = "time limit reached"
            break
    a, b = (_series(s, t) for s, t in zip(samples, throttled))
    return {
        "status": "ok", "backend": "cuda", "stop": stop, "noise_target": noise_target,
        "reference": asdict(a), "other": asdict(b), "ratio": b.median_ms / a.median_ms,
        "ratio_noise": math.hypot(a.noise, b.noise),
        "device": {**info, "driver_version": nvml.driver_version()},
        "sm_clock_mhz": {"min": min(clocks), "max": max(clocks)} if clocks else None,
        "wall_s": time.perf_counter() - t0,
    }
