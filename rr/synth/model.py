"""A numpy model of the synthetic enc2: the same outputs from the same buffers, stage by stage, for
every block at once.

Every step rounds where the PTX rounds (`rr.numerics`: f16 operations, e4m3 packs with satfinite,
the `.approx` f32 functions) and reduces in the PTX's order (the in-lane tree, then the two
butterfly steps, then the two halves). The `mma` accumulation is a parameter: with the CPU
interpreter's model the two agree byte for byte; against the GPU they differ where the tensor
core rounds differently from the model (DESIGN §7).

Matrices here are in channel order; `gemm` puts each 32-wide k slice into fragment order
(`layout.SIGMA`) before it calls the `mma` model, so a model that is not order-invariant sees the
k order the hardware sees.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rr import numerics as nx
from rr.synth import layout as L
from rr.synth.enc2 import GATHER_TAPS


@dataclass
class Enc2Inputs:
    weights: np.ndarray  # uint8 [WEIGHT_BYTES]
    image: np.ndarray  # uint8 (ey, ex, 96), fragment order per 32 channels
    texture: np.ndarray  # float16 (ey, ex, 4)
    origins: tuple = (0, 0)

    @property
    def extents(self) -> tuple[int, int]:
        return self.image.shape[1], self.image.shape[0]


# -- the weight image ---------------------------------------------------------------------------

def f16_vector(weights: np.ndarray, offset: int, n: int) -> np.ndarray:
    """A per-column f16 table (and the `{w, w}` bias words): column c at offset + 2c."""
    return weights[offset:offset + 2 * n].view(np.float16).copy()


def b_operand(weights: np.ndarray, phase: int, slab: int = 0) -> np.ndarray:
    """Phase `phase`'s B as a (32k, 8n) e4m3 byte matrix, k in fragment order: lane (g, t) of tile
    (s, j) holds b0, b1 of n-tile 2j (column g, k 4t…4t+3 and 16+4t…) then those of n-tile 2j+1."""
    lay = L.PHASES[phase]
    out = np.zeros((32 * lay.k, 8 * lay.n), dtype=np.uint8)
    lanes = np.arange(32)
    g, t = lanes >> 2, lanes & 3
    for s in range(lay.k):
        for j in range(max(lay.n // 2, 1)):
            base = lay.b_offset + slab + 512 * lay.b_tile(s, j) + 16 * lanes
            for w in range(4):
                col = 8 * (2 * j + (w >> 1)) + g
                for i in range(4):
                    out[32 * s + 16 * (w & 1) + 4 * t + i, col] = weights[base + 4 * w + i]
    return out


def score_bias(weights: np.ndarray, head: int) -> np.ndarray:
    """Phase 7's C for one head, (64, 96) f16: tile (m, n) at 512·(4(n>>1)+m), words 2(n&1)+j."""
    out = np.zeros((64, 96), dtype=np.float16)
    lanes = np.arange(32)
    g, t = lanes >> 2, lanes & 3
    for m in range(4):
        for n in range(12):
            base = L.SLAB_QKV * head + L.SCORE_BIAS + 512 * (4 * (n >> 1) + m) + 16 * lanes
            for jw in range(2):
                for e in range(2):
                    at = base + 4 * (2 * (n & 1) + jw) + 2 * e
                    out[16 * m + g + 8 * jw, 8 * n + 2 * t + e] = \
                        weights[np.stack([at, at + 1], -1)].copy().view(np.float16)[:, 0]
    return out


# -- fragment order and the GEMM -----------------------------------------------------------------

