"""The Swin-layer generator of the synthetic engine: every one of the eleven layers
(`cuda_dldn_engine_swin_<layer>_kernel`) is this one kernel template at the layer's channel
count, emitted through the PTX builder. At enc2 (96 channels) it is the kernel the reference
document describes, byte for byte the synthetic enc2 the project started with.

One block is one 8×8 window of tokens with C channels; its four warps (`%tid.z`) are the four
attention heads (32 wide), then four 16-token row groups. In order (reference §2–§3; the scaling
rules and the choices where §6 is silent are in docs/engine.md):

    prologue   load 128 token slots (the window and two 4-row strips) of the input (decoders: plus
               the skip input), RMS-norm them (2^-13, gain at W+0), requantise to e4m3, stage
               them in shared as A fragments
    K, V       per head: K = X·Wk and V = X·Wv, one k32 slice per phase, interleaved
    score      score = K[0:64]·Kᵀ + bias (A and B are packs of the last K phase's D; C the
               12288-byte tile-major bias)
    P·V        clamped-cubic exponent (no row max), butterfly row sums, rcp.approx, P·V with V
               transposed by movmatrix
    proj       heads → shared → output projection, C = input skip + table
    band       RMS norm → the normed tile N; C/8 MLP branches off N: odd = N·W + bias, clamped
               cubic, even = act·W with the residual chain
    merge      (encoders) D → plane arena and shared; 2×2 patch merge (K = 4C) → half extents,
               32 output channels per trip of NVVM's loop over %tid.z<<5
    expand     (decoders) the same loop, each warp one of the 2×2 children: K = C over the
               window's 64 tokens → the next layer's C' channels at the extents of the level below
    head, E38  a 16-wide head on D, real 5-value softmax, 3×3 texture gather, sigmoid; encoders
               0.25 scale and shfl.down 1 and 8 to half resolution, decoders the value on its 2×2
               children; dec0 the final frame, each token's kernel applied to its 4×4 pixels
"""

from __future__ import annotations

from rr.synth.builder import KernelBuilder, KernelParam
from rr.synth.layout import BLOCK, GATHER_TAPS, PARAM_BYTES, LayerLayout, layer_layout

# the immediates of the reference document, §1.2 and E38
SCORE_SCALE = "0f3C8CCB50"  # 0.017186… → f16 0.017181396484375
CLAMP_LO, CLAMP_HI = "0dBFE1CC0000000000", "0d3FE1CC0000000000"  # ∓0.55615234375
CUBIC_C1, CUBIC_C2 = "0f3F6D6000", "0f3FB00000"  # 0.92724609375, 1.375
EXP_MASK = "2145419232"  # 0x7FE07FE0
ACT_A, ACT_B, ACT_HALF, ACT_TWO = "0f3ED306EB", "0f3DA60DD6", "0f3F000000", "0f40000000"
EPS_F64 = "0d3F20000000000000"  # 2^-13
NEG_LOG2E, LOG2E, ONE, QUARTER = "0fBFB8AA3B", "0f3FB8AA3B", "0f3F800000", "0f3E800000"


def smem_symbol(entry: str) -> str:
    return f"_ZZ{len(entry)}{entry}E4smem"


