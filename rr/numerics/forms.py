"""The `mma.sync` forms beside the engine's e4m3 one, as first-class data and arithmetic: which
form an instruction is (`mma_form`: shape, input and accumulator types), and the models of the
forms that are not e4m3 — f16 and bf16 (m16n8k16), tf32 (m16n8k8), s8/u8 (m16n8k32) — in matrix
form (`form_sm90`, `form_exact`; `FORM_MODELS` names them as rr.numerics.mma.MMA_MODELS names
the e4m3 ones).

Fragments. In bytes, the four forms lay A, B, C and D out as the e4m3 m16n8k32 does (PTX ISA,
"Matrix Fragments for mma.m16n8k*"): A register r of lane (g, t) holds 4 bytes of row
8·(r & 1) + g at byte 4t of the row's (r >> 1)-th 16 bytes — two f16/bf16, one tf32 or four
s8 elements —, B's the same for column g, and C/D (f32 or s32) four registers, c0, c1 row g and
c2, c3 row g + 8 at columns 2t, 2t + 1 (an f16 C/D: two f16x2). So rr.run.fragments' byte
matrices hold them all; `a_values`/`b_values` read the bytes as the form's elements.

Models (docs/numerics.md, "The other mma forms"). NOT YET CHECKED AGAINST H200 PROBES: they are
the most defensible reading of what is known. On sm_90 ptxas compiles the e4m3 mma to two
HMMA.16816 on f16 values, so the rules the H200 showed for those HMMA (rr.numerics.mma.SM90,
bit-exact on its probes) are those of the unit that runs `mma.m16n8k16.f16.f16` natively; the one
difference is that the native form's C enters the HMMA as its accumulator (the fp8 form's C is
added after, by HADD2/FADD). So `form_sm90` computes one aligned sum per instruction: the K
products (exact: f16·f16, bf16·bf16 and tf32·tf32 fit f64's 53 bits) and C, each cut toward zero
to a multiple of 2^(emax − 25), emax the largest term exponent (a product's ea + eb, the sum of
its factors' exponent fields, a subnormal's the format's least; C's its leading bit's), summed,
rounded toward zero to f32 or to nearest even to f16; a NaN D is the canonical NaN. tf32 operands
are f32 registers of which the hardware reads the top 19 bits (the low 13 cut). Integer forms are
exact: the s32 sum wraps modulo 2^32 (`.satfinite` clamps). `form_exact` is the order-free
reference: the exact sum rounded once to nearest.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from rr.numerics.half import canonical_nan


@dataclass(frozen=True)
class MmaForm:
    """One `mma.sync.aligned.mMnNkK.row.col` form: its shape, its A/B element type (`ab`) and its
    accumulator type (`acc`, C's and D's)."""

    shape: tuple
    ab: str  # e4m3, e5m2, f16, bf16, tf32, s8, u8
    acc: str  # f16, f32, s32
    satfinite: bool = False

    @property
    def name(self) -> str:
        m, n, k = self.shape
        return f"m{m}n{n}k{k}.{self.acc}.{self.ab}"

    @property
    def fp8(self) -> bool:
        return self.ab in ("e4m3", "e5m2")

    @property
    def integer(self) -> bool:
        return self.acc == "s32"


# the forms whose fragments are the e4m3 m16n8k32's in bytes (the module docstring), by A/B type:
# the shape and the accumulators the PTX ISA allows
FORMS = {
    "e4m3": ((16, 8, 32), ("f16", "f32")),
    "e5m2": ((16, 8, 32), ("f16", "f32")),
    "f16": ((16, 8, 16), ("f16", "f32")),
    "bf16": ((16, 8, 16), ("f32",)),
    "tf32": ((16, 8, 8), ("f32",)),
    "s8": ((16, 8, 32), ("s32",)),
    "u8": ((16, 8, 32), ("s32",)),
}
_INTEGER_INPUTS = {"s8", "u8"}


def mma_form(shape: tuple | None, types: tuple, mods: tuple = ()) -> MmaForm | None:
    """The form of an `mma` with this shape, (D, A, B, C) types and modifiers (an Opcode's), or
    None where it is none that `FORMS` holds (other shapes, mixed A/B types, D ≠ C)."""
    if shape is None or len(types) != 4:
        return None
    d, a, b, c = types
    if a != b and not (a in _INTEGER_INPUTS and b in _INTEGER_INPUTS) and not ({a, b} <= {"e4m3", "e5m2"}):
        return None
    known = FORMS.get(a)
    if known is None or known[0] != tuple(shape) or d != c or d not in known[1]:
        return None
    return MmaForm(tuple(shape), a, d, "satfinite" in mods)


# -- element values --------------------------------------------------------------------------------

_VIEW = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "tf32": np.uint32, "s8": np.int8, "u8": np.uint8}
_LEAST_EXPONENT = {"f16": -14, "bf16": -126, "tf32": -126}


def _values(raw: np.ndarray, ab: str) -> np.ndarray:
    """Bytes (…, n·size) of elements → their values (…, n), f64 (floats) or int64 (integers)."""
    x = np.ascontiguousarray(raw).view(_VIEW[ab])
    if ab == "tf32":  # the hardware reads the top 19 bits of each f32 register
        return (x & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
    return x.astype(np.int64 if ab in _INTEGER_INPUTS else np.float64)


def a_values(a: np.ndarray, ab: str) -> np.ndarray:
    """rr.run.fragments.a_matrix's (…, 16, 32) bytes → A (…, 16, K) element values."""
    return _values(a, ab)


def b_values(b: np.ndarray, ab: str) -> np.ndarray:
    """rr.run.fragments.b_matrix's (…, 32, 8) bytes (k-major, a column's bytes along k) → B
    (…, K, 8) element values."""
    return np.swapaxes(_values(np.swapaxes(b, -1, -2), ab), -1, -2)


def _exponent_fields(v: np.ndarray, ab: str) -> np.ndarray:
    """Each factor's exponent as its format's exponent field says (a subnormal's: the least)."""
    e = np.frexp(v)[1].astype(np.int32) - 1
    return np.maximum(e, _LEAST_EXPONENT[ab])


_NONE = -100000  # the exponent of a term that is zero: it never sets the alignment


def _leading(x: np.ndarray) -> np.ndarray:
    e = np.frexp(x)[1].astype(np.int32) - 1
    return np.where((x == 0) | ~np.isfinite(x), _NONE, e)


def _round(s: np.ndarray, acc: str, mode: str) -> np.ndarray:
    """An exact f64 sum to the accumulator type, to nearest even or toward zero."""
    dtype = np.float16 if acc == "f16" else np.float32
    with np.errstate(over="ignore", invalid="ignore"):
        r = s.astype(dtype)
        if mode == "rz":
            r = np.where(np.isfinite(s) & (np.abs(r.astype(np.float64)) > np.abs(s)),
                         np.nextafter(r, dtype(0)), r).astype(dtype)
    return r


def _integer(av: np.ndarray, bv: np.ndarray, c: np.ndarray, form: MmaForm) -> np.ndarray:
    s = np.matmul(av, bv) + np.asarray(c).view(np.int32).astype(np.int64)
    if form.satfinite:
        return np.clip(s, -(1 << 31), (1 << 31) - 1).astype(np.int32)
    return ((s + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int32)


WIDTH = 25  # rr.numerics.mma.SM90's: terms cut to a multiple of 2^(emax − 25)


def form_sm90(form: MmaForm, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """D of one mma of `form` (not fp8) as the module docstring's model of sm_90 computes it: `a`
    (…, 16, 32) and `b` (…, 32, 8) bytes in rr.run.fragments' matrix form, `c` (…, 16, 8) of the
    accumulator's type (f32, f16, or s32 viewed as any 32-bit type)."""
    av, bv = a_values(a, form.ab), b_values(b, form.ab)
    if form.integer:
        return _integer(av, bv, c, form)
    t = np.asarray(c).astype(np.float64)
    terms = av[..., :, None, :] * np.swapaxes(bv, -1, -2)[..., None, :, :]  # (…, 16, 8, K)
    ea, eb = _exponent_fields(av, form.ab), _exponent_fields(bv, form.ab)
    exps = np.where(terms == 0, _NONE, ea[..., :, None, :] + np.swapaxes(eb, -1, -2)[..., None, :, :])
    terms = np.concatenate([terms, t[..., None]], axis=-1)
    exps = np.concatenate([exps, _leading(t)[..., None]], axis=-1)
    with np.errstate(invalid="ignore", over="ignore"):
        exact = terms.sum(axis=-1)  # where a term is inf or NaN the sum is the IEEE one
        scale = (WIDTH - exps.max(axis=-1, keepdims=True)).astype(np.int32)
        cut = np.ldexp(np.trunc(np.ldexp(terms, scale)), -scale).sum(axis=-1)
    s = np.where(np.isfinite(exact), cut, exact) + 0.0  # a zero sum is +0
    d = _round(s, form.acc, "rz" if form.acc == "f32" else "rn")
    return np.where(np.isnan(d), canonical_nan(d.dtype), d)


def form_exact(form: MmaForm, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """The order-free reference: the products and C summed in f64 and rounded once to nearest."""
    av, bv = a_values(a, form.ab), b_values(b, form.ab)
    if form.integer:
        return _integer(av, bv, c, form)
    with np.errstate(invalid="ignore", over="ignore"):
        s = np.matmul(av, bv) + np.asarray(c).astype(np.float64)
    return _round(s, form.acc, "rn")


FormModel = Callable[[MmaForm, np.ndarray, np.ndarray, np.ndarray], np.ndarray]
# by the names of rr.numerics.mma.MMA_MODELS: what the cpu backend's `--mma NAME` computes these forms with
FORM_MODELS: dict[str, FormModel] = {"exact": form_exact, "sm_90": form_sm90}
