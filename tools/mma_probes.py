"""On a GPU: probe `mma.sync.aligned.m16n8k32.row.col.{f16,f32}.e4m3.e4m3.{f16,f32}` with random
and adversarial inputs, keep A, B, C and D as data files, and score rr's model on them.

    python tools/mma_probes.py --warps 8192 --seed N -o DIR [--swapped]

For each form (f16, f32 accumulate) and each set (random, adversarial) it writes
`DIR/mma_<form>_<set>.npz`: `A` (warps, 16, 32) and `B` (warps, 32, 8) uint8 e4m3 codes, `C` and
`D` (warps, 16, 8) float16 or float32 in matrix form (the kernel's fragments are built from and
read back into matrix form with rr.run.fragments' layouts), `design` (warps,) uint8 — which
generator made each warp — with `designs` naming them, and the `seed`. Then it prints, per form,
set and design, the share of D's bits that `rr.numerics.mma.mma_sync` reproduces.

The adversarial designs follow the MMA-Sim approach: inputs that isolate one property each —
alignment width (two or three nonzero products of very different size), truncation direction
(a big product and small ones of one sign), where C enters (C special or far larger than the
products), f16 overflow of an intermediate HMMA sum, every e4m3 code (NaN and subnormals too),
and special C (±inf, NaNs with payloads, ±0, subnormals, the largest finite values).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import ml_dtypes
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rr.numerics.mma import mma_sync  # noqa: E402
from rr.run import fragments  # noqa: E402

PTX = """
.version 8.7
.target sm_90
.address_size 64
.visible .entry mma_f16(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u64 pd)
{
  .reg .b32 %r<16>;
  .reg .b64 %rd<16>;
  ld.param.u64 %rd1, [pa]; ld.param.u64 %rd2, [pb]; ld.param.u64 %rd3, [pc]; ld.param.u64 %rd4, [pd];
  mov.u32 %r1, %ctaid.x; mov.u32 %r2, %ntid.x; mov.u32 %r3, %tid.x; mad.lo.s32 %r4, %r1, %r2, %r3;
  cvt.u64.u32 %rd5, %r4;
  shl.b64 %rd6, %rd5, 4; add.s64 %rd7, %rd1, %rd6; ld.global.v4.u32 {%r5, %r6, %r7, %r8}, [%rd7];
  shl.b64 %rd8, %rd5, 3; add.s64 %rd9, %rd2, %rd8; ld.global.v2.u32 {%r9, %r10}, [%rd9];
  add.s64 %rd10, %rd3, %rd8; ld.global.v2.u32 {%r11, %r12}, [%rd10];
  mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16 {%r13, %r14}, {%r5, %r6, %r7, %r8}, {%r9, %r10}, {%r11, %r12};
  add.s64 %rd11, %rd4, %rd8; st.global.v2.u32 [%rd11], {%r13, %r14};
  ret;
}
.visible .entry mma_f32(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u64 pd)
{
  .reg .b32 %r<16>;
  .reg .f32 %f<12>;
  .reg .b64 %rd<16>;
  ld.param.u64 %rd1, [pa]; ld.param.u64 %rd2, [pb]; ld.param.u64 %rd3, [pc]; ld.param.u64 %rd4, [pd];
  mov.u32 %r1, %ctaid.x; mov.u32 %r2, %ntid.x; mov.u32 %r3, %tid.x; mad.lo.s32 %r4, %r1, %r2, %r3;
  cvt.u64.u32 %rd5, %r4;
  shl.b64 %rd6, %rd5, 4; add.s64 %rd7, %rd1, %rd6; ld.global.v4.u32 {%r5, %r6, %r7, %r8}, [%rd7];
  shl.b64 %rd8, %rd5, 3; add.s64 %rd9, %rd2, %rd8; ld.global.v2.u32 {%r9, %r10}, [%rd9];
  add.s64 %rd10, %rd3, %rd6; ld.global.v4.f32 {%f1, %f2, %f3, %f4}, [%rd10];
  mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%f5, %f6, %f7, %f8}, {%r5, %r6, %r7, %r8}, {%r9, %r10}, {%f1, %f2, %f3, %f4};
  add.s64 %rd11, %rd4, %rd6; st.global.v4.f32 [%rd11], {%f5, %f6, %f7, %f8};
  ret;
}
"""

E4M3 = ml_dtypes.float8_e4m3fn
FINITE_CODES = np.array([c for c in range(256) if c & 0x7F != 0x7F], np.uint8)


def codes(x) -> np.ndarray:
    return np.asarray(x, np.float32).astype(E4M3).view(np.uint8)


# -- fragments: matrix form → the lane-major registers the kernel loads ----------------------------

def a_words(a: np.ndarray) -> np.ndarray:
    """(warps, 16, 32) e4m3 → (warps, 32, 4) uint32: the inverse of fragments.a_matrix."""
    w = np.ascontiguousarray(a).view(np.uint32).reshape(-1, 2, 8, 2, 4)
    return np.ascontiguousarray(w.transpose(0, 2, 4, 3, 1)).reshape(-1, 32, 4)


def b_words(b: np.ndarray) -> np.ndarray:
    """(warps, 32, 8) e4m3 → (warps, 32, 2) uint32: the inverse of fragments.b_matrix."""
    w = np.ascontiguousarray(b.transpose(0, 2, 1)).view(np.uint32).reshape(-1, 8, 2, 4)
    return np.ascontiguousarray(w.transpose(0, 1, 3, 2)).reshape(-1, 32, 2)


def c_words(c: np.ndarray) -> np.ndarray:
    return np.stack(fragments.d_registers(c), axis=-1)


def from_d_words(d: np.ndarray, dtype) -> np.ndarray:
    return fragments.c_matrix([d[..., r] for r in range(d.shape[-1])]).astype(dtype, copy=False)


def self_check(rng) -> None:
    """The host-side layouts invert rr.run.fragments' (else the probe would test a shuffle)."""
    a = rng.integers(0, 256, (3, 16, 32), dtype=np.uint8)
    b = rng.integers(0, 256, (3, 32, 8), dtype=np.uint8)
    aw, bw = a_words(a), b_words(b)
    assert np.array_equal(fragments.a_matrix([aw[..., r] for r in range(4)]), a)
    assert np.array_equal(fragments.b_matrix([bw[..., r] for r in range(2)]), b)
    for dt in (np.float16, np.float32):
        c = rng.normal(size=(3, 16, 8)).astype(dt)
        assert np.array_equal(from_d_words(c_words(c), dt), c)


