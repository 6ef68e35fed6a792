"""The e4m3 `mma.sync.m16n8k32` as a pluggable function of A, B and C (`MmaModel`): `mma_sync`,
the H200's own arithmetic (two HMMA.16816 as ptxas compiles it for sm_90, bit-exact on its probes),
`mma_hmma` the same with the HMMA's rules as data (`HmmaRules`), and `mma_exact`, the exact sum
rounded once; `MMA_MODELS` names them for the cpu backend and probe replay."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from rr.numerics.fp8 import E4M3_F64, e4m3_values
from rr.numerics.half import (
    F16,
    canonical_nan,
    f16_as_f32,
    f16_bits,
    f16_of_split,
    nan_bits,
    split_f16,
    split_f16_in_place,
)

MmaModel = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def mma_exact(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """One `mma.sync.m16n8k32 … .f16.e4m3.e4m3.f16` step for any number of rows and columns:
    `a` (…, M, 32) e4m3 bytes in fragment k order, `b` (…, 32, N) e4m3 bytes, `c` (…, M, N) f16.
    The exact sum of the 32 products and C, rounded once to f16. Exact in f64: every product is a
    multiple of 2^-18 below 2^18 and C a multiple of 2^-24 below 2^16, so any summation order
    gives the same f64 value (48 significant bits at most). An f32 `c` is the `.f32` form
    (`mma_exact_f32`)."""
    if np.asarray(c).dtype == np.float32:
        return mma_exact_f32(a, b, c)
    s = np.matmul(e4m3_values(a), e4m3_values(b)) + np.asarray(c, dtype=F16).astype(np.float64)
    return s.astype(F16)


def mma_exact_f32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """The f32-accumulating e4m3 `mma`: the sum of the products and C in f64 (exact unless C spans
    more than 53 bits beyond the products), rounded once to f32."""
    s = np.matmul(e4m3_values(a), e4m3_values(b)) + np.asarray(c, dtype=np.float32).astype(np.float64)
    return s.astype(np.float32)


# Hopper has no fp8 path for `mma.sync`: ptxas -arch=sm_90 unpacks each A and B register's two
# halfwords to f16x2 (F2FP.F16.E4M3.UNPACK_B) and issues two HMMA.16816 — first the k held in
# the registers' low halfwords (k mod 4 in {0, 1}) with C = 0, then the high halfwords' k
# accumulating on that result — and adds C last, with HADD2 (or FADD for the .f32 form).
_LOW_HALF_K = (np.arange(32) % 4) < 2
_NO_EXPONENT = -1000  # a zero (or NaN) term's exponent: it never sets the alignment


@dataclass(frozen=True)
class HmmaRules:
    """How one HMMA.16816 adds its 16 products and the running accumulator T (docs/numerics.md
    says how each was established on the H200).

    `width`: each term is aligned to the largest exponent of the sum and cut to a multiple of
    2^(emax - width) (None: summed exactly); `exponent`: a product's exponent is "factors" ea + eb,
    the sum of its f16 factors' exponents (its significand lies in [1, 4)), or "value" its
    leading bit's; T's is its own. `cut`: "rz" toward zero (sign and magnitude) or "rm" toward
    -inf (two's complement). `f32` / `f16`: how the sum is rounded to the accumulator's type
    ("rz" toward zero, "rn" to nearest even). `canonical_nan`: a NaN D is the canonical NaN
    (0x7FFF, 0x7FFFFFFF) whatever NaN made it."""
    width: int | None = 25
    exponent: str = "factors"
    cut: str = "rz"
    f32: str = "rz"
    f16: str = "rn"
    canonical_nan: bool = True


SM90 = HmmaRules()


def _exponents(codes) -> np.ndarray:
    """e4m3 codes → the exponent of their f16 value's leading bit (e4m3 subnormals are f16
    normals); _NO_EXPONENT for zeros and NaNs."""
    v = E4M3_F64
    e = np.frexp(v)[1].astype(np.int32) - 1
    return np.where((v == 0) | np.isnan(v), _NO_EXPONENT, e)[np.asarray(codes, np.uint8)]


_E4M3_EXPONENT = _exponents(np.arange(256))
_BELOW_ALL = np.int32(1 << 20)
# a magnitude code's exponent where it is the smallest nonzero one; none (_BELOW_ALL) for 0, NaN
_LEAST_EXPONENT = np.where((np.arange(256) == 0) | (np.arange(256) & 0x7F == 0x7F), _BELOW_ALL, _E4M3_EXPONENT)


def _round_sum(s: np.ndarray, dtype, mode: str) -> np.ndarray:
    """An exact f64 sum rounded to f16 or f32, to nearest even or toward zero."""
    with np.errstate(over="ignore", invalid="ignore"):  # past the type's largest finite value: ±inf
        r = s.astype(dtype)
    if mode == "rz":
        r = np.where(np.abs(r.astype(np.float64)) > np.abs(s), np.nextafter(r, dtype(0)), r).astype(dtype)
    return r


def _leading_exponent(x: np.ndarray) -> np.ndarray:
    e = np.frexp(x)[1].astype(np.int32) - 1
    return np.where((x == 0) | ~np.isfinite(x), _NO_EXPONENT, e)


_CUT = {"rz": np.trunc, "rm": np.floor}


_T_FRACTION_BITS = {np.float16: 10, np.float32: 23}


def _cut_is_exact(amag, bmag, t, te, grain, dtype) -> np.ndarray:
    """(N, 16, 8): where no term has a bit below 2^grain (grain >= emax − width, emax bounded
    above as in _hmma), so that the cut removes nothing and the exact sum is the HMMA's. A
    nonzero product's lowest bit is at least 2^(ea + eb − 6) (three fraction bits a factor; an
    e4m3 subnormal's is higher than its leading exponent says), T's at least 2^(te − 10) in f16,
    2^(te − 23) in f32. Most outputs of real layers have terms within 19 binades of each other,
    so only the rest is summed term by term."""
    # the smallest nonzero finite magnitude has the smallest exponent: codes are ordered by |value|
    amin = _LEAST_EXPONENT[np.where(amag == 0, 0x7F, amag).min(-1)]
    bmin = _LEAST_EXPONENT[np.where(bmag == 0, 0x7F, bmag).min(-2)]
    low = np.minimum(amin[..., :, None] + bmin[..., None, :], _BELOW_ALL) - 6
    exact = low >= grain
    if t is not None:
        exact &= (t == 0) | (te - _T_FRACTION_BITS[dtype] >= grain)
    return exact


def _hmma(ah, bh, t, dtype, rules: HmmaRules) -> np.ndarray:
    """One HMMA.16816 on (N, 16, 16) A and (N, 16, 8) B e4m3 codes and the running T (N, 16, 8)
    or None: the 16 products and T aligned and cut as `rules` say, summed, rounded to the
    accumulator's type.

    Every term is a multiple of 2^-18 (an e4m3 product; T is a rounding of sums of them), so
    while emax <= width - 18 the cut removes nothing and the exact sum (one matmul, exact in
    f64) is the answer; only the outputs whose largest exponent may pass that are summed term by
    term. Where T is NaN or infinite the exact sum already is the result."""
    av, bv = E4M3_F64[ah], E4M3_F64[bh]
    with np.errstate(invalid="ignore"):
        s = np.matmul(av, bv) if t is None else np.matmul(av, bv) + t
    if rules.width is not None:
        te = None if t is None else _leading_exponent(t)
        # >= every product's exponent (ea + eb, or its leading bit's: one more at most); the
        # largest magnitude code has the largest exponent (a row with a NaN sums to NaN anyway)
        amag, bmag = ah & np.uint8(0x7F), bh & np.uint8(0x7F)
        bound = (_E4M3_EXPONENT[amag.max(-1)][..., :, None] + _E4M3_EXPONENT[bmag.max(-2)][..., None, :]
                 + (rules.exponent == "value"))
        if te is not None:
            bound = np.maximum(bound, te)
        slow = bound > rules.width - 18
        if rules.exponent == "factors" and slow.any():
            slow &= ~_cut_is_exact(amag, bmag, t, te, bound - rules.width, dtype)
        w, i, j = np.nonzero(slow)
        if w.size:
            terms = av[w, i, :] * bv[w, :, j]
            exps = (_E4M3_EXPONENT[ah[w, i, :]] + _E4M3_EXPONENT[bh[w, :, j]] if rules.exponent == "factors"
                    else _leading_exponent(terms))
            if t is not None:
                terms = np.concatenate([terms, t[w, i, j][:, None]], axis=1)
                exps = np.concatenate([exps, te[w, i, j][:, None]], axis=1)
            scale = (rules.width - exps.max(axis=1, keepdims=True)).astype(np.int32)
            with np.errstate(invalid="ignore"):
                s[w, i, j] = np.ldexp(_CUT[rules.cut](np.ldexp(terms, scale)), -scale).sum(axis=1)
    s += 0.0  # a zero sum is +0 (the aligned sum is fixed point: it has no -0)
    return _round_sum(s, dtype, rules.f32 if dtype == np.float32 else rules.f16)


@functools.cache
def _pair_values() -> np.ndarray:
    """(65536, 2) f64: the values of a halfword's two e4m3 codes (low byte first). A register's
    halfword holds two consecutive k of one HMMA, so one gather fetches both."""
    u = np.arange(1 << 16)
    return np.stack([E4M3_F64[u & 0xFF], E4M3_F64[u >> 8]], axis=-1)


def _half_values(pairs: np.ndarray) -> np.ndarray:
    """(…, R, 8) halfwords of e4m3 code pairs → (…, R, 16) their values (f64)."""
    v = _pair_values().take(pairs, axis=0, mode="wrap")
    return v.reshape(*v.shape[:-2], -1)


def _both_halves(a16: np.ndarray) -> np.ndarray:
    """(…, 16) halfwords of A's rows → (2, …, 16) f64: the values of each HMMA's k (the even
    halfwords, then the odd ones), both gathered at once."""
    v = _pair_values().take(np.moveaxis(a16.reshape(*a16.shape[:-1], 8, 2), -1, 0), axis=0, mode="wrap")
    return v.reshape(*v.shape[:-2], 16)


def _top_exponent(codes: np.ndarray) -> int | None:
    """The exponent of the largest magnitude among e4m3 codes (_NO_EXPONENT if all are zero);
    None where a NaN code is among them (its row's bound is not the largest code's)."""
    top = int(np.maximum.reduce(np.bitwise_and(codes, np.uint8(0x7F)), axis=None, initial=0))
    return None if top == 0x7F else int(_E4M3_EXPONENT[top])


def _below(t: np.ndarray, exponent: int) -> bool:
    """Is every element of t (f64) finite with its leading bit below 2^(exponent + 1)?"""
    return bool(np.maximum.reduce(np.abs(t), axis=None, initial=0.0) < 2.0 ** (exponent + 1))  # NaN: False


def _rows_times(av: np.ndarray, bv: np.ndarray) -> np.ndarray:
    """(G, M, 16) @ (G, 16, Q) in f64, M cut into blocks of rows small enough (rows · 16 · Q at
    most 2^17) that OpenBLAS keeps each product to one thread: its threads cost more than they
    save on these sizes, more so on a busy machine."""
    g, m, _ = av.shape
    rows = max(1, (1 << 13) // bv.shape[-1])
    if m <= rows:
        return np.matmul(av, bv)
    whole = m - m % rows
    s = np.matmul(av[:, :whole].reshape(g, whole // rows, rows, 16), bv[:, None]).reshape(g, whole, -1)
    return s if whole == m else np.concatenate([s, np.matmul(av[:, whole:], bv)], axis=1)


def _a_values(a16: np.ndarray, sharing: tuple, prep: dict) -> np.ndarray:
    """(2, …) f64: A's values for both HMMA, laid out as `_half_products` multiplies them for
    the chunk's sharing (every warp's A in order; each group's shared A once; or the warps
    w % P == j together), gathered once and kept in `prep` for a caller that passes the same A
    again."""
    n, period, shared_a = sharing
    key = "own" if period in (1, n) else ("shared", period) if shared_a else ("periodic", period)
    av = prep.get(key)
    if av is None:
        if key == "own":
            av = _both_halves(a16)  # (2, N, M, 16)
        elif shared_a:
            av = _both_halves(a16[::period])  # (2, N/P, M, 16)
        else:
            av = _both_halves(a16.reshape(-1, period, *a16.shape[1:]).transpose(1, 0, 2, 3))  # (2, P, N/P, M, 16)
        prep[key] = av
    return av


def _half_products(av, bt16, half: int, n: int, period: int, shared_a: bool) -> np.ndarray:
    """Each of N warps' exact sum of one HMMA's products (A's values `av` of the half, as
    `_a_values` lays them out, and halfwords `half` of Bᵀ's (…, Q, 16) code pairs), one matmul
    exact in f64, in the product's own layout (`_as_product`: the warps in another order). `period`
    P: warp w's B is bt16[w % P] (P = N: every warp its own); `shared_a`: warps w and w + 1 …
    w + P − 1 (w a multiple of P) share A, and av holds each group's once. Shared tiles are
    gathered once and their warps multiplied as one product of many rows."""
    bv = _half_values(bt16[..., half::2])  # (P, Q, 16): Bᵀ
    if period == n:  # every warp its own A and B (numpy's batched matmul is faster on a contiguous B)
        return np.matmul(av, np.ascontiguousarray(np.swapaxes(bv, -1, -2)))
    if shared_a:  # one A a group, its warps' B side by side: (N/P · M, 16) @ (16, P · Q)
        bv = np.ascontiguousarray(bv.reshape(1, -1, 16).transpose(0, 2, 1))  # numpy's BLAS path wants it so
        return _rows_times(av.reshape(1, -1, 16), bv)
    # warps w % P == j: (P, N/P · M, 16) @ (P, 16, Q)
    return _rows_times(av.reshape(period, -1, 16), np.ascontiguousarray(np.swapaxes(bv, -1, -2)))


def _as_product(x: np.ndarray, sharing: tuple) -> np.ndarray:
    """A view of (N, M, Q) warps' outputs `x` in `_half_products`' layout: (N/P, M, P, Q) where
    groups of P warps share A, (P, N/P, M, Q) where warps w % P share B, (N, M, Q) where each warp
    has its own B or all one — so that its products, their sums and roundings, which are
    elementwise, are written to the warps' places by the last of them, not moved there first."""
    n, period, shared_a = sharing
    if period in (1, n):
        return x
    tiles = x.reshape(-1, period, *x.shape[1:])  # (N/P, P, M, Q)
    return tiles.transpose(0, 2, 1, 3) if shared_a else tiles.transpose(1, 0, 2, 3)


def _in_warps(s: np.ndarray, sharing: tuple, shape: tuple) -> np.ndarray:
    """`_half_products`' layout as (N, M, Q) warps' outputs (a copy where they differ)."""
    if sharing[1] in (1, sharing[0]):
        return s.reshape(shape)
    w = np.empty(shape, s.dtype)
    view = _as_product(w, sharing)
    view[...] = s.reshape(view.shape)
    return w


def _hmma_pairs(av, bt16, half: int, t, dtype, rules: HmmaRules, small: bool, sharing: tuple, out=None):
    """One HMMA where no term can reach the cut (the caller has bounded every exponent): the
    exact sum of the half's products and T (both in `_half_products`' layout), rounded to the
    accumulator's type and returned as f64 in that layout (or in `out`, (N, M, Q) warps' f32, for
    the f16 sum of a small one). `small`: every sum is below 2^15 (no f16 overflow)."""
    s = _half_products(av, bt16, half, *sharing)  # a new array: rounded in place
    if small and dtype == np.float16 and rules.f16 == "rn":
        # a multiple of 2^-18 below 2^15: below f16's normals it has at most 4 significant bits
        # and f16 holds it, so the 11-bit rounding is f16's; a zero sum comes out +0 (the
        # aligned sum is fixed point: it has no -0)
        if t is not None:
            s += t
        if out is None:
            return split_f16_in_place(s)
        view = _as_product(out, sharing)
        split_f16_in_place(s.reshape(view.shape), view)
        return out
    if t is None:
        s += 0.0  # a zero sum is +0
    else:
        s += t  # T is never -0, so neither is the sum
    return _round_sum(s, dtype, rules.f32 if dtype == np.float32 else rules.f16).astype(np.float64)


def _sharing(a16: np.ndarray, bt16: np.ndarray) -> tuple[int, bool]:
    """How a chunk's warps share their tiles (the interpreter's warps are blocks of consecutive
    warps, whose weight tiles repeat from block to block): the least period P among 1, 2, 4, 8
    (dividing N) with warp w's B that of warp w % P, else N; and whether each group of P
    consecutive warps shares one A (P > 1)."""
    n = len(bt16)
    for p in (1, 2, 4, 8) if n >= 16 else ():  # a few warps gain nothing by it
        if n % p == 0 and bt16[p].tobytes() == bt16[0].tobytes() \
                and (bt16.reshape(-1, p, *bt16.shape[1:]) == bt16[:p]).all():
            shared_a = p > 1 and a16[1].tobytes() == a16[0].tobytes() \
                and (a16.reshape(-1, p, *a16.shape[1:]) == a16[::p, None]).all()
            return p, bool(shared_a)
    return n, False


_MMA_CHUNK = 512  # warps at a time: the f64 temporaries of a chunk stay in the caches


def mma_hmma(a: np.ndarray, b: np.ndarray, c: np.ndarray, rules: HmmaRules = SM90) -> np.ndarray:
    """The e4m3 `mma` as ptxas compiles it for sm_90 (two HMMA.16816, then C added), with the
    HMMA's arithmetic as `rules` say: `mma_sync`'s model, and its variants that the tests show
    the H200 does not compute."""
    c = np.asarray(c)
    if c.dtype not in (np.float16, np.float32):
        raise TypeError(f"c must be float16 or float32, not {c.dtype}")
    a, b = np.asarray(a, np.uint8), np.asarray(b, np.uint8)
    if a.ndim == b.ndim == c.ndim == 3 and a.shape[0] == b.shape[0] == c.shape[0] <= _MMA_CHUNK:
        return _mma_warps(a, b, c, rules)  # the interpreter's warps of a small chunk
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2], c.shape[:-2])
    a = np.broadcast_to(a, batch + a.shape[-2:]).reshape(-1, *a.shape[-2:])
    b = np.broadcast_to(b, batch + b.shape[-2:]).reshape(-1, *b.shape[-2:])
    cc = np.broadcast_to(c, batch + c.shape[-2:]).reshape(-1, *c.shape[-2:])
    d = np.empty(cc.shape, c.dtype)
    for i in range(0, len(d), _MMA_CHUNK):
        part = slice(i, i + _MMA_CHUNK)
        d[part] = _mma_warps(a[part], b[part], cc[part], rules)
    return d.reshape(batch + d.shape[-2:])


