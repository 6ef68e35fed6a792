"""Fault isolation: every run happens in a child process with a time limit (a fresh one, or the
GPU's long-lived worker with RR_WORKER=1: rr.run.worker).

An illegal address, an invalid launch or a hang kills only the child; the parent turns it into a
run record (`status`, `message`) and the next run starts with a clean context. The child writes
into a temporary directory that is renamed onto the output only when the run is over, so an output
directory always holds a whole run (buffers and `run.json`, or `run.json` alone for a failure).
Inputs are only ever read. A cuda run or timing first claims a GPU of its own (rr.run.gpus) and
its child sees only that device; the record names it (`gpu`).
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
from rr.records import RUN, TIMING, Status, failure, read_record, record_text
from rr.run.gpus import claimed_gpu, gpu_env, resolve_backend
from rr.run.launch import LaunchError, read_launch, write_launch

IO_ERROR_EXIT = 5  # the child's exit status when it could not even write its record


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

    return read_frame(directory) if is_frame(directory) else read_launch(directory)


def _bad_launches(backend: str, *directories) -> dict | None:
    """The bad_launch (or io_error) record of the first launch directory that does not read."""
    for d in directories:
        try:
            read_launch_or_frame(d)
        except LaunchError as e:
            return failure(e, backend=backend)
        except OSError as e:
            return failure(Status.IO_ERROR, _os_message(e), backend=backend)
    return None


def _os_message(e: OSError) -> str:
    return f"{e.filename}: {e.strerror or e}" if e.filename is not None else str(e.strerror or e)


def run_isolated(launch_dir: str | Path, out_dir: str | Path, backend: str = "auto",
                 timeout_s: float = 120, mma: str | None = None, reference: str | Path | None = None) -> dict:
    """Run a launch in a child process; returns the run record written to OUT/run.json (rr.records.RUN). `mma`:
    the cpu backend's mma model (rr.numerics.MMA_MODELS; the GPU has its own). `reference`: a
    capture of the unspliced launch or frame; the outputs equal to its buffers are hard links to
    its files (`linked_to_reference` in the record: rr.run.launch.save_outputs)."""
    launch_dir, out_dir = Path(launch_dir), Path(out_dir)
    backend = resolve_backend(backend)
    t0 = time.perf_counter()
    gpu = None
    with atomic_dir(out_dir, inputs=(launch_dir, reference)) as tmp:
        record = _bad_launches(backend, launch_dir)
        try:
            if record is None:
                # the GPU is claimed for the child's work only: another job's checks and start-up
                # go on beside it
                with _device_for(backend) as gpu:
                    child = _child([backend, str(launch_dir), str(tmp), mma or "", str(reference or "")], gpu,
                                   timeout_s)
                record_path = RUN.within(tmp)
                record = read_record(record_path, RUN) if record_path.is_file() else _died(child, backend, "run's")
                record["message"] = record.get("message", "").replace(str(tmp), str(out_dir))  # name the output
        except subprocess.TimeoutExpired:
            record = failure(Status.TIMEOUT, f"the kernel did not finish within {timeout_s} s; the run's process was "
                             "killed", backend=backend)
        record["gpu"] = gpu
        record["wall_ms"] = (time.perf_counter() - t0) * 1e3
        if record["status"] != Status.OK:
            _remove_files(tmp)  # a failed run leaves no partial buffers
        RUN.within(tmp).write_text(record_text(record))
    return record


def _remove_files(directory: Path) -> None:
    for p in directory.iterdir():
        if p.is_file():
            p.unlink()


def _device_for(backend: str):
    """A claimed GPU for the cuda backend; nothing to claim for the others."""
    return claimed_gpu() if backend == "cuda" else contextlib.nullcontext()


def _write_record(path: Path, record: dict, code: int) -> int:
    """The child's record; if even that cannot be written (a full disk), its reason on stderr and
    IO_ERROR_EXIT, which the parent turns into the io_error record."""
    try:
        Path(path).write_text(record_text(record))
    except OSError as e:
        Path(path).unlink(missing_ok=True)  # what was written of it: no partial record for the parent to read
        print(record.get("message") if record["status"] == Status.IO_ERROR else _os_message(e), file=sys.stderr)
        return IO_ERROR_EXIT
    return code


def time_isolated(reference: str | Path, other: str | Path, noise_target: float = 0.005,
                  time_limit_s: float = 30.0, backend: str = "auto") -> dict:
    """`rr.run.timing.time_pair` in a child process; a fault or hang becomes the record's status."""
    backend = resolve_backend(backend)
    bad = _bad_launches(backend, reference, other)
    if bad is not None:
        return bad
    out = TIMING.within(tempfile.mkdtemp(prefix="rr-time-"))
    try:
        with _device_for(backend) as gpu:
            child = _child(["time", str(reference), str(other), str(out), str(noise_target), str(time_limit_s),
                            backend], gpu, time_limit_s * 2 + 120)
        if out.is_file():
            return {**read_record(out, TIMING), "gpu": gpu}
        return {**_died(child, backend, "timing"), "gpu": gpu}
    except subprocess.TimeoutExpired:
        return failure(Status.TIMEOUT, "timing did not finish; its process was killed")
    finally:
        shutil.rmtree(out.parent, ignore_errors=True)


