"""Per-job wall time of `rr run` and `rr time` as a sweep's jobs pay it, with a fresh child per job
and with the GPU's long-lived worker (RR_WORKER=1, rr.run.worker): the synthetic enc2 launched over
a frame, each job a whole `python -m rr` process as Snakemake runs it.

    python benchmarks/worker_jobs.py [--frame 3840x2160] [--runs 20] [--timings 5] [--backend cuda]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def job(args: list, worker: bool, env_dir: Path) -> float:
    env = {**os.environ, "RR_WORKER": "1" if worker else "0", "RR_WORKER_DIR": str(env_dir)}
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "rr.cli", *map(str, args)], capture_output=True, text=True, env=env)
    if r.returncode:
        sys.exit(f"rr {' '.join(map(str, args))}: exit {r.returncode}\n{r.stderr}")
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--frame", default="3840x2160")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--timings", type=int, default=5)
    ap.add_argument("--backend", default="cuda")
    a = ap.parse_args()
    w = Path(tempfile.mkdtemp())
    for cmd in (("synth", "engine", "-o", w / "e.bin"), ("extract", w / "e.bin", "-o", w / "corpus"),
                ("launch", "enc2", w / "corpus", "--frame", a.frame, "-o", w / "enc2")):
        job(list(cmd), False, w / "workers")
    print(f"enc2 over a {a.frame} frame, backend {a.backend}: seconds of wall time per job (median, min-max)")
    for worker in (False, True, False, True):  # alternated: a drifting machine falls on both
        runs = [job(["run", w / "enc2", "--backend", a.backend, "-o", w / f"o{i}"], worker, w / "workers")
                for i in range(a.runs)]
        times = [job(["time", w / "enc2", "--vs", w / "enc2", "--backend", a.backend, "-o", w / f"t{i}.json"],
                     worker, w / "workers") for i in range(a.timings)] if a.backend == "cuda" else []
        label = "worker" if worker else "fresh child"
        print(f"  {label:<12} rr run {statistics.median(runs):.3f} ({min(runs):.3f}-{max(runs):.3f}), first "
              f"{runs[0]:.3f}" + (f"; rr time {statistics.median(times):.3f} ({min(times):.3f}-{max(times):.3f})"
                                  if times else ""))
    for pid in (w / "workers").glob("*.pid"):
        subprocess.run(["kill", pid.read_text()], check=False)


if __name__ == "__main__":
    main()