def mma_hmma_many(a: np.ndarray, bs: list, cs: list, rules: HmmaRules = SM90) -> list:
    """`mma_hmma(a, b, c)` for each (b, c) of `bs` and `cs`, one A: (N, 16, 32), (N, 32, 8) and
    (N, 16, 8) (a run of the interpreter's `mma` that multiply one A register set by several B).
    Chunk by chunk of warps, A's values are gathered once for all of them, while in the caches."""
    a = np.asarray(a, np.uint8)
    bs, cs = [np.asarray(b, np.uint8) for b in bs], [np.asarray(c) for c in cs]
    for b, c in zip(bs, cs):
        if c.dtype not in (np.float16, np.float32):
            raise TypeError(f"c must be float16 or float32, not {c.dtype}")
        if not (a.ndim == b.ndim == c.ndim == 3 and a.shape[0] == b.shape[0] == c.shape[0]):
            raise ValueError("mma_hmma_many takes (N, 16, 32), (N, 32, 8) and (N, 16, 8) operands of one N")
    ds = [np.empty(c.shape, c.dtype) for c in cs]
    for i in range(0, len(a), _MMA_CHUNK):
        part = slice(i, i + _MMA_CHUNK)
        prep: dict = {}
        for b, c, d in zip(bs, cs, ds):
            d[part] = _mma_warps(a[part], b[part], c[part], rules, prep)
    return ds


