"""On a GPU: the `probe` splice of phases of the synthetic enc2 — each splice's outputs against the
unspliced kernel's, then every mma of the phase replayed by a numpy `mma` model on the A, B and C
the probe recovered per lane, against the D the hardware produced: the share bit-identical and
the distance in f16 ulps. With --save, the probed words and the probe records of every phase go
into one .npz, so that a model can be replayed on them later without a GPU
(`python benchmarks/enc2_probe.py --replay FILE.npz`).

    python benchmarks/enc2_probe.py [--extents 240x135] [--phases 8] [--mma sm_90] [--save F.npz] [--out DIR]
    python benchmarks/enc2_probe.py --replay F.npz [--mma sm_90]
"""

from __future__ import annotations

import argparse
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from common import rr, work_dir
from enc2_splices import phases as phase_list

from rr.numerics.mma import MMA_MODELS
from rr.run.probe import replay

ENTRY = "cuda_dldn_engine_swin_enc2_kernel"
RECIPE = Path(__file__).resolve().parents[1] / "config" / "recipes" / "probe.yaml"


def probe_phase(w: Path, phase: int, backend: str) -> dict:
    """Splice, compile, run one phase's probe; its words, record and output identity."""
    tag = w / f"probe{phase}"
    rr("splice", w / "enc2" / "enc2.ptx", "--entry", ENTRY, "--recipe", RECIPE, "--phase", phase, "-o", f"{tag}.ptx")
    module = f"{tag}.ptx"
    if backend == "cuda":  # the cpu backend interprets the PTX itself
        rr("compile", f"{tag}.ptx", "-o", f"{tag}.cubin")
        module = f"{tag}.cubin"
    rr("relaunch", w / "enc2" / "launch", "--module", module, "--splice-record", f"{tag}.ptx.splice.json",
       "-o", f"{tag}.launch")
    rr("run", f"{tag}.launch", "--backend", backend, "-o", f"{tag}.out")
    cmp = json.loads(rr("compare", w / "ref.out", f"{tag}.out", "--json", check=False).stdout)
    return {"phase": phase, "record": json.loads(Path(f"{tag}.ptx.splice.json").read_text())["probe"],
            "words": np.load(f"{tag}.out/probe.npy"), "identical": all(c["identical"] for c in cmp)}


def report(phase: int, words: np.ndarray, record: dict, mma: str, identical) -> dict:
    result = replay(words, record, mma=MMA_MODELS[mma])
    print(f"phase {phase:>2}: {result['mma']} mma × {result['warps']} warps, outputs identical to the unspliced "
          f"kernel: {identical}; D bit-identical to the {mma} model {result['identical_share']:.4%}; ulps "
          f"0/1/2/≥3 {'/'.join(map(str, result['ulp_histogram_0_1_2_3plus']))}, max {result['max_ulp']}", flush=True)
    return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--extents", default="240x135")
    ap.add_argument("--phases", default="8", help="e.g. 8 or 1-38")
    ap.add_argument("--mma", default="sm_90", choices=sorted(MMA_MODELS))
    ap.add_argument("--save", help="write the probed words and records of every phase here (.npz)")
    ap.add_argument("--replay", help="replay a --save file with --mma (no GPU)")
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--backend", default="cuda", help="cuda; cpu to try the script without a GPU")
    ap.add_argument("--out")
    args = ap.parse_args()
    if args.replay:
        z = np.load(args.replay)
        records = json.loads(str(z["records"]))
        shares = [report(int(p), z[f"words_{p}"], records[str(p)], args.mma, records[str(p)].get("_identical"))
                  ["identical_share"] for p in z["phases"]]
        print(f"all phases: D bit-identical {min(shares):.4%} (worst phase) to {args.mma}")
        return
    w = work_dir(args.out)
    rr("synth", "enc2", "--extents", args.extents, "-o", w / "enc2")
    rr("run", w / "enc2" / "launch", "--backend", args.backend, "-o", w / "ref.out")
    with ThreadPoolExecutor(args.jobs) as pool:
        probed = list(pool.map(lambda p: probe_phase(w, p, args.backend), phase_list(args.phases)))
    results = {}
    for p in probed:
        results[p["phase"]] = {"outputs_identical": p["identical"],
                               **report(p["phase"], p["words"], p["record"], args.mma, p["identical"])}
    (w / "probe_result.json").write_text(json.dumps({"extents": args.extents, "mma": args.mma,
                                                     "phases": results}, indent=2) + "\n")
    if args.save:
        records = {str(p["phase"]): {**p["record"], "_identical": p["identical"]} for p in probed}
        np.savez_compressed(args.save, phases=np.array([p["phase"] for p in probed]), records=json.dumps(records),
                            extents=args.extents, **{f"words_{p['phase']}": p["words"] for p in probed})
        print(f"{args.save}: {Path(args.save).stat().st_size / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
