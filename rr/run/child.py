"""The child process of one isolated run or timing (rr.run.isolate): the job it runs, and the
record it leaves for the parent.

    python -m rr.run.child BACKEND LAUNCH_DIR OUT_DIR [MMA_MODEL [REFERENCE]]   (empty: none)
    python -m rr.run.child time REFERENCE OTHER OUT.json NOISE_TARGET TIME_LIMIT_S BACKEND

A fresh process runs it from its command line; the GPU's long-lived worker (rr.run.worker) runs
the same `child_dispatch` for each job it is sent. Either way the child writes the record (OUT_DIR/
run.json, or the timing's OUT.json) and the parent reads it; a child that cannot even write it
exits with IO_ERROR_EXIT and says why on stderr.
"""

from __future__ import annotations

import sys
from pathlib import Path

from rr.records import RUN, TIMING, Status, failure, record_text
from rr.run.gpus import resolve_backend

# rr.run.launch (numpy) is imported where a job needs it: `rr run` imports this module for the
# names below, and its process never touches a buffer

IO_ERROR_EXIT = 5  # the child's exit status when it could not even write its record


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
    from rr.run.launch import LaunchError

    out = Path(out_dir)

    def finish(record: dict, code: int) -> int:
        return _write_record(RUN.within(out), record, code, RUN)

    try:
        return _child_run(resolve_backend(backend), Path(launch_dir), out, finish, mma, reference, resident)
    except LaunchError as e:  # a launch or buffer file that does not read
        return finish(failure(e, backend=backend), 2)
    except OSError as e:  # a full disk, a file it may not read
        remove_files(out)  # what was written of the outputs, so that the record still fits
        return finish(failure(Status.IO_ERROR, os_message(OSError(e.errno, e.strerror, e.filename or str(out))),
                              backend=backend), IO_ERROR_EXIT)


def _child_run(backend: str, launch_dir: Path, out: Path, finish, mma: str | None = None,
               reference: str | None = None, resident=None) -> int:
    from rr.run.cuda import NoDevice
    from rr.run.frame import is_frame, run_frame_cpu, write_frame_outputs
    from rr.run.launch import LaunchError, read_launch, write_launch

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
            from rr.run.cuda import run_cuda, run_frame_cuda

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


def child_time(reference: str, other: str, out: str, noise_target: str, time_limit_s: str,
               backend: str, resident=None) -> int:
    from rr.run.cuda import NoDevice, device_info
    from rr.run.launch import LaunchError

    def finish(record: dict, code: int) -> int:
        return _write_record(Path(out), record, code, TIMING)

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
        return finish(failure(Status.IO_ERROR, os_message(e), backend="cuda"), IO_ERROR_EXIT)
    except Exception as e:  # a faulting kernel
        return finish(failure(Status.FAULT, f"{type(e).__name__}: {e}", backend="cuda"), 3)
    return finish(record, 0)


def _write_record(path: Path, record: dict, code: int, kind) -> int:
    """The child's record, checked against its kind's definition here, where it is made (the
    parent reads it with rr.records.read_own_record); if even that cannot be written (a full
    disk), its reason on stderr and IO_ERROR_EXIT, which the parent turns into the io_error
    record."""
    text = record_text(record, kind)
    try:
        Path(path).write_text(text)
    except OSError as e:
        Path(path).unlink(missing_ok=True)  # what was written of it: no partial record for the parent to read
        print(record.get("message") if record["status"] == Status.IO_ERROR else os_message(e), file=sys.stderr)
        return IO_ERROR_EXIT
    return code


def os_message(e: OSError) -> str:
    return f"{e.filename}: {e.strerror or e}" if e.filename is not None else str(e.strerror or e)


def remove_files(directory: Path) -> None:
    for p in directory.iterdir():
        if p.is_file():
            p.unlink()


if __name__ == "__main__":
    try:
        sys.exit(child_dispatch(sys.argv[1:]))
    except Exception as e:
        # an error of rr's own: its name and text for the parent's record (as the worker reports
        # one, rr.run.worker), not traceback lines
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
