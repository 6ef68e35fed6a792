"""Score rr's fp8 `mma` model on H200 probe files: the share of D's bits it reproduces, per file and
input design, beside the rules it was fitted against (so each rule's effect shows in the figures).

    python tools/mma_fit.py /work/notes/probes            # every mma_*.npz in the directory
    python tools/mma_fit.py DIR --variants                # also each rule changed on its own
    python tools/mma_fit.py DIR --subset tests/data/probes   # the tests' subsets of DIR's files

The files are what tools/mma_probes.py writes on the GPU (A, B, C, D in matrix form, `design`
and `designs`). No GPU needed. `--subset` writes, per form, `mma_h200_<form>.npz`: per design the
128 warps that the most variants get wrong (then the most outputs wrong), the random file's as
design 0, with `warp` (the warp's index in its file) beside the probe file's arrays.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rr.numerics.mma import SM90, HmmaRules, mma_hmma, mma_sync  # noqa: E402

# each established rule changed on its own (what tests/test_numerics_mma.py shows the data rejects)
VARIANTS = {
    "exact HMMA sums (the model before)": HmmaRules(width=None, f32="rn", canonical_nan=False),
    "alignment width 24": dataclasses.replace(SM90, width=24),
    "alignment width 26": dataclasses.replace(SM90, width=26),
    "product exponent from its leading bit": dataclasses.replace(SM90, exponent="value"),
    "terms cut toward -inf": dataclasses.replace(SM90, cut="rm"),
    "f32 HMMA rounds to nearest": dataclasses.replace(SM90, f32="rn"),
    "NaN as IEEE propagates it": dataclasses.replace(SM90, canonical_nan=False),
}


def same_bits(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    u = np.uint16 if x.dtype == np.float16 else np.uint32
    return x.view(u) == y.view(u)


def score(path: Path, model) -> tuple[dict[str, float], float]:
    """Per design (and "all"): the share of outputs whose bits the model reproduces; the seconds
    the model took."""
    z = np.load(path)
    t0 = time.perf_counter()
    d = model(z["A"], z["B"], z["C"])
    seconds = time.perf_counter() - t0
    ok = same_bits(d, z["D"]).reshape(len(d), -1)
    shares = {str(name): float(ok[z["design"] == i].mean()) for i, name in enumerate(z["designs"])
              if (z["design"] == i).any()}
    shares["all"] = float(ok.mean())
    return shares, seconds


def subset(paths: list[Path], out: Path, per_design: int = 128) -> list[Path]:
    """The tests' probe files: for each form, from its random and adversarial files, the warps
    that tell the rules apart (`per_design` per design, the most variants wrong first)."""
    written = []
    for form in ("f16", "f32"):
        parts = []
        for path in (p for p in paths if p.name.startswith(f"mma_{form}_")):
            z = np.load(path)
            a, b, c, d = z["A"], z["B"], z["C"], z["D"]
            wrong = [(~same_bits(mma_hmma(a, b, c, rules), d)).reshape(len(d), -1).sum(1) for rules in VARIANTS.values()]
            key = np.lexsort((-np.sum(wrong, axis=0), -np.sum([w > 0 for w in wrong], axis=0)))  # stable: by warp index last
            for i in np.unique(z["design"]):
                pick = np.sort(key[z["design"][key] == i][:per_design])
                parts.append({"A": a[pick], "B": b[pick], "C": c[pick], "D": d[pick], "design": z["design"][pick],
                              "warp": pick.astype(np.int32)})
            designs, seed = z["designs"], z["seed"]
        if not parts:
            continue
        target = out / f"mma_h200_{form}.npz"
        tmp = target.with_suffix(".tmp.npz")
        np.savez_compressed(tmp, **{k: np.concatenate([p[k] for p in parts]) for k in parts[0]}, designs=designs, seed=seed)
        tmp.replace(target)
        written.append(target)
    return written


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("directory", type=Path)
    ap.add_argument("--variants", action="store_true", help="also score each rule changed on its own")
    ap.add_argument("--subset", type=Path, metavar="OUT", help="write the tests' subsets to OUT instead")
    args = ap.parse_args()
    paths = sorted(args.directory.glob("mma_*.npz"))
    if not paths:
        print(f"rr: error: {args.directory}: no mma_*.npz probe files", file=sys.stderr)
        raise SystemExit(2)
    if args.subset:
        for target in subset(paths, args.subset):
            z = np.load(target)
            print(f"{target}: {len(z['D'])} warps, {target.stat().st_size / 2**20:.2f} MiB")
        return
    models = {"rr.numerics.mma.mma_sync": mma_sync}
    if args.variants:
        models |= {name: (lambda a, b, c, r=rules: mma_hmma(a, b, c, r)) for name, rules in VARIANTS.items()}
    for path in paths:
        outputs = int(np.load(path)["D"].size)
        for label, model in models.items():
            shares, seconds = score(path, model)
            print(f"{path.name}  {label}  ({outputs} outputs, {seconds:.2f} s)")
            print("  " + "  ".join(f"{name} {share:.4%}" for name, share in shares.items()), flush=True)


if __name__ == "__main__":
    main()
