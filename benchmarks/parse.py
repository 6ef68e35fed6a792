"""Front-end benchmark: rr parse + linearise against ptxas on one large NVVM kernel.

Generates a fully unrolled engine-style kernel (benchmarks/big_kernel.py), compiles it to PTX with
nvcc, then on the same file times `rr` parse + linearise (best and median of several runs, each in a
fresh process so nothing is cached), measures the peak memory that adds to the process, and times
`ptxas -arch=sm_90`. Prints the figures recorded in docs/benchmarks.md.

    python benchmarks/parse.py [--phases 80] [--runs 5] [--build build/bench]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from big_kernel import source  # noqa: E402

# Runs in a child process: parse + linearise once, report seconds, statements and memory.
_CHILD = r"""
import json, resource, sys, time
from rr.ptx import linearise, parse

def vm(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
text = open(sys.argv[1]).read()
before = vm("VmRSS:")
t0 = time.perf_counter()
module = parse(text, source=sys.argv[1])
# has_body, not body: asking for `body` builds the syntax tree, which `rr linearise` never does
stmts = [s for f in module.functions if f.has_body for s in linearise(f)]
seconds = time.perf_counter() - t0
print(json.dumps({"seconds": seconds, "statements": len(stmts), "peak_added": vm("VmHWM:") - before}))
"""


def build_ptx(build: Path, phases: int) -> Path:
    build.mkdir(parents=True, exist_ok=True)
    cu = source(phases, 12, 3)
    tag = hashlib.sha1(cu.encode()).hexdigest()[:12]
    ptx = build / f"big_kernel-{phases}-{tag}.ptx"
    if not ptx.exists():
        nvcc = shutil.which("nvcc")
        if nvcc is None:
            sys.exit("nvcc is not on PATH: it is needed to build the benchmark kernel")
        (build / "big_kernel.cu").write_text(cu)
        print(f"nvcc: compiling a {phases}-phase kernel (minutes) ...", flush=True)
        t0 = time.perf_counter()
        subprocess.run([nvcc, "-ptx", "-arch=sm_90", str(build / "big_kernel.cu"), "-o", str(ptx) + ".tmp"],
                       check=True)
        os.replace(str(ptx) + ".tmp", ptx)
        print(f"nvcc: {time.perf_counter() - t0:.1f} s", flush=True)
    return ptx


def time_rr(ptx: Path, runs: int) -> list[dict]:
    out = []
    for _ in range(runs):
        r = subprocess.run([sys.executable, "-c", _CHILD, str(ptx)], check=True, capture_output=True,
                           text=True)
        out.append(json.loads(r.stdout))
    return out


def time_ptxas(ptx: Path, runs: int) -> list[float]:
    ptxas = shutil.which("ptxas")
    if ptxas is None:
        sys.exit("ptxas is not on PATH")
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([ptxas, "-arch=sm_90", str(ptx), "-o", os.devnull], check=True)
        times.append(time.perf_counter() - t0)
    return times


def python_loop_s() -> float:
    """Seconds for a bare 10^7-iteration Python loop: how fast this machine is right now (a shared
    VM's speed varies between runs, and rr's figure is per-statement Python work)."""
    t0 = time.perf_counter()
    for _ in range(10**7):
        pass
    return time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--phases", type=int, default=80)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--ptxas-runs", type=int, default=2)
    p.add_argument("--build", type=Path, default=Path("build/bench"))
    a = p.parse_args()

    ptx = build_ptx(a.build, a.phases)
    size = ptx.stat().st_size
    rr_runs = time_rr(ptx, a.runs)
    ptxas_runs = time_ptxas(ptx, a.ptxas_runs)

    n = rr_runs[0]["statements"]
    best = min(r["seconds"] for r in rr_runs)
    median = statistics.median(r["seconds"] for r in rr_runs)
    peak = max(r["peak_added"] for r in rr_runs)
    ptxas_best = min(ptxas_runs)
    print(f"machine      {platform.node()} ({os.cpu_count()} cores, Python {platform.python_version()}); "
          f"a 10^7-iteration Python loop takes {python_loop_s():.2f} s")
    print(f"file         {ptx}  {size / 1e6:.2f} MB, {n} statements")
    print(f"rr           parse + linearise: best {best:.3f} s, median {median:.3f} s over {a.runs} runs")
    print(f"             {n / best:,.0f} statements/s (best), {n / median:,.0f} (median)   goal >= 100,000")
    print(f"             peak memory added {peak / 1e6:.1f} MB = {peak / size:.1f}x the file   goal < 20x")
    print(f"ptxas        -arch=sm_90: best {ptxas_best:.2f} s over {a.ptxas_runs} runs")
    print(f"ratio        ptxas / rr = {ptxas_best / best:.1f}x (best), {ptxas_best / median:.1f}x (median)   goal >= 10x")


if __name__ == "__main__":
    main()