# -- input designs ---------------------------------------------------------------------------------

def special_c(rng, shape, dtype) -> np.ndarray:
    """C drawn from the special values of its type and a wide random spread."""
    if dtype == np.float16:
        bits = np.array([0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01, 0x7D55, 0xFFFF, 0x7FFF,
                         0x0001, 0x8001, 0x03FF, 0x83FF, 0x0200, 0x7BFF, 0xFBFF, 0x0400, 0x8400], np.uint16)
        spread = rng.integers(0, 0x7C00, shape).astype(np.uint16) | (rng.integers(0, 2, shape) << 15).astype(np.uint16)
    else:
        bits = np.array([0x0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001,
                         0x7FA55555, 0xFFFFFFFF, 0x00000001, 0x80000001, 0x007FFFFF, 0x00400000, 0x7F7FFFFF,
                         0xFF7FFFFF, 0x00800000, 0x477FE000, 0xC77FE000, 0x47800000], np.uint32)
        spread = rng.integers(0, 0x7F800000, shape, dtype=np.int64).astype(np.uint32) | \
            (rng.integers(0, 2, shape).astype(np.uint32) << 31)
    pick = rng.choice(bits, shape)
    out = np.where(rng.random(shape) < 0.5, pick, spread).astype(bits.dtype)
    return out.view(dtype)


