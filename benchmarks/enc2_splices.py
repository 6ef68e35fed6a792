"""On a GPU: every phase of the synthetic enc2 spliced by each template, run on a whole frame and
compared with the unspliced kernel — byte identity of every output buffer, PSNR where it differs,
and (with --time) the time ratio spliced / reference from `rr time`.

    python benchmarks/enc2_splices.py [--extents 240x135] [--phases 1-38] [--templates regen isolate f32acc]
                                      [--jobs 16] [--time | --time-only] [--time-limit 3] [--out DIR]

Any shipped template name works (`--templates direct isolate --phases 8 --time` is the direct
converter against the isolation experiment); registers and spill bytes are printed beside the
unspliced kernel's.

Splicing and ptxas run in parallel (--jobs); runs and timings one at a time on the one GPU.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from common import rr, work_dir

ENTRY = "cuda_dldn_engine_swin_enc2_kernel"
RECIPES = Path(__file__).resolve().parents[1] / "config" / "recipes"
OUTPUTS = ("arena", "half_out", "surface0", "surface1", "surface2")


def phases(text: str) -> list[int]:
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return out


def resources(cubin_json: Path) -> dict:
    """The entry's registers and spill bytes from `rr compile`'s report."""
    fn = next(iter(json.loads(cubin_json.read_text())["functions"].values()))
    return {"registers": fn["registers"], "spill_stores": fn["spill_stores"], "spill_loads": fn["spill_loads"]}


def prepare(work: Path, template: str, phase: int) -> dict:
    """Splice and compile one cell; returns its record (status, message, registers)."""
    tag = work / f"{template}_{phase}"
    r = rr("splice", work / "enc2" / "enc2.ptx", "--entry", ENTRY, "--recipe", RECIPES / f"{template}.yaml",
           "--phase", phase, "-o", f"{tag}.ptx", check=False)
    if r.returncode:
        return {"template": template, "phase": phase, "status": "splice_error", "message": r.stderr.strip()}
    r = rr("compile", f"{tag}.ptx", "-o", f"{tag}.cubin", check=False)
    if r.returncode:
        return {"template": template, "phase": phase, "status": "compile_error", "message": r.stderr.strip()}
    return {"template": template, "phase": phase, "status": "compiled", **resources(Path(f"{tag}.cubin.json"))}


def run(work: Path, rec: dict, compare: bool, timing: bool, time_limit: float) -> dict:
    tag = work / f"{rec['template']}_{rec['phase']}"
    rr("relaunch", work / "enc2" / "launch", "--module", f"{tag}.cubin", "-o", f"{tag}.launch")
    rec = {**rec, "status": "ok"}
    if compare:
        r = rr("run", f"{tag}.launch", "--backend", "cuda", "-o", f"{tag}.out", check=False)
        if r.returncode:
            return {**rec, "status": "run_error", "message": r.stderr.strip()}
        cmp = json.loads(rr("compare", work / "ref.out", f"{tag}.out", "--json", check=False).stdout)
        rec.update(identical=all(c["identical"] for c in cmp),
                   buffers={c["buffer"]: {"identical": c["identical"], "differing_share": c["differing_share"],
                                          "psnr_db": c["psnr_db"]} for c in cmp})
    if timing:
        rr("time", work / "ref.launch", "--vs", f"{tag}.launch", "--time-limit", time_limit,
           "-o", f"{tag}.timing.json")
        t = json.loads(Path(f"{tag}.timing.json").read_text())
        rec.update(ref_ms=t["reference"]["median_ms"], spliced_ms=t["other"]["median_ms"],
                   ratio=t["ratio"], ratio_noise=t["ratio_noise"])
    for leftover in (f"{tag}.launch", f"{tag}.out"):
        subprocess.run(["rm", "-rf", leftover], check=False)
    return rec


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--extents", default="240x135")
    ap.add_argument("--phases", default="1-38")
    ap.add_argument("--templates", nargs="+", default=["regen", "isolate", "f32acc"])
    ap.add_argument("--jobs", type=int, default=16)
    ap.add_argument("--time", action="store_true", help="also time each splice against the reference")
    ap.add_argument("--time-only", action="store_true", help="time without running and comparing")
    ap.add_argument("--time-limit", type=float, default=3.0)
    ap.add_argument("--out")
    args = ap.parse_args()
    work = work_dir(args.out)
    rr("synth", "enc2", "--extents", args.extents, "-o", work / "enc2")
    rr("compile", work / "enc2" / "enc2.ptx", "-o", work / "ref.cubin")
    rr("relaunch", work / "enc2" / "launch", "--module", work / "ref.cubin", "-o", work / "ref.launch")
    reference = resources(work / "ref.cubin.json")
    print(f"unspliced: {reference['registers']} registers, {reference['spill_stores']}/{reference['spill_loads']} "
          "bytes spill stores/loads")
    if not args.time_only:
        rr("run", work / "ref.launch", "--backend", "cuda", "-o", work / "ref.out")
    cells = [(t, p) for p in phases(args.phases) for t in args.templates]
    with ThreadPoolExecutor(args.jobs) as pool:
        prepared = list(pool.map(lambda c: prepare(work, *c), cells))
    print(f"{'phase':>5} {'template':<8} {'status':<13} {'regs':>4} {'spill':>5} {'identical':>9} {'worst PSNR':>10} "
          f"{'ref ms':>8} {'spliced ms':>10} {'ratio':>6}")
    results = []
    for rec in prepared:
        if rec["status"] == "compiled":
            rec = run(work, rec, not args.time_only, args.time or args.time_only, args.time_limit)
        results.append(rec)
        psnrs = [b["psnr_db"] for b in rec.get("buffers", {}).values() if b["psnr_db"] not in (None, "inf")]

        def num(key: str, fmt: str = ".4f") -> str:
            return format(rec[key], fmt) if key in rec else "-"
        print(f"{rec['phase']:>5} {rec['template']:<8} {rec['status']:<13} {rec.get('registers', ''):>4} "
              f"{rec.get('spill_stores', ''):>5} "
              f"{rec.get('identical', '')!s:>9} {(format(min(psnrs), '.1f') if psnrs else '-'):>10} "
              f"{num('ref_ms'):>8} {num('spliced_ms'):>10} {num('ratio', '.3f'):>6}"
              + (f"  {rec['message'][:120]}" if rec.get("message") else ""), flush=True)
    (work / "splices.json").write_text(json.dumps({"reference": reference, "cells": results}, indent=2) + "\n")
    print(f"{work / 'splices.json'}")


if __name__ == "__main__":
    main()