class _Layer(KernelBuilder):
    """The builder plus the idioms NVVM uses over and over in these kernels."""

    def __init__(self, lay: LayerLayout, target: str):
        pname = f"{lay.entry}_param_0"
        super().__init__(lay.entry, [KernelParam(pname, f".param .align 8 .b8 {{name}}[{PARAM_BYTES}]")],
                         directives=".reqntid {}, {}, {}".format(*BLOCK), target=target)
        self.lay, self.spec = lay, lay.spec
        self.p = pname
        self.smem_name = smem_symbol(lay.entry)
        self.globals.append(f".shared .align 16 .b8 {self.smem_name}[{lay.smem_bytes}];")

    # -- values ------------------------------------------------------------------------------

    def u32(self, value) -> str:
        return self.op("mov.u32", "b32", str(value))

    def f16x2_const(self, f32_hex: str, f32reg: str | None = None) -> tuple[str, str]:
        """`mov.f32` (unless given) and cuda_fp16's `__float2half2_rn` block; returns (f32, f16x2)."""
        f = f32reg or self.op("mov.f32", "f32", f32_hex)
        out = self.reg()
        with self.block(("b16", "low")) as (low,):
            self.ins("cvt.rn.f16.f32", low, f)
            self.ins("mov.b32", out, f"{{{low}, {low}}}")
        return f, out

    def f16x2_from_f64(self, f64_hex: str) -> str:
        d = self.op("mov.f64", "f64", f64_hex)
        h = self.op("cvt.rn.f16.f64", "b16", d)
        return self.op("mov.b32", "b32", f"{{{h}, {h}}}")

    def halves(self, r: str) -> tuple[str, str]:
        lo, hi = self.reg("b16"), self.reg("b16")
        self.ins("mov.b32", f"{{{lo}, {hi}}}", r)
        return lo, hi

    def join(self, lo: str, hi: str) -> str:
        return self.op("mov.b32", "b32", f"{{{lo}, {hi}}}")

    def pack(self, lo: str, hi: str) -> str:
        """Two f16x2 registers → one word of four e4m3 (lo's two first)."""
        b = self.op("cvt.rn.satfinite.e4m3x2.f16x2", "b16", hi)
        a = self.op("cvt.rn.satfinite.e4m3x2.f16x2", "b16", lo)
        return self.join(a, b)

    def quad(self, row0: list[str], row1: list[str], j: int) -> list[str]:
        """An A fragment from accumulator rows g (row0) and g+8 (row1), n-tiles j…j+3."""
        return [self.pack(row0[j], row0[j + 1]), self.pack(row1[j], row1[j + 1]),
                self.pack(row0[j + 2], row0[j + 3]), self.pack(row1[j + 2], row1[j + 3])]

    def approx(self, fn: str, h: str) -> str:
        """cuda_fp16's `hrcp`/`hrsqrt` shape: f16 → f32 → `fn.approx.ftz.f32` → f16."""
        out = self.reg("b16")
        with self.block(("f32", "fl")) as (fl,):
            self.ins("cvt.f32.f16", fl, h)
            self.ins(f"{fn}.approx.ftz.f32", fl, fl)
            self.ins("cvt.rn.f16.f32", out, fl)
        return out

    # -- memory ------------------------------------------------------------------------------

    def lane_base(self, base: str) -> str:
        """base + 16·laneid, re-derived from %laneid as NVVM does in each epilogue."""
        lane = self.op("mov.u32", "b32", "%laneid")
        off = self.op("mul.wide.u32", "b64", lane, "16")
        return self.op("add.s64", "b64", base, off)

    def tiles(self, base: str, offset: int, count: int) -> list[list[str]]:
        """`count` 512-byte weight tiles at base+offset: 16 bytes (4 words) per lane each."""
        out = []
        for i in range(count):
            addr = self.op("add.s64", "b64", base, str(offset + 512 * i))
            words = self.regs(4)
            self.ins("ld.weak.global.ca.v4.u32", "{ " + ",".join(words) + "}", f"[{addr}]")
            out.append(words)
        return out

    def b_pairs(self, base: str, phase: int) -> list[list[list[str]]]:
        """Phase `phase`'s B operand: pairs[nt][s] = [b0, b1]."""
        lay = self.lay.phases[phase]
        t = self.tiles(base, lay.b_offset, lay.n * lay.k // 2)
        return [[t[lay.b_tile(s, nt // 2)][2 * (nt % 2):2 * (nt % 2) + 2] for s in range(lay.k)]
                for nt in range(lay.n)]

    def column_table(self, tbase: str, offset: int) -> list[tuple[str, str]]:
        """A C-wide f16 column vector: C/8 `ld.global.v2.u16` at 16-byte stride, NVVM's order
        (+16 … , then +0). Returns (col 8j+2t, col 8j+2t+1) per n-tile j."""
        nt = self.spec.ntiles
        out = [None] * nt
        for j in list(range(1, nt)) + [0]:
            a, b = self.reg("b16"), self.reg("b16")
            self.ins("ld.global.v2.u16", f"{{{a}, {b}}}", f"[{tbase}+{offset + 16 * j}]")
            out[j] = (a, b)
        return out

    def bias_seeds(self, tbase: str, offset: int, n: int) -> list[list[str]]:
        """Per-column bias words used as C = {w, w} (replicated over the 16 rows)."""
        words = [self.op("ld.global.u32", "b32", f"[{tbase}+{offset + 16 * j}]") for j in range(n)]
        return [[w, w] for w in words]

    def input_row(self, base: str, idx: str, out: str, lane_word: str, planes: str | None) -> list[str]:
        """One token slot's C channels (C/8 f16x2, n-tile order) from a stored e4m3 image: C/16
        `ld.global.v2.u16`, zero where `out`; token-major (C bytes a token) or, given the plane
        stride, in planes of 32 bytes a token."""
        C = self.spec.channels
        addr = self.op("add.s64", "b64", base, self.op("mul.wide.s32", "b64", idx, str(C if planes is None else 32)))
        addr = self.op("add.s64", "b64", addr, lane_word)
        row = []
        for j2 in range(C // 16):
            if planes is None:
                at = f"[{addr}+{16 * j2}]"
            else:
                if j2 and j2 % 2 == 0:
                    addr = self.op("add.s64", "b64", addr, planes)
                at = f"[{addr}+{16 * (j2 % 2)}]"
            a, b = self.op("mov.u16", "b16", "0"), self.op("mov.u16", "b16", "0")
            self.ins("ld.global.v2.u16", f"{{{a}, {b}}}", at, guard=f"!{out}")
            row += [self.op("cvt.rn.f16x2.e4m3x2", "b32", a), self.op("cvt.rn.f16x2.e4m3x2", "b32", b)]
        return row

    # -- mma ---------------------------------------------------------------------------------

    def gemm(self, a, b, c, interleave: bool = False):
        """One phase. a[mt][s] quads, b[nt][s] pairs, c[mt][nt] seeds → d[mt][nt] (chain finals).
        k-steps chain through C; `interleave` emits n-tile pairs step by step as NVVM does for
        K > 32 (reference §6 U1: (n0,k0) (n1,k0) (n0,k1) (n1,k1) …)."""
        m, n, k = len(a), len(b), len(a[0])
        d = [[None] * n for _ in range(m)]
        for mt in range(m):
            acc = [list(c[mt][nt]) for nt in range(n)]
            groups = [(p, p + 1) for p in range(0, n, 2)] if interleave else [(nt,) for nt in range(n)]
            for group in groups:
                for s in range(k):
                    for nt in group:
                        out = self.regs(2)
                        self.mma(out, a[mt][s], b[nt][s], acc[nt])
                        acc[nt] = out
            d[mt] = acc
        return d

    # -- reductions over the four lanes of a row ---------------------------------------------

    def shuffles(self, one: str, two: str, member: str):
        self._bfly = (one, two, member)

    def row_sum(self, regs: list[str]) -> str:
        """Σ over the C columns of one accumulator row: an in-lane tree of add.f16x2, two
        butterfly steps (lane bits 0 and 1), then the two halves; returns the f16 sum."""
        xs = list(regs)
        while len(xs) > 1:
            nxt = [self.op("add.f16x2", "b32", xs[i], xs[i + 1]) for i in range(0, len(xs) - 1, 2)]
            xs = nxt + ([xs[-1]] if len(xs) % 2 else [])
        v = xs[0]
        one, two, member = self._bfly
        for delta in (one, two):
            seg = self.u32(31)
            other = self.op("shfl.sync.bfly.b32", "b32", v, delta, seg, member)
            v = self.op("add.f16x2", "b32", v, other)
        lo, hi = self.halves(v)
        return self.op("add.f16", "b16", lo, hi)

    def rms_norm(self, rows: list[list[str]], tbase: str, gain: int, eps: str) -> list[list[str]]:
        """RMS norm of accumulator rows (C/8 f16x2 each): raw Σx² + 2^-13 (no mean, no 1/N),
        rsqrt.approx, then x·(inv·gain[c]) — reference §3/E12."""
        sums = []
        for row in rows:
            squares = []
            for r in row:
                lo, hi = self.halves(r)
                squares.append(self.join(self.op("mul.f16", "b16", lo, lo), self.op("mul.f16", "b16", hi, hi)))
            sums.append(self.row_sum(squares))
        invs = []
        for s in sums:
            e = self.op("cvt.rn.f16.f64", "b16", eps)
            invs.append(self.approx("rsqrt", self.op("add.f16", "b16", s, e)))
        g = self.column_table(tbase, gain)
        out = []
        for row, inv in zip(rows, invs):
            normed = []
            for j, r in enumerate(row):
                ig_lo = self.op("mul.f16", "b16", inv, g[j][0])
                ig_hi = self.op("mul.f16", "b16", inv, g[j][1])
                lo, hi = self.halves(r)
                normed.append(self.join(self.op("mul.f16", "b16", lo, ig_lo), self.op("mul.f16", "b16", hi, ig_hi)))
            out.append(normed)
        return out

    def guarded_store(self, idx: str, skip_if: str, opcode: str, base: str, value: str) -> None:
        """NVVM's bounds idiom: index := −1 when out of range, then branch over the store."""
        sel = self.op("selp.b32", "b32", "-1", idx, skip_if)
        neg = self.op("setp.lt.s32", "pred", sel, "0")
        done = self.new_label()
        self.bra(done, guard=neg)
        off = self.op("mul.wide.s32", "b64", sel, "4")
        addr = self.op("add.s64", "b64", base, off)
        self.ins(opcode, f"[{addr}]", value)
        self.place(done)

    def outside(self, x: str, y: str, ex: str, ey: str) -> str:
        """(x<0)|(x≥ex)|(y<0)|(y≥ey) as one predicate."""
        p = self.op("setp.lt.s32", "pred", x, "0")
        for cmp, a, b in (("setp.ge.s32", x, ex), ("setp.lt.s32", y, "0"), ("setp.ge.s32", y, ey)):
            q = self.op(cmp, "pred", a, b)
            p = self.op("or.pred", "pred", p, q)
        return p

    def word_stores(self, d: list, h: int, t: str, base: str, skip: str, out: str) -> None:
        """Row h of a 32-channel D (4 n-tiles) as two words of e4m3 at base + (t | 4·dd): one as a
        v2.u16 pair, one as a u32, as NVVM emits them."""
        for dd in range(2):
            lo8 = self.op("cvt.rn.satfinite.e4m3x2.f16x2", "b16", d[2 * dd][h])
            hi8 = self.op("cvt.rn.satfinite.e4m3x2.f16x2", "b16", d[2 * dd + 1][h])
            idx = self.op("or.b32", "b32", t if dd == 0 else self.op("or.b32", "b32", t, "4"), base)
            if dd == h:
                self.guarded_store(idx, skip, "st.global.v2.u16", out, f"{{{lo8}, {hi8}}}")
            else:
                self.guarded_store(idx, skip, "st.global.u32", out, self.join(lo8, hi8))

    def neighbours(self, v: str, ext: str) -> dict[int, str]:
        """v−1, v, v+1 mirrored at the border (−1 → 1, ext → ext−2), E38's texel coordinates."""
        m1 = self.op("add.s32", "b32", v, "-1")
        out = {-1: self.op("selp.b32", "b32", "1", m1, self.op("setp.lt.s32", "pred", v, "1")), 0: v}
        p1 = self.op("add.s32", "b32", v, "1")
        out[1] = self.op("selp.b32", "b32", self.op("add.s32", "b32", ext, "-2"), p1,
                         self.op("setp.ge.s32", "pred", p1, ext))
        return out

    def gather(self, tparam: str, cx: dict, cy: dict, wts: list[str]) -> list[str]:
        """E38(d): the nine texels around (cx[0], cy[0]) weighted by the five softmax weights;
        returns the (RG, BA) f16x2 accumulators."""
        acc = None
        for wi, taps in enumerate(GATHER_TAPS):
            for dx, dy in taps:
                tex = self.op("mov.u64", "b64", tparam)
                ch = self.regs(4, "b16")
                self.ins("tex.base.2d.v4.f16.s32", "{" + ",".join(ch) + "}", f"[{tex}, {{{cx[dx]},{cy[dy]}}}]")
                rg, ba = self.join(ch[0], ch[1]), self.join(ch[2], ch[3])
                if acc is None:
                    acc = [self.op("mul.f16x2", "b32", wts[wi], rg), self.op("mul.f16x2", "b32", wts[wi], ba)]
                else:
                    acc = [self.op("fma.rn.f16x2", "b32", wts[wi], rg, acc[0]),
                           self.op("fma.rn.f16x2", "b32", wts[wi], ba, acc[1])]
        return acc


def build_layer(name: str, target: str = "sm_90") -> str:
    """The whole module text of one synthetic layer."""
    return _emit(name, target).module_text()


def build_module(names: list[str], target: str = "sm_90") -> str:
    """One module holding several layers' entries, as an engine packs related kernels."""
    ks = [_emit(n, target) for n in names]
    head = ks[0].module_text().split("\t// .globl", 1)[0]
    head = head.replace(ks[0].globals[0] + "\n", "".join(k.globals[0] + "\n" for k in ks))
    return head + "\n".join(f"\t// .globl\t{k.name}\n{k.entry_text()}" for k in ks)


def _emit(name: str, target: str) -> _Layer:
    lay = layer_layout(name)
    spec = lay.spec
    C, S, NT = spec.channels, spec.slices, spec.ntiles
    k = _Layer(lay, target)
    P = k.p

    # ---- prologue: parameters, block origin, lane coordinates -------------------------------
    pbase = k.op("mov.b64", "b64", P)
    p80 = k.op("add.s64", "b64", pbase, "80")
    ox16, oy16 = k.reg("b16"), k.reg("b16")
    k.ins("ld.param.v2.u16", f"{{{ox16}, {oy16}}}", f"[{P}+80]")
    ox, oy = k.op("cvt.u32.u16", "b32", ox16), k.op("cvt.u32.u16", "b32", oy16)
    cx = k.op("mov.u32", "b32", "%ctaid.x")
    x0 = k.op("sub.s32", "b32", k.op("shl.b32", "b32", cx, "3"), ox)
    wparam = k.op("ld.param.u64", "b64", f"[{P}+40]")
    W = k.op("cvta.to.global.u64", "b64", wparam)
    cy = k.op("mov.u32", "b32", "%ctaid.y")
    y0 = k.op("sub.s32", "b32", k.op("shl.b32", "b32", cy, "3"), oy)
    ex, ey = k.reg(), k.reg()
    k.ins("ld.param.v2.u32", f"{{{ex}, {ey}}}", f"[{P}]")
    row_stride = k.op("shl.b32", "b32", ex, "3")  # 8·ex words per arena row
    plane = k.op("mul.lo.s32", "b32", ey, row_stride)  # one arena plane
    iparam = k.op("ld.param.u64", "b64", f"[{P}+8]")
    I = k.op("cvta.to.global.u64", "b64", iparam)
    planes = None if spec.token_input else k.op("mul.wide.s32", "b64", plane, "4")  # bytes per input plane
    Sk = k.op("cvta.to.global.u64", "b64", k.op("ld.param.u64", "b64", f"[{P}+16]")) if spec.skip else None
    lane = k.op("mov.u32", "b32", "%laneid")
    g = k.op("shr.u32", "b32", lane, "2")
    t = k.op("and.b32", "b32", lane, "3")
    z = k.op("mov.u32", "b32", "%tid.z")
    t4 = k.op("shl.b32", "b32", t, "2")
    tb = k.op("add.s64", "b64", W, k.op("cvt.u64.u32", "b64", t4))  # W + ((laneid<<2)&12)
    one, two, member = k.u32(1), k.u32(2), k.u32(-1)
    k.shuffles(one, two, member)
    eps = k.op("mov.f64", "f64", EPS_F64)

    # ---- prologue: the four token slots of this lane (window rows and strips) ---------------
    xg = k.op("add.s32", "b32", x0, g)
    z2 = k.op("shl.b32", "b32", z, "1")
    yw = k.op("add.s32", "b32", y0, z2)  # window slot 16z+g: row y0+2z
    strip = k.op("add.s32", "b32", yw, k.op("add.s32", "b32", k.op("shl.b32", "b32",
                                                                  k.op("shr.u32", "b32", z, "1"), "3"), "-4"))
    lane_word = k.op("cvt.u64.u32", "b64", t4)
    ys = [yw, k.op("add.s32", "b32", yw, "1"), strip, k.op("add.s32", "b32", strip, "1")]
    x_in = []  # the quantised input rows (decoders: input + skip), C/8 f16x2 each
    for y in ys:
        out = k.outside(xg, y, ex, ey)
        idx = k.op("mad.lo.s32", "b32", y, ex, xg)
        row = k.input_row(I, idx, out, lane_word, planes)
        if Sk is not None:
            skip_row = k.input_row(Sk, idx, out, lane_word, planes)
            row = [k.op("add.f16x2", "b32", a, b) for a, b in zip(row, skip_row)]
        x_in.append(row)
    normed = k.rms_norm(x_in, tb, lay.prologue_gain, eps)

    smem = k.op("mov.u32", "b32", k.smem_name)
    lane16 = k.op("shl.b32", "b32", lane, "4")
    mtile = 512 * S  # one staged m-tile: S A quads of 16 bytes a lane
    slot = k.op("add.s32", "b32", k.op("add.s32", "b32", smem, lane16), k.op("mul.lo.s32", "b32", z, str(mtile)))
    for half, (r0, r1) in enumerate(((0, 1), (2, 3))):
        for s in range(S):
            q = k.quad(normed[r0], normed[r1], 4 * s)
            k.ins("st.shared.v4.u32", f"[{slot}+{4 * mtile * half + 512 * s}]", "{" + ", ".join(q) + "}")
    k.ins("bar.sync", "0")
    a_x = []  # the head's 96 keys: window m-tiles 0–3, then strip (z&1)
    wslot = k.op("add.s32", "b32", smem, lane16)
    sslot = k.op("add.s32", "b32", wslot, k.op("mul.lo.s32", "b32", k.op("and.b32", "b32", z, "1"), str(2 * mtile)))
    for mt in range(6):
        base, mrel = (wslot, mt) if mt < 4 else (sslot, mt)
        row = []
        for s in range(S):
            q = k.regs(4)
            k.ins("ld.shared.v4.u32", "{" + ", ".join(q) + "}", f"[{base}+{mtile * mrel + 512 * s}]")
            row.append(q)
        a_x.append(row)
    zero = k.u32(0)

    # ---- K and V projections, one k32 slice per phase, per head slab ------------------------
    zs = k.op("mul.lo.s32", "b32", z, str(lay.slab_qkv // 2))
    wz = k.op("add.s64", "b64", W, k.op("mul.wide.u32", "b64", zs, "2"))  # W + slab·%tid.z
    c0 = [[[zero, zero]] * 4 for _ in range(6)]
    d = {}
    for ph in lay.kv:
        b = k.b_pairs(k.lane_base(wz), ph)
        s = (ph - 1) // 2
        c = c0 if ph <= 2 else d[ph - 2]
        d[ph] = k.gemm([[a_x[mt][s]] for mt in range(6)], b, c)
    kproj, vproj = d[lay.kv[-2]], d[lay.kv[-1]]

    # ---- E6: score bias seeds, the score's A and B from the last K phase's D ----------------
    bias_tiles = k.tiles(k.lane_base(wz), lay.score_bias, 24)
    c7 = [[bias_tiles[4 * (nt >> 1) + mt][2 * (nt & 1):2 * (nt & 1) + 2] for nt in range(12)] for mt in range(4)]
    b7 = [[[k.pack(kproj[nt >> 1][0][nt & 1], kproj[nt >> 1][1][nt & 1]),
            k.pack(kproj[nt >> 1][2][nt & 1], kproj[nt >> 1][3][nt & 1])]] for nt in range(12)]
    a7 = [[k.quad([kproj[mt][j][0] for j in range(4)], [kproj[mt][j][1] for j in range(4)], 0)]
          for mt in range(4)]
    score = k.gemm(a7, b7, c7)

    # ---- E7: clamped-cubic exponent, row sums, reciprocals, V transpose, packs --------------
    _, scale = k.f16x2_const(SCORE_SCALE)
    lo, hi = k.f16x2_from_f64(CLAMP_LO), k.f16x2_from_f64(CLAMP_HI)
    _, c1 = k.f16x2_const(CUBIC_C1)
    _, c2 = k.f16x2_const(CUBIC_C2)
    expv = [[[None, None] for _ in range(12)] for _ in range(4)]
    for mt in range(4):
        for nt in range(12):
            for h in range(2):
                x = k.op("mul.f16x2", "b32", score[mt][nt][h], scale)
                m = k.op("min.f16x2", "b32", k.op("max.f16x2", "b32", x, lo), hi)
                tt = k.op("fma.rn.f16x2", "b32", m, k.op("neg.f16x2", "b32", m), c1)
                u = k.op("fma.rn.f16x2", "b32", m, tt, c2)
                expv[mt][nt][h] = k.op("and.b32", "b32", k.op("shl.b32", "b32", u, "5"), EXP_MASK)
    recip = [[None, None] for _ in range(4)]
    for mt in range(4):
        for h in range(2):
            s = k.row_sum([expv[mt][nt][h] for nt in range(12)])
            r = k.approx("rcp", s)
            recip[mt][h] = k.join(r, r)
    prob = [[[k.op("mul.f16x2", "b32", expv[mt][nt][h], recip[mt][h]) for h in range(2)]
             for nt in range(12)] for mt in range(4)]
    vt = {}  # (8-key block q, dim n-tile j) → transposed register
    for mt in range(6):
        for j in range(4):
            for h in range(2):
                vt[2 * mt + h, j] = k.op("movmatrix.sync.trans.aligned.m8n8.b16", "b32", vproj[mt][j][h])
    b8 = [[[k.pack(vt[4 * s, j], vt[4 * s + 1, j]), k.pack(vt[4 * s + 2, j], vt[4 * s + 3, j])]
           for s in range(3)] for j in range(4)]
    a8 = [[k.quad([prob[mt][nt][0] for nt in range(12)], [prob[mt][nt][1] for nt in range(12)], 4 * s)
           for s in range(3)] for mt in range(4)]
    heads = k.gemm(a8, b8, [[[zero, zero]] * 4 for _ in range(4)], interleave=True)

    # ---- E8: heads → shared; the output projection's A, B and C (input skip + table) --------
    k.ins("bar.sync", "0")
    hslot = k.op("add.s32", "b32", k.op("add.s32", "b32", smem, k.op("shl.b32", "b32", z, "11")), lane16)
    for mt in range(4):
        q = k.quad([heads[mt][j][0] for j in range(4)], [heads[mt][j][1] for j in range(4)], 0)
        k.ins("st.shared.v4.u32", f"[{hslot}+{512 * mt}]", "{" + ", ".join(q) + "}")
    k.ins("bar.sync", "0")
    rslot = k.op("add.s32", "b32", k.op("add.s32", "b32", smem, k.op("shl.b32", "b32", z, "9")), lane16)
    acc = None
    for h in range(4):
        aq = k.regs(4)
        k.ins("ld.shared.v4.u32", "{" + ", ".join(aq) + "}", f"[{rslot}+{2048 * h}]" if h else f"[{rslot}]")
        b = k.b_pairs(k.lane_base(W), lay.proj[h])
        if h == 0:
            tab = k.column_table(tb, lay.skip_table)
            seeds = []
            for nt in range(NT):
                pair = []
                for r in (0, 1):
                    xl, xh = k.halves(x_in[r][nt])
                    pair.append(k.join(k.op("add.f16", "b16", tab[nt][0], xl), k.op("add.f16", "b16", tab[nt][1], xh)))
                seeds.append(pair)
            acc = [seeds]
        acc = k.gemm([[aq]], b, acc)
    dproj = acc[0]

    # ---- E12: the normed tile; the MLP band ---------------------------------------------------
    normed = k.rms_norm([[dproj[nt][0] for nt in range(NT)], [dproj[nt][1] for nt in range(NT)]], tb,
                        lay.band_gain, eps)
    residual = [dproj]
    f_act = None
    for i, (odd, even) in enumerate(lay.band):
        b = k.b_pairs(k.lane_base(W), odd)
        c = k.bias_seeds(tb, lay.phases[odd].bias_offset, 4)
        a = [[k.quad(normed[0], normed[1], 4 * s) for s in range(S)]]
        dodd = k.gemm(a, b, [c], interleave=True)[0]
        # the clamped cubic, constants materialised once (E13) and re-converted per group
        if f_act is None:
            f_act = [k.op("mov.f32", "f32", v) for v in (ACT_A, ACT_B, ACT_HALF, ACT_TWO)]
        act = []
        for nt in range(4):
            pair = []
            for h in range(2):
                ca, cb, chalf, ctwo = (k.f16x2_const(None, f)[1] for f in f_act)
                x = dodd[nt][h]
                y = k.op("min.f16x2", "b32", k.op("max.f16x2", "b32", x, k.op("neg.f16x2", "b32", ctwo)), ctwo)
                q = k.op("mul.f16x2", "b32", cb, k.op("abs.f16x2", "b32", y))
                gg = k.op("add.f16x2", "b32", chalf, k.op("mul.f16x2", "b32", y, k.op("sub.f16x2", "b32", ca, q)))
                pair.append(k.op("mul.f16x2", "b32", x, gg))
            act.append(pair)
        if i == 0:
            tab = k.column_table(tb, lay.residual_table)
            seeds = []
            for nt in range(NT):
                pair = []
                for h in range(2):
                    dl, dh = k.halves(dproj[nt][h])
                    pair.append(k.join(k.op("add.f16", "b16", tab[nt][0], dl), k.op("add.f16", "b16", tab[nt][1], dh)))
                seeds.append(pair)
            c_even = [seeds]
        else:
            c_even = residual
        b = k.b_pairs(k.lane_base(W), even)
        a = [[k.quad([act[j][0] for j in range(4)], [act[j][1] for j in range(4)], 0)]]
        residual = k.gemm(a, b, c_even)
    dband = residual[0]

    # ---- E36: requantise, plane arena, shared staging ----------------------------------------
    words = {}  # (plane P, row h, word half dd) → b32 of four e4m3
    for P_ in range(S):
        for h in range(2):
            for dd in range(2):
                jj = 2 * P_ + dd
                words[P_, h, dd] = k.pack(dband[2 * jj][h], dband[2 * jj + 1][h])
    aparam = k.op("ld.param.u64", "b64", f"[{p80}+-32]")  # param+48, through param+80 as NVVM does
    arena = k.op("cvta.to.global.u64", "b64", aparam)
    xg8 = k.op("shl.b32", "b32", xg, "3")
    for h in range(2):
        y = yw if h == 0 else k.op("add.s32", "b32", yw, "1")
        skip = k.outside(xg, y, ex, ey)
        base = k.op("mad.lo.s32", "b32", row_stride, y, xg8)
        for P_ in range(S):
            pb = base if P_ == 0 else k.op("mad.lo.s32", "b32", plane, str(P_), base)
            for dd in range(2):
                idx = k.op("add.s32", "b32", pb, t if dd == 0 else k.op("or.b32", "b32", t, "4"))
                k.guarded_store(idx, skip, "st.global.u32", arena, words[P_, h, dd])
    tok = None
    if lay.merge is not None:  # the merge or expand reads every warp's words back
        k.ins("bar.sync", "0")
        tok = k.op("add.s32", "b32", k.op("shl.b32", "b32", z, "4"), g)  # window token 16z+g
        st_addr = k.op("add.s32", "b32", k.op("mad.lo.s32", "b32", tok, str(C), smem), t4)
        for (P_, h, dd), w in words.items():
            k.ins("st.shared.u32", f"[{st_addr}+{C * 8 * h + 32 * P_ + 16 * dd}]", w)
        k.ins("bar.sync", "0")

    # ---- the merge (encoders) or the expand (decoders), in NVVM's loop over %tid.z<<5 -------
    bounds = None
    if spec.kind == "enc":
        _merge(k, lay, ex, ey, x0, y0, g, t, t4, z, W, tb, smem, pbase)
    elif lay.merge is not None:
        bounds = _expand(k, lay, ex, ey, xg, y0, g, t, t4, z, W, tb, smem, pbase)

    # ---- the head: 16 wide on the requantised band output ------------------------------------
    b = k.b_pairs(k.lane_base(W), lay.head)
    c = k.bias_seeds(tb, lay.phases[lay.head].bias_offset, 2)
    a38 = [[[words[P_, 0, 0], words[P_, 1, 0], words[P_, 0, 1], words[P_, 1, 1]] for P_ in range(S)]]
    d38 = k.gemm(a38, b, [c], interleave=True)[0]
    _final_epilogue(k, d38, x0, y0, ex, ey, z, lane, t4, smem, pbase, member, tok, bounds)
    return k


def _merge(k: _Layer, lay: LayerLayout, ex, ey, x0, y0, g, t, t4, z, W, tb, smem, pbase) -> None:
    """E36(d)–E37: the 2×2 patch merge, K = 4 window tokens × C; each trip of the loop makes 32 of
    the next layer's C' channels for the 16 merged tokens, stored at half extents."""
    spec = lay.spec
    C, S, out_c = spec.channels, spec.slices, spec.next_channels
    hx, hy = k.op("shr.u32", "b32", ex, "1"), k.op("shr.u32", "b32", ey, "1")
    if spec.token_output:  # enc1 → enc2: tokens of C' bytes
        hrow = k.op("mul.lo.s32", "b32", hx, str(out_c // 4))
    else:
        hrow = k.op("shl.b32", "b32", hx, "3")
        hplane = k.op("mul.lo.s32", "b32", hy, hrow)
    oparam = k.op("ld.param.u64", "b64", f"[{pbase}+56]")
    O = k.op("cvta.to.global.u64", "b64", oparam)
    # merged row r = 4·ry + rx reads window tokens (2rx+dx, 2ry+dy): base at r = g, +32 tokens for g+8
    mtok = k.op("add.s32", "b32", k.op("shl.b32", "b32", k.op("shr.u32", "b32", g, "2"), "4"),
                k.op("shl.b32", "b32", k.op("and.b32", "b32", g, "3"), "1"))
    ld_addr = k.op("add.s32", "b32", k.op("mad.lo.s32", "b32", mtok, str(C), smem), t4)
    zz = k.op("shl.b32", "b32", z, "5")
    top, done = k.new_label(), k.new_label()
    k.place(top)
    k.bra(done, guard=k.op("setp.gt.u32", "pred", zz, str(out_c - 1)))
    a37 = []
    for s in range(4 * S):
        q, P_ = divmod(s, S)
        off = C * (8 * (q >> 1) + (q & 1)) + 32 * P_
        a37.append([k.op("ld.shared.u32", "b32", f"[{ld_addr}+{off + C * 32 * h + 16 * dd}]")
                    for dd, h in ((0, 0), (0, 1), (1, 0), (1, 1))])
    w37 = k.op("add.s64", "b64", W, k.op("cvt.u64.u32", "b64", k.op("mul.lo.s32", "b32", zz, str(4 * C))))
    b = k.b_pairs(k.lane_base(w37), lay.merge)
    c = k.bias_seeds(tb, lay.phases[lay.merge].bias_offset, 4)
    d37 = k.gemm([a37], b, [c], interleave=True)[0]
    ox2, oy2 = k.op("shr.s32", "b32", x0, "1"), k.op("shr.s32", "b32", y0, "1")
    if spec.token_output:
        pbase37 = k.op("shr.u32", "b32", zz, "2")  # 8 words per 32 channels
    else:
        pbase37 = k.op("mul.lo.s32", "b32", hplane, k.op("shr.u32", "b32", zz, "5"))
    for h in range(2):
        r = g if h == 0 else k.op("add.s32", "b32", g, "8")
        yy = k.op("add.s32", "b32", oy2, k.op("shr.u32", "b32", r, "2"))
        xx = k.op("add.s32", "b32", ox2, k.op("and.b32", "b32", r, "3"))
        skip = k.outside(xx, yy, hx, hy)
        row = k.op("mad.lo.s32", "b32", hrow, yy, pbase37)
        xw = k.op("mul.lo.s32", "b32", xx, str(out_c // 4)) if spec.token_output else k.op("shl.b32", "b32", xx, "3")
        base = k.op("add.s32", "b32", row, xw)
        k.word_stores(d37, h, t, base, skip, O)
    nxt = k.op("add.s32", "b32", zz, "128")
    again = k.op("setp.lt.u32", "pred", nxt, str(out_c))
    k.ins("mov.u32", zz, nxt)
    k.bra(top, guard=again)
    k.place(done)


def _expand(k: _Layer, lay: LayerLayout, ex, ey, xg, y0, g, t, t4, z, W, tb, smem, pbase) -> tuple[str, str]:
    """The 2×2 expand: warp z makes child (dx, dy) = (z&1, z>>1) of every window token, 32 of
    the next layer's C' channels per trip (K = C, M = the 64 tokens), stored in planes at the
    extents of the level below (param+64). Returns the children's bounds."""
    spec = lay.spec
    C, S, out_c = spec.channels, spec.slices, spec.next_channels
    oex, oey = k.reg(), k.reg()
    k.ins("ld.param.v2.u32", f"{{{oex}, {oey}}}", f"[{k.p}+64]")
    # children exist where the level below has tokens and this level had their parent
    xl = k.op("min.s32", "b32", oex, k.op("shl.b32", "b32", ex, "1"))
    yl = k.op("min.s32", "b32", oey, k.op("shl.b32", "b32", ey, "1"))
    orow = k.op("shl.b32", "b32", oex, "3")
    oplane = k.op("mul.lo.s32", "b32", oey, orow)
    oparam = k.op("ld.param.u64", "b64", f"[{pbase}+56]")
    O = k.op("cvta.to.global.u64", "b64", oparam)
    ld_addr = k.op("add.s32", "b32", k.op("mad.lo.s32", "b32", g, str(C), smem), t4)
    zz = k.op("shl.b32", "b32", z, "5")
    top, done = k.new_label(), k.new_label()
    k.place(top)
    k.bra(done, guard=k.op("setp.gt.u32", "pred", zz, str(4 * out_c - 1)))
    a = [[[k.op("ld.shared.u32", "b32", f"[{ld_addr}+{16 * C * mt + 32 * s + 8 * C * h + 16 * dd}]")
           for dd, h in ((0, 0), (0, 1), (1, 0), (1, 1))] for s in range(S)] for mt in range(4)]
    wexp = k.op("add.s64", "b64", W, k.op("cvt.u64.u32", "b64", k.op("mul.lo.s32", "b32", zz, str(C))))
    b = k.b_pairs(k.lane_base(wexp), lay.merge)
    c = k.bias_seeds(tb, lay.phases[lay.merge].bias_offset, 4)
    dexp = k.gemm(a, b, [c] * 4, interleave=True)
    pofs = k.op("mul.lo.s32", "b32", oplane, k.op("shr.u32", "b32", zz, "7"))  # plane = trip
    cx = k.op("add.s32", "b32", k.op("shl.b32", "b32", xg, "1"), k.op("and.b32", "b32", z, "1"))
    cy0 = k.op("add.s32", "b32", k.op("shl.b32", "b32", y0, "1"), k.op("shr.u32", "b32", z, "1"))
    cxw = k.op("shl.b32", "b32", cx, "3")
    for mt in range(4):
        for h in range(2):
            yy = cy0 if mt == h == 0 else k.op("add.s32", "b32", cy0, str(4 * mt + 2 * h))
            skip = k.outside(cx, yy, xl, yl)
            base = k.op("add.s32", "b32", k.op("mad.lo.s32", "b32", orow, yy, pofs), cxw)
            k.word_stores(dexp[mt], h, t, base, skip, O)
    nxt = k.op("add.s32", "b32", zz, "128")
    again = k.op("setp.lt.u32", "pred", nxt, str(4 * out_c))
    k.ins("mov.u32", zz, nxt)
    k.bra(top, guard=again)
    k.place(done)
    return xl, yl


def _final_epilogue(k: _Layer, d38, x0, y0, ex, ey, z, lane, t4, smem, pbase, member, tok, bounds) -> None:
    """E38: stage the head's D, one thread per window token (dec0: two per token, 8 pixels
    each), softmax with a real row max, the 3×3 gather, sigmoid, the surface writes."""
    spec = k.spec
    k.ins("bar.sync", "0")
    tok = tok or k.op("add.s32", "b32", k.op("shl.b32", "b32", z, "4"), k.op("shr.u32", "b32", lane, "2"))
    s38 = k.op("add.s32", "b32", k.op("mad.lo.s32", "b32", tok, "32", smem), t4)
    for h in range(2):
        for nt in range(2):
            k.ins("st.shared.u32", f"[{s38}+{256 * h + 16 * nt}]", d38[nt][h])
    k.ins("bar.sync", "0")
    end = k.new_label()
    if spec.final:  # four warps: tokens lane + 32·(z&1), pixel rows 2·(z>>1) + {0, 1}
        pix = k.op("add.s32", "b32", lane, k.op("shl.b32", "b32", k.op("and.b32", "b32", z, "1"), "5"))
    else:
        k.bra(end, guard=k.op("setp.gt.u32", "pred", z, "1"))  # two warps: one thread per window pixel
        pix = k.op("add.s32", "b32", lane, k.op("shl.b32", "b32", z, "5"))
    px = k.op("add.s32", "b32", x0, k.op("and.b32", "b32", pix, "7"))
    py = k.op("add.s32", "b32", y0, k.op("shr.u32", "b32", pix, "3"))
    pw = k.op("mad.lo.s32", "b32", pix, "32", smem)
    logits = []
    for i in range(5):
        wv = k.op("ld.shared.u32", "b32", f"[{pw}+{4 * i}]" if i else f"[{pw}]")
        logits.append(k.halves(wv)[0])
    sg0, _sg1 = k.reg("b16"), k.reg("b16")
    k.ins("ld.shared.v2.u16", f"{{{sg0}, {_sg1}}}", f"[{pw}+20]")
    mx = logits[0]
    for v in logits[1:]:
        mx = k.op("max.f16", "b16", mx, v)
    f_one = k.op("mov.f32", "f32", ONE)
    exps, total = [], None
    for v in logits:
        f = k.op("cvt.f32.f16", "f32", k.op("sub.f16", "b16", v, mx))
        e = k.op("ex2.approx.ftz.f32", "f32", k.op("mul.ftz.f32", "f32", f, LOG2E))
        exps.append(e)
        total = e if total is None else k.op("add.ftz.f32", "f32", total, e)
    inv = k.op("div.approx.ftz.f32", "f32", f_one, total)
    wts = []
    for e in exps:
        w16 = k.op("cvt.rn.f16.f32", "b16", k.op("mul.ftz.f32", "f32", e, inv))
        wts.append(k.join(w16, w16))
    if spec.final:
        _frame(k, wts, sg0, f_one, px, py, ex, ey, z, pbase, end)
        return
    cx, cy = k.neighbours(px, ex), k.neighbours(py, ey)
    tparam = k.op("ld.param.u64", "b64", f"[{pbase}+88]")
    acc = k.gather(tparam, cx, cy, wts)
    sig = _sigmoid(k, sg0, f_one)
    sig2 = k.join(sig, sig)
    prod_rg = k.op("mul.f16x2", "b32", sig2, acc[0])
    acc_b, acc_a = k.halves(acc[1])
    prod_b = k.op("mul.f16", "b16", sig, acc_b)
    diff_rg = k.op("sub.f16x2", "b32", acc[0], prod_rg)
    diff_b = k.op("sub.f16", "b16", acc_b, prod_b)
    if spec.kind == "enc":  # 0.25 · the 2×2 sum, by shfl.down 1 (x+1) and 8 (y+1)
        _, quarter = k.f16x2_const(QUARTER)
        q_rg = k.op("mul.f16x2", "b32", diff_rg, quarter)
        q_b = k.op("mul.f16", "b16", diff_b, k.halves(quarter)[0])
        q_b2 = k.join(q_b, q_b)
        for delta in ("1", "8"):
            dreg = k.u32(delta)
            seg = k.u32(31)
            q_rg = k.op("add.f16x2", "b32", q_rg, k.op("shfl.sync.down.b32", "b32", q_rg, dreg, seg, member))
            other = k.halves(k.op("shfl.sync.down.b32", "b32", q_b2, dreg, seg, member))[0]
            q_b = k.op("add.f16", "b16", k.halves(q_b2)[0], other)
            q_b2 = k.join(q_b, q_b)
    k.bra(end, guard=k.outside(px, py, ex, ey))
    s0 = k.op("ld.param.u64", "b64", f"[{pbase}+112]")
    s1 = k.op("ld.param.u64", "b64", f"[{pbase}+120]")
    s2 = k.op("ld.param.u64", "b64", f"[{pbase}+128]")
    xb = k.op("shl.b32", "b32", px, "3")
    d_r, d_g = k.halves(diff_rg)
    p_r, p_g = k.halves(prod_rg)
    k.ins("sust.b.2d.v4.b16.zero", f"[{s0}, {{{xb}, {py}}}]", f"{{{d_r}, {d_g}, {diff_b}, {acc_a}}}")
    k.ins("sust.b.2d.v4.b16.zero", f"[{s1}, {{{xb}, {py}}}]", f"{{{p_r}, {p_g}, {prod_b}, {sig}}}")
    if spec.kind == "enc":
        odd = k.op("and.b32", "b32", k.op("or.b32", "b32", px, py), "1")
        k.bra(end, guard=k.op("setp.ne.s32", "pred", odd, "0"))
        xh = k.op("and.b32", "b32", k.op("shl.b32", "b32", px, "2"), "-8")
        yh = k.op("shr.s32", "b32", py, "1")
        v_r, v_g = k.halves(q_rg)
        zero16 = k.op("mov.u16", "b16", "0")
        k.ins("sust.b.2d.v4.b16.zero", f"[{s2}, {{{xh}, {yh}}}]", f"{{{v_r}, {v_g}, {q_b}, {zero16}}}")
    else:  # the token's value on its 2×2 children at the level below
        xl, yl = bounds
        zero16 = k.op("mov.u16", "b16", "0")
        x2, y2 = k.op("shl.b32", "b32", px, "1"), k.op("shl.b32", "b32", py, "1")
        for dy in range(2):
            for dx in range(2):
                cxx = x2 if dx == 0 else k.op("add.s32", "b32", x2, "1")
                cyy = y2 if dy == 0 else k.op("add.s32", "b32", y2, "1")
                nxt = k.new_label()
                k.bra(nxt, guard=k.outside(cxx, cyy, xl, yl))
                k.ins("sust.b.2d.v4.b16.zero", f"[{s2}, {{{k.op('shl.b32', 'b32', cxx, '3')}, {cyy}}}]",
                      f"{{{d_r}, {d_g}, {diff_b}, {zero16}}}")
                k.place(nxt)
    k.place(end)


def _sigmoid(k: _Layer, v: str, f_one: str) -> str:
    """σ(v) = 1/(1 + 2^(−log2e·v)) through ex2.approx and div.approx, rounded to f16."""
    f = k.op("mul.ftz.f32", "f32", k.op("cvt.f32.f16", "f32", v), NEG_LOG2E)
    den = k.op("add.ftz.f32", "f32", k.op("ex2.approx.ftz.f32", "f32", f), ONE)
    return k.op("cvt.rn.f16.f32", "b16", k.op("div.approx.ftz.f32", "f32", f_one, den))


def _frame(k: _Layer, wts, sg0, f_one, px, py, ex, ey, z, pbase, end) -> None:
    """dec0's E38: each token's kernel on its 4×4 pixels of the noisy frame (param+88), two
    threads a token, blended with the coarse texture (param+96) by σ: the final frame (param+112)
    = acc − σ·acc + σ·coarse, alpha from the gather."""
    sig = _sigmoid(k, sg0, f_one)
    sig2 = k.join(sig, sig)
    k.bra(end, guard=k.outside(px, py, ex, ey))
    fw, fh = k.reg(), k.reg()
    k.ins("ld.param.v2.u32", f"{{{fw}, {fh}}}", f"[{k.p}+64]")
    ctex = k.op("ld.param.u64", "b64", f"[{pbase}+96]")
    ch = k.regs(4, "b16")
    k.ins("tex.base.2d.v4.f16.s32", "{" + ",".join(ch) + "}", f"[{ctex}, {{{px},{py}}}]")
    coarse_rg = k.join(ch[0], ch[1])
    noisy = k.op("ld.param.u64", "b64", f"[{pbase}+88]")
    frame = k.op("ld.param.u64", "b64", f"[{pbase}+112]")
    bx = k.op("shl.b32", "b32", px, "2")
    by = k.op("add.s32", "b32", k.op("shl.b32", "b32", py, "2"),
              k.op("shl.b32", "b32", k.op("shr.u32", "b32", z, "1"), "1"))
    xs = [bx] + [k.op("add.s32", "b32", bx, str(c)) for c in range(1, 4)]
    ys = [by, k.op("add.s32", "b32", by, "1")]
    cxs = [k.neighbours(x, fw) for x in xs]
    cys = [k.neighbours(y, fh) for y in ys]
    for yi, y in enumerate(ys):
        for xi, x in enumerate(xs):
            acc = k.gather(noisy, cxs[xi], cys[yi], wts)
            prod_rg = k.op("mul.f16x2", "b32", sig2, acc[0])
            acc_b, acc_a = k.halves(acc[1])
            prod_b = k.op("mul.f16", "b16", sig, acc_b)
            diff_rg = k.op("sub.f16x2", "b32", acc[0], prod_rg)
            diff_b = k.op("sub.f16", "b16", acc_b, prod_b)
            fin_rg = k.op("fma.rn.f16x2", "b32", sig2, coarse_rg, diff_rg)
            fin_b = k.op("fma.rn.f16", "b16", sig, ch[2], diff_b)
            f_r, f_g = k.halves(fin_rg)
            k.ins("sust.b.2d.v4.b16.zero", f"[{frame}, {{{k.op('shl.b32', 'b32', x, '3')}, {y}}}]",
                  f"{{{f_r}, {f_g}, {fin_b}, {acc_a}}}")
    k.place(end)
