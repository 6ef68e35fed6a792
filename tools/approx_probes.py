"""On a GPU: the `.approx.ftz.f32` functions (rcp, rsqrt, sqrt, ex2, div) and `ex2.approx.f16` over
whole binades, as tables rr's model can ship, and the checks that say how far a table reaches.

    python tools/approx_probes.py -o DIR

Tables (`DIR/approx_tables.npz`): each function's output bits over one period of its input —
rcp over the mantissas of [1, 2), rsqrt and sqrt over [1, 4) (the exponent's parity matters),
ex2 over x = k·2⁻²³ for k in [0, 2²³) (the fraction, as fixed point) and over −k·2⁻²³ — stored as
the first word and the int8 first differences (the outputs are monotone in the input, so the
differences are small; decoding is a cumulative sum, exact on any machine), plus ex2.approx.f16
at all 65 536 inputs. Checks (printed, and in `DIR/approx_checks.json`): for each hypothesis of
how the hardware extends its table to other inputs — an exponent shift for rcp/rsqrt/sqrt, a
fixed-point split x = n + k·2⁻²³ (rounded down, toward zero or to nearest) for ex2, a · rcp(b) for
div — the number of inputs it gets wrong, over whole binades.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

FUNCS = {"rcp": "rcp.approx.ftz.f32", "rsqrt": "rsqrt.approx.ftz.f32", "sqrt": "sqrt.approx.ftz.f32",
         "ex2": "ex2.approx.ftz.f32"}


def unary_ptx(name: str, op: str) -> str:
    return f"""
