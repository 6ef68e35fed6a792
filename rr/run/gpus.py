"""The GPUs this process may use, and one of them claimed for the duration of a run or a timing.

A timing must never share its GPU: two timings on one device measure each other, and a run beside
a timing slows it. A plain run (or capture) needs no device of its own: its result does not
depend on what else runs there, and many small `rr run`s of a user's script should share one GPU
rather than queue for it. So a timing claims its device exclusively and a run claims it shared:
a `flock` on a lock file named by the device's UUID, LOCK_EX for a timing, LOCK_SH for a run —
runs share a device with each other, never with a timing. A timing that waits is not starved by a
stream of runs: it first takes the device's gate (a second lock file) exclusively and holds it
until it has the device, and a run passes the gate (takes it shared) before it takes the device,
so runs that come while a timing waits queue behind it. The kernel releases the locks when the
process ends, however it ends, so a crashed job never leaves a device claimed. The child process
that touches the GPU then sees only that device (`CUDA_VISIBLE_DEVICES=<uuid>`).

Snakemake's `resources: gpu=N` bounds how many GPU jobs run at once, but it does not say *which*
device a job gets: each `rr run` / `rr time` claims one itself. Devices are enumerated through the
CUDA driver (`libcuda`) with ctypes rather than cupy: it is the driver that honours
`CUDA_VISIBLE_DEVICES` (as SLURM sets it), it costs milliseconds instead of the second that
importing cupy and creating a context cost, and it is what the workflow asks at DAG time and on
every no-op run. UUIDs rather than indices name the locks because under SLURM's cgroups every job
sees its own GPU as device 0. The locks are in a private directory ($TMPDIR/rr-gpu-locks-<uid>,
or RR_GPU_LOCK_DIR: rr.private.private_dir — one another user owns or can write is refused,
never used), opened without following links.
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
                poll_s: float = 0.02, say: Callable[[str], None] = _say,
                exclusive: bool = True) -> Iterator[str | None]:
    """Hold one of `devices` (default: the visible GPUs) against other rr processes — alone
    (`exclusive`, a timing's claim) or shared with other shared claims (a run's); yields its
    UUID, or None when there is no GPU. Waits, saying so once, while none can be had: for one
    device in the kernel, which hands it over the moment it is let go (the workflow queues a few
    GPU jobs per device, so that their start-up overlaps another's GPU work, and a poll's sleep
    would be GPU time lost at each hand-over); for several, polling them every `poll_s`. Shared
    claims start their search at a device of their own (by pid), so that they spread."""
    devices = visible_gpus() if devices is None else tuple(devices)
    if not devices:
        yield None
        return
    from rr.private import private_dir  # here: the workflow imports this module at DAG time

    lock_dir = private_dir(lock_dir if lock_dir is not None else default_lock_dir(), "rr's GPU lock directory")
    if not exclusive:
        k = os.getpid() % len(devices)
        devices = devices[k:] + devices[:k]
    mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
    gates: dict[str, int] = {}  # device -> its gate, held (an exclusive claim's, while it waits)
    handle = device = None
    waiting_since = None
    try:
        while handle is None:
            for d in devices:
                handle = _device_lock(lock_dir, d, mode, gates, exclusive, block=False)
                if handle is not None:
                    device = d
                    break
            else:
                waiting_since = waiting_since or _waiting(devices, lock_dir, say)
                if len(devices) == 1:
                    device = devices[0]
                    handle = _device_lock(lock_dir, device, mode, gates, exclusive, block=True)
                else:
                    time.sleep(poll_s)
        for gate in gates.values():  # had: runs may queue for the device again
            os.close(gate)
        gates.clear()
        if waiting_since is not None:
            say(f"rr: got GPU {device} after {time.monotonic() - waiting_since:.1f} s")
        yield device
    finally:
        for fd in (*gates.values(), *([handle] if handle is not None else [])):
            os.close(fd)  # closing a descriptor releases its lock


def _device_lock(lock_dir: Path, device: str, mode: int, gates: dict, exclusive: bool, block: bool) -> int | None:
    """The device's lock held in `mode` (its descriptor), or None where it is held against it
    (only when not `block`). An exclusive claim takes the device's gate first and keeps it (in
    `gates`) while it waits; a shared one passes the gate: it waits there while a timing does."""
    from rr.private import open_private

    nb = 0 if block else fcntl.LOCK_NB
    gate = gates.get(device)
    if gate is None:
        gate = open_private(lock_dir / f"{device}.gate", os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(gate, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | nb)
        except BlockingIOError:
            os.close(gate)
            if not exclusive:
                return None  # a timing waits for this device: queue behind it
            gate = None  # another timing's: wait for the device beside it
        if gate is not None and exclusive:
            gates[device] = gate
    handle = open_private(lock_dir / f"{device}.lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(handle, mode | nb)
    except BlockingIOError:
        os.close(handle)
        handle = None
    finally:
        if gate is not None and not exclusive:
            os.close(gate)  # passed
    return handle


def _waiting(devices, lock_dir, say) -> float:
    say(f"rr: all {len(devices)} GPU(s) are held by other rr jobs (locks in {lock_dir}); waiting")
    return time.monotonic()


def gpu_env(device: str | None) -> dict[str, str]:
    """The environment of a child that may use only `device`."""
    env = dict(os.environ)
    if device is not None:
        env["CUDA_VISIBLE_DEVICES"] = device
    return env
