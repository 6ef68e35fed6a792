"""On a GPU: what rr capture costs on the engine-style test program (tests/cuda/capture_app.cu) at
3840×2160 — each iteration's two launches (capa: 136-byte block, RGBA16F texture and surface, an
arena of 132 MB; capb: reads the arena, writes as much) timed by the program itself, without and
with the capture; per launch the interposer's own times (copies before, launch and sync, copies
after, each including the writes of the .npy files) and the bytes it copied.

    python benchmarks/capture_overhead.py [--size 3840x2160] [--iterations 3] [--out DIR] [--fake]

Prints one JSON object: plain and captured milliseconds per iteration (median of the iterations
after the first), the overhead per launch, and per launch entry (medians over its launches) the
copied and the written bytes (a buffer found as the last captured launch left it is a hard link,
not written again), the copy-and-write bandwidth (copied bytes / (before + after time)) and the
copies' own (copied bytes / time in the device-to-host copies); the bytes the capture's .npy files
take on disk (each hard-linked file once). Needs nvcc and cc; about 1 GB of disk
for 3 iterations at 3840×2160 (written under --out).

--fake runs the same shape without a GPU: tests/capture/fake_app.c's `bench` scenario (per
iteration a 136-byte-block launch on 16 bytes per pixel in and out, a texture and a surface, then
a launch reading its output) on the fake driver, whose device memory is host memory. What it
measures is the interposer's own work — the host copies, comparisons and file writes — which is
what remains on a GPU once the device-to-host copies run at the bus's speed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from common import rr, work_dir

from rr.capture.index import read_capture

ROOT = Path(__file__).resolve().parent.parent
GENCODE = "-gencode=arch=compute_90,code=[sm_90,compute_90]"


def build(work: Path) -> tuple[Path, Path]:
    """capture_app and its driver-API module; linked against libcuda, or against the fake driver as
    a stub for it where the toolkit has no libcuda to link (the system's driver is loaded at run time)."""
    src = ROOT / "tests/cuda/capture_app.cu"
    app, fatbin = work / "capture_app", work / "capture_app.fatbin"
    cmd = ["nvcc", "-O2", GENCODE, "-o", str(app), str(src), "-lcuda"]
    if subprocess.run(cmd, capture_output=True).returncode:
        stub = work / "stub"
        stub.mkdir(exist_ok=True)
        subprocess.run(["cc", "-shared", "-fPIC", f"-I{ROOT / 'tests/capture'}", "-Wl,-soname,libcuda.so.1", "-o",
                        str(stub / "libcuda.so"), str(ROOT / "tests/capture/fake_cuda.c")], check=True)
        subprocess.run(cmd[:-1] + [f"-L{stub}", "-lcuda"], check=True)
    subprocess.run(["nvcc", "-fatbin", GENCODE, "-o", str(fatbin), str(src)], check=True)
    return app, fatbin


def build_fake(work: Path) -> tuple[Path, Path, dict]:
    """The fake driver (as libcuda.so.1), fake_app and the PTX of its kernels; the environment that
    makes the fake driver the one loaded."""
    here = ROOT / "tests/capture"
    cc = ["cc", "-O2", f"-I{here}"]
    subprocess.run([*cc, "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", str(work / "libcuda.so.1"),
                    str(here / "fake_cuda.c")], check=True)
    if not (work / "libcuda.so").exists():
        (work / "libcuda.so").symlink_to("libcuda.so.1")
    subprocess.run([*cc, "-o", str(work / "fake_app"), str(here / "fake_app.c"), f"-L{work}", "-lcuda",
                    f"-Wl,-rpath,{work}"], check=True)
    subprocess.run(["nvcc", "-ptx", "-o", str(work / "kernels.ptx"), str(here / "kernels.cu")], check=True)
    return work / "fake_app", work / "kernels.ptx", {"LD_LIBRARY_PATH": str(work)}


def iteration_ms(stdout: str) -> float:
    times = [float(t) for t in re.findall(r"iteration \d+: ([0-9.]+) ms", stdout)]
    return statistics.median(times[1:] if len(times) > 1 else times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="3840x2160")
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--out")
    ap.add_argument("--fake", action="store_true", help="no GPU: the fake driver and fake_app's bench scenario")
    args = ap.parse_args()
    if shutil.which("nvcc") is None:
        sys.exit("capture_overhead: needs nvcc")
    work = work_dir(args.out)
    w, h = args.size.split("x")
    if args.fake:
        app, ptx, env = build_fake(work)
        argv = [str(app), "bench", str(ptx), w, h, str(args.iterations)]
    else:
        app, fatbin = build(work)
        argv, env = [str(app), str(fatbin), w, h, str(args.iterations)], {}
    os.environ.update(env)  # the program's, and rr capture's (which passes it on)
    plain = subprocess.run(argv, capture_output=True, text=True, check=True)
    cap = work / "cap"
    t0 = time.perf_counter()
    captured = rr("capture", "-o", cap, "--", *argv)
    wall = time.perf_counter() - t0
    launches = read_capture(cap)["launches"]
    per_entry = {}
    for e in launches:
        t = e["times_ns"]
        row = per_entry.setdefault(e["entry"], {"launches": 0, "bytes_copied": 0, "bytes_written": [], "before_ms": [],
                                                "launch_ms": [], "after_ms": [], "copies_ms": [], "writes_ms": []})
        row["launches"] += 1
        row["bytes_copied"] = e["bytes_copied"]
        row["bytes_written"].append(e.get("bytes_written", e["bytes_copied"]))  # an interposer before the field: all
        for k in ("before", "launch", "after", "copies", "writes"):
            if k in t:
                row[f"{k}_ms"].append(t[k] / 1e6)
    for row in per_entry.values():  # medians over the launches (the first ones fill the host buffers)
        row["bytes_written"] = int(statistics.median(row["bytes_written"]))
        for k in ("before_ms", "launch_ms", "after_ms", "copies_ms", "writes_ms"):
            row[k] = round(statistics.median(row[k]), 3) if row[k] else None
        row["copy_and_write_GBps"] = round(row["bytes_copied"] / ((row["before_ms"] + row["after_ms"]) * 1e6), 3)
        if row["copies_ms"]:
            row["copy_GBps"] = round(row["bytes_copied"] / (row["copies_ms"] * 1e6), 3)
    p, c = iteration_ms(plain.stdout), iteration_ms(captured.stdout)
    inodes = {(f.stat().st_dev, f.stat().st_ino): f.stat().st_size for f in cap.rglob("*.npy")}
    print(json.dumps({"driver": "fake" if args.fake else "cuda", "size": args.size, "iterations": args.iterations,
                      "rr_capture_wall_s": round(wall, 2), "plain_ms_per_iteration": round(p, 3),
                      "captured_ms_per_iteration": round(c, 3), "overhead_ms_per_launch": round((c - p) / 2, 3),
                      "launches_captured": len(launches), "per_entry": per_entry,
                      "capture_npy_bytes_on_disk": sum(inodes.values()),
                      "capture_npy_files": sum(1 for _ in cap.rglob("*.npy"))}, indent=2))


if __name__ == "__main__":
    main()
