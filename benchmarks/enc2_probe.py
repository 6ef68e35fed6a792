"""On a GPU: the `probe` splice of phase 8 of the synthetic enc2 — its outputs against the unspliced
kernel's, then every mma of the phase replayed by the numpy `mma` model on the A, B and C the probe
recovered per lane, against the D the hardware produced: the share bit-identical and the distance
in f16 ulps.

    python benchmarks/enc2_probe.py [--extents 240x135] [--phase 8] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from common import rr, work_dir

from rr.run.probe import replay

ENTRY = "cuda_dldn_engine_swin_enc2_kernel"
RECIPE = Path(__file__).resolve().parents[1] / "config" / "recipes" / "probe.yaml"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--extents", default="240x135")
    ap.add_argument("--phase", type=int, default=8)
    ap.add_argument("--out")
    args = ap.parse_args()
    w = work_dir(args.out)
    rr("synth", "enc2", "--extents", args.extents, "-o", w / "enc2")
    rr("run", w / "enc2" / "launch", "--backend", "cuda", "-o", w / "ref.out")
    rr("splice", w / "enc2" / "enc2.ptx", "--entry", ENTRY, "--recipe", RECIPE, "--phase", args.phase,
       "-o", w / "probe.ptx")
    rr("compile", w / "probe.ptx", "-o", w / "probe.cubin")
    rr("relaunch", w / "enc2" / "launch", "--module", w / "probe.cubin", "-o", w / "probe.launch")
    rr("run", w / "probe.launch", "--backend", "cuda", "-o", w / "probe.out")
    cmp = json.loads(rr("compare", w / "ref.out", w / "probe.out", "--json", check=False).stdout)
    record = json.loads((w / "probe.ptx.splice.json").read_text())["probe"]
    words = np.load(w / "probe.out" / "probe.npy")  # (blocks, threads, W)
    result = replay(words, record)
    print(f"phase {args.phase} probe at {args.extents}: {record['words_per_thread']} words per thread, "
          f"{result['mma']} mma, {result['warps']} warps; outputs identical to the unspliced kernel: "
          f"{all(c['identical'] for c in cmp)} ({', '.join(c['buffer'] for c in cmp)})")
    print(f"D elements replayed: {result['elements']}; bit-identical to the model: "
          f"{result['identical_share']:.2%}; ulp distance 0/1/2/≥3: "
          f"{'/'.join(map(str, result['ulp_histogram_0_1_2_3plus']))}; max {result['max_ulp']} ulp; "
          f"max {result['max_largest_term_ulps']:.3g} ulp of the largest term")
    (w / "probe_result.json").write_text(json.dumps({
        "extents": args.extents, "phase": args.phase, "outputs_identical": all(c["identical"] for c in cmp),
        **result}, indent=2) + "\n")


if __name__ == "__main__":
    main()
