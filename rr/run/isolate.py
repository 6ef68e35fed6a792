"""Fault isolation: every run happens in a child process with a time limit (a fresh one, or the
GPU's long-lived worker with RR_WORKER=1: rr.run.worker).

An illegal address, an invalid launch or a hang kills only the child; the parent turns it into a
run record (`status`, `message`) and the next run starts with a clean context. The child writes
into a temporary directory that is renamed onto the output only when the run is over, so an output
directory always holds a whole run (buffers and `run.json`, or `run.json` alone for a failure).
Inputs are only ever read. A cuda timing first claims a GPU of its own, a cuda run a GPU it
shares with other runs but no timing (rr.run.gpus); its child sees only that device, and the
record names it (`gpu`).
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rr.io import atomic_dir
from rr.records import RUN, TIMING, Status, failure, read_own_record, record_text
from rr.run.child import IO_ERROR_EXIT, os_message, remove_files
from rr.run.gpus import claimed_gpu, gpu_env, resolve_backend

# what a run's parent imports is its start-up: no numpy, no jsonschema (the child reads the
# launch, and checks the record it leaves)


def _child(args: list[str], gpu: str | None, timeout_s: float):
    """`python -m rr.run.child ARGS` as a fresh process, or by the GPU's long-lived worker when
    RR_WORKER=1 (rr.run.worker); either way something with returncode (None: the worker died
    during the job), stdout and stderr, or subprocess.TimeoutExpired."""
    from rr import children
    from rr.run import worker

    if worker.enabled():
        return worker.call(args, gpu, gpu_env(gpu), timeout_s)
    return children.run([sys.executable, "-m", "rr.run.child", *args], capture=True, timeout=timeout_s,
                        env=gpu_env(gpu))


def _died(child, backend: str, what: str) -> dict:
    """The record of a child that left none: an io_error if it said so, else a fault, saying what
    the process ended with (rr.run.child reports an exception as its name and text, never a
    traceback) or the signal that killed it."""
    if child.returncode is None:
        return failure(Status.FAULT, child.stderr, backend=backend)
    tail = (child.stderr or child.stdout).strip().splitlines()[-5:]
    if child.returncode == IO_ERROR_EXIT and tail:
        return failure(Status.IO_ERROR, tail[-1], backend=backend)
    if child.returncode < 0:
        import signal

        number = -child.returncode
        name = signal.Signals(number).name if number in signal.valid_signals() else f"signal {number}"
        return failure(Status.FAULT, f"the {what} process was killed by {name}"
                       + (" (out of memory?)" if number == signal.SIGKILL else ""), backend=backend)
    return failure(Status.FAULT, f"the {what} process died (exit {child.returncode}): " + " | ".join(tail),
                   backend=backend)


def read_launch_or_frame(directory):
    """A launch directory's Launch, or a frame directory's Frame (rr.run.frame)."""
    from rr.run.frame import is_frame, read_frame
    from rr.run.launch import read_launch

    return read_frame(directory) if is_frame(directory) else read_launch(directory)


def _bad_launches(backend: str, *directories) -> dict | None:
    """The bad_launch (or io_error) record of the first launch directory that does not read."""
    from rr.run.launch import LaunchError

    for d in directories:
        try:
            read_launch_or_frame(d)
        except LaunchError as e:
            return failure(e, backend=backend)
        except OSError as e:
            return failure(Status.IO_ERROR, os_message(e), backend=backend)
    return None


def run_isolated(launch_dir: str | Path, out_dir: str | Path, backend: str = "auto",
                 timeout_s: float = 120, mma: str | None = None, reference: str | Path | None = None) -> dict:
    """Run a launch in a child process; returns the run record written to OUT/run.json (rr.records.RUN). `mma`:
    the cpu backend's mma model (rr.numerics.mma.MMA_MODELS; the GPU has its own). `reference`: a
    capture of the unspliced launch or frame; the outputs equal to its buffers are hard links to
    its files (`linked_to_reference` in the record: rr.run.launch.save_outputs)."""
    launch_dir, out_dir = Path(launch_dir), Path(out_dir)
    backend = resolve_backend(backend)
    t0 = time.perf_counter()
    gpu = None
    with atomic_dir(out_dir, inputs=(launch_dir, reference)) as tmp:
        try:
            # the child reads the launch (a bad one is its bad_launch record); the GPU is claimed
            # shared, so other runs go on beside this one, never a timing
            with _device_for(backend, exclusive=False) as gpu:
                child = _child([backend, str(launch_dir), str(tmp), mma or "", str(reference or "")], gpu, timeout_s)
            record_path = RUN.within(tmp)
            record = read_own_record(record_path, RUN) if record_path.is_file() else _died(child, backend, "run's")
            record["message"] = record.get("message", "").replace(str(tmp), str(out_dir))  # name the output
        except subprocess.TimeoutExpired:
            record = failure(Status.TIMEOUT, f"the kernel did not finish within {timeout_s} s; the run's process was "
                             "killed", backend=backend)
        record["gpu"] = gpu
        record["wall_ms"] = (time.perf_counter() - t0) * 1e3
        if record["status"] != Status.OK:
            remove_files(tmp)  # a failed run leaves no partial buffers
        RUN.within(tmp).write_text(record_text(record))
    return record


def _device_for(backend: str, exclusive: bool):
    """A claimed GPU for the cuda backend — alone for a timing, shared with other runs for a run
    (rr.run.gpus); nothing to claim for the others."""
    return claimed_gpu(exclusive=exclusive) if backend == "cuda" else contextlib.nullcontext()


def time_isolated(reference: str | Path, other: str | Path, noise_target: float = 0.005,
                  time_limit_s: float = 30.0, backend: str = "auto") -> dict:
    """`rr.run.timing.time_pair` in a child process; a fault or hang becomes the record's status."""
    backend = resolve_backend(backend)
    bad = _bad_launches(backend, reference, other)
    if bad is not None:
        return bad
    out = TIMING.within(tempfile.mkdtemp(prefix="rr-time-"))
    try:
        with _device_for(backend, exclusive=True) as gpu:
            child = _child(["time", str(reference), str(other), str(out), str(noise_target), str(time_limit_s),
                            backend], gpu, time_limit_s * 2 + 120)
        if out.is_file():
            return {**read_own_record(out, TIMING), "gpu": gpu}
        return {**_died(child, backend, "timing"), "gpu": gpu}
    except subprocess.TimeoutExpired:
        return failure(Status.TIMEOUT, "timing did not finish; its process was killed")
    finally:
        shutil.rmtree(out.parent, ignore_errors=True)