def _mma_warps(a, b, c, rules: HmmaRules, prep: dict | None = None) -> np.ndarray:
    """mma_hmma on (N, M, 32), (N, 32, Q) and (N, M, Q) (a warp's M, Q: 16, 8): the two HMMA
    (`_hmma_sums`), then C added (`_add_c`). `prep`: a dict kept for these warps' A, where what
    is derived from A alone is kept for a call with the same A (mma_hmma_many)."""
    return _add_c(_hmma_sums(a, b, c.dtype.type, rules, {} if prep is None else prep), c, rules)


def _hmma_sums(a, b, dtype, rules: HmmaRules, prep: dict, out=None) -> np.ndarray:
    """The two HMMA of the mma of (N, M, 32) A and (N, 32, Q) B for a D of `dtype`: T, the f16
    values as f32 (in `out`, (N, M, Q), where given) or the f32 values as f64. Where no product
    of the batch and no T can reach 2^(width - 18) (real layers' operands: the largest codes'
    exponents bound every product's), nothing is cut, and each HMMA is one exact matmul on the
    registers' halfword pairs; otherwise `_hmma` decides output by output."""
    shape = (*a.shape[:-1], b.shape[-1])
    limit = None if rules.width is None else rules.width - 18  # an exponent past it may be cut
    ea = eb = 0
    if limit is not None:
        if "ea" not in prep:
            prep["ea"] = _top_exponent(a)
        ea = prep["ea"]
    uncut = False
    if ea is not None:  # (N, 16, 16) and Bᵀ (N, 8, 16) halfwords: the even ones hold the first HMMA's k
        a16 = prep.get("a16")
        if a16 is None:
            a16 = prep["a16"] = np.ascontiguousarray(a).view(np.uint16)
        bt16 = np.ascontiguousarray(np.swapaxes(b, -1, -2)).view(np.uint16)
        period, shared_a = _sharing(a16, bt16)
        sharing = (len(a16), period, shared_a)
        bt16 = bt16[:period]
        if limit is not None:  # every warp's B is one of the period's tiles
            eb = _top_exponent(bt16.view(np.uint8))
        uncut = limit is None or (eb is not None and ea + eb + (rules.exponent == "value") <= limit)
    if uncut:
        av = _a_values(a16, sharing, prep)
    # bounded: products below 2^(limit + 2) <= 2^10, sixteen of them and T below 2^15
    small = limit is not None and limit <= 8
    # each product is below 2^(ea + eb + 2), sixteen of them below 2^(ea + eb + 6), and T (their
    # sum rounded) at most that: where that is at most 2^limit, T is below 2^(limit + 1) unlooked
    t_bounded = limit is None or (uncut and ea + eb + 6 <= limit)
    t = None  # the running accumulator, as f64 values of its type (in _half_products' layout while `product`)
    product = False
    for h, half in enumerate((_LOW_HALF_K, ~_LOW_HALF_K)):
        if uncut and (t is None or t_bounded or _below(t, limit)):
            last = h == 1 and dtype == np.float16  # T for HADD2, in f32, in the warps' layout
            into = (np.empty(shape, np.float32) if out is None else out) if last else None
            t = _hmma_pairs(av[h], bt16, h, t, dtype, rules, small, sharing, into)
            product = t is not into
        else:
            if product:
                t, product = _in_warps(t, sharing, shape), False
            t = _hmma(a[..., half], b[..., half, :], t, dtype, rules).astype(np.float64)
    if product:
        t = _in_warps(t, sharing, shape)
    if out is not None and t is not out:
        out[...] = t
        return out
    return t