def child_time(reference: str, other: str, out: str, noise_target: str, time_limit_s: str,
               backend: str, resident=None) -> int:
    from rr.run.cuda import NoDevice, device_info

    def finish(record: dict, code: int) -> int:
        return _write_record(Path(out), record, code)

    if backend == "cpu":
        return finish(failure(Status.UNSUPPORTED, "the cpu backend gives no timing: times are only measured on a GPU",
                              backend="cpu"), 4)
    try:
        device_info()
    except NoDevice as e:
        return finish(failure(Status.NO_DEVICE, str(e), backend="cuda"), 3)
    from rr.run.timing import AllThrottled, time_pair

    try:
        record = time_pair(reference, other, float(noise_target), float(time_limit_s), resident=resident)
    except AllThrottled as e:
        return finish(failure(Status.THROTTLED, str(e), backend="cuda"), 3)
    except LaunchError as e:  # a launch, frame or buffer file that does not read
        return finish(failure(Status.BAD_LAUNCH, str(e), backend="cuda"), 2)
    except OSError as e:
        return finish(failure(Status.IO_ERROR, _os_message(e), backend="cuda"), IO_ERROR_EXIT)
    except Exception as e:  # a faulting kernel
        return finish(failure(Status.FAULT, f"{type(e).__name__}: {e}", backend="cuda"), 3)
    return finish(record, 0)


def child_dispatch(args: list[str], resident=None) -> int:
    """The child's command line (rr.run.child), whether a fresh process or the worker runs it:
    `time REFERENCE OTHER OUT NOISE LIMIT BACKEND`, else `BACKEND LAUNCH OUT [MMA [REFERENCE]]`
    (an empty MMA or REFERENCE: none given). `resident`: the worker's rr.run.cuda.Resident, which
    keeps the buffers on the device from one job to the next (a fresh child makes its own)."""
    if args[0] == "time":
        return child_time(*args[1:7], resident=resident)
    return child_main(*args[:3], *(a or None for a in args[3:5]), resident=resident)


def child_main(backend: str, launch_dir: str, out_dir: str, mma: str | None = None,
               reference: str | None = None, resident=None) -> int:
    """Entry point of the child process: run, write buffers (those equal to `reference`'s as links
    to its files) and run.json into out_dir."""
    out = Path(out_dir)

    def finish(record: dict, code: int) -> int:
        return _write_record(RUN.within(out), record, code)

    try:
        return _child_run(resolve_backend(backend), Path(launch_dir), out, finish, mma, reference, resident)
    except LaunchError as e:  # a launch or buffer file that does not read
        return finish(failure(e, backend=backend), 2)
    except OSError as e:  # a full disk, a file it may not read
        _remove_files(out)  # what was written of the outputs, so that the record still fits
        return finish(failure(Status.IO_ERROR, _os_message(OSError(e.errno, e.strerror, e.filename or str(out))),
                              backend=backend), IO_ERROR_EXIT)


def _child_run(backend: str, launch_dir: Path, out: Path, finish, mma: str | None = None,
               reference: str | None = None, resident=None) -> int:
    from rr.run.cuda import NoDevice
    from rr.run.frame import is_frame, run_frame_cpu, run_frame_cuda, write_frame_outputs

    frame = is_frame(launch_dir)
    # the worker's Resident has read the directory already (and its jobs read it again and again)
    described = resident.described(launch_dir) if resident is not None else (None, None)
    launch = None if frame else (described[1] or read_launch(launch_dir))
    if backend == "cpu":
        from rr.ptx.errors import ParseError
        from rr.run.cpu import CpuUnsupported, ExecutionError, ResourceLimit, run_cpu

        try:
            record, outputs = (run_frame_cpu(launch_dir, progress=True, mma=mma) if frame
                               else run_cpu(launch_dir, mma=mma, progress=True))
            equal = set()
        except CpuUnsupported as e:
            return finish(failure(Status.UNSUPPORTED, str(e), backend="cpu"), 4)
        except ResourceLimit as e:  # a kernel that asks more memory than the interpreter allocates
            return finish(failure(Status.RESOURCE, str(e), backend="cpu"), 4)
        except MemoryError as e:  # what the bound does not cover (the registers): the allocation numpy names
            return finish(failure(Status.RESOURCE, f"the cpu backend ran out of memory: {e or 'MemoryError'}",
                                  backend="cpu"), 4)
        except ParseError as e:  # a module that is not PTX: what the driver would refuse to load
            return finish(failure(Status.BAD_LAUNCH, str(e), backend="cpu"), 2)
        except ExecutionError as e:  # what would fault on a GPU: out-of-bounds, divergent barriers
            return finish(failure(Status.FAULT, str(e), backend="cpu"), 3)
    elif backend == "cuda":
        try:
            from rr.run.cuda import run_cuda

            record, outputs, equal = (run_frame_cuda if frame else run_cuda)(launch_dir, resident, reference)
        except NoDevice as e:
            return finish(failure(Status.NO_DEVICE, str(e), backend="cuda"), 3)
        except (LaunchError, OSError):
            raise
        except Exception as e:  # CUDA errors: illegal address, launch failures, module load errors
            return finish(failure(Status.FAULT, f"{type(e).__name__}: {e}", backend="cuda"), 3)
    else:
        return finish(failure(Status.BAD_LAUNCH, f"unknown backend {backend!r} (auto, cuda, cpu)", backend=backend), 2)
    if frame:
        written = write_frame_outputs(out, launch_dir, outputs, reference, equal, described[0])
    else:
        written = write_launch(out, launch, outputs, launch_dir / launch.module, reference, equal)
    return finish({**record, **written}, 0)


