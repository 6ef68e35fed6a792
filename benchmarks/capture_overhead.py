"""On a GPU: what rr capture costs on the engine-style test program (tests/cuda/capture_app.cu) at
3840×2160 — each iteration's two launches (capa: 136-byte block, RGBA16F texture and surface, an
arena of 132 MB; capb: reads the arena, writes as much) timed by the program itself, without and
with the capture; per launch the interposer's own times (copies before, launch and sync, copies
after, each including the writes of the .npy files) and the bytes it copied.

    python benchmarks/capture_overhead.py [--size 3840x2160] [--iterations 3] [--out DIR]

Prints one JSON object: plain and captured milliseconds per iteration (median of the iterations
after the first), the overhead per launch, and per launch entry the copied bytes and the
copy-and-write bandwidth (bytes / (before + after time)). Needs nvcc and cc; about 2.5 GB of disk
for 3 iterations at 3840×2160 (written under --out).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from common import rr, work_dir

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


def iteration_ms(stdout: str) -> float:
    times = [float(t) for t in re.findall(r"iteration \d+: ([0-9.]+) ms", stdout)]
    return statistics.median(times[1:] if len(times) > 1 else times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="3840x2160")
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--out")
    args = ap.parse_args()
    if shutil.which("nvcc") is None:
        sys.exit("capture_overhead: needs nvcc")
    work = work_dir(args.out)
    app, fatbin = build(work)
    w, h = args.size.split("x")
    argv = [str(app), str(fatbin), w, h, str(args.iterations)]
    plain = subprocess.run(argv, capture_output=True, text=True, check=True)
    cap = work / "cap"
    captured = rr("capture", "-o", cap, "--", *argv)
    launches = json.loads((cap / "capture.json").read_text())["launches"]
    per_entry = {}
    for e in launches:
        t = e["times_ns"]
        row = per_entry.setdefault(e["entry"], {"launches": 0, "bytes_copied": 0, "before_ms": [], "launch_ms": [],
                                                "after_ms": []})
        row["launches"] += 1
        row["bytes_copied"] = e["bytes_copied"]
        row["before_ms"].append(t["before"] / 1e6)
        row["launch_ms"].append(t["launch"] / 1e6)
        row["after_ms"].append(t["after"] / 1e6)
    for row in per_entry.values():
        for k in ("before_ms", "launch_ms", "after_ms"):
            row[k] = round(statistics.median(row[k]), 3)
        row["copy_and_write_GBps"] = round(row["bytes_copied"] / ((row["before_ms"] + row["after_ms"]) * 1e6), 3)
    p, c = iteration_ms(plain.stdout), iteration_ms(captured.stdout)
    print(json.dumps({"size": args.size, "iterations": args.iterations, "plain_ms_per_iteration": round(p, 3),
                      "captured_ms_per_iteration": round(c, 3), "overhead_ms_per_launch": round((c - p) / 2, 3),
                      "launches_captured": len(launches), "per_entry": per_entry,
                      "capture_npy_bytes": sum(f.stat().st_size for f in cap.rglob("*.npy"))}, indent=2))


if __name__ == "__main__":
    main()
