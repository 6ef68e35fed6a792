"""A numpy model of every layer of the synthetic engine: the same outputs from the same buffers,
stage by stage, for every block at once.

Every step rounds where the PTX rounds (`rr.numerics`: f16 operations, e4m3 packs with satfinite,
the `.approx` f32 functions) and reduces in the PTX's order (the in-lane tree, then the two
butterfly steps, then the two halves). The `mma` accumulation is a parameter, by default the
H200's own (`rr.numerics.mma.DEFAULT_MMA`: the two HMMA of sm_90, bit-exact on the probes): with the
CPU interpreter's model the two agree byte for byte, and both follow the GPU as far as the
numerics model does (docs/numerics.md).

Matrices here are in channel order; `gemm` puts each 32-wide k slice into fragment order
(`layout.SIGMA`) before it calls the `mma` model, so a model that is not order-invariant sees the
k order the hardware sees. Every function takes the layer's `LayerLayout` (enc2's by default).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rr.numerics import fp8, half, mufu
from rr.numerics.mma import DEFAULT_MMA, MMA_MODELS, MmaModel
from rr.synth import layout as L
from rr.synth.layout import GATHER_TAPS, LayerLayout, layer_layout


@dataclass
class LayerInputs:
    weights: np.ndarray  # uint8 [weight_bytes]
    image: np.ndarray  # uint8 e4m3, fragment order: (ey, ex, C) token-major (enc2) or (C/32, ey, ex, 32)
    texture: np.ndarray  # float16 (ey, ex, 4); dec0: the noisy frame (H, W, 4)
    origins: tuple = (0, 0)
    layer: str = "enc2"
    skip: np.ndarray | None = None  # decoders but dec5: the encoder's arena (C/32, ey, ex, 32)
    coarse: np.ndarray | None = None  # dec0: the coarse texture (ey, ex, 4)
    out_extents: tuple | None = None  # decoders: the level below's (oex, oey); dec0: the frame (W, H)
    surface2_shape: tuple | None = None  # encoders: surface2's (height, width), if not (ey/2, ex/2)

    @property
    def extents(self) -> tuple[int, int]:
        s = self.image.shape
        return (s[1], s[0]) if self.image.ndim == 3 else (s[2], s[1])


Enc2Inputs = LayerInputs


# -- the weight image ---------------------------------------------------------------------------

def f16_vector(weights: np.ndarray, offset: int, n: int) -> np.ndarray:
    """A per-column f16 table (and the `{w, w}` bias words): column c at offset + 2c."""
    return weights[offset:offset + 2 * n].view(np.float16).copy()


def b_operand(weights: np.ndarray, phase: int, slab: int = 0, lay: LayerLayout = L.ENC2) -> np.ndarray:
    """Phase `phase`'s B as a (32k, 8n) e4m3 byte matrix, k in fragment order: lane (g, t) of tile
    (s, j) holds b0, b1 of n-tile 2j (column g, k 4t…4t+3 and 16+4t…) then those of n-tile 2j+1."""
    ph = lay.phases[phase]
    out = np.zeros((32 * ph.k, 8 * ph.n), dtype=np.uint8)
    lanes = np.arange(32)
    g, t = lanes >> 2, lanes & 3
    for s in range(ph.k):
        for j in range(max(ph.n // 2, 1)):
            base = ph.b_offset + slab + 512 * ph.b_tile(s, j) + 16 * lanes
            for w in range(4):
                col = 8 * (2 * j + (w >> 1)) + g
                for i in range(4):
                    out[32 * s + 16 * (w & 1) + 4 * t + i, col] = weights[base + 4 * w + i]
    return out


def score_bias(weights: np.ndarray, head: int, lay: LayerLayout = L.ENC2) -> np.ndarray:
    """The score's C for one head, (64, 96) f16: tile (m, n) at 512·(4(n>>1)+m), words 2(n&1)+j."""
    out = np.zeros((64, 96), dtype=np.float16)
    lanes = np.arange(32)
    g, t = lanes >> 2, lanes & 3
    for m in range(4):
        for n in range(12):
            base = lay.slab_qkv * head + lay.score_bias + 512 * (4 * (n >> 1) + m) + 16 * lanes
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


