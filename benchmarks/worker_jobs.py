"""Per-job wall time of `rr run` and `rr time` as a sweep's jobs pay it, with a fresh child per job
and with the GPU's long-lived worker (RR_WORKER=1, rr.run.worker): the synthetic enc2 launched over
a frame, each job a whole `python -m rr` process as Snakemake runs it; with `--network` the whole
eleven-layer frame instead (what a sweep's cell captures and times: 265 MiB of buffers at 4K).

    python benchmarks/worker_jobs.py [--frame 3840x2160] [--runs 20] [--timings 5] [--backend cuda] [--network]
                                     [--modules ptx cubin] [--worker-only]

`--modules`: the layers' modules as the corpus has them (PTX, which the driver compiles — from its
cache after the first time — at every module load), or each compiled by `rr compile` first (cubin).
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
from pathlib import Path


def job(args: list, worker: bool, env_dir: Path) -> float:
    env = {**os.environ, "RR_WORKER": "1" if worker else "0", "RR_WORKER_DIR": str(env_dir)}
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "rr.cli", *map(str, args)], capture_output=True, text=True, env=env)
    if r.returncode:
        sys.exit(f"rr {' '.join(map(str, args))}: exit {r.returncode}\n{r.stderr}")
    return time.perf_counter() - t0


def compiled(w: Path, what: str) -> None:
    """w/cubin: the launch (or frame) of w/ptx with every layer's module compiled by rr compile."""
    from concurrent.futures import ThreadPoolExecutor

    from rr.synth.family import LAYERS

    layers = [s.name for s in LAYERS] if what == "frame" else ["enc2"]
    entry = "cuda_dldn_engine_swin_{}_kernel"
    with ThreadPoolExecutor(len(layers)) as pool:
        list(pool.map(lambda L: job(["compile", w / "corpus", "--entry", entry.format(L), "-o", w / f"{L}.cubin"],
                                    False, w / "workers"), layers))
    src = w / "ptx"
    for i, layer in enumerate(layers):
        dst = w / ("cubin" if i == len(layers) - 1 else f"step{i}")
        job(["relaunch", src, *(["--layer", layer] if what == "frame" else []), "--module", w / f"{layer}.cubin",
             "-o", dst], False, w / "workers")
        src = dst


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--frame", default="3840x2160")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--timings", type=int, default=5)
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--network", action="store_true", help="the whole network's frame rather than enc2 alone")
    ap.add_argument("--modules", nargs="+", choices=("ptx", "cubin"), default=["ptx"])
    ap.add_argument("--worker-only", action="store_true", help="no series with a fresh child per job")
    a = ap.parse_args()
    w = Path(tempfile.mkdtemp())
    what = "frame" if a.network else "enc2"
    for cmd in (("synth", "engine", "-o", w / "e.bin"), ("extract", w / "e.bin", "-o", w / "corpus"),
                ("launch", what, w / "corpus", "--frame", a.frame, "-o", w / "ptx")):
        job(list(cmd), False, w / "workers")
    if "cubin" in a.modules:
        compiled(w, what)
    print(f"{what} over a {a.frame} frame, backend {a.backend}: seconds of wall time per job (median, min-max)")
    series = (True, True) if a.worker_only else (False, True, False, True)  # alternated: drift falls on both
    for worker in series:
        for modules in a.modules:
            runs = []
            for i in range(a.runs):
                runs.append(job(["run", w / modules, "--backend", a.backend, "-o", w / "o"], worker, w / "workers"))
                shutil.rmtree(w / "o")
            times = [job(["time", w / modules, "--vs", w / modules, "--backend", a.backend, "-o", w / f"t{i}.json"],
                         worker, w / "workers") for i in range(a.timings)] if a.backend == "cuda" else []
            label = f"{'worker' if worker else 'fresh child'}, {modules}"
            print(f"  {label:<19} rr run {statistics.median(runs):.3f} ({min(runs):.3f}-{max(runs):.3f}), first "
                  f"{runs[0]:.3f}" + (f"; rr time {statistics.median(times):.3f} ({min(times):.3f}-"
                                      f"{max(times):.3f})" if times else ""), flush=True)
    for pid in (w / "workers").glob("*.pid"):
        subprocess.run(["kill", pid.read_text()], check=False)


if __name__ == "__main__":
    main()
