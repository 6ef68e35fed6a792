"""The cpu backend on the synthetic enc2: wall time, peak memory, lanes × statements per second,
and byte identity with the numpy model (same `mma` model), at the extents of a 3840×2160 frame.

    python benchmarks/cpu_enc2.py [--extents 240x135]
    python benchmarks/cpu_enc2.py --against-ptxas 5 [--baseline SRC]
    python benchmarks/cpu_enc2.py --digests

`--against-ptxas N`: N rounds of the cpu run (`run_cpu`, each in a fresh process) and `ptxas
-arch=sm_90` of the same PTX, in turn, their order rotating round by round, and the ratio taken
round by round: on a shared machine only the paired ratio means anything. `--baseline SRC` adds
the cpu run of another checkout's rr (SRC, its `rr/` on the path) to every round, so before and
after are timed in the same rounds. The ratios are of the run's own wall (the figure above) and
of the whole process (Python's start and the imports included). Goal (issue 36): at most 1.5.

`--digests`: the sha256 of every buffer after the run, for showing that a change keeps the bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from rr.run.cpu import run_cpu
from rr.run.launch import load_buffers, read_launch
from rr.synth import model
from rr.synth.inputs import parse_extents, write_enc2

sys.path.insert(0, str(Path(__file__).resolve().parent))
from parse import time_ptxas  # noqa: E402


# The child of --against-ptxas, a process of its own: one cpu run, its wall as JSON on stdout.
_TIMED_RUN = r"""
import json, sys, time
from rr.run.cpu import run_cpu
t0 = time.perf_counter()
run_cpu(sys.argv[1])
print(json.dumps({"wall": time.perf_counter() - t0}))
"""


def cpu_process(launch: Path, src: str | None) -> tuple[float, float]:
    """(run_cpu's wall, the whole process's wall) of one fresh process; `src`: a checkout whose rr runs."""
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = os.pathsep.join([str(Path(src).resolve()), *filter(None, [env.get("PYTHONPATH")])])
    t0 = time.perf_counter()
    # run from the launch directory: the current directory (first on a `-c` child's path) holds no rr
    r = subprocess.run([sys.executable, "-c", _TIMED_RUN, str(launch.resolve())], env=env, cwd=launch, check=True,
                       capture_output=True, text=True)
    whole = time.perf_counter() - t0
    return json.loads(r.stdout.splitlines()[-1])["wall"], whole


def against_ptxas(launch: Path, rounds: int, baseline: str | None) -> None:
    ptx = launch / read_launch(launch).module
    sides = {"cpu": None, **({"baseline": baseline} if baseline else {})}
    names = ["ptxas", *sides]
    for name in sides:  # once before: bytecode written, tables cached, files in the page cache
        cpu_process(launch, sides[name])
    got: dict = {name: [] for name in names}
    for i in range(rounds):
        order = names[i % len(names):] + names[:i % len(names)]
        for name in order:
            got[name].append(time_ptxas(ptx, 1)[0] if name == "ptxas" else cpu_process(launch, sides[name]))
    p = got["ptxas"]
    print(f"ptxas -arch=sm_90 {ptx.name}: median {statistics.median(p):.2f} s ({min(p):.2f}–{max(p):.2f}), {rounds} rounds")
    for name in sides:
        run = [r for r, _ in got[name]]
        whole = [w for _, w in got[name]]
        ratio = [r / q for r, q in zip(run, p)]
        ratio_whole = [w / q for w, q in zip(whole, p)]
        label = name if name == "cpu" else f"baseline ({baseline})"
        print(f"{label}: run_cpu median {statistics.median(run):.2f} s ({min(run):.2f}–{max(run):.2f}), whole process "
              f"{statistics.median(whole):.2f} s; / ptxas round by round: median {statistics.median(ratio):.2f}x "
              f"({min(ratio):.2f}–{max(ratio):.2f}), whole process {statistics.median(ratio_whole):.2f}x")
    if baseline:
        after = [r for r, _ in got["cpu"]]
        before = [r for r, _ in got["baseline"]]
        change = [a / b for a, b in zip(after, before)]
        print(f"cpu / baseline, round by round: median {statistics.median(change):.2f} ({min(change):.2f}–{max(change):.2f})")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--extents", default="240x135")
    ap.add_argument("--against-ptxas", type=int, metavar="ROUNDS")
    ap.add_argument("--baseline", metavar="SRC", help="with --against-ptxas: a checkout whose cpu run is timed too")
    ap.add_argument("--digests", action="store_true")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp())
    d = write_enc2(work / "enc2", parse_extents(args.extents))
    if args.against_ptxas:
        return against_ptxas(d / "launch", args.against_ptxas, args.baseline)
    t0 = time.perf_counter()
    record, out = run_cpu(d / "launch")
    wall = time.perf_counter() - t0
    if args.digests:
        for name, array in sorted(out.items()):
            print(f"{name:<9} sha256 {hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()}")
        return
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    run_s = record["times_ms"]["run"] / 1e3
    print(f"enc2 at {args.extents} on the cpu backend: {wall:.1f} s wall (decode {record['times_ms']['prepare'] / 1e3:.2f} s, "
          f"run {run_s:.1f} s), peak RSS {peak_mib:.0f} MiB; {record['lanes']} lanes, "
          f"{record['lane_statements']:.3g} lane-statements, {record['lane_statements'] / run_s:.3g} lane-statements/s")
    launch = read_launch(d / "launch")
    inp = load_buffers(d / "launch", launch)
    t0 = time.perf_counter()
    ref = model.forward(model.Enc2Inputs(inp["weights"], inp["input"], inp["texture"]))
    print(f"numpy model {time.perf_counter() - t0:.1f} s")
    for name in ("arena", "half_out", "surface0", "surface1", "surface2"):
        same = np.array_equal(np.ascontiguousarray(out[name]).view(np.uint8), ref[name].view(np.uint8))
        print(f"  {name:<9} byte-identical to the model: {same}")


if __name__ == "__main__":
    main()