.visible .entry {name}(.param .u64 px, .param .u64 py, .param .u32 pn)
{{
  .reg .pred %p1; .reg .b32 %r<8>; .reg .f32 %f<4>; .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [px]; ld.param.u64 %rd2, [py]; ld.param.u32 %r5, [pn];
  mov.u32 %r1, %ctaid.x; mov.u32 %r2, %ntid.x; mov.u32 %r3, %tid.x; mad.lo.s32 %r4, %r1, %r2, %r3;
  setp.ge.u32 %p1, %r4, %r5; @%p1 ret;
  mul.wide.u32 %rd3, %r4, 4; add.s64 %rd4, %rd1, %rd3; ld.global.f32 %f1, [%rd4];
  {op} %f2, %f1;
  add.s64 %rd5, %rd2, %rd3; st.global.f32 [%rd5], %f2;
  ret;
}}"""


PTX = ".version 8.7\n.target sm_90\n.address_size 64\n" + "".join(unary_ptx(n, op) for n, op in FUNCS.items()) + """
.visible .entry ex2_f16(.param .u64 px, .param .u64 py, .param .u32 pn)
{
  .reg .pred %p1; .reg .b16 %h<4>; .reg .b32 %r<8>; .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [px]; ld.param.u64 %rd2, [py]; ld.param.u32 %r5, [pn];
  mov.u32 %r1, %ctaid.x; mov.u32 %r2, %ntid.x; mov.u32 %r3, %tid.x; mad.lo.s32 %r4, %r1, %r2, %r3;
  setp.ge.u32 %p1, %r4, %r5; @%p1 ret;
  mul.wide.u32 %rd3, %r4, 2; add.s64 %rd4, %rd1, %rd3; ld.global.b16 %h1, [%rd4];
  ex2.approx.f16 %h2, %h1;
  add.s64 %rd5, %rd2, %rd3; st.global.b16 [%rd5], %h2;
  ret;
}
.visible .entry div(.param .u64 pa, .param .u64 pb, .param .u64 py, .param .u32 pn)
{
  .reg .pred %p1; .reg .b32 %r<8>; .reg .f32 %f<4>; .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [pa]; ld.param.u64 %rd6, [pb]; ld.param.u64 %rd2, [py]; ld.param.u32 %r5, [pn];
  mov.u32 %r1, %ctaid.x; mov.u32 %r2, %ntid.x; mov.u32 %r3, %tid.x; mad.lo.s32 %r4, %r1, %r2, %r3;
  setp.ge.u32 %p1, %r4, %r5; @%p1 ret;
  mul.wide.u32 %rd3, %r4, 4; add.s64 %rd4, %rd1, %rd3; ld.global.f32 %f1, [%rd4];
  add.s64 %rd7, %rd6, %rd3; ld.global.f32 %f3, [%rd7];
  div.approx.ftz.f32 %f2, %f1, %f3;
  add.s64 %rd5, %rd2, %rd3; st.global.f32 [%rd5], %f2;
  ret;
}
"""


class Gpu:
    def __init__(self):
        import cupy
        from cupy.cuda import driver

        self.cupy, self.driver = cupy, driver
        cupy.empty(1)
        self.module = driver.moduleLoadData(PTX.encode() + b"\0")

    def __call__(self, name: str, *inputs: np.ndarray) -> np.ndarray:
        cp, drv = self.cupy, self.driver
        fn = drv.moduleGetFunction(self.module, name)
        d_in = [cp.asarray(np.ascontiguousarray(x)) for x in inputs]
        d_out = cp.empty_like(d_in[0])
        n = d_in[0].size
        ptrs = [np.array([x.data.ptr], np.uint64) for x in (*d_in, d_out)] + [np.array([n], np.uint32)]
        args = np.array([p.ctypes.data for p in ptrs], np.uint64)
        drv.launchKernel(fn, -(-n // 256), 1, 1, 256, 1, 1, 0, 0, args.ctypes.data, 0)
        cp.cuda.runtime.deviceSynchronize()
        return d_out.get()


def bits_range(lo: int, count: int) -> np.ndarray:
    return (np.uint32(lo) + np.arange(count, dtype=np.uint32)).view(np.float32)


def encode(out_bits: np.ndarray) -> dict:
    """The first word and int8 differences where they fit (a monotone table), else the raw words."""
    d = np.diff(out_bits.astype(np.int64))
    if np.abs(d).max() >= 128:
        return {"raw": out_bits}
    return {"first": np.uint32(out_bits[0]), "diff": d.astype(np.int8)}


def shifted(table_bits: np.ndarray, shift: int) -> np.ndarray:
    """The table's values times 2^shift, by the exponent field (what an exponent-independent unit
    would return where the result stays normal)."""
    return (table_bits.astype(np.int64) + (shift << 23)).astype(np.uint32)


def check_exponent_shift(gpu, name: str, table_bits: np.ndarray, period: int, scale, exps) -> dict:
    """Inputs m·2^e for every mantissa m of the table's period: wrong counts per e and sign."""
    wrong = {}
    base = 0x3F800000
    for e in exps:
        for sign in (0, 1):
            x = bits_range(((base + (e << 23)) & 0x7FFFFFFF) | (sign << 31), period)
            got = gpu(name, x).view(np.uint32)
            want = shifted(table_bits, scale(e)) | (np.uint32(sign << 31) if name == "rcp" else np.uint32(0))
            normal = ((want >> 23) & 0xFF > 0) & ((want >> 23) & 0xFF < 255)
            if name != "rcp" and sign:  # rsqrt/sqrt of a negative: NaN
                wrong[f"-2^{e}"] = int((~np.isnan(got.view(np.float32))).sum())
                continue
            wrong[f"{'-' if sign else '+'}2^{e}"] = int((got[normal] != want[normal]).sum())
    return wrong


