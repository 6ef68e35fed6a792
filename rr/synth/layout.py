"""Where each layer of the synthetic engine keeps everything: the parameter block, the weight
image's offsets (for enc2 those of the reference document's §3 and §6 U5), the phase numbering,
and the one fragment order every operand is stored in.

The PTX generator (`rr.synth.swin`), the numpy model (`rr.synth.model`) and the input generator
(`rr.synth.inputs`) all read their offsets from a `LayerLayout`, so they cannot drift apart. The
module-level names (`PHASES`, `SLAB_QKV`, …) are enc2's.

**Scaling.** Every offset is a rule in the layer's channel count C (and the next layer's C'); at
C = 96, C' = 128 the rules give the reference's numbers (docs/engine.md lists them):

    prologue gain     0, 2C bytes
    head slab z       2C + z·(96C + 12288): K|V projections (64C), score bias (12288), output
                      projection (32C)
    skip table        2C + 4·slab, then the band gain (2C)
    MLP branch i      odd B (32C), its bias (64), even B (32C); the residual table (2C) after the
                      first even B
    merge (encoders)  C'/32 slabs of 128C (K = 4C, 32 output channels each), a 256-byte bias block
    expand (decoders) C'/8 slabs of 32C (K = C, 32 output channels each), a 256-byte bias block
    head              16C (K = C, N = 16), its bias (32)

**Fragment order.** An `m16n8k32` e4m3 A fragment word holds four consecutive k of one row; the
lanes' f16 accumulators hold column pairs `(8j+2t, 8j+2t+1)`. Packing four accumulator columns
into one A word (as every epilogue does) therefore puts channel `c = 8j + 2t + e` of a 32-wide
slice at fragment position `k = SIGMA[c] = 16(j>>1) + 4t + 2(j&1) + e`. Every stored operand of
the synthetic engine uses that order per 32-channel slice: the input image, the plane arena, the
half-extent output, and the k axis of every weight tile. When both operands of an `mma` come from
accumulators (phases 7 and 8) the order cancels.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from rr.synth.family import LayerSpec, layer_spec

HEADS = 4  # warps per block, one per %tid.z; each head is 32 wide
WINDOW = 8  # 8×8 tokens per block
BLOCK = (32, 1, 4)
PARAM_BYTES = 136
KEYS = 96  # attention keys per head: the window and a 4-row strip
SCORE_BYTES = 12288  # a head's 64×96 f16 score bias
BIAS_BLOCK = 256  # the merge/expand bias block (64 bytes read)
EPS = 2.0 ** -13


def _sigma() -> np.ndarray:
    s = np.empty(32, dtype=np.int64)
    for j in range(4):
        for t in range(4):
            for e in range(2):
                s[8 * j + 2 * t + e] = 16 * (j >> 1) + 4 * t + 2 * (j & 1) + e
    return s


SIGMA = _sigma()  # channel within a 32-slice -> fragment k (and byte within a stored 32-byte group)
SIGMA_INV = np.argsort(SIGMA)  # fragment k -> channel


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


@dataclass(frozen=True)
class Region:
    """A run of the weight image: `e4m3` matrix tiles or `f16` vectors/bias tiles."""
    offset: int
    size: int
    kind: str  # e4m3 | f16
    name: str
    fan_in: int = 0  # e4m3 tiles: the K of the GEMM they feed (sets their spread)
    gain: float = 1.0  # e4m3 tiles: spread = gain / sqrt(fan_in)


@dataclass(frozen=True)
class LayerLayout:
    spec: LayerSpec
    phases: dict  # phase number -> PhaseLayout
    kv: tuple  # K and V projection phases, slice by slice: K0, V0, K1, V1, …
    score: int  # the score GEMM (reference phase 7)
    pv: int  # P·V (phase 8)
    proj: tuple  # the four heads' output projections (9–12)
    band: tuple  # the MLP branches: (odd, even) phase pairs (13/14 … 35/36)
    merge: int | None  # the merge (encoders, phase 37) or expand (decoders); None for dec0
    head: int  # the 16-wide head (phase 38)
    slab_qkv: int  # bytes per %tid.z of phases 1…score
    score_bias: int
    prologue_gain: int
    skip_table: int
    band_gain: int
    residual_table: int
    merge_planes: int  # trips of the merge/expand loop over all warps: 32 output channels each
    weight_bytes: int
    params: dict  # offset -> (name, role)
    regions: tuple

    @property
    def entry(self) -> str:
        return self.spec.entry

    @property
    def channels(self) -> int:
        return self.spec.channels

    @property
    def smem_bytes(self) -> int:
        """The prologue's 128 staged tokens, or E8's four 64×32 head outputs if more."""
        return max(128 * self.channels, HEADS * 64 * 32)


def _params(s: LayerSpec) -> dict:
    C, S = s.channels, s.slices
    p = {0: ("extents", "(ex, ey) v2.u32")}
    if s.token_input:
        p[8] = ("input", f"input image, ex·ey tokens × {C} e4m3 in fragment order")
    elif s.kind == "enc":
        p[8] = ("input", f"input image, {S} planes × ey × ex × 32 e4m3 in fragment order")
    else:
        p[8] = ("input", f"input image (the layer above's expanded output), {S} planes × ey × ex × 32 e4m3")
    if s.skip:
        p[16] = ("skip", f"skip input: {s.skip}'s plane arena, {S} planes × ey × ex × 32 e4m3")
    p[40] = ("weights", "weight image")
    p[48] = ("arena", f"plane arena: {S} planes × ey × ex × 32 e4m3, written")
    if s.kind == "enc":
        n = s.next_channels
        p[56] = ("half_out", f"patch-merged output: (ey/2) × (ex/2) tokens × {n} e4m3, written" if s.token_output
                 else f"patch-merged output: {n // 32} planes × (ey/2) × (ex/2) × 32 e4m3, written")
    elif not s.final:
        p[56] = ("expanded", f"expanded output: {s.next_channels // 32} planes × oey × oex × 32 e4m3, written")
        p[64] = ("out_extents", "(oex, oey) v2.u32: the extents of the level below")
    else:
        p[64] = ("frame_extents", "(W, H) v2.u32: the final frame in pixels")
    p[80] = ("origins", "patch origin offsets v2.u16")
    if s.final:
        p[88] = ("noisy", "the noisy frame, RGBA16F W × H")
        p[96] = ("texture", "coarse texture, RGBA16F ex × ey")
        p[112] = ("frame", "the final frame, RGBA16F W × H, written")
        return p
    p[88] = ("texture", "input texture, RGBA16F ex × ey")
    p[112] = ("surface0", "output surface, RGBA16F ex × ey")
    p[120] = ("surface1", "output surface, RGBA16F ex × ey")
    p[128] = ("surface2", "output surface, RGBA16F (ex/2) × (ey/2)" if s.kind == "enc"
              else "output surface, RGBA16F oex × oey (each token's value on its 2×2)")
    return p


@functools.lru_cache(maxsize=None)
def layer_layout(name: str) -> LayerLayout:
    """A layer's phases, offsets, parameter block and weight regions, by the rules above."""
    s = layer_spec(name)
    C, S, NT = s.channels, s.slices, s.ntiles
    G = 2 * C  # a C-wide f16 vector
    slab = 96 * C + SCORE_BYTES
    phases: dict[int, PhaseLayout] = {}
    regions = [Region(0, G, "f16", "prologue RMS gain")]

    kv = tuple(range(1, 2 * S + 1))
    for i in kv:  # K slice s in phase 2s+1, V slice s in 2s+2
        sl = (i - 1) // 2
        phases[i] = PhaseLayout(i, 6, 4, 1, G + 1024 * sl + (32 * C if i % 2 == 0 else 0), slab)
    score, pv = 2 * S + 1, 2 * S + 2
    phases[score] = PhaseLayout(score, 4, 12, 1, -1, slab)  # A, B from the last K phase's D; C = score bias
    phases[pv] = PhaseLayout(pv, 4, 4, 3, -1)  # probabilities × movmatrix(V)
    proj = tuple(range(pv + 1, pv + 1 + HEADS))
    score_bias, proj_b = G + 64 * C, G + 64 * C + SCORE_BYTES
    for h, ph in enumerate(proj):  # head h's output projection, in head h's slab
        phases[ph] = PhaseLayout(ph, 1, NT, 1, proj_b + slab * h)
    for z in range(HEADS):
        base = slab * z
        regions.append(Region(base + G, 64 * C, "e4m3",
                              f"head {z}: K and V projections (phases {kv[0]}–{kv[-1]})", C))
        regions.append(Region(base + score_bias, SCORE_BYTES, "f16", f"head {z}: score bias (phase {score} C)"))
        regions.append(Region(base + proj_b, 32 * C, "e4m3", f"head {z}: output projection (phase {proj[z]})", 128))
    skip_table = G + HEADS * slab
    band_gain = skip_table + G
    regions += [Region(skip_table, G, "f16", f"skip table (phase {proj[0]} C)"),
                Region(band_gain, G, "f16", f"band RMS gain (E{proj[-1]})")]

    band = []
    odd_b = band_gain + G
    residual_table = 0
    for i in range(NT):  # C/8 branches
        odd, even = proj[-1] + 1 + 2 * i, proj[-1] + 2 + 2 * i
        even_b = odd_b + 32 * C + 64
        phases[odd] = PhaseLayout(odd, 1, 4, S, odd_b, bias_offset=odd_b + 32 * C)
        phases[even] = PhaseLayout(even, 1, NT, 1, even_b)
        regions += [Region(odd_b, 32 * C, "e4m3", f"phase {odd} B", C),
                    Region(odd_b + 32 * C, 64, "f16", f"phase {odd} bias"),
                    Region(even_b, 32 * C, "e4m3", f"phase {even} B", 32, 0.6)]
        if i == 0:  # the residual table sits after the first even phase's B
            residual_table = even_b + 32 * C
            regions.append(Region(residual_table, G, "f16", f"residual table (phase {even} C)"))
        band.append((odd, even))
        odd_b = even_b + 32 * C + (G if i == 0 else 0)
    at = odd_b
    merge = None
    merge_planes = 0
    if not s.final:
        merge = band[-1][1] + 1
        if s.kind == "enc":  # 2×2 merge: K = 4 tokens × C, 32 of C' outputs per trip
            merge_planes, k, m, size, what = s.next_channels // 32, 4 * S, 1, 128 * C, "slab"
        else:  # 2×2 expand: K = C, 32 of the 4·C' outputs per trip, all 64 tokens
            merge_planes, k, m, size, what = 4 * s.next_channels // 32, S, 4, 32 * C, "plane"
        phases[merge] = PhaseLayout(merge, m, 4, k, at, size, bias_offset=at + merge_planes * size)
        for p in range(merge_planes):
            regions.append(Region(at + size * p, size, "e4m3", f"phase {merge} B, {what} {p}", 32 * k))
        at += merge_planes * size
        regions.append(Region(at, 64, "f16", f"phase {merge} bias"))
        at += BIAS_BLOCK
    head = (merge or band[-1][1]) + 1
    phases[head] = PhaseLayout(head, 1, 2, S, at, bias_offset=at + 16 * C)
    regions += [Region(at, 16 * C, "e4m3", f"phase {head} B", C),
                Region(at + 16 * C, 32, "f16", f"phase {head} bias")]
    return LayerLayout(
        spec=s, phases=phases, kv=kv, score=score, pv=pv, proj=proj, band=tuple(band), merge=merge, head=head,
        slab_qkv=slab, score_bias=score_bias, prologue_gain=0, skip_table=skip_table, band_gain=band_gain,
        residual_table=residual_table, merge_planes=merge_planes, weight_bytes=at + 16 * C + 32,
        params=_params(s), regions=tuple(sorted(regions, key=lambda r: r.offset)))