def wide_c(rng, shape, dtype, scale_log2=(-24, 16)) -> np.ndarray:
    lo, hi = scale_log2
    v = rng.choice([-1.0, 1.0], shape) * np.exp2(rng.uniform(lo, hi, shape))
    return np.where(rng.random(shape) < 0.2, 0.0, v).astype(dtype)


def random_set(rng, n, dtype):
    a = codes(rng.normal(size=(n, 16, 32)))
    b = codes(rng.normal(size=(n, 32, 8)))
    c = (4 * rng.normal(size=(n, 16, 8))).astype(dtype)
    return a, b, c, np.zeros(n, np.uint8)


def design_all_codes(rng, n, dtype):
    """Every e4m3 code (NaN, subnormals and ±0 too), C special."""
    return (rng.integers(0, 256, (n, 16, 32), dtype=np.uint8), rng.integers(0, 256, (n, 32, 8), dtype=np.uint8),
            special_c(rng, (n, 16, 8), dtype))


def design_spread(rng, n, dtype):
    """Every finite code, uniformly: products from 2^-18 to 2^17.6 in one sum; C wide."""
    return rng.choice(FINITE_CODES, (n, 16, 32)), rng.choice(FINITE_CODES, (n, 32, 8)), wide_c(rng, (n, 16, 8), dtype)


def _sparse(rng, n, nonzero: int):
    """A and B zero but at `nonzero` k slots per warp; at those slots, random finite codes."""
    a = np.zeros((n, 16, 32), np.uint8)
    b = np.zeros((n, 32, 8), np.uint8)
    for w in range(n):
        ks = rng.choice(32, nonzero, replace=False)
        a[w, :, ks] = rng.choice(FINITE_CODES, (nonzero, 16))
        b[w, ks, :] = rng.choice(FINITE_CODES, (nonzero, 8))
    return a, b


def design_two_terms(rng, n, dtype):
    """Two nonzero products per output (alignment width: is the small one kept, and rounded how?)."""
    a, b = _sparse(rng, n, 2)
    return a, b, np.zeros((n, 16, 8), dtype)


def design_three_terms(rng, n, dtype):
    """Three nonzero products (a big pair that may cancel and a small one): truncation of the
    aligned small term before or after the cancellation."""
    a, b = _sparse(rng, n, 3)
    return a, b, np.where(rng.random((n, 16, 8)) < 0.5, 0, wide_c(rng, (n, 16, 8), dtype)).astype(dtype)


def design_big_and_small(rng, n, dtype):
    """One big product and many small ones of one sign: whether the small ones, each below the
    big one's last bit, are truncated, rounded or summed before alignment."""
    a = codes(np.exp2(rng.integers(-9, -2, (n, 16, 32))) * rng.choice([1.0, 1.125, 1.5, 1.875], (n, 16, 32)))
    b = codes(np.exp2(rng.integers(-9, -2, (n, 32, 8))) * rng.choice([1.0, 1.25, 1.75], (n, 32, 8)))
    sign = rng.choice([-1.0, 1.0], (n, 1, 1))
    big_k = rng.integers(0, 32, n)
    for w in range(n):
        a[w, :, big_k[w]] = codes(rng.choice([64.0, 128.0, 240.0, 448.0], 16))
        b[w, big_k[w], :] = codes(sign[w, 0, 0] * rng.choice([1.0, 2.0, 4.0, 8.0], 8))
    return a, b, np.zeros((n, 16, 8), dtype)


def design_cancel(rng, n, dtype):
    """Pairs of equal products of opposite sign, and a residual far below them."""
    vals = codes(rng.normal(size=(n, 16, 16)) * 16)
    a = np.zeros((n, 16, 32), np.uint8)
    a[..., 0::2], a[..., 1::2] = vals, vals
    bv = codes(rng.normal(size=(n, 16, 8)) * 8)
    b = np.zeros((n, 32, 8), np.uint8)
    b[:, 0::2], b[:, 1::2] = bv, bv ^ 0x80  # the same magnitude, the other sign
    tweak = rng.random((n, 32, 8)) < 0.1  # a few pairs off by one code: a small residual
    b = np.where(tweak & (b & 0x7F != 0) & (b & 0x7F != 0x7E), b + 1, b).astype(np.uint8)
    return a, b, np.where(rng.random((n, 16, 8)) < 0.5, 0, wide_c(rng, (n, 16, 8), dtype, (-24, 0))).astype(dtype)


