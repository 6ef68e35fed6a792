"""Fault isolation: every run happens in a child process with a time limit.

An illegal address, an invalid launch or a hang kills only the child; the parent turns it into a
run record (`status`, `message`) and the next run starts with a clean context. The child writes
into a temporary directory that is renamed onto the output only when the run is over, so an output
directory always holds a whole run (buffers and `run.json`, or `run.json` alone for a failure).
Inputs are only ever read. A cuda run or timing first claims a GPU of its own (rr.run.gpus) and
its child sees only that device; the record names it (`gpu`).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rr.io import atomic_dir
from rr.run.gpus import claimed_gpu, gpu_env, resolve_backend
from rr.run.launch import LaunchError, read_launch, write_launch

STATUSES = ("ok", "fault", "timeout", "no_device", "unsupported", "bad_launch")


def run_isolated(launch_dir: str | Path, out_dir: str | Path, backend: str = "auto",
                 timeout_s: float = 120) -> dict:
    """Run a launch in a child process; returns the run record written to OUT/run.json."""
    launch_dir, out_dir = Path(launch_dir), Path(out_dir)
    backend = resolve_backend(backend)
    t0 = time.perf_counter()
    with atomic_dir(out_dir) as tmp, _device_for(backend) as gpu:
        try:
            child = subprocess.run([sys.executable, "-m", "rr.run.child", backend, str(launch_dir), str(tmp)],
                                   capture_output=True, text=True, timeout=timeout_s, env=gpu_env(gpu))
            record_path = tmp / "run.json"
            if record_path.is_file():
                record = json.loads(record_path.read_text())
            else:
                tail = (child.stderr or child.stdout).strip().splitlines()[-5:]
                record = {"status": "fault", "backend": backend,
                          "message": f"the run's process died (exit {child.returncode}): " + " | ".join(tail)}
        except subprocess.TimeoutExpired:
            record = {"status": "timeout", "backend": backend,
                      "message": f"the kernel did not finish within {timeout_s} s; the run's process was killed"}
        record["gpu"] = gpu
        record["wall_ms"] = (time.perf_counter() - t0) * 1e3
        if record["status"] != "ok":
            for p in tmp.iterdir():  # a failed run leaves no partial buffers
                if p.is_file():
                    p.unlink()
        (tmp / "run.json").write_text(json.dumps(record, indent=2) + "\n")
    return record


def _device_for(backend: str):
    """A claimed GPU for the cuda backend; nothing to claim for the others."""
    return claimed_gpu() if backend == "cuda" else contextlib.nullcontext()


def _write_record(path: Path, record: dict, code: int) -> int:
    Path(path).write_text(json.dumps(record, indent=2, default=str) + "\n")
    return code


def time_isolated(reference: str | Path, other: str | Path, noise_target: float = 0.005,
                  time_limit_s: float = 30.0, backend: str = "auto") -> dict:
    """`rr.run.timing.time_pair` in a child process; a fault or hang becomes the record's status."""
    out = Path(tempfile.mkdtemp(prefix="rr-time-")) / "timing.json"
    backend = resolve_backend(backend)
    try:
        with _device_for(backend) as gpu:
            child = subprocess.run(
                [sys.executable, "-m", "rr.run.child", "time", str(reference), str(other), str(out),
                 str(noise_target), str(time_limit_s), backend],
                capture_output=True, text=True, timeout=time_limit_s * 2 + 120, env=gpu_env(gpu))
        if out.is_file():
            return {**json.loads(out.read_text()), "gpu": gpu}
        tail = (child.stderr or child.stdout).strip().splitlines()[-5:]
        return {"status": "fault", "gpu": gpu, "message": f"the timing process died (exit {child.returncode}): "
                + " | ".join(tail)}
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "message": "timing did not finish; its process was killed"}
    finally:
        shutil.rmtree(out.parent, ignore_errors=True)


def child_time(reference: str, other: str, out: str, noise_target: str, time_limit_s: str,
               backend: str) -> int:
    from rr.run.cuda import NoDevice, device_info

    def finish(record: dict, code: int) -> int:
        return _write_record(Path(out), record, code)

    if backend == "cpu":
        return finish({"status": "unsupported", "backend": "cpu",
                       "message": "the cpu backend gives no timing: times are only measured on a GPU"}, 4)
    try:
        device_info()
        for d in (reference, other):
            read_launch(d)
    except NoDevice as e:
        return finish({"status": "no_device", "backend": "cuda", "message": str(e)}, 3)
    except LaunchError as e:
        return finish({"status": "bad_launch", "backend": "cuda", "message": str(e)}, 2)
    from rr.run.timing import time_pair

    try:
        record = time_pair(reference, other, float(noise_target), float(time_limit_s))
    except Exception as e:  # a faulting kernel
        return finish({"status": "fault", "backend": "cuda", "message": f"{type(e).__name__}: {e}"}, 3)
    return finish(record, 0)


def child_main(backend: str, launch_dir: str, out_dir: str) -> int:
    """Entry point of the child process: run, write buffers and run.json into out_dir."""
    from rr.run.cuda import NoDevice

    out = Path(out_dir)

    def finish(record: dict, code: int) -> int:
        return _write_record(out / "run.json", record, code)

    try:
        launch = read_launch(launch_dir)
    except LaunchError as e:
        return finish({"status": "bad_launch", "backend": backend, "message": str(e)}, 2)
    backend = resolve_backend(backend)
    if backend == "cpu":
        from rr.run.cpu import CpuUnsupported, ExecutionError, run_cpu

        try:
            record, outputs = run_cpu(launch_dir, progress=True)
        except CpuUnsupported as e:
            return finish({"status": "unsupported", "backend": "cpu", "message": str(e)}, 4)
        except ExecutionError as e:  # what would fault on a GPU: out-of-bounds, divergent barriers
            return finish({"status": "fault", "backend": "cpu", "message": str(e)}, 3)
        except LaunchError as e:
            return finish({"status": "bad_launch", "backend": "cpu", "message": str(e)}, 2)
        write_launch(out, launch, outputs, Path(launch_dir) / launch.module)
        return finish(record, 0)
    if backend != "cuda":
        return finish({"status": "bad_launch", "backend": backend,
                       "message": f"unknown backend {backend!r} (auto, cuda, cpu)"}, 2)
    try:
        from rr.run.cuda import run_cuda

        record, outputs = run_cuda(launch_dir)
    except NoDevice as e:
        return finish({"status": "no_device", "backend": "cuda", "message": str(e)}, 3)
    except LaunchError as e:
        return finish({"status": "bad_launch", "backend": "cuda", "message": str(e)}, 2)
    except Exception as e:  # CUDA errors: illegal address, launch failures, module load errors
        return finish({"status": "fault", "backend": "cuda", "message": f"{type(e).__name__}: {e}"}, 3)
    write_launch(out, launch, outputs, Path(launch_dir) / launch.module)
    return finish(record, 0)
