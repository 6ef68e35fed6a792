"""Check rr's `.approx` models (rr.numerics.mufu: the H200's MUFU tables) against what
tools/approx_probes.py measured on the GPU, and make the package's tables from it.

    python tools/approx_fit.py /work/notes/probes              # the checks below (about 3 min)
    python tools/approx_fit.py /work/notes/probes --tables rr/data   # write rr/data/mufu_h200.npz

The checks, each on data the model was not made from:
- ex2 of negative inputs: the measured table at -k·2⁻²³ (`ex2_neg_*`) against the model, which
  has only the positive table (the ones' complement rule);
- ex2 over whole binades: approx_probes.py counted, over |x| in [2⁻²⁴, 2⁷) of both signs (520 M
  inputs), how often three fixed-point splits of x (floor, trunc, rint) disagree with the H200;
  the model must disagree with each split on exactly as many inputs (`approx_checks.json`);
- div: the pairs approx_probes.py drew (its seed) and the measured quotients it kept: the model
  (a · rcp(b), one FMUL.FTZ) must give every kept quotient and disagree with approx_probes.py's
  own reference (which lost the sign of a zero product) exactly as often as the H200 did;
- rcp, rsqrt, sqrt, ex2 at the tables' own inputs and at other binades (the exponent shift the
  GPU checked), through the public functions.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rr.numerics import mufu  # noqa: E402

TABLES = ("rcp", "rsqrt", "sqrt", "ex2")
ONE = 0x3F800000


def decode(z, name: str) -> np.ndarray:
    return np.concatenate([[z[f"{name}_first"]], z[f"{name}_first"].astype(np.int64)
                           + np.cumsum(z[f"{name}_diff"], dtype=np.int64)]).astype(np.uint32)


def write_tables(probes: Path, out: Path) -> Path:
    z = np.load(probes / "approx_tables.npz")
    arrays = {f"{n}_{part}": z[f"{n}_{part}"] for n in TABLES for part in ("first", "diff")} | {"ex2_f16": z["ex2_f16"]}
    target = out / mufu.MUFU_TABLES
    tmp = target.with_suffix(".tmp.npz")
    np.savez_compressed(tmp, **arrays)
    tmp.replace(target)
    return target


def bits_range(lo: int, count: int) -> np.ndarray:
    return (np.uint32(lo) + np.arange(count, dtype=np.uint32)).view(np.float32)


def check_tables(z) -> dict:
    """Wrong outputs of the public functions at the tables' inputs, and at the binades the GPU
    checked (the table shifted by the exponent, where the result is normal)."""
    out = {}
    for name, fn, period, scale in (("rcp", mufu.rcp_approx, 2 ** 23, lambda e: -e), ("rsqrt", mufu.rsqrt_approx, 2 ** 24, lambda e: -e // 2),
                                    ("sqrt", mufu.sqrt_approx, 2 ** 24, lambda e: e // 2)):
        t = decode(z, name)
        wrong = 0
        for e in (0, -126, -20, -2, 2, 20, 124):
            x = bits_range(ONE + (e << 23), period)
            want = (t.astype(np.int64) + (scale(e) << 23))
            normal = (want >> 23 > 0) & (want >> 23 < 255)
            wrong += int((fn(x).view(np.uint32)[normal] != want[normal]).sum())
        out[name] = wrong
    k = np.arange(2 ** 23, dtype=np.float64)
    out["ex2"] = int((mufu.ex2_approx((k * 2.0 ** -23).astype(np.float32)).view(np.uint32) != decode(z, "ex2")).sum())
    out["ex2_neg (not in the model's tables)"] = int((mufu.ex2_approx((-k * 2.0 ** -23).astype(np.float32)).view(np.uint32)
                                                      != decode(z, "ex2_neg")).sum())
    h = np.arange(2 ** 16, dtype=np.uint16).view(np.float16)
    out["ex2_f16"] = int((mufu.ex2_approx_f16(h).view(np.uint16) != z["ex2_f16"]).sum())
    return out


def check_ex2_binades(z) -> dict:
    """approx_probes.py's count of inputs on which each fixed-point split disagrees with the
    H200 (approx_probes.ex2_fixed_point, its normal results only), with the model for the H200."""
    table = decode(z, "ex2").astype(np.int64)
    counts = {mode: 0 for mode in ("floor", "trunc", "rint")}
    m = np.arange(2 ** 23, dtype=np.uint32)
    for e in range(-24, 7):
        for sign in (0, 1):
            x = (np.uint32(((127 + e) << 23) | (sign << 31)) + m).view(np.float32)
            got = mufu.ex2_approx(x).view(np.uint32).astype(np.int64)
            for mode in counts:
                q = {"floor": np.floor, "trunc": np.trunc, "rint": np.rint}[mode](x.astype(np.float64) * 2.0 ** 23).astype(np.int64)
                want = table[q & (2 ** 23 - 1)] + ((q >> 23) << 23)
                normal = (want >> 23 > 0) & (want >> 23 < 255)
                counts[mode] += int((got[normal] != want[normal]).sum())
    return counts


def check_div(z, seed: int) -> dict:
    """approx_probes.py's div pairs (drawn again from its seed) through the model."""
    rng = np.random.default_rng(seed)
    n = 2 ** 24
    a = (rng.integers(0, 2 ** 31, n, dtype=np.int64).astype(np.uint32) | (rng.integers(0, 2, n).astype(np.uint32) << 31)).view(np.float32)
    b = (rng.integers(0x00800000, 0x7F000000, n, dtype=np.int64).astype(np.uint32)
         | (rng.integers(0, 2, n).astype(np.uint32) << 31)).view(np.float32)
    got = mufu.div_approx(a, b)
    with np.errstate(all="ignore"):  # approx_probes.py's reference, as it computed it
        prod = (a.astype(np.float64) * mufu.rcp_approx(b).astype(np.float64)).astype(np.float32)
    prod = np.where(np.abs(prod) < np.finfo(np.float32).tiny, np.float32(0) * np.sign(prod), prod)
    finite = np.isfinite(got) & np.isfinite(prod) & (np.abs(a) >= np.finfo(np.float32).tiny)
    bad = finite & (got.view(np.uint32) != prod.view(np.uint32))
    kept = int(min(len(z["div_a"]), bad.sum()))
    same_pairs = np.array_equal(a[bad][:kept], z["div_a"][:kept]) and np.array_equal(b[bad][:kept], z["div_b"][:kept])
    return {"compared": int(finite.sum()), "model_vs_reference_differ": int(bad.sum()), "kept_pairs_are_these": same_pairs,
            "kept_quotients_wrong": int((mufu.div_approx(z["div_a"], z["div_b"]).view(np.uint32) != z["div_got"].view(np.uint32)).sum())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("directory", type=Path, help="approx_probes.py's output (approx_tables.npz, approx_checks.json)")
    ap.add_argument("--tables", type=Path, metavar="OUT", help="write the package's MUFU tables to OUT instead")
    ap.add_argument("--seed", type=int, default=20261201, help="approx_probes.py's --seed (its default)")
    args = ap.parse_args()
    path = args.directory / "approx_tables.npz"
    if not path.is_file():
        print(f"rr: error: {path}: no such file", file=sys.stderr)
        raise SystemExit(2)
    if args.tables:
        target = write_tables(args.directory, args.tables)
        print(f"{target}: {target.stat().st_size / 2 ** 20:.2f} MiB")
        return
    z = np.load(path)
    measured = json.loads((args.directory / "approx_checks.json").read_text())
    t0 = time.perf_counter()
    print("wrong outputs at the tables' inputs and shifted binades:", check_tables(z), flush=True)
    print("div:", check_div(z, args.seed), "measured:", measured["div"], flush=True)
    print("ex2 splits' disagreements, model:", check_ex2_binades(z), "measured:", measured["ex2"]["wrong_by_split"])
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