def design_overflow(rng, n, dtype):
    """Products near the top of e4m3 (448²), so that one HMMA half's f16 sum overflows while the
    other half would bring it back; C up to ±65504 or infinite."""
    a = codes(rng.choice([-448.0, -256.0, 256.0, 448.0, 1.0], (n, 16, 32)))
    b = codes(rng.choice([-448.0, -128.0, 128.0, 448.0, 0.5], (n, 32, 8)))
    return a, b, special_c(rng, (n, 16, 8), dtype)


def design_subnormal(rng, n, dtype):
    """Tiny operands (e4m3 subnormals and the lowest binades): results in f16's subnormal range,
    C subnormal."""
    small = np.array([c for c in FINITE_CODES if (c & 0x7F) < 0x20], np.uint8)
    c = wide_c(rng, (n, 16, 8), dtype, (-30, -12) if dtype == np.float16 else (-140, -110))
    return rng.choice(small, (n, 16, 32)), rng.choice(small, (n, 32, 8)), c


def design_nan_inputs(rng, n, dtype):
    """NaN codes (0x7F, 0xFF) at a few places among random operands, C special."""
    a = codes(rng.normal(size=(n, 16, 32)))
    b = codes(rng.normal(size=(n, 32, 8)))
    a = np.where(rng.random(a.shape) < 0.01, rng.choice([0x7F, 0xFF], a.shape), a).astype(np.uint8)
    b = np.where(rng.random(b.shape) < 0.01, rng.choice([0x7F, 0xFF], b.shape), b).astype(np.uint8)
    return a, b, special_c(rng, (n, 16, 8), dtype)


def design_c_dominates(rng, n, dtype):
    """C far larger or far smaller than the products: where C is added, and how it rounds."""
    a = codes(rng.normal(size=(n, 16, 32)))
    b = codes(rng.normal(size=(n, 32, 8)))
    return a, b, wide_c(rng, (n, 16, 8), dtype, (-24, 15.9) if dtype == np.float16 else (-60, 60))


DESIGNS = {"random": None, "all_codes": design_all_codes, "spread": design_spread,
           "two_terms": design_two_terms, "three_terms": design_three_terms,
           "big_and_small": design_big_and_small, "cancel": design_cancel, "overflow": design_overflow,
           "subnormal": design_subnormal, "nan_inputs": design_nan_inputs, "c_dominates": design_c_dominates}


