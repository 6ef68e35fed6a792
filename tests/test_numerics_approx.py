"""The `.approx` f32 functions as the H200's MUFU computes them (rr.numerics: rcp, rsqrt, sqrt,
ex2, div and ex2.f16 from tables measured on the H200, shipped in rr/data/mufu_h200.npz): the
exponent only shifts a table's value, ex2 cuts its input to 23 fraction bits and takes a negative
one's fraction by its ones' complement, div is a · rcp(b) in one FMUL.FTZ, and the special values
(zeros, infinities, NaN, negative roots, flushed subnormals) are as the PTX ISA and the SASS say.
H200 data the package does not ship (tests/data/probes/approx_h200_samples.npz: ex2 at negative
inputs, div quotients) checks the rules the tables do not hold."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rr.numerics import mufu, rounding

SAMPLES = Path(__file__).parent / "data/probes/approx_h200_samples.npz"
NAN32 = rounding.CANONICAL_NAN["f32"]
ONE = 0x3F800000


def f32(*values) -> np.ndarray:
    return np.array(values, np.float32)


def bits(x) -> np.ndarray:
    return np.asarray(x, np.float32).view(np.uint32)


def from_bits(u) -> np.ndarray:
    return np.asarray(u, np.uint32).view(np.float32)


def mantissas(count: int, exponent: int = 0, step: int = 1) -> np.ndarray:
    return from_bits(np.uint32(ONE + (exponent << 23)) + np.arange(0, count, step, dtype=np.uint32))


@pytest.mark.parametrize("name, fn, period, shift", [
    ("rcp", mufu.rcp_approx, 2 ** 23, lambda e: -e),
    ("rsqrt", mufu.rsqrt_approx, 2 ** 24, lambda e: -e // 2),
    ("sqrt", mufu.sqrt_approx, 2 ** 24, lambda e: e // 2),
])
def test_rcp_rsqrt_and_sqrt_are_the_h200_table_shifted_by_the_exponent(name, fn, period, shift):
    """At the table's own inputs the function is the table; at other binades (the H200 checked
    2⁻¹²⁶ to 2¹²⁶, both signs) the same bits with the exponent moved; a negative x's rcp the
    same with the sign."""
    table = mufu.mufu_table(name)
    x = mantissas(period, 0, 7)
    assert np.array_equal(bits(fn(x)), table[::7])
    for e in (-126, -40, -2, 2, 40, 124):
        got = bits(fn(mantissas(period, e, 7))).astype(np.int64)
        assert np.array_equal(got, table[::7].astype(np.int64) + (shift(e) << 23)), e
    if name == "rcp":
        assert np.array_equal(bits(fn(-x)), table[::7] | np.uint32(1 << 31))


@pytest.mark.parametrize("name, exact", [
    ("rcp", lambda v: 1.0 / v), ("rsqrt", lambda v: 1.0 / np.sqrt(v)), ("sqrt", np.sqrt), ("ex2", np.exp2)])
def test_the_mufu_is_not_correctly_rounded_but_within_two_ulps(name, exact):
    """What the tables replace: the correctly rounded value differs from the H200's on a share of
    the inputs (rsqrt and ex2 by up to two ulps at a binade's edge)."""
    table = mufu.mufu_table(name)
    period = table.size
    x = (np.arange(period) * 2.0 ** -23).astype(np.float32) if name == "ex2" else mantissas(period)
    rounded = bits(exact(x.astype(np.float64)).astype(np.float32)).astype(np.int64)
    ulps = table.astype(np.int64) - rounded
    assert 0.05 < np.mean(ulps != 0) < 0.5
    assert np.abs(ulps).max() <= 2


def test_ex2_of_a_negative_input_takes_its_fractions_ones_complement():
    """2^-(k·2⁻²³) = 2⁻¹ · T[2²³ − 1 − k] for k ≠ 0: the H200's ex2 at negative inputs (not in the
    shipped tables) from the positive table alone — and not the exact complement T[2²³ − k]."""
    z = np.load(SAMPLES)
    k = z["ex2_neg_k"].astype(np.float64)
    x = (-k * 2.0 ** -23).astype(np.float32)
    assert np.array_equal(bits(mufu.ex2_approx(x)), z["ex2_neg_bits"])
    table = mufu.mufu_table("ex2").astype(np.int64)
    inside = (k > 0) & (k < 2 ** 23)
    twos = table[(2 ** 23 - k[inside]).astype(np.int64) % 2 ** 23] - (1 << 23)
    assert np.mean(twos != z["ex2_neg_bits"][inside]) > 0.5


def test_ex2_cuts_its_input_to_23_fraction_bits_toward_zero():
    """The bits of |x| below 2⁻²³ do not count (2^x of 2⁻²⁴ is 1, for either sign), and a
    negative integer's power is exact (its fraction is zero: no complement)."""
    k = np.arange(1, 2 ** 20, 97, dtype=np.float64)
    grid = (k * 2.0 ** -23).astype(np.float32)
    finer = (k * 2.0 ** -23 + 2.0 ** -24 + 2.0 ** -30).astype(np.float32)  # same cut, more bits
    assert np.array_equal(bits(mufu.ex2_approx(finer)), bits(mufu.ex2_approx(grid)))
    assert np.array_equal(bits(mufu.ex2_approx(-finer)), bits(mufu.ex2_approx(-grid)))
    assert (mufu.ex2_approx(f32(2.0 ** -24, -(2.0 ** -24), 2.0 ** -23 * 0.99)) == 1).all()
    n = np.arange(1, 127)
    assert np.array_equal(mufu.ex2_approx(-n.astype(np.float32)), np.exp2(-n).astype(np.float32))
    assert np.array_equal(mufu.ex2_approx(n.astype(np.float32)), np.exp2(n).astype(np.float32))


def test_div_is_a_times_rcp_b_in_one_ftz_multiply():
    """The H200's div.approx.ftz.f32 where a · rcp(b) underflows: −0 for a negative quotient (an
    FMUL.FTZ flushes to a zero of the product's sign); and a · rcp(b) bit for bit elsewhere."""
    z = np.load(SAMPLES)
    got = mufu.div_approx(z["div_a"], z["div_b"])
    assert np.array_equal(bits(got), bits(z["div_got"]))
    assert np.signbit(z["div_got"]).all() and (z["div_got"] == 0).all()
    rng = np.random.default_rng(5)
    a, b = (rng.normal(size=4096) * 2.0 ** rng.integers(-60, 60, 4096)).astype(np.float32), \
        (rng.normal(size=4096) * 2.0 ** rng.integers(-60, 60, 4096)).astype(np.float32)
    assert np.array_equal(bits(mufu.div_approx(a, b)), bits(mufu.mul_ftz(a, mufu.rcp_approx(b))))
    assert mufu.div_approx(f32(1), f32(2.0 ** 126 * 1.5))[0] == 0  # rcp(b) is subnormal: flushed
    assert bits(mufu.div_approx(f32(0), f32(0)))[0] == NAN32 and mufu.div_approx(f32(1), f32(0))[0] == np.inf


def test_the_special_values():
    inf, tiny = np.float32(np.inf), np.float32(2.0 ** -130)
    x = f32(0.0, -0.0, np.inf, -np.inf, np.nan, 2.0 ** -130, -(2.0 ** -130))
    rcp, rsq, sq, ex2 = (mufu.rcp_approx(x), mufu.rsqrt_approx(x), mufu.sqrt_approx(x), mufu.ex2_approx(x))
    np.testing.assert_array_equal(rcp[[0, 1, 2, 3, 5, 6]], f32(inf, -inf, 0, -0.0, inf, -inf))
    assert list(np.signbit(rcp[[2, 3]])) == [False, True]
    np.testing.assert_array_equal(rsq[[0, 1, 2, 5, 6]], f32(inf, -inf, 0, inf, -inf))
    np.testing.assert_array_equal(sq[[0, 1, 2, 5]], f32(0, -0.0, inf, 0))
    assert np.signbit(sq[1]) and np.signbit(sq[6])
    np.testing.assert_array_equal(ex2[[0, 1, 2, 3, 5, 6]], f32(1, 1, inf, 0, 1, 1))
    for r in (rcp, rsq, sq, ex2):
        assert bits(r)[4] == NAN32
    assert (bits(mufu.rsqrt_approx(f32(-1, -inf))) == NAN32).all() and (bits(mufu.sqrt_approx(f32(-1, -tiny * 4e9))) == NAN32).all()
    # results past the range: rcp of |x| >= 2^126 (but exactly 2^126) and ex2 below -126 flush to +-0
    assert mufu.rcp_approx(f32(2.0 ** 126 * 1.5, -(2.0 ** 127)))[0] == 0
    assert np.signbit(mufu.rcp_approx(f32(-(2.0 ** 127))))[0]
    assert mufu.rcp_approx(f32(2.0 ** 126))[0] == 2.0 ** -126
    assert (mufu.ex2_approx(f32(-126.5, -200, -1e30)) == 0).all() and (mufu.ex2_approx(f32(128, 1e30)) == inf).all()


def test_the_forms_without_ftz_scale_around_the_mufu():
    """Without .ftz ptxas scales a subnormal input into range (and ex2's input below -126 by one
    half, squaring the result), so subnormal inputs and results survive."""
    sub = f32(2.0 ** -127, 1.5 * 2.0 ** -127)
    assert np.isfinite(mufu.rcp_approx(sub, ftz=False)).all() and (mufu.rcp_approx(sub) == np.inf).all()
    np.testing.assert_array_equal(mufu.rcp_approx(sub[:1], ftz=False), f32(2.0 ** 127))
    np.testing.assert_array_equal(mufu.sqrt_approx(f32(2.0 ** -140), ftz=False), f32(2.0 ** -70))
    np.testing.assert_array_equal(mufu.rsqrt_approx(f32(2.0 ** -140), ftz=False), f32(2.0 ** 70))
    np.testing.assert_array_equal(mufu.ex2_approx(f32(-140), ftz=False), f32(2.0 ** -140))
    assert mufu.ex2_approx(f32(-140))[0] == 0
    np.testing.assert_array_equal(mufu.rcp_approx(f32(2.0 ** 127), ftz=False), f32(2.0 ** -127))
    np.testing.assert_array_equal(mufu.div_approx(f32(2.0 ** -140), f32(2.0 ** -141), ftz=False), f32(2))
    x = mantissas(2 ** 23, 3, 101)
    for fn in (mufu.rcp_approx, mufu.rsqrt_approx, mufu.sqrt_approx, mufu.ex2_approx):
        assert np.array_equal(bits(fn(x, ftz=False)), bits(fn(x)))  # normal inputs: the same MUFU


def test_ex2_f16_is_the_h200s_table_with_its_special_values():
    """MUFU.EX2.F16 (measured at all 65 536 inputs): exact at zeros, infinities and integers,
    subnormal results kept (2⁻²⁴ is the smallest), 2¹⁶ infinite, a NaN the canonical 0x7FFF."""
    h = np.array([0x0000, 0x8000, 0x0001, 0x7C00, 0xFC00, 0x3C00, 0x4C00, 0xCE00, 0xCE40, 0x7E00, 0xFC01], np.uint16)
    r = mufu.ex2_approx_f16(h.view(np.float16))
    assert r.dtype == np.float16
    np.testing.assert_array_equal(r[:9], np.array([1, 1, 1, np.inf, 0, 2, np.inf, 2.0 ** -24, 0], np.float16))
    assert (r[9:].view(np.uint16) == rounding.CANONICAL_NAN["f16"]).all()
    every = np.arange(2 ** 16, dtype=np.uint16).view(np.float16)
    finite = np.isfinite(every) & (np.abs(every) < 15)
    exact = np.exp2(every[finite].astype(np.float64)).astype(np.float16)
    ulps = np.abs(mufu.ex2_approx_f16(every[finite]).view(np.uint16).astype(np.int64) - exact.view(np.uint16))
    assert ulps.max() <= 1 and 0 < np.mean(ulps) < 0.5


# -- on the GPU: the rules the tables do not hold (the lead runs these on the H200) --------------

GPU_PTX = """
.version 8.7
.target sm_90
.address_size 64
.visible .entry approx(.param .u64 pa, .param .u64 pb, .param .u64 py, .param .u32 pn)
{
  .reg .pred %p1; .reg .b32 %r<8>; .reg .f32 %f<20>; .reg .b64 %rd<12>;
  ld.param.u64 %rd1, [pa]; ld.param.u64 %rd2, [pb]; ld.param.u64 %rd3, [py]; ld.param.u32 %r5, [pn];
  mov.u32 %r1, %ctaid.x; mov.u32 %r2, %ntid.x; mov.u32 %r3, %tid.x; mad.lo.s32 %r4, %r1, %r2, %r3;
  setp.ge.u32 %p1, %r4, %r5; @%p1 ret;
  mul.wide.u32 %rd4, %r4, 4; add.s64 %rd5, %rd1, %rd4; ld.global.f32 %f1, [%rd5];
  add.s64 %rd6, %rd2, %rd4; ld.global.f32 %f2, [%rd6];
  rcp.approx.ftz.f32 %f3, %f1;   rcp.approx.f32 %f4, %f1;
  rsqrt.approx.ftz.f32 %f5, %f1; rsqrt.approx.f32 %f6, %f1;
  sqrt.approx.ftz.f32 %f7, %f1;  sqrt.approx.f32 %f8, %f1;
  ex2.approx.ftz.f32 %f9, %f1;   ex2.approx.f32 %f10, %f1;
  div.approx.ftz.f32 %f11, %f1, %f2; div.approx.f32 %f12, %f1, %f2;
  mul.wide.u32 %rd7, %r4, 40; add.s64 %rd8, %rd3, %rd7;  // a 40-byte row: 8-byte aligned at best
  st.global.v2.f32 [%rd8], {%f3, %f4};   st.global.v2.f32 [%rd8+8], {%f5, %f6};
  st.global.v2.f32 [%rd8+16], {%f7, %f8}; st.global.v2.f32 [%rd8+24], {%f9, %f10};
  st.global.v2.f32 [%rd8+32], {%f11, %f12};
  ret;
}
"""


def gpu_inputs() -> tuple[np.ndarray, np.ndarray]:
    """Special values, subnormals, binade edges, ex2's range ends and random bits of every exponent."""
    special = f32(0, -0.0, np.inf, -np.inf, np.nan, 2.0 ** -149, -(2.0 ** -149), 2.0 ** -127, 2.0 ** -126,
                  2.0 ** 126, 2.0 ** 126 * 1.5, 2.0 ** 127, 3.4e38, -3.4e38, 128, 127.99999, -126, -126.00001,
                  -127, -149, -150, -200, 1, -1, 2.0 ** -24, -(2.0 ** -24), 2.0 ** -23, -(2.0 ** -23))
    rng = np.random.default_rng(17)
    rand = from_bits(rng.integers(0, 2 ** 32, 1 << 20, dtype=np.uint64).astype(np.uint32))
    ex2_range = (rng.uniform(-160, 140, 1 << 18)).astype(np.float32)
    a = np.concatenate([np.repeat(special, len(special)), rand, ex2_range])
    b = np.concatenate([np.tile(special, len(special)), rand[::-1], rng.permutation(rand)[: 1 << 18]])
    return a, b


@pytest.mark.gpu
def test_the_models_give_the_h200s_bits_on_special_and_random_inputs(gpu):
    import cupy
    from cupy.cuda import driver

    a, b = gpu_inputs()
    cupy.empty(1)
    fn = driver.moduleGetFunction(driver.moduleLoadData(GPU_PTX.encode() + b"\0"), "approx")
    da, db = cupy.asarray(a), cupy.asarray(b)
    dy = cupy.zeros((len(a), 10), cupy.float32)
    ptrs = [np.array([p], np.uint64) for p in (da.data.ptr, db.data.ptr, dy.data.ptr)] + [np.array([len(a)], np.uint32)]
    args = np.array([p.ctypes.data for p in ptrs], np.uint64)
    driver.launchKernel(fn, -(-len(a) // 256), 1, 1, 256, 1, 1, 0, 0, args.ctypes.data, 0)
    got = dy.get()
    model = np.stack([mufu.rcp_approx(a), mufu.rcp_approx(a, ftz=False),
                      mufu.rsqrt_approx(a), mufu.rsqrt_approx(a, ftz=False),
                      mufu.sqrt_approx(a), mufu.sqrt_approx(a, ftz=False),
                      mufu.ex2_approx(a), mufu.ex2_approx(a, ftz=False),
                      mufu.div_approx(a, b), mufu.div_approx(a, b, ftz=False)], axis=1)
    names = ["rcp.ftz", "rcp", "rsqrt.ftz", "rsqrt", "sqrt.ftz", "sqrt", "ex2.ftz", "ex2", "div.ftz", "div"]
    wrong = {n: int((bits(got[:, j]) != bits(model[:, j])).sum()) for j, n in enumerate(names)}
    first = {n: (a[i], b[i], got[i, j], model[i, j]) for j, n in enumerate(names)
             for i in np.flatnonzero(bits(got[:, j]) != bits(model[:, j]))[:1]}
    assert not any(wrong.values()), (wrong, first)
