"""Reading what a `probe` splice stored: per warp, the A, B, C and D fragments of each probed
`mma` (`rr.run.fragments`), and their replay by an `mma` model of `rr.numerics`."""

from __future__ import annotations

import numpy as np

from rr.numerics import fp8
from rr.numerics.mma import DEFAULT_MMA, MMA_MODELS, MmaModel
from rr.run import fragments


def mma_fragments(words: np.ndarray, mma: dict) -> tuple:
    """From probed words (warps, 32 lanes, W) and one mma's word indices (`splice.json` probe
    record): A (warps, 16, 32) and B (warps, 32, 8) e4m3 bytes, C and D (warps, 16, 8)."""
    regs = {role: [words[:, :, w] for w in mma[role]] for role in ("A", "B", "C", "D")}
    return (fragments.a_matrix(regs["A"]), fragments.b_matrix(regs["B"]),
            fragments.c_matrix(regs["C"]), fragments.c_matrix(regs["D"]))


def ulp_distance(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """How many f16 values lie between x and y (0 when the bits agree; ±0 count as equal)."""
    def key(v):
        u = np.asarray(v, np.float16).view(np.uint16).astype(np.int32)
        return np.where(u & 0x8000, -(u & 0x7FFF), u)
    return np.abs(key(x) - key(y))


def largest_term_ulp(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Per output element, the f16 ulp of the largest |a_k·b_k| or |c|: the scale at which an
    accumulator that aligns its terms to the largest one rounds."""
    prod = np.abs(fp8.e4m3_values(a)[..., :, :, None] * fp8.e4m3_values(b)[..., None, :, :]).max(axis=-2)
    big = np.maximum(prod, np.abs(np.asarray(c, np.float16).astype(np.float64)))
    return np.spacing(np.minimum(big, 65504).astype(np.float16)).astype(np.float64)


def replay(words: np.ndarray, record: dict, mma: MmaModel | None = None) -> dict:
    """Every probed mma replayed by `mma` on the probed A, B, C, against the probed D: distances in
    ulps of the result, and in ulps of the largest term (which bounds an aligned accumulator's
    error even where the terms cancel and the result is small)."""
    mma = mma or MMA_MODELS[DEFAULT_MMA]
    words = words.reshape(-1, 32, words.shape[-1])
    total = same = worst = 0
    worst_term = 0.0
    hist = np.zeros(4, np.int64)
    for m in record["mma"]:
        a, b, c, d = mma_fragments(words, m)
        model = mma(a, b, c)
        u = ulp_distance(model, d)
        total += u.size
        same += int((u == 0).sum())
        hist += np.bincount(np.minimum(u.ravel(), 3), minlength=4)
        worst = max(worst, int(u.max()))
        diff = np.abs(model.astype(np.float64) - d.astype(np.float64))
        worst_term = max(worst_term, float(np.nanmax(diff / largest_term_ulp(a, b, c))))
    return {"elements": total, "identical_share": same / max(total, 1),
            "ulp_histogram_0_1_2_3plus": hist.tolist(), "max_ulp": worst,
            "max_largest_term_ulps": worst_term, "warps": words.shape[0], "mma": len(record["mma"])}