# -- enc2, the reference document's kernel ------------------------------------------------------

ENC2 = layer_layout("enc2")
ENTRY = ENC2.entry
CHANNELS = ENC2.channels
PARAMS = ENC2.params
SLAB_QKV = ENC2.slab_qkv  # phases 1–7 add 21504·%tid.z (reference §6 U5)
SLAB_MERGE = ENC2.phases[ENC2.merge].b_slab  # phase 37 adds 12288·%tid.z
SCORE_BIAS = ENC2.score_bias  # phase 7's C: 48 tiles of 512 bytes, tile-major (E6)
PROLOGUE_GAIN = ENC2.prologue_gain  # 96 f16
SKIP_TABLE = ENC2.skip_table  # E8: added to the input skip → phase 9's C
BAND_GAIN = ENC2.band_gain  # E12's RMS-norm gain
RESIDUAL_TABLE = ENC2.residual_table  # E13: D12 + table → phase 14's C
PHASES = ENC2.phases
WEIGHT_BYTES = ENC2.weight_bytes  # highest byte any lane of any %tid.z reads, + 1 (reference §6 U5)


def weight_regions(lay: LayerLayout = ENC2) -> list[Region]:
    """Every byte range of the weight image the kernel reads, in offset order."""
    return list(lay.regions)


# E38's 3×3 gather: five softmax weights over the nine texels (centre, N+S, W+E, NW+SE, NE+SW)
GATHER_TAPS = (((0, 0),), ((0, -1), (0, 1)), ((-1, 0), (1, 0)), ((-1, -1), (1, 1)), ((1, -1), (-1, 1)))