def _add_c(t, c, rules: HmmaRules) -> np.ndarray:
    """D = T + C, as ptxas's code adds C after the two HMMA: HADD2 (f16; correctly rounded, in
    f32 as `add`; an infinite C splits to NaN, so the sums that are ±inf or NaN are cast as they
    are) or FADD (f32: 53 >= 2·24 + 2); a NaN D is the canonical NaN where `rules` say so."""
    dtype = c.dtype.type
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf, and sums past the largest finite value
        if dtype == np.float16:
            s = t if t.dtype == np.float32 else t.astype(np.float32)
            s += f16_as_f32(c)
            d = f16_of_split(split_f16(s).view(np.uint32)).view(F16)
        else:
            d = (t + c.astype(np.float64)).astype(np.float32)
    nan = nan_bits(d)
    if np.count_nonzero(nan):
        if dtype == np.float16:
            at = np.flatnonzero(nan)
            d.flat[at] = s.take(at).astype(F16)
        if rules.canonical_nan:
            d = np.where(np.isnan(d), canonical_nan(d.dtype), d)
    return d


def mma_sync_sums(a: np.ndarray, bs: list, *, arch: str = "sm_90") -> list:
    """The f16 form of `mma_sync_many` up to C: for each B, T (N, 16, 8), the f16 values of the
    two HMMA's result as f32, to which `add_c_values` adds C — in any layout, as that is
    elementwise (the cpu backend adds it in the D registers' own)."""
    if arch != "sm_90":
        raise ValueError(f"no mma model for {arch!r}: the model is established for sm_90 only")
    a = np.asarray(a, np.uint8)
    bs = [np.asarray(b, np.uint8) for b in bs]
    ts = [np.empty((*a.shape[:-1], b.shape[-1]), np.float32) for b in bs]
    for i in range(0, len(a), _MMA_CHUNK):
        part = slice(i, i + _MMA_CHUNK)
        prep: dict = {}
        for b, t in zip(bs, ts):
            _hmma_sums(a[part], b[part], np.float16, SM90, prep, t[part])
    return ts


