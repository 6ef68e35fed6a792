"""Where the synthetic enc2 keeps everything: the parameter block, the weight image's offsets (the
reference document's §3 and §6 U5), and the one fragment order every operand is stored in.

The PTX generator (`rr.synth.enc2`), the numpy model (`rr.synth.model`) and the input generator
(`rr.synth.inputs`) all read their offsets from here, so they cannot drift apart.

**Fragment order.** An `m16n8k32` e4m3 A fragment word holds four consecutive k of one row; the
lanes' f16 accumulators hold column pairs `(8j+2t, 8j+2t+1)`. Packing four accumulator columns
into one A word (as every epilogue does) therefore puts channel `c = 8j + 2t + e` of a 32-wide
slice at fragment position `k = SIGMA[c] = 16(j>>1) + 4t + 2(j&1) + e`. Every stored operand of
the synthetic engine uses that order per 32-channel slice: the input image, the plane arena, the
half-extent output, and the k axis of every weight tile. When both operands of an `mma` come from
accumulators (phases 7 and 8) the order cancels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ENTRY = "cuda_dldn_engine_swin_enc2_kernel"
CHANNELS = 96
HEADS = 4  # warps per block, one per %tid.z
WINDOW = 8  # 8×8 tokens per block
BLOCK = (32, 1, 4)
PARAM_BYTES = 136

# offset -> (name, role) of the 136-byte parameter block (reference §4)
PARAMS = {
    0: ("extents", "(ex, ey) v2.u32"),
    8: ("input", "input image, ex·ey tokens × 96 e4m3 in fragment order"),
    40: ("weights", "weight image"),
    48: ("arena", "plane arena: 3 planes × ey × ex × 32 e4m3, written"),
    56: ("half_out", "patch-merged output: 4 planes × (ey/2) × (ex/2) × 32 e4m3, written"),
    80: ("origins", "patch origin offsets v2.u16"),
    88: ("texture", "input texture, RGBA16F ex × ey"),
    112: ("surface0", "output surface, RGBA16F ex × ey"),
    120: ("surface1", "output surface, RGBA16F ex × ey"),
    128: ("surface2", "output surface, RGBA16F (ex/2) × (ey/2)"),
}


def _sigma() -> np.ndarray:
    s = np.empty(32, dtype=np.int64)
    for j in range(4):
        for t in range(4):
            for e in range(2):
                s[8 * j + 2 * t + e] = 16 * (j >> 1) + 4 * t + 2 * (j & 1) + e
    return s


SIGMA = _sigma()  # channel within a 32-slice -> fragment k (and byte within a stored 32-byte group)
SIGMA_INV = np.argsort(SIGMA)  # fragment k -> channel

# -- weight image (offsets relative to W + 16·laneid, or W + ((laneid<<2)&12) for tables) ------

SLAB_QKV = 21504  # phases 1–7 add 21504·%tid.z (reference §6 U5)
SLAB_MERGE = 12288  # phase 37 adds 12288·%tid.z
SCORE_BIAS = 6336  # phase 7's C: 48 tiles of 512 bytes, tile-major (E6)
PROLOGUE_GAIN = 0  # 96 f16
SKIP_TABLE = 86208  # E8: added to the input skip → phase 9's C
BAND_GAIN = 86400  # E12's RMS-norm gain
RESIDUAL_TABLE = 92800  # E13: D12 + table → phase 14's C
EPS = 2.0 ** -13


@dataclass(frozen=True)
class PhaseLayout:
    phase: int
    m: int
    n: int
    k: int
    b_offset: int
    b_slab: int = 0  # bytes per %tid.z added to the B pointer
    bias_offset: int | None = None  # per-column f16 bias words ({w, w}) as C seeds

    @property
    def mma(self) -> int:
        return self.m * self.n * self.k

    def b_tile(self, s: int, j: int) -> int:
        """Index of the 512-byte tile holding n-tiles 2j, 2j+1 of k-slice s (reference §6 U1:
        k-slice-major, the two n-tiles of a pair side by side)."""
        return s * max(self.n // 2, 1) + j


def _phases() -> dict[int, PhaseLayout]:
    p = {}
    # Q/K and V projections, three k32 slices each, interleaved (K: 1, 3, 5; V: 2, 4, 6)
    for i, off in zip(range(1, 7), (192, 3264, 1216, 4288, 2240, 5312)):
        p[i] = PhaseLayout(i, 6, 4, 1, off, SLAB_QKV)
    p[7] = PhaseLayout(7, 4, 12, 1, -1, SLAB_QKV)  # A, B from phase 5's D; C = score bias
    p[8] = PhaseLayout(8, 4, 4, 3, -1)  # probabilities × movmatrix(V)
    for h in range(4):  # output projection, head h's slab of the same stride
        p[9 + h] = PhaseLayout(9 + h, 1, 12, 1, 18624 + SLAB_QKV * h)
    odd_b, even_b = 86592, 89728
    for i in range(12):
        p[13 + 2 * i] = PhaseLayout(13 + 2 * i, 1, 4, 3, odd_b, bias_offset=odd_b + 3072)
        p[14 + 2 * i] = PhaseLayout(14 + 2 * i, 1, 12, 1, even_b)
        odd_b = even_b + 3072 + (192 if i == 0 else 0)  # the residual table sits after phase 14's B
        even_b = odd_b + 3136
    p[37] = PhaseLayout(37, 1, 4, 12, 161280, SLAB_MERGE, bias_offset=210432)
    p[38] = PhaseLayout(38, 1, 2, 3, 210688, bias_offset=212224)
    return p


PHASES = _phases()
WEIGHT_BYTES = 212256  # highest byte any lane of any %tid.z reads, + 1 (reference §6 U5)


@dataclass(frozen=True)
class Region:
    """A run of the weight image: `e4m3` matrix tiles or `f16` vectors/bias tiles."""
    offset: int
    size: int
    kind: str  # e4m3 | f16
    name: str
    fan_in: int = 0  # e4m3 tiles: the K of the GEMM they feed (sets their spread)
    gain: float = 1.0  # e4m3 tiles: spread = gain / sqrt(fan_in)


def weight_regions() -> list[Region]:
    """Every byte range of the weight image the kernel reads, in offset order."""
    r = [Region(PROLOGUE_GAIN, 192, "f16", "prologue RMS gain")]
    for z in range(HEADS):
        base = SLAB_QKV * z
        r.append(Region(base + 192, 6144, "e4m3", f"head {z}: K and V projections (phases 1–6)", 96))
        r.append(Region(base + SCORE_BIAS, 12288, "f16", f"head {z}: score bias (phase 7 C)"))
        r.append(Region(base + 18624, 3072, "e4m3", f"head {z}: output projection (phase {9 + z})", 128))
    r += [Region(SKIP_TABLE, 192, "f16", "skip table (phase 9 C)"),
          Region(BAND_GAIN, 192, "f16", "band RMS gain (E12)")]
    for i in range(12):
        odd, even = PHASES[13 + 2 * i], PHASES[14 + 2 * i]
        r.append(Region(odd.b_offset, 3072, "e4m3", f"phase {odd.phase} B", 96))
        r.append(Region(odd.bias_offset, 64, "f16", f"phase {odd.phase} bias"))
        r.append(Region(even.b_offset, 3072, "e4m3", f"phase {even.phase} B", 32, 0.6))
        if i == 0:
            r.append(Region(RESIDUAL_TABLE, 192, "f16", "residual table (phase 14 C)"))
    for z in range(HEADS):
        r.append(Region(PHASES[37].b_offset + SLAB_MERGE * z, 12288, "e4m3", f"phase 37 B, slab {z}", 384))
    r += [Region(PHASES[37].bias_offset, 64, "f16", "phase 37 bias"),
          Region(PHASES[38].b_offset, 1536, "e4m3", "phase 38 B", 96),
          Region(PHASES[38].bias_offset, 32, "f16", "phase 38 bias")]
    return sorted(r, key=lambda x: x.offset)