def ex2_fixed_point(x: np.ndarray, table: np.ndarray, mode: str) -> np.ndarray:
    """ex2(x) as 2^n · T[k] with x·2²³ made an integer by `mode` (floor, trunc, rint): n = its
    high bits, k its low 23."""
    q = {"floor": np.floor, "trunc": np.trunc, "rint": np.rint}[mode](x.astype(np.float64) * 2.0 ** 23).astype(np.int64)
    n, k = q >> 23, q & (2 ** 23 - 1)
    return shifted(table[k], 0).astype(np.int64) + (n << 23)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--seed", type=int, default=20261201)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    gpu = Gpu()
    tables, checks = {}, {}
    one = 0x3F800000
    rcp = gpu("rcp", bits_range(one, 2 ** 23)).view(np.uint32)
    tables["rcp"] = rcp
    checks["rcp"] = check_exponent_shift(gpu, "rcp", rcp, 2 ** 23, lambda e: -e, [-126, -100, -20, -1, 1, 20, 100, 125])
    for name in ("rsqrt", "sqrt"):
        t = gpu(name, bits_range(one, 2 ** 24)).view(np.uint32)
        tables[name] = t
        checks[name] = check_exponent_shift(gpu, name, t, 2 ** 24, (lambda e: -e // 2) if name == "rsqrt" else (lambda e: e // 2),
                                            [-126, -100, -20, -2, 2, 20, 100, 126])
    k = np.arange(2 ** 23, dtype=np.float64)
    ex2_pos = gpu("ex2", (k * 2.0 ** -23).astype(np.float32)).view(np.uint32)
    ex2_neg = gpu("ex2", (-k * 2.0 ** -23).astype(np.float32)).view(np.uint32)
    tables["ex2"], tables["ex2_neg"] = ex2_pos, ex2_neg
    # ex2 beyond the grid: whole binades of |x| from 2^-24 to 2^7, both signs
    ex2_checks = {mode: 0 for mode in ("floor", "trunc", "rint")}
    counted = 0
    for e in range(-24, 7):
        for sign in (0, 1):
            x = bits_range(((127 + e) << 23) | (sign << 31), 2 ** 23)
            got = gpu("ex2", x).view(np.uint32).astype(np.int64)
            for mode in ex2_checks:
                want = ex2_fixed_point(x, ex2_pos, mode)
                normal = (want >> 23 > 0) & (want >> 23 < 255)
                ex2_checks[mode] += int((got[normal] != want[normal]).sum())
            counted += x.size
    checks["ex2"] = {"inputs": counted, "wrong_by_split": ex2_checks,
                     "neg_grid_vs_1_minus": int((ex2_neg[1:] != shifted(ex2_pos[::-1][:-1], -1)).sum())}
    h = np.arange(2 ** 16, dtype=np.uint32).astype(np.uint16)
    tables_f16 = gpu("ex2_f16", h.view(np.float16)).view(np.uint16)
    # div: a / b against a · rcp(b) rounded to nearest (ftz) on random pairs over wide exponents
    rng = np.random.default_rng(args.seed)
    n = 2 ** 24
    a = (rng.integers(0, 2 ** 31, n, dtype=np.int64).astype(np.uint32) | (rng.integers(0, 2, n).astype(np.uint32) << 31)).view(np.float32)
    b = (rng.integers(0x00800000, 0x7F000000, n, dtype=np.int64).astype(np.uint32)
         | (rng.integers(0, 2, n).astype(np.uint32) << 31)).view(np.float32)
    got = gpu("div", a, b)
    r = gpu("rcp", b)
    with np.errstate(all="ignore"):
        prod = (a.astype(np.float64) * r.astype(np.float64)).astype(np.float32)
    prod = np.where(np.abs(prod) < np.finfo(np.float32).tiny, np.float32(0) * np.sign(prod), prod)
    a_ftz = np.abs(a) >= np.finfo(np.float32).tiny
    finite = np.isfinite(got) & np.isfinite(prod) & a_ftz
    checks["div"] = {"pairs": n, "compared": int(finite.sum()),
                     "wrong_a_times_rcp_b": int((got[finite].view(np.uint32) != prod[finite].view(np.uint32)).sum())}
    bad = finite & (got.view(np.uint32) != prod.view(np.uint32))
    enc = {}
    for name, t in tables.items():
        e = encode(t)
        if "raw" in e:
            enc[f"{name}_raw"] = e["raw"]
            continue
        assert np.array_equal(np.concatenate([[e["first"]], e["first"] + np.cumsum(e["diff"].astype(np.int64))]).astype(np.uint32), t)
        enc[f"{name}_first"], enc[f"{name}_diff"] = e["first"], e["diff"]
    np.savez_compressed(out / "approx_tables.npz", **enc, ex2_f16=tables_f16,
                        div_a=a[bad][:100000], div_b=b[bad][:100000], div_got=got[bad][:100000])
    (out / "approx_checks.json").write_text(json.dumps(checks, indent=2) + "\n")
    print(json.dumps(checks, indent=2))
    print(f"{out / 'approx_tables.npz'}: {(out / 'approx_tables.npz').stat().st_size / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
