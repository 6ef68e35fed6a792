"""The cpu backend on the synthetic enc2: wall time, peak memory, lanes × statements per second,
and byte identity with the numpy model (same `mma` model), at the extents of a 3840×2160 frame.

    python benchmarks/cpu_enc2.py [--extents 240x135]
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

import numpy as np

from rr.run.cpu import run_cpu
from rr.run.launch import load_buffers, read_launch
from rr.synth import model
from rr.synth.inputs import parse_extents, write_enc2


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--extents", default="240x135")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp())
    d = write_enc2(work / "enc2", parse_extents(args.extents))
    t0 = time.perf_counter()
    record, out = run_cpu(d / "launch")
    wall = time.perf_counter() - t0
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