def gemm(a: np.ndarray, b_frag: np.ndarray, c: np.ndarray, mma: MmaModel) -> np.ndarray:
    """D = A·B + C as a chain of k32 `mma` steps. `a` (…, M, K) e4m3 bytes in channel order,
    `b_frag` (…, K, N) e4m3 bytes in fragment k order, `c` broadcastable to (…, M, N) f16."""
    a = to_fragment_order(a)
    d = np.broadcast_to(np.asarray(c, dtype=np.float16), a.shape[:-1] + b_frag.shape[-1:])
    for s in range(a.shape[-1] // 32):
        d = mma(a[..., 32 * s:32 * s + 32], b_frag[..., 32 * s:32 * s + 32, :], d)
    return d


# -- stored images -------------------------------------------------------------------------------

def stored_planes(q: np.ndarray) -> np.ndarray:
    """(…, 32·P) channel-order bytes → (…, P, 32) as the arena and the merge output store them."""
    return to_fragment_order(q).reshape(q.shape[:-1] + (q.shape[-1] // 32, 32))


def image_channels(image: np.ndarray) -> np.ndarray:
    """A stored e4m3 image, token-major (ey, ex, C) or in planes (C/32, ey, ex, 32), as
    (ey, ex, C) bytes in channel order."""
    if image.ndim == 4:
        image = np.moveaxis(image, 0, -2).reshape(image.shape[1:3] + (32 * image.shape[0],))
    return from_fragment_order(image)


def planes_of(tokens: np.ndarray) -> np.ndarray:
    """(ey, ex, C) bytes in channel order → the (C/32, ey, ex, 32) stored planes."""
    return np.moveaxis(stored_planes(tokens), -2, 0)


# -- epilogue arithmetic ---------------------------------------------------------------------------

def pairwise(xs: list, op) -> object:
    """Reduce a list by adding neighbours, level by level ((x0+x1), (x2+x3), …; an odd last one
    is carried up): the in-lane reduction tree the engine's kernels use."""
    xs = list(xs)
    while len(xs) > 1:
        nxt = [op(xs[i], xs[i + 1]) for i in range(0, len(xs) - 1, 2)]
        if len(xs) % 2:
            nxt.append(xs[-1])
        xs = nxt
    return xs[0]


def row_sum(x: np.ndarray) -> np.ndarray:
    """Σ over the last axis (C columns) in the kernel's order: column 8j+2t+e sits in lane t,
    half e, register j; in-lane tree over j, butterfly over t (bits 0 then 1), then the halves."""
    v = x.reshape(x.shape[:-1] + (x.shape[-1] // 8, 4, 2))
    v = pairwise([v[..., j, :, :] for j in range(v.shape[-3])], half.add)  # (…, 4 lanes, 2 halves)
    w = half.add(v[..., 0, :], v[..., 1, :])  # lane 0 after the delta-1 step
    w = half.add(w, half.add(v[..., 2, :], v[..., 3, :]))  # … and after delta 2
    return half.add(w[..., 0], w[..., 1])


def rms_norm(x: np.ndarray, gain: np.ndarray) -> np.ndarray:
    """x · (rsqrt(Σx² + 2^-13) · gain): no mean, no 1/N (reference §3/E12)."""
    s = half.add(row_sum(half.mul(x, x)), half.f16(L.EPS))
    inv = half.f16(mufu.rsqrt_approx(s.astype(np.float32)))
    return half.mul(x, half.mul(inv[..., None], gain))


def cubic_exponent(score: np.ndarray) -> np.ndarray:
    """E7(a): clamp(x·0.017181…, ±0.55615…), u = m·(0.927… − m²) + 1.375, then u's top mantissa
    bits moved into the exponent field: 2^(32·frac(u) − 15) to a 6-bit significand."""
    m = half.fmin(half.fmax(half.mul(score, half.f16(np.float32(0.017186790704727173))), half.f16(-0.55615234375)),
                  half.f16(0.55615234375))
    t = half.fma(m, half.neg(m), half.f16(0.92724609375))
    u = half.fma(m, t, half.f16(1.375))
    return half.from_bits16((half.bits16(u).astype(np.uint32) << 5 & 0x7FE0).astype(np.uint16))


def softmax_no_max(score: np.ndarray) -> np.ndarray:
    e = cubic_exponent(score)
    r = half.f16(mufu.rcp_approx(row_sum(e).astype(np.float32)))
    return half.mul(e, r[..., None])


def clamped_cubic(x: np.ndarray) -> np.ndarray:
    """E13(a): y = clamp(x, ±2), out = x·(0.5 + y·(0.412109375 − 0.0810546875·|y|)). The kernel's
    mul.f16x2 → sub.f16x2 and mul.f16x2 → add.f16x2 carry no rounding modifier and each product
    has one reader, so ptxas makes each pair one HFMA2 (rr.run.cpu.program._contract): two fmas,
    the last product rounded alone."""
    two = half.f16(2.0)
    y = half.fmin(half.fmax(x, half.neg(two)), two)
    s = half.fma(half.neg(half.f16(np.float32(0.0810810774564743))), np.abs(y),
                 half.f16(np.float32(0.4121621549129486)))
    g = half.fma(y, s, half.f16(0.5))
    return half.mul(x, g)


def sigmoid(v: np.ndarray) -> np.ndarray:
    """1/(1 + 2^(−log2e·v)) through ex2.approx and div.approx, rounded to f16."""
    f32 = np.float32
    den = mufu.add_ftz(mufu.ex2_approx(mufu.mul_ftz(v.astype(f32), f32(-1.4426950216293335))), f32(1))
    return half.f16(mufu.div_approx(f32(1), den))


# -- the layer ------------------------------------------------------------------------------------

def _slots(x0: np.ndarray, y0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Token coordinates of the 128 slots of each block: the window, the strip above, below."""
    s = np.arange(128)
    dx = s & 7
    dy = np.where(s < 64, s >> 3, np.where(s < 96, ((s - 64) >> 3) - 4, ((s - 96) >> 3) + 8))
    return x0[..., None] + dx, y0[..., None] + dy


def forward(inp: LayerInputs, mma: MmaModel | None = None) -> dict[str, np.ndarray]:
    """Run the layer; returns the final contents of every buffer it writes, by the parameter
    block's names: arena, half_out (encoders) or expanded (decoders), surface0–2 (dec0: frame)."""
    mma = mma or MMA_MODELS[DEFAULT_MMA]
    lay = layer_layout(inp.layer)
    spec = lay.spec
    C, S = spec.channels, spec.slices
    W = inp.weights
    ex, ey = inp.extents
    ox, oy = inp.origins
    if ox % 2 or oy % 2:
        raise ValueError(f"patch origins {inp.origins}: the model assumes even origins")
    gx, gy = -(-(ex + ox) // 8), -(-(ey + oy) // 8)
    by, bx = np.meshgrid(np.arange(gy), np.arange(gx), indexing="ij")
    x0, y0 = 8 * bx - ox, 8 * by - oy  # (gy, gx)

    # prologue: 128 slots per block, quantised input (+ skip), RMS norm, e4m3
    sx, sy = _slots(x0, y0)
    inside = (sx >= 0) & (sx < ex) & (sy >= 0) & (sy < ey)

    def slots_of(image):
        chan = image_channels(image)  # (ey, ex, C) bytes in channel order
        return np.where(inside[..., None], fp8.from_e4m3(chan[np.clip(sy, 0, ey - 1), np.clip(sx, 0, ex - 1)]),
                        np.float16(0))
    x = slots_of(inp.image)
    if spec.skip:
        x = half.add(x, slots_of(inp.skip))
    xq = fp8.to_e4m3(rms_norm(x, f16_vector(W, lay.prologue_gain, C)))

    heads = []
    for z in range(L.HEADS):
        slab = lay.slab_qkv * z
        rows = np.concatenate([xq[..., :64, :], xq[..., 64 + 32 * (z & 1):96 + 32 * (z & 1), :]], axis=-2)
        zero = np.float16(0)
        kp = vp = zero
        for s in range(S):  # K and V, one k32 slice a phase
            sl = rows[..., 32 * s:32 * s + 32]
            kp = gemm(sl, b_operand(W, lay.kv[2 * s], slab, lay), kp, mma)
            vp = gemm(sl, b_operand(W, lay.kv[2 * s + 1], slab, lay), vp, mma)
        kq = fp8.to_e4m3(kp)  # (…, 96, 32)
        score = gemm(kq[..., :64, :], to_fragment_order(kq, -1).swapaxes(-1, -2), score_bias(W, z, lay), mma)
        p = fp8.to_e4m3(softmax_no_max(score))
        vq = to_fragment_order(fp8.to_e4m3(vp), -2)
        heads.append(gemm(p, vq, zero, mma))  # (…, 64, 32)

    # output projection with the input skip, RMS norm, the MLP band with its residual chain
    y = half.add(f16_vector(W, lay.skip_table, C), x[..., :64, :])
    for h in range(L.HEADS):
        y = gemm(fp8.to_e4m3(heads[h]), b_operand(W, lay.proj[h], 0, lay), y, mma)
    nq = fp8.to_e4m3(rms_norm(y, f16_vector(W, lay.band_gain, C)))
    r = half.add(f16_vector(W, lay.residual_table, C), y)
    for odd, even in lay.band:
        d = gemm(nq, b_operand(W, odd, 0, lay), f16_vector(W, lay.phases[odd].bias_offset, 32), mma)
        r = gemm(fp8.to_e4m3(clamped_cubic(d)), b_operand(W, even, 0, lay), r, mma)
    rq = fp8.to_e4m3(r)  # (gy, gx, 64, C)

    out = {}
    win_x, win_y = sx[..., :64], sy[..., :64]
    win_in = inside[..., :64]
    arena = np.zeros((S, ey, ex, 32), dtype=np.uint8)
    planes = stored_planes(rq)
    for P in range(S):
        arena[P, win_y[win_in], win_x[win_in]] = planes[..., P, :][win_in]
    out["arena"] = arena
    if spec.kind == "enc":
        out["half_out"] = _merge(lay, W, rq, x0, y0, ex, ey, mma)
    elif not spec.final:
        out["expanded"] = _expand(lay, W, rq, win_x, win_y, inp, mma)

    head = lay.phases[lay.head]
    d38 = gemm(rq, b_operand(W, lay.head, 0, lay), f16_vector(W, head.bias_offset, 16), mma)  # (…, 64, 16)
    out.update(_final_epilogue(lay, d38, inp, win_x, win_y, ex, ey))
    return out


def _merge(lay: LayerLayout, W, rq, x0, y0, ex, ey, mma) -> np.ndarray:
    """The 2×2 patch merge (K = 4C), 32 output channels per slab, at half extents."""
    spec = lay.spec
    r_ = np.arange(16)
    merged = np.concatenate([rq[..., (2 * (r_ >> 2) + dy) * 8 + 2 * (r_ & 3) + dx, :]
                             for dy in (0, 1) for dx in (0, 1)], axis=-1)  # (…, 16, 4C)
    hx, hy = ex >> 1, ey >> 1
    merged_out = np.zeros((lay.merge_planes, hy, hx, 32), dtype=np.uint8)
    mx_, my_ = (x0 >> 1)[..., None] + (r_ & 3), (y0 >> 1)[..., None] + (r_ >> 2)
    m_in = (mx_ >= 0) & (mx_ < hx) & (my_ >= 0) & (my_ < hy)
    ph = lay.phases[lay.merge]
    bias = f16_vector(W, ph.bias_offset, 32)
    for p in range(lay.merge_planes):
        d = gemm(merged, b_operand(W, lay.merge, ph.b_slab * p, lay), bias, mma)
        merged_out[p, my_[m_in], mx_[m_in]] = stored_planes(fp8.to_e4m3(d))[..., 0, :][m_in]
    if spec.token_output:  # tokens of C' bytes: plane p at bytes 32p…32p+31
        merged_out = np.moveaxis(merged_out, 0, 2).reshape(hy, hx, spec.next_channels)
    return merged_out


def _child_bounds(inp: LayerInputs) -> tuple[int, int]:
    """Where a decoder's 2×2 children are written: the level below, where this level had a parent."""
    (ex, ey), (oex, oey) = inp.extents, inp.out_extents
    return min(oex, 2 * ex), min(oey, 2 * ey)


def _expand(lay: LayerLayout, W, rq, win_x, win_y, inp: LayerInputs, mma) -> np.ndarray:
    """The 2×2 expand: child (dx, dy) of every token, 32 of the next layer's channels a plane, in
    planes at the level below's extents."""
    oex, oey = inp.out_extents
    xl, yl = _child_bounds(inp)
    n_planes = lay.spec.next_channels // 32
    ph = lay.phases[lay.merge]
    bias = f16_vector(W, ph.bias_offset, 32)
    out = np.zeros((n_planes, oey, oex, 32), dtype=np.uint8)
    for p in range(n_planes):
        for q in range(4):  # warp q makes child (q & 1, q >> 1): column group 4p + q
            d = gemm(rq, b_operand(W, lay.merge, ph.b_slab * (4 * p + q), lay), bias, mma)  # (…, 64, 32)
            cx, cy = 2 * win_x + (q & 1), 2 * win_y + (q >> 1)
            ok = (cx >= 0) & (cx < xl) & (cy >= 0) & (cy < yl)
            out[p, cy[ok], cx[ok]] = stored_planes(fp8.to_e4m3(d))[..., 0, :][ok]
    return out


def _weights_and_sigma(d38: np.ndarray):
    """E38(c): the real-max softmax of logits 0, 2, 4, 6, 8 and σ of column 10."""
    f32 = np.float32
    logits = [d38[..., 2 * i] for i in range(5)]
    mx = logits[0]
    for v in logits[1:]:
        mx = half.fmax(mx, v)
    exps = [mufu.ex2_approx(mufu.mul_ftz(half.sub(v, mx).astype(f32), f32(1.4426950216293335))) for v in logits]
    total = exps[0]
    for e in exps[1:]:
        total = mufu.add_ftz(total, e)
    inv = mufu.div_approx(f32(1), total)
    return [half.f16(mufu.mul_ftz(e, inv)) for e in exps], sigmoid(d38[..., 10])


def _neighbours(v: np.ndarray, ext: int) -> dict[int, np.ndarray]:
    return {-1: np.where(v < 1, 1, v - 1), 0: v, 1: np.where(v + 1 >= ext, ext - 2, v + 1)}


def fetch(image: np.ndarray, y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """`tex.2d.v4.f16.s32` as the H200 does it: the texel at integer (x, y), and zeros outside the
    image — the sampler's clamp addressing applies to float coordinates only (an x of -1 or of
    the width reads zeros; a 1-wide layer's mirrored neighbours fall there)."""
    h, w = image.shape[:2]
    inside = (y >= 0) & (y < h) & (x >= 0) & (x < w)
    return np.where(inside[..., None], image[np.clip(y, 0, h - 1), np.clip(x, 0, w - 1)], np.float16(0))


def _gather(texture: np.ndarray, cx: dict, cy: dict, wts: list) -> np.ndarray:
    """The nine texels, point-sampled at integer coordinates, weighted by the five weights."""
    acc = None
    for wt, taps in zip(wts, GATHER_TAPS):
        for dx, dy in taps:
            texel = fetch(texture, cy[dy], cx[dx])
            acc = half.mul(wt[..., None], texel) if acc is None else half.fma(wt[..., None], texel, acc)
    return acc


def _final_epilogue(lay: LayerLayout, d38, inp: LayerInputs, px, py, ex, ey) -> dict[str, np.ndarray]:
    """E38 per window pixel: real-max softmax of 5 logits, 3×3 gather, sigmoid, surfaces."""
    spec = lay.spec
    wts, sig = _weights_and_sigma(d38)
    inside = (px >= 0) & (px < ex) & (py >= 0) & (py < ey)
    if spec.final:
        return {"frame": _frame(inp, wts, sig, px, py, inside)}
    acc = _gather(inp.texture, _neighbours(px, ex), _neighbours(py, ey), wts)
    prod = half.mul(sig[..., None], acc[..., :3])
    diff = half.sub(acc[..., :3], prod)
    s0_img = np.zeros((ey, ex, 4), dtype=np.float16)
    s1_img = np.zeros((ey, ex, 4), dtype=np.float16)
    s0_img[py[inside], px[inside]] = np.concatenate([diff, acc[..., 3:]], -1)[inside]
    s1_img[py[inside], px[inside]] = np.concatenate([prod, sig[..., None]], -1)[inside]
    with_zero = np.concatenate([diff, np.zeros_like(diff[..., :1])], -1)
    if spec.kind == "dec":  # the value on the token's 2×2 children at the level below
        xl, yl = _child_bounds(inp)
        oex, oey = inp.out_extents
        s2_img = np.zeros((oey, oex, 4), dtype=np.float16)
        for dy in (0, 1):
            for dx in (0, 1):
                cx, cy = 2 * px + dx, 2 * py + dy
                ok = inside & (cx < xl) & (cy < yl)
                s2_img[cy[ok], cx[ok]] = with_zero[ok]
        return {"surface0": s0_img, "surface1": s1_img, "surface2": s2_img}
    q = half.mul(diff, half.f16(0.25))  # (gy, gx, 64, 3)
    # shfl.down 1 then 8 inside each warp of 32 pixels (a source lane past 31 gives its own value)
    lane = np.arange(64) % 32
    idx1 = np.where(lane + 1 <= 31, np.arange(64) + 1, np.arange(64))
    v = half.add(q, q[..., idx1, :])
    idx8 = np.where(lane + 8 <= 31, np.arange(64) + 8, np.arange(64))
    v = half.add(v, v[..., idx8, :])
    # E38 writes every even pixel's sum; the surface keeps what falls inside it
    hy, hx = inp.surface2_shape or (ey >> 1, ex >> 1)
    even = inside & ((px | py) & 1 == 0) & ((px >> 1) < hx) & ((py >> 1) < hy)
    s2_img = np.zeros((hy, hx, 4), dtype=np.float16)
    s2_img[py[even] >> 1, px[even] >> 1] = np.concatenate([v, np.zeros_like(v[..., :1])], -1)[even]
    return {"surface0": s0_img, "surface1": s1_img, "surface2": s2_img}


def _frame(inp: LayerInputs, wts, sig, px, py, inside) -> np.ndarray:
    """dec0's final frame: each token's kernel on its 4×4 pixels of the noisy frame, blended with
    the coarse texture: acc − σ·acc + σ·coarse, alpha from the gather."""
    fw, fh = inp.out_extents
    coarse = fetch(inp.coarse, py, px)
    frame = np.zeros((fh, fw, 4), dtype=np.float16)
    for r in range(4):
        for c in range(4):
            X, Y = 4 * px + c, 4 * py + r
            acc = _gather(inp.texture, _neighbours(X, fw), _neighbours(Y, fh), wts)
            # σ·acc has one reader here (the layers above also store it): ptxas fuses the pair
            diff = half.fma(half.neg(sig[..., None]), acc[..., :3], acc[..., :3])
            fin = half.fma(sig[..., None], coarse[..., :3], diff)
            ok = inside & (X < fw) & (Y < fh)
            frame[Y[ok], X[ok]] = np.concatenate([fin, acc[..., 3:]], -1)[ok]
    return frame
