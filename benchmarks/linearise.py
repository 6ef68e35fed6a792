"""Start-up benchmark: `rr linearise` end to end — a fresh `python -m rr` process: start-up,
imports, parse, linearise, the Parquet file written — against `ptxas -arch=sm_90` on the large
generated kernel of benchmarks/parse.py. The two run in turn, a pair at a time, and the ratio is
taken pair by pair, so that a shared machine's drifting speed moves both sides of each ratio.
Goal (issue 18, item 3): ptxas / rr >= 10.

    python benchmarks/linearise.py [--phases 80] [--pairs 3] [--build build/bench]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from parse import build_ptx, time_ptxas  # noqa: E402


def timed(command: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--phases", type=int, default=80)
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--build", type=Path, default=Path("build/bench"))
    a = p.parse_args()
    ptx = build_ptx(a.build, a.phases)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "statements.parquet"
        rr = [sys.executable, "-m", "rr", "linearise", str(ptx), "--entry", "big_kernel", "-o", str(out)]
        timed(rr)  # once before: the bytecode written, the file in the page cache
        pairs = [(timed(rr), time_ptxas(ptx, 1)[0]) for _ in range(a.pairs)]
    rr_s, ptxas_s = [r for r, _ in pairs], [q for _, q in pairs]
    ratios = [q / r for r, q in pairs]
    print(f"file    {ptx} ({ptx.stat().st_size / 1e6:.2f} MB)")
    print(f"rr      linearise, whole process: median {statistics.median(rr_s):.2f} s (min {min(rr_s):.2f}, "
          f"max {max(rr_s):.2f}) over {a.pairs} runs")
    print(f"ptxas   -arch=sm_90: median {statistics.median(ptxas_s):.2f} s (min {min(ptxas_s):.2f}, max {max(ptxas_s):.2f})")
    print(f"ratio   ptxas / rr linearise, pair by pair: median {statistics.median(ratios):.1f}x "
          f"(min {min(ratios):.1f}, max {max(ratios):.1f})   goal >= 10x")


if __name__ == "__main__":
    main()