def adversarial_set(rng, n, dtype):
    names = list(DESIGNS)[1:]
    per = -(-n // len(names))
    parts = [DESIGNS[name](rng, per, dtype) for name in names]
    a, b, c = (np.concatenate([p[i] for p in parts])[:n] for i in range(3))
    design = np.repeat(np.arange(1, len(names) + 1, dtype=np.uint8), per)[:n]
    return a, b, c, design


# -- the GPU ---------------------------------------------------------------------------------------

def run_gpu(a, b, c) -> np.ndarray:
    import cupy
    from cupy.cuda import driver

    cupy.empty(1)
    module = driver.moduleLoadData(PTX.encode() + b"\0")
    f32 = c.dtype == np.float32
    fn = driver.moduleGetFunction(module, "mma_f32" if f32 else "mma_f16")
    n = a.shape[0]
    da, db = cupy.asarray(a_words(a)), cupy.asarray(b_words(b))
    dc = cupy.asarray(c_words(c))
    dd = cupy.zeros_like(dc)
    ptrs = [np.array([x.data.ptr], np.uint64) for x in (da, db, dc, dd)]
    args = np.array([p.ctypes.data for p in ptrs], np.uint64)
    driver.launchKernel(fn, n, 1, 1, 32, 1, 1, 0, 0, args.ctypes.data, 0)
    cupy.cuda.runtime.deviceSynchronize()
    return from_d_words(dd.get(), c.dtype)


def swapped_share(a, b, c, run) -> float:
    """The share of outputs that `run` (the GPU's mma, or a model's) gives bit for bit the same when
    the operands are swapped and transposed — what a phase computed transposed relies on (issue
    22): warps 2i and 2i+1 are taken as one A times a 16-column B (two n-tiles) with their C, and
    mma(Bᵀ, Aᵀ, Cᵀ) of each 8-row half of A is run as warps of their own and compared with the
    transpose of the pair's D."""
    n = a.shape[0] // 2 * 2
    a0, b0, b1, c0, c1 = a[0:n:2], b[0:n:2], b[1:n:2], c[0:n:2], c[1:n:2]
    d0, d1 = run(a0, b0, c0), run(a0, b1, c1)
    at = np.ascontiguousarray(np.concatenate([b0.transpose(0, 2, 1), b1.transpose(0, 2, 1)], axis=1))
    same = []
    for h in (0, 1):
        rows = slice(8 * h, 8 * h + 8)
        bt = np.ascontiguousarray(a0[:, rows].transpose(0, 2, 1))
        ct = np.ascontiguousarray(np.concatenate([c0[:, rows].transpose(0, 2, 1), c1[:, rows].transpose(0, 2, 1)],
                                                 axis=1))
        want = np.concatenate([d0[:, rows].transpose(0, 2, 1), d1[:, rows].transpose(0, 2, 1)], axis=1)
        same.append(same_bits(run(at, bt, ct), np.ascontiguousarray(want)))
    return float(np.mean(same))


def same_bits(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    u = np.uint16 if x.dtype == np.float16 else np.uint32
    return x.view(u) == y.view(u)


def score(path: Path) -> None:
    z = np.load(path)
    model = mma_sync(z["A"], z["B"], z["C"])
    ok = same_bits(model, z["D"])
    nan_ok = np.isnan(model) == np.isnan(z["D"])
    for i, name in enumerate(z["designs"]):
        sel = z["design"] == i
        if sel.any():
            print(f"  {path.name:<24} {name:<14} warps {int(sel.sum()):>6}  bits identical "
                  f"{ok[sel].mean():8.4%}  NaN where D is NaN {nan_ok[sel].mean():8.4%}", flush=True)
    print(f"  {path.name:<24} {'all':<14} warps {z['A'].shape[0]:>6}  bits identical {ok.mean():8.4%}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--warps", type=int, default=8192, help="warps per set (128 outputs each)")
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--forms", nargs="+", default=["f16", "f32"])
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--swapped", action="store_true",
                    help="also: does the GPU give mma(Bᵀ, Aᵀ, Cᵀ) = mma(A, B, C)ᵀ on each set (and the model)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    self_check(np.random.default_rng(0))
    for form in args.forms:
        dtype = np.float16 if form == "f16" else np.float32
        for label, make in (("random", random_set), ("adversarial", adversarial_set)):
            rng = np.random.default_rng([args.seed, form == "f32", label == "adversarial"])
            a, b, c, design = make(rng, args.warps, dtype)
            d = run_gpu(a, b, c)
            path = out / f"mma_{form}_{label}.npz"
            np.savez_compressed(path, A=a, B=b, C=c, D=d, design=design, designs=np.array(list(DESIGNS)),
                                seed=np.int64(args.seed))
            print(f"{path}: {a.shape[0]} warps, {d.size} outputs, {path.stat().st_size / 2**20:.1f} MiB", flush=True)
            score(path)
            if args.swapped:
                print(f"  swapped operands, transposed D: GPU {swapped_share(a, b, c, run_gpu):8.4%} bits identical, "
                      f"model {swapped_share(a, b, c, mma_sync):8.4%}", flush=True)


if __name__ == "__main__":
    main()
