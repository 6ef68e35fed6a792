"""What one `rr run` of a small launch costs as a whole process, where that time goes, and how
many of them one GPU serves at once (issue 36, item 3).

    python benchmarks/run_startup.py [--backend cuda] [--runs 10] [--procs 16] [--per-proc 8]
                                     [--baseline SRC] [--work DIR]

The launch is the sample kernel's (`rr sample-launch`: one warp, 16 fp8 tiles), so what is
measured is start-up, not the kernel. Each figure is the median of `--runs` whole processes
(`python -P -m rr run L --backend B -o OUT`, as a user's script or a Snakemake job starts one):

- cold: a fresh child per run (the default);
- worker: RR_WORKER=1, after a first run that starts the worker (rr.run.worker; it ends 20 s after
  its last job);
- the parts, each its own process: the interpreter alone, the parent's imports (what `rr run`
  imports before the child starts), the child as the parent starts it (`python -m rr.run.child`),
  and in it cupy's import and a CUDA context;
- throughput: `--procs` processes each running `--per-proc` cold runs one after another, against
  one process running `--per-proc`: how many times one process's rate they reach together.

`--baseline SRC`: the same figures for another checkout of rr (its directory; PYTHONPATH), each
taken right after this checkout's, so that the pairs share the machine's state.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


def env_for(src: Path, work: Path, **extra) -> dict:
    path = [str(src), *(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p) != HERE)]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path), "RR_WORKER_DIR": str(work / "workers"),
            "RR_GPU_LOCK_DIR": str(work / "locks"), **extra}


def timed(cmd: list, env: dict, cwd: Path) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if r.returncode:
        sys.exit(f"{' '.join(map(str, cmd))}: exit {r.returncode}\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    return dt


def rr_run(launch: Path, out: Path, backend: str) -> list:
    return [sys.executable, "-P", "-m", "rr", "run", str(launch), "--backend", backend, "-o", str(out)]


def median_ms(f, n: int) -> float:
    return statistics.median(f(i) for i in range(n)) * 1e3


def measures(backend: str, runs: int, procs: int, per_proc: int) -> list:
    """(name, f(src, work, launch) -> the figure) in the order they are taken and printed."""
    py = [sys.executable, "-P"]

    def each(cmd_of, worker: bool = False):
        def f(src, work, launch):
            env = env_for(src, work, RR_WORKER="1" if worker else "0", RR_WORKER_IDLE_S="20")
            return median_ms(lambda i: timed(cmd_of(launch, _fresh(work / "outs" / str(i))), env, work), runs)
        return f

    def worker_first(src, work, launch):
        env = env_for(src, work, RR_WORKER="1", RR_WORKER_IDLE_S="20")
        return timed(rr_run(launch, _fresh(work / "outs" / "first") / "o", backend), env, work) * 1e3

    def throughput(src, work, launch):
        env = env_for(src, work, RR_WORKER="0")

        def series(p: int) -> None:
            for i in range(per_proc):
                timed(rr_run(launch, _fresh(work / "outs" / f"p{p}-{i}") / "o", backend), env, work)

        t0 = time.perf_counter()
        series(0)
        one = time.perf_counter() - t0
        t0 = time.perf_counter()
        with ThreadPoolExecutor(procs) as pool:
            list(pool.map(series, range(procs)))
        return (procs * per_proc / (time.perf_counter() - t0)) / (per_proc / one)

    m = [("interpreter (python -P -c pass)", each(lambda L, o: [*py, "-c", "pass"])),
         ("parent's imports", each(lambda L, o: [*py, "-c", "import rr.cli.main, rr.run.isolate"])),
         ("child alone (python -m rr.run.child)", each(lambda L, o: [*py, "-m", "rr.run.child", backend, str(L),
                                                                       str(o), "", ""]))]
    if backend == "cuda":
        m += [("  import cupy", each(lambda L, o: [*py, "-c", "import cupy"])),
              ("  import cupy, a context", each(lambda L, o: [*py, "-c", "import cupy; cupy.cuda.runtime.free(0)"]))]
    m += [("rr run, cold", each(lambda L, o: rr_run(L, o / "o", backend))),
          ("rr run, the worker's first", worker_first),
          ("rr run, through the worker", each(lambda L, o: rr_run(L, o / "o", backend), worker=True)),
          (f"{procs} processes: x one's runs/s", throughput)]
    return m


def _fresh(d: Path) -> Path:
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    return d


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--procs", type=int, default=16)
    ap.add_argument("--per-proc", type=int, default=8)
    ap.add_argument("--baseline", type=Path, help="another checkout of rr: its figures beside this one's")
    ap.add_argument("--work", type=Path)
    args = ap.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="rr-startup-"))
    work.mkdir(parents=True, exist_ok=True)
    launch = work / "sample.launch"
    if not launch.is_dir():
        timed([sys.executable, "-P", "-m", "rr", "sample-launch", str(HERE / "rr/data/sample_swin.ptx"), "-o",
               str(launch)], env_for(HERE, work), work)
    sources = {"this": HERE, **({"baseline": args.baseline.resolve()} if args.baseline else {})}
    for name in sources:
        (work / name).mkdir(exist_ok=True)
    print(f"rr run of the sample launch, backend {args.backend}: medians of {args.runs} processes (ms); "
          f"throughput: {args.procs} processes of {args.per_proc} runs each")
    print(f"{'':40}" + "".join(f"{n:>10}" for n in sources))
    for name, f in measures(args.backend, args.runs, args.procs, args.per_proc):
        values = [f(src, work / n, launch) for n, src in sources.items()]  # each source right after the other
        print(f"{name:40}" + "".join(f"{v:10.2f}" if "runs/s" in name else f"{v:10.0f}" for v in values), flush=True)
    for name in sources:
        shutil.rmtree(work / name / "outs", ignore_errors=True)


if __name__ == "__main__":
    main()
