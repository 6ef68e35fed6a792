"""The GPUs this process may use, and one of them claimed for the duration of a run or a timing.

A job must never share its GPU: two timings on one device measure each other. Snakemake's
`resources: gpu=1` bounds how many GPU jobs run at once, but it does not say *which* device a job
gets, so each `rr run` / `rr time` claims one itself: an exclusive `flock` on a lock file named by
the device's UUID. The kernel releases the lock when the process ends, however it ends, so a
crashed job never leaves a device claimed. The child process that touches the GPU then sees only
that device (`CUDA_VISIBLE_DEVICES=<uuid>`).

Devices are enumerated through the CUDA driver (`libcuda`) with ctypes rather than cupy: it is the
driver that honours `CUDA_VISIBLE_DEVICES` (as SLURM sets it), it costs milliseconds instead of the
second that importing cupy and creating a context cost, and it is what the workflow asks at DAG
time and on every no-op run. UUIDs rather than indices name the locks because under SLURM's
cgroups every job sees its own GPU as device 0. The locks are in a private directory
($TMPDIR/rr-gpu-locks-<uid>, or RR_GPU_LOCK_DIR: rr.private.private_dir — one another user owns or
can write is refused, never used), opened without following links.
"""

from __future__ import annotations

import ctypes
import fcntl
import functools
import importlib.util
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

LOCK_DIR_ENV = "RR_GPU_LOCK_DIR"


@functools.lru_cache(maxsize=1)
def visible_gpus() -> tuple[str, ...]:
    """UUIDs (`GPU-xxxxxxxx-…`) of the devices the driver shows this process; () without a driver."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return ()
    if cuda.cuInit(0) != 0:  # no device, or the driver refuses (CUDA_VISIBLE_DEVICES="")
        return ()
    count = ctypes.c_int()
    if cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return ()
    get_uuid = getattr(cuda, "cuDeviceGetUuid_v2", None) or cuda.cuDeviceGetUuid
    uuids = []
    for index in range(count.value):
        device, raw = ctypes.c_int(), (ctypes.c_ubyte * 16)()
        if cuda.cuDeviceGet(ctypes.byref(device), index) != 0 or get_uuid(raw, device) != 0:
            return tuple(uuids)
        h = bytes(raw).hex()
        uuids.append(f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}")
    return tuple(uuids)


def gpu_count() -> int:
    return len(visible_gpus())


# GPU jobs the local profile lets run at once per device: one on the device (its claim), the others
# starting, checking their launches or comparing a capture, so that the device waits for none of it
# (a 4K sweep's `rr measure` jobs took 2.8 s each, 0.5 s of it on the device: docs/benchmarks.md)
JOBS_PER_GPU = 8


def gpu_job_slots() -> int:
    """The local profile's `gpu` limit: JOBS_PER_GPU per device, at least one device's worth."""
    return JOBS_PER_GPU * max(1, gpu_count())


def resolve_backend(backend: str) -> str:
    """`auto` → `cuda` when the driver shows a GPU and cupy is installed, else `cpu`; other names as
    they are. No cupy import and no context: the workflow asks this at DAG time on every run."""
    if backend != "auto":
        return backend
    return "cuda" if gpu_count() and importlib.util.find_spec("cupy") is not None else "cpu"


def default_lock_dir() -> Path:
    return Path(os.environ.get(LOCK_DIR_ENV) or Path(tempfile.gettempdir()) / f"rr-gpu-locks-{os.getuid()}")


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@contextmanager
def claimed_gpu(devices: Sequence[str] | None = None, lock_dir: str | Path | None = None,
                poll_s: float = 0.02, say: Callable[[str], None] = _say) -> Iterator[str | None]:
    """Hold one of `devices` (default: the visible GPUs) exclusively against other rr processes;
    yields its UUID, or None when there is no GPU. Waits, saying so once, while all are held: for
    one device in the kernel, which hands it over the moment it is let go (the workflow queues a few
    GPU jobs per device, so that their start-up overlaps another's GPU work, and a poll's sleep would
    be GPU time lost at each hand-over); for several, polling them every `poll_s`."""
    devices = visible_gpus() if devices is None else tuple(devices)
    if not devices:
        yield None
        return
    from rr.private import open_private, private_dir  # here: the workflow imports this module at DAG time

    lock_dir = private_dir(lock_dir if lock_dir is not None else default_lock_dir(), "rr's GPU lock directory")
    waiting_since = None
    while True:
        for device in devices:
            handle = open_private(lock_dir / f"{device}.lock", os.O_RDWR | os.O_CREAT)
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if len(devices) > 1:
                    os.close(handle)
                    continue
                waiting_since = waiting_since or _waiting(devices, lock_dir, say)
                fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                if waiting_since is not None:
                    say(f"rr: got GPU {device} after {time.monotonic() - waiting_since:.1f} s")
                yield device
            finally:
                os.close(handle)  # closing the descriptor releases the lock
            return
        waiting_since = waiting_since or _waiting(devices, lock_dir, say)
        time.sleep(poll_s)


def _waiting(devices, lock_dir, say) -> float:
    say(f"rr: all {len(devices)} GPU(s) are held by other rr jobs (locks in {lock_dir}); waiting")
    return time.monotonic()


def gpu_env(device: str | None) -> dict[str, str]:
    """The environment of a child that may use only `device`."""
    env = dict(os.environ)
    if device is not None:
        env["CUDA_VISIBLE_DEVICES"] = device
    return env