_F16_PAST = np.float32(2.0 ** 16)  # an 11-bit value from here on is f16's infinity


def add_c_values(t: np.ndarray, c: np.ndarray, *, arch: str = "sm_90") -> np.ndarray:
    """D of the f16 form from T (`mma_sync_sums`) and C, both as the f32 values of f16, as the
    f32 values of D's f16 (`_add_c`, elementwise: any layout): the 11-bit split of their f32
    sum where f16 holds it, `_add_c`'s own result where the sum is past f16's range or NaN."""
    if arch != "sm_90":
        raise ValueError(f"no mma model for {arch!r}: the model is established for sm_90 only")
    with np.errstate(invalid="ignore", over="ignore"):
        s = t + c
        v = split_f16(s)
    if not -_F16_PAST < np.minimum.reduce(v, axis=None) <= np.maximum.reduce(v, axis=None) < _F16_PAST:  # NaN: not
        odd = (v.view(np.uint32) & np.uint32(0x7FFFFFFF)) >= np.uint32(0x47800000)  # 2^16 and up, inf, NaN
        at = np.flatnonzero(odd)
        v.flat[at] = f16_as_f32(_add_c(t.take(at), f16_bits(c.take(at)).view(F16), SM90))
    return v


def mma_sync(a: np.ndarray, b: np.ndarray, c: np.ndarray, *, arch: str = "sm_90") -> np.ndarray:
    """`mma.sync.aligned.m16n8k32.row.col.{f16,f32}.e4m3.e4m3.{f16,f32}` as the hardware of `arch`
    computes it: `a` uint8 e4m3 codes (…, 16, 32), `b` (…, 32, 8), `c` float16 or float32
    (…, 16, 8), all in matrix form (fragments: rr.run.fragments); D has c's dtype.

    sm_90: the two HMMA of ptxas's code (above), each aligning its 16 products and T to the
    largest exponent, cutting them toward zero 25 bits below it and rounding the sum (toward
    zero to f32, to nearest to f16); then T + C rounded to nearest; a NaN D is the canonical NaN.
    Bit-exact on all 4 194 304 H200 outputs of the random and adversarial probes of both forms
    (docs/numerics.md)."""
    if arch != "sm_90":
        raise ValueError(f"no mma model for {arch!r}: the model is established for sm_90 only")
    return mma_hmma(a, b, c, SM90)


def mma_sync_many(a: np.ndarray, bs: list, cs: list, *, arch: str = "sm_90") -> list:
    """`mma_sync(a, b, c)` for each (b, c) of `bs` and `cs`, one A of (N, 16, 32) (`mma_hmma_many`)."""
    if arch != "sm_90":
        raise ValueError(f"no mma model for {arch!r}: the model is established for sm_90 only")
    return mma_hmma_many(a, bs, cs, SM90)


# name → model: the cpu backend's `mma` (run records name it) and probe replay's
MMA_MODELS: dict[str, MmaModel] = {"exact": mma_exact, "sm_90": mma_sync}
# What the cpu backend, probe replay and the synthetic engine's model compute with unless told
# otherwise: the H200's own arithmetic (bit-exact on the probes, docs/numerics.md), so that model,
# cpu backend and GPU agree; `exact` stays as the order-free reference.
DEFAULT_MMA = "sm_90"
