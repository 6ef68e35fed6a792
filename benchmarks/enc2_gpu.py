"""On a GPU: the synthetic enc2 through the CUDA backend against its numpy model, at a small size
and at the extents of a 3840×2160 frame (240×135) — per output buffer the share of identical
elements over the whole buffer (e4m3 codes, f16 values), max |Δ| and PSNR, whether the outputs are
finite and not constant; the ptxas report; the kernel time.

    python benchmarks/enc2_gpu.py [--extents 16x16 240x135] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from common import rr, work_dir

from rr.run.compare import as_numbers, compare_buffer
from rr.run.launch import load_buffers, read_launch
from rr.synth import model

OUTPUTS = ("arena", "half_out", "surface0", "surface1", "surface2")


def check(extents: str, work: Path) -> list[dict]:
    d = work / extents
    rr("synth", "enc2", "--extents", extents, "-o", str(d))
    rr("compile", str(d / "enc2.ptx"), "-o", str(d / "enc2.cubin"))
    report = json.loads((d / "enc2.cubin.json").read_text())
    rr("run", str(d / "launch"), "--backend", "cuda", "-o", str(d / "gpu"))
    launch = read_launch(d / "launch")
    inputs = load_buffers(d / "launch", launch)
    gpu = load_buffers(d / "gpu", launch)
    t0 = time.perf_counter()
    ref = model.forward(model.Enc2Inputs(inputs["weights"], inputs["input"], inputs["texture"]))
    model_s = time.perf_counter() - t0
    rr("time", str(d / "launch"), "--vs", str(d / "launch"), "--time-limit", "10", "-o", str(d / "timing.json"))
    timing = json.loads((d / "timing.json").read_text())
    rows = []
    for name in OUTPUTS:
        dtype = launch.buffers[name].dtype
        c = compare_buffer(name, gpu[name], ref[name], dtype)
        g = as_numbers(gpu[name], dtype).astype(np.float64)
        same = (np.ascontiguousarray(gpu[name]) == np.ascontiguousarray(ref[name])).mean()
        rows.append({"extents": extents, "buffer": name, "elements": int(g.size),
                     "identical_share": float(same), "max_abs_diff": c.max_abs_diff,
                     "psnr_db": c.psnr_db, "finite": bool(np.isfinite(g).all()),
                     "distinct_values": int(np.unique(g).size), "nonzero_share": float((g != 0).mean()),
                     "e4m3_codes": dtype == "e4m3"})
    return rows, report, timing, model_s


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--extents", nargs="+", default=["16x16", "240x135"])
    ap.add_argument("--out", help="directory to keep the runs and a results.json in")
    args = ap.parse_args()
    work = work_dir(args.out)
    everything = []
    for ext in args.extents:
        rows, report, timing, model_s = check(ext, work)
        fn = next(iter(report["functions"].values()))
        ref = timing["reference"]
        print(f"\nenc2 at {ext} tokens — ptxas: {fn['registers']} registers, {fn['spill_stores']} B spill "
              f"stores, {fn['spill_loads']} B spill loads, {fn['stack_frame']} B stack; kernel median "
              f"{ref['median_ms']:.4f} ms (min {ref['min_ms']:.4f}, {ref['samples']} samples, noise "
              f"{ref['noise']:.2%}, {timing['device'].get('name')}); numpy model {model_s:.1f} s")
        print(f"{'buffer':<10} {'elements':>9} {'identical':>9} {'max|Δ|':>9} {'PSNR dB':>8} {'finite':>6} "
              f"{'distinct':>8} {'nonzero':>7}")
        for r in rows:
            psnr = r["psnr_db"]
            print(f"{r['buffer']:<10} {r['elements']:>9} {r['identical_share']:>9.4f} "
                  f"{(r['max_abs_diff'] or 0):>9.4g} {psnr if isinstance(psnr, str) else (psnr or 0):>8.2f} "
                  f"{r['finite']!s:>6} {r['distinct_values']:>8} {r['nonzero_share']:>7.3f}")
        everything.append({"extents": ext, "rows": rows, "ptxas": report, "timing": timing, "model_s": model_s})
    (work / "results.json").write_text(json.dumps(everything, indent=2, default=str) + "\n")
    print(f"\n{work / 'results.json'}")


if __name__ == "__main__":
    main()
