"""How many ptxas a host runs at once: N copies of one module compiled together, N = 1 … cores.

    python benchmarks/ptxas_scaling.py results/frame/layout/enc4.ptx [more.ptx …] [--jobs 1 4 8 16]

A sweep compiles one module a recipe (1788 for the network), so the host's ptxas throughput is
its floor. Prints, per module and N: the wall time, the mean time of one compile, and modules per
second — linear scaling means the cores are real cores, and the loss at N = cores is what sharing
the memory system costs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rr.run.compile import find_ptxas  # noqa: E402


def compile_once(ptxas: str, ptx: Path, out: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run([ptxas, "-arch=sm_90", "-v", str(ptx), "-o", str(out)], capture_output=True, check=True)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ptx", nargs="+", type=Path)
    ap.add_argument("--jobs", type=int, nargs="+", default=[1, 4, 8, 12, os.cpu_count() or 1])
    args = ap.parse_args()
    ptxas = find_ptxas()
    if ptxas is None:
        sys.exit("ptxas not found: put the CUDA toolkit's bin on PATH or pip install nvidia-cuda-nvcc")
    print(f"{os.cpu_count()} CPUs; {ptxas}")
    with tempfile.TemporaryDirectory() as tmp:
        for ptx in args.ptx:
            for n in args.jobs:
                t0 = time.perf_counter()
                with ThreadPoolExecutor(n) as pool:
                    each = list(pool.map(lambda i: compile_once(ptxas, ptx, Path(tmp, f"{i}.cubin")), range(n)))
                wall = time.perf_counter() - t0
                print(f"{ptx.name} N={n:3d}: wall {wall:6.2f} s, one compile {sum(each) / n:6.2f} s, "
                      f"{n / wall:5.2f} modules/s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