def _permute_slices(x: np.ndarray, axis: int, perm: np.ndarray) -> np.ndarray:
    """x with each 32-wide slice of `axis` gathered through `perm`."""
    x = np.moveaxis(x, axis, -1)
    i = np.arange(x.shape[-1])
    return np.moveaxis(x[..., (i // 32) * 32 + perm[i % 32]], -1, axis)


def to_fragment_order(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Reorder each 32-wide slice of `axis` from channel order to fragment k order."""
    return _permute_slices(x, axis, L.SIGMA_INV)


def from_fragment_order(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Reorder each 32-wide slice of `axis` from fragment k order (as stored) to channel order."""
    return _permute_slices(x, axis, L.SIGMA)


def gemm(a: np.ndarray, b_frag: np.ndarray, c: np.ndarray, mma: nx.MmaModel) -> np.ndarray:
    """D = A·B + C as a chain of k32 `mma` steps. `a` (…, M, K) e4m3 bytes in channel order,
    `b_frag` (…, K, N) e4m3 bytes in fragment k order, `c` broadcastable to (…, M, N) f16."""
    a = to_fragment_order(a)
    d = np.broadcast_to(np.asarray(c, dtype=np.float16), a.shape[:-1] + b_frag.shape[-1:])
    for s in range(a.shape[-1] // 32):
        d = mma(a[..., 32 * s:32 * s + 32], b_frag[..., 32 * s:32 * s + 32, :], d)
    return d


# -- epilogue arithmetic ---------------------------------------------------------------------------

def row_sum(x: np.ndarray) -> np.ndarray:
    """Σ over the last axis (96 columns) in the kernel's order: column 8j+2t+e sits in lane t,
    half e, register j; in-lane tree over j, butterfly over t (bits 0 then 1), then the halves."""
    v = x.reshape(x.shape[:-1] + (12, 4, 2))
    v = nx.pairwise([v[..., j, :, :] for j in range(12)], nx.add)  # (…, 4 lanes, 2 halves)
    w = nx.add(v[..., 0, :], v[..., 1, :])  # lane 0 after the delta-1 step
    w = nx.add(w, nx.add(v[..., 2, :], v[..., 3, :]))  # … and after delta 2
    return nx.add(w[..., 0], w[..., 1])


def rms_norm(x: np.ndarray, gain: np.ndarray) -> np.ndarray:
    """x · (rsqrt(Σx² + 2^-13) · gain): no mean, no 1/N (reference §3/E12)."""
    s = nx.add(row_sum(nx.mul(x, x)), nx.f16(L.EPS))
    inv = nx.f16(nx.rsqrt_approx(s.astype(np.float32)))
    return nx.mul(x, nx.mul(inv[..., None], gain))


def cubic_exponent(score: np.ndarray) -> np.ndarray:
    """E7(a): clamp(x·0.017181…, ±0.55615…), u = m·(0.927… − m²) + 1.375, then u's top mantissa
    bits moved into the exponent field: 2^(32·frac(u) − 15) to a 6-bit significand."""
    m = nx.fmin(nx.fmax(nx.mul(score, nx.f16(np.float32(0.017186790704727173))), nx.f16(-0.55615234375)),
                nx.f16(0.55615234375))
    t = nx.fma(m, nx.neg(m), nx.f16(0.92724609375))
    u = nx.fma(m, t, nx.f16(1.375))
    return nx.from_bits16((nx.bits16(u).astype(np.uint32) << 5 & 0x7FE0).astype(np.uint16))


def softmax_no_max(score: np.ndarray) -> np.ndarray:
    e = cubic_exponent(score)
    r = nx.f16(nx.rcp_approx(row_sum(e).astype(np.float32)))
    return nx.mul(e, r[..., None])


def clamped_cubic(x: np.ndarray) -> np.ndarray:
    """E13(a): y = clamp(x, ±2), out = x·(0.5 + y·(0.412109375 − 0.0810546875·|y|))."""
    two = nx.f16(2.0)
    y = nx.fmin(nx.fmax(x, nx.neg(two)), two)
    q = nx.mul(nx.f16(np.float32(0.0810810774564743)), np.abs(y))
    g = nx.add(nx.f16(0.5), nx.mul(y, nx.sub(nx.f16(np.float32(0.4121621549129486)), q)))
    return nx.mul(x, g)


# -- the layer ------------------------------------------------------------------------------------

def _slots(x0: np.ndarray, y0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Token coordinates of the 128 slots of each block: the window, the strip above, below."""
    s = np.arange(128)
    dx = s & 7
    dy = np.where(s < 64, s >> 3, np.where(s < 96, ((s - 64) >> 3) - 4, ((s - 96) >> 3) + 8))
    return x0[..., None] + dx, y0[..., None] + dy


def forward(inp: Enc2Inputs, mma: nx.MmaModel = nx.mma_exact) -> dict[str, np.ndarray]:
    """Run the layer; returns the final contents of arena, half_out and the three surfaces."""
    W = inp.weights
    ex, ey = inp.extents
    ox, oy = inp.origins
    if ox % 2 or oy % 2:
        raise ValueError(f"patch origins {inp.origins}: the model assumes even origins")
    gx, gy = -(-(ex + ox) // 8), -(-(ey + oy) // 8)
    by, bx = np.meshgrid(np.arange(gy), np.arange(gx), indexing="ij")
    x0, y0 = 8 * bx - ox, 8 * by - oy  # (gy, gx)

    # prologue: 128 slots per block, quantised input, RMS norm, e4m3
    sx, sy = _slots(x0, y0)
    inside = (sx >= 0) & (sx < ex) & (sy >= 0) & (sy < ey)
    chan = from_fragment_order(inp.image)  # (ey, ex, 96) bytes in channel order
    x = np.where(inside[..., None], nx.from_e4m3(chan[np.clip(sy, 0, ey - 1), np.clip(sx, 0, ex - 1)]),
                 np.float16(0))
    xq = nx.to_e4m3(rms_norm(x, f16_vector(W, L.PROLOGUE_GAIN, 96)))

    heads = []
    for z in range(L.HEADS):
        slab = L.SLAB_QKV * z
        rows = np.concatenate([xq[..., :64, :], xq[..., 64 + 32 * (z & 1):96 + 32 * (z & 1), :]], axis=-2)
        zero = np.float16(0)
        kp = vp = zero
        for s in range(3):  # phases 1,3,5 (K) and 2,4,6 (V), one k32 slice each
            sl = rows[..., 32 * s:32 * s + 32]
            kp = gemm(sl, b_operand(W, 1 + 2 * s, slab), kp, mma)
            vp = gemm(sl, b_operand(W, 2 + 2 * s, slab), vp, mma)
        kq = nx.to_e4m3(kp)  # (…, 96, 32)
        score = gemm(kq[..., :64, :], to_fragment_order(kq, -1).swapaxes(-1, -2), score_bias(W, z), mma)
        p = nx.to_e4m3(softmax_no_max(score))
        vq = to_fragment_order(nx.to_e4m3(vp), -2)
        heads.append(gemm(p, vq, zero, mma))  # (…, 64, 32)

    # output projection with the input skip, RMS norm, the MLP band with its residual chain
    y = nx.add(f16_vector(W, L.SKIP_TABLE, 96), x[..., :64, :])
    for h in range(4):
        y = gemm(nx.to_e4m3(heads[h]), b_operand(W, 9 + h), y, mma)
    nq = nx.to_e4m3(rms_norm(y, f16_vector(W, L.BAND_GAIN, 96)))
    r = nx.add(f16_vector(W, L.RESIDUAL_TABLE, 96), y)
    for i in range(12):
        odd, even = L.PHASES[13 + 2 * i], L.PHASES[14 + 2 * i]
        d = gemm(nq, b_operand(W, odd.phase), f16_vector(W, odd.bias_offset, 32), mma)
        r = gemm(nx.to_e4m3(clamped_cubic(d)), b_operand(W, even.phase), r, mma)
    rq = nx.to_e4m3(r)  # (gy, gx, 64, 96)

    out = {}
    win_x, win_y = sx[..., :64], sy[..., :64]
    win_in = inside[..., :64]
    arena = np.zeros((3, ey, ex, 32), dtype=np.uint8)
    planes = stored_planes(rq)
    for P in range(3):
        arena[P, win_y[win_in], win_x[win_in]] = planes[..., P, :][win_in]
    out["arena"] = arena

    # phase 37: 2×2 patch merge (K = 384) per warp slab, then phase 38 and E38
    r_ = np.arange(16)
    merged = np.concatenate([rq[..., (2 * (r_ >> 2) + dy) * 8 + 2 * (r_ & 3) + dx, :]
                             for dy in (0, 1) for dx in (0, 1)], axis=-1)  # (…, 16, 384)
    hx, hy = ex >> 1, ey >> 1
    half = np.zeros((4, hy, hx, 32), dtype=np.uint8)
    mx_, my_ = (x0 >> 1)[..., None] + (r_ & 3), (y0 >> 1)[..., None] + (r_ >> 2)
    m_in = (mx_ >= 0) & (mx_ < hx) & (my_ >= 0) & (my_ < hy)
    bias37 = f16_vector(W, L.PHASES[37].bias_offset, 32)
    for z in range(L.HEADS):
        d37 = gemm(merged, b_operand(W, 37, L.SLAB_MERGE * z), bias37, mma)
        half[z, my_[m_in], mx_[m_in]] = stored_planes(nx.to_e4m3(d37))[..., 0, :][m_in]
    out["half_out"] = half

    d38 = gemm(rq, b_operand(W, 38), f16_vector(W, L.PHASES[38].bias_offset, 16), mma)  # (…, 64, 16)
    out.update(_final_epilogue(d38, inp.texture, win_x, win_y, ex, ey))
    return out


def stored_planes(q: np.ndarray) -> np.ndarray:
    """(…, 32·P) channel-order bytes → (…, P, 32) as the arena and half_out store them."""
    return to_fragment_order(q).reshape(q.shape[:-1] + (q.shape[-1] // 32, 32))


def _final_epilogue(d38, texture, px, py, ex, ey) -> dict[str, np.ndarray]:
    """E38 per window pixel: real-max softmax of 5 logits, 3×3 gather, sigmoid, surfaces."""
    f32 = np.float32
    logits = [d38[..., 2 * i] for i in range(5)]
    mx = logits[0]
    for v in logits[1:]:
        mx = nx.fmax(mx, v)
    exps = [nx.ex2_approx(nx.mul_ftz(nx.sub(v, mx).astype(f32), f32(1.4426950216293335))) for v in logits]
    total = exps[0]
    for e in exps[1:]:
        total = nx.add_ftz(total, e)
    inv = nx.div_approx(f32(1), total)
    wts = [nx.f16(nx.mul_ftz(e, inv)) for e in exps]

    def coord(v, ext):
        return {-1: np.where(v < 1, 1, v - 1), 0: v, 1: np.where(v + 1 >= ext, ext - 2, v + 1)}
    cx, cy = coord(px, ex), coord(py, ey)
    acc = None
    for w, taps in zip(wts, GATHER_TAPS):
        for dx, dy in taps:
            texel = texture[np.clip(cy[dy], 0, ey - 1), np.clip(cx[dx], 0, ex - 1)]
            acc = nx.mul(w[..., None], texel) if acc is None else nx.fma(w[..., None], texel, acc)
    s0 = d38[..., 10]
    den = nx.add_ftz(nx.ex2_approx(nx.mul_ftz(s0.astype(f32), f32(-1.4426950216293335))), f32(1))
    sig = nx.f16(nx.div_approx(f32(1), den))
    prod = nx.mul(sig[..., None], acc[..., :3])
    diff = nx.sub(acc[..., :3], prod)
    q = nx.mul(diff, nx.f16(0.25))  # (gy, gx, 64, 3)
    # shfl.down 1 then 8 inside each warp of 32 pixels (a source lane past 31 gives its own value)
    lane = np.arange(64) % 32
    idx1 = np.where(lane + 1 <= 31, np.arange(64) + 1, np.arange(64))
    v = nx.add(q, q[..., idx1, :])
    idx8 = np.where(lane + 8 <= 31, np.arange(64) + 8, np.arange(64))
    v = nx.add(v, v[..., idx8, :])

    inside = (px >= 0) & (px < ex) & (py >= 0) & (py < ey)
    s0_img = np.zeros((ey, ex, 4), dtype=np.float16)
    s1_img = np.zeros((ey, ex, 4), dtype=np.float16)
    s0_img[py[inside], px[inside]] = np.concatenate([diff, acc[..., 3:]], -1)[inside]
    s1_img[py[inside], px[inside]] = np.concatenate([prod, sig[..., None]], -1)[inside]
    hx, hy = ex >> 1, ey >> 1
    even = inside & ((px | py) & 1 == 0) & ((px >> 1) < hx) & ((py >> 1) < hy)
    s2_img = np.zeros((hy, hx, 4), dtype=np.float16)
    s2_img[py[even] >> 1, px[even] >> 1] = np.concatenate([v, np.zeros_like(v[..., :1])], -1)[even]
    return {"surface0": s0_img, "surface1": s1_img, "surface2": s2_img}
