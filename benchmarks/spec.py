"""Describe benchmark: `rr spec --json` (parse, linearise, phases, provenance, epilogues, params)
against ptxas on the large generated kernel of benchmarks/parse.py. Each rr run is a fresh process.

    python benchmarks/spec.py [--phases 80] [--runs 3] [--build build/bench]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from parse import build_ptx, time_ptxas  # noqa: E402


def time_spec(ptx: Path, entry: str, runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "rr.cli", "spec", str(ptx), "--entry", entry, "--json"],
                       check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    return times


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--phases", type=int, default=80)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--build", type=Path, default=Path("build/bench"))
    a = p.parse_args()
    ptx = build_ptx(a.build, a.phases)
    spec = time_spec(ptx, "big_kernel", a.runs)
    ptxas = min(time_ptxas(ptx, 1))
    print(f"file   {ptx} ({ptx.stat().st_size / 1e6:.2f} MB)")
    print(f"rr     spec --json, whole process: best {min(spec):.2f} s, median {statistics.median(spec):.2f} s "
          f"over {a.runs} runs")
    print(f"ptxas  -arch=sm_90: {ptxas:.2f} s")
    print(f"ratio  ptxas / rr spec = {ptxas / min(spec):.1f}x (best), "
          f"{ptxas / statistics.median(spec):.1f}x (median)   goal >= 5x")


if __name__ == "__main__":
    main()
