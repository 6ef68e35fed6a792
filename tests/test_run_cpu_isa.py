"""The cpu backend runs what nvcc -O3 emits for ordinary CUDA code: integer and bit instructions
(bfe/bfi at every position and length, prmt in every mode, lop3 with every immLut, funnel
shifts, bit counts, hi/wide/24-bit multiplies, dot products, packed halves), float edge cases
(testp, copysign, min/max with NaN and signed zeros), warp votes, matches and reductions,
atomics on global and shared memory, constant tables and read-only loads, and four ordinary
kernels. The truth is the PTX ISA's definition of each instruction, written here as small Python
functions on integers; on a GPU the same kernels must give the cpu backend's bytes."""

from __future__ import annotations

import itertools
import math
import re
import struct
import subprocess
import sys
from fractions import Fraction
from functools import reduce
from operator import and_, or_, xor
from pathlib import Path

import numpy as np
import pytest

from rr.run.cpu import prepare, run_cpu
from rr.run.launch import Buffer, Field, Launch, write_launch

M32, M64 = (1 << 32) - 1, (1 << 64) - 1


def signed(x: int, bits: int) -> int:
    x &= (1 << bits) - 1
    return x - (1 << bits) if x >> (bits - 1) else x


def launch(directory: Path, module: Path, entry: str, buffers: dict, grid=(1, 1, 1), block=(32, 1, 1),
           scalars: tuple = ()) -> None:
    """A list-layout launch: one pointer parameter per buffer, in order, then scalars."""
    fields = [Field("buffer", buffer=name) for name in buffers]
    fields += [Field("scalar", 0, dtype, (value,)) for dtype, value in scalars]
    described = {name: Buffer(name, f"{name}.npy", "inout") for name in buffers}
    write_launch(directory, Launch(entry=entry, module="kernel.ptx", grid=grid, block=block, layout="list",
                                   fields=tuple(fields), buffers=described), buffers, module)


def run(tmp_path: Path, module: Path, entry: str, buffers: dict, **kw) -> dict:
    launch(tmp_path / entry, module, entry, buffers, **kw)
    record, out = run_cpu(tmp_path / entry)
    assert record["status"] == "ok"
    return out


def assert_columns(got: np.ndarray, want: np.ndarray, names: list, inputs: np.ndarray) -> None:
    """Column by column, naming the first instruction and input row that differ."""
    assert got.shape == want.shape
    for j, name in enumerate(names):
        bad = np.flatnonzero(got[:, j] != want[:, j])
        if bad.size:
            i = bad[0]
            pytest.fail(f"{name}: {bad.size} of {len(got)} rows differ; row {i} inputs "
                        f"{[hex(int(x)) for x in inputs[i]]}: got {int(got[i, j]):#x}, want {int(want[i, j]):#x}")


def split_undefined(expected: list) -> tuple:
    """Expected rows holding None where the ISA defines nothing but NaN-ness (or nothing at all):
    (where those are, the values with zeros there)."""
    loose = np.array([[w is None for w in e] for e in expected])
    return loose, np.array([[0 if w is None else w for w in e] for e in expected], np.uint64)


# -- inputs -------------------------------------------------------------------------------------

POOL = [0, 1, 2, 3, 4, 7, 8, 12, 15, 16, 17, 23, 24, 31, 32, 33, 40, 47, 48, 63, 64, 65, 127, 128, 200, 255,
        256, 257, 0x7FFF, 0x8000, 0xFFFF, 0x10000, 0x7FFFFF, 0x800000, 0xFFFFFF, 0x1000000, 0x7FFFFFFF,
        0x80000000, 0x80000001, 0xFFFFFFFE, 0xFFFFFFFF, 0xDEADBEEF, 0x01234567, 0x89ABCDEF, 0x00FF00FF,
        0x80808080, 0x7F7F7F7F, 0xFFFF0001]


def int_rows(n: int, seed: int, pairs: bool = True) -> np.ndarray:
    """(n, 4) words: every pair of small positions/lengths in (b, c) first (with `pairs`), then
    words drawn from edge values and at random."""
    rng = np.random.default_rng(seed)
    small = POOL[:30] + [0xFFFFFFFF]
    rows = [[POOL[(i * 7) % len(POOL)], b, c, POOL[(i * 3 + 1) % len(POOL)]]
            for i, (b, c) in enumerate(itertools.product(small, repeat=2)) if pairs]
    while len(rows) < n:
        rows.append([int(rng.choice(POOL)) if rng.random() < 0.5 else int(rng.integers(0, 1 << 32))
                     for _ in range(4)])
    return np.array(rows[:n], np.uint64).astype(np.uint32)


# -- the ISA's definitions ----------------------------------------------------------------------

def bfe(a: int, pos: int, length: int, bits: int, is_signed: bool) -> int:
    msb = bits - 1
    pos, length = pos & 0xFF, length & 0xFF
    sbit = 0 if (not is_signed or length == 0) else (a >> min(pos + length - 1, msb)) & 1
    d = 0
    for i in range(msb + 1):
        bit = (a >> (pos + i)) & 1 if (i < length and pos + i <= msb) else sbit
        d |= bit << i
    return d


def bfe_h200(a: int, pos: int, length: int, bits: int, is_signed: bool) -> int:
    """bfe.{u64,s64} as the H200 runs it: the ISA's definition, but with the position and length
    read as whole 32-bit values, not their low 8 bits (measured; 32-bit bfe masks as the ISA says)."""
    return bfe(a, min(pos, 255), min(length, 255), bits, is_signed) if bits == 64 else bfe(a, pos, length, bits, is_signed)


def bfi(a: int, b: int, pos: int, length: int, bits: int) -> int:
    if bits == 64:  # the H200 (see bfe_h200): whole 32-bit position and length; past 255 changes nothing
        pos, length = min(pos, 255), min(length, 255)
    pos, length = pos & 0xFF, length & 0xFF
    f = b
    i = 0
    while i < length and pos + i <= bits - 1:
        f = (f & ~(1 << (pos + i))) | (((a >> i) & 1) << (pos + i))
        i += 1
    return f & ((1 << bits) - 1)


# prmt's table as the ISA prints it: per mode, for c[1:0] = 0..3, the sources of d.b3 d.b2 d.b1 d.b0
PRMT_TABLE = {
    "f4e": [(3, 2, 1, 0), (4, 3, 2, 1), (5, 4, 3, 2), (6, 5, 4, 3)],
    "b4e": [(5, 6, 7, 0), (6, 7, 0, 1), (7, 0, 1, 2), (0, 1, 2, 3)],
    "rc8": [(0, 0, 0, 0), (1, 1, 1, 1), (2, 2, 2, 2), (3, 3, 3, 3)],
    "ecl": [(3, 2, 1, 0), (3, 2, 1, 1), (3, 2, 2, 2), (3, 3, 3, 3)],
    "ecr": [(0, 0, 0, 0), (1, 1, 1, 0), (2, 2, 1, 0), (3, 2, 1, 0)],
    "rc16": [(1, 0, 1, 0), (3, 2, 3, 2), (1, 0, 1, 0), (3, 2, 3, 2)],
}


def prmt(a: int, b: int, c: int, mode: str | None = None) -> int:
    tmp = (b << 32) | a
    out = 0
    for i in range(4):  # d.b0 .. d.b3
        if mode is None:
            sel = (c >> (4 * i)) & 0xF
            byte = (tmp >> (8 * (sel & 7))) & 0xFF
            if sel & 8:
                byte = 0xFF if byte & 0x80 else 0
        else:
            byte = (tmp >> (8 * PRMT_TABLE[mode][c & 3][3 - i])) & 0xFF
        out |= byte << (8 * i)
    return out


def lop3_words(a, b, c, lut: int):
    """immLut's truth table over arrays: the OR of the minterms its set bits name (bit
    (a << 2) | (b << 1) | c, from ta = 0xF0, tb = 0xCC, tc = 0xAA)."""
    out = np.zeros_like(a)
    for k in range(8):
        if lut >> k & 1:
            out |= (a if k & 4 else ~a) & (b if k & 2 else ~b) & (c if k & 1 else ~c)
    return out


def shf(a: int, b: int, c: int, left: bool, clamp: bool) -> int:
    n = min(c, 32) if clamp else c & 0x1F
    return ((b << n) | (a >> (32 - n))) & M32 if left else ((b << (32 - n)) | (a >> n)) & M32


def shift(a: int, n: int, bits: int, kind: str) -> int:
    n = min(n, bits)  # counts past the width clamp to it
    if kind == "shl":
        return (a << n) & ((1 << bits) - 1)
    if kind == "shr.u":
        return a >> n
    return (signed(a, bits) >> n) & ((1 << bits) - 1)


def brev(a: int, bits: int) -> int:
    return int(f"{a:0{bits}b}"[::-1], 2)


def clz(a: int, bits: int) -> int:
    return bits - a.bit_length()


def bfind(a: int, bits: int, is_signed: bool, shiftamt: bool) -> int:
    if is_signed and a >> (bits - 1):
        a = ~a & ((1 << bits) - 1)
    if a == 0:
        return M32
    d = a.bit_length() - 1
    return bits - 1 - d if shiftamt else d


def ffs(a: int) -> int:
    return (a & -a).bit_length()


def int24(v: int, is_signed: bool) -> int:
    return signed(v, 24) if is_signed else v & 0xFFFFFF


def clamp32(x: int) -> int:
    return max(-(1 << 31), min((1 << 31) - 1, x)) & M32


def lanes(v: int, size: int, is_signed: bool) -> list:
    n = 32 // size
    return [signed(v >> (size * i), size) if is_signed else (v >> (size * i)) & ((1 << size) - 1) for i in range(n)]


def dp(a: int, b: int, c: int, asig: bool, bsig: bool, two: bool, hi: bool) -> int:
    va = lanes(a, 16 if two else 8, asig)
    vb = lanes(b, 8, bsig)
    if two:
        vb = vb[2:] if hi else vb[:2]
    cv = c if not (asig or bsig) else signed(c, 32)
    return (cv + sum(x * y for x, y in zip(va, vb))) & M32


def pack(values: list, size: int):
    """Elements packed low first; None (a value only the NaN-ness of which is defined) if any is."""
    if any(v is None for v in values):
        return None
    return sum((v & ((1 << size) - 1)) << (size * i) for i, v in enumerate(values))


def f32(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits & M32))[0]


def f32_bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


# -- integer and bit instructions ---------------------------------------------------------------

def expect_bitfield(r) -> list:
    a, b, c, d = r
    C, A = c | d << 32, a | b << 32
    return [bfe(a, b, c, 32, False), bfe(a, b, c, 32, True), *split64(bfe_h200(C, b, a, 64, False)),
            *split64(bfe_h200(C, b, a, 64, True)), bfi(d, a, b, c, 32), *split64(bfi(C, A, b, c, 64)),
            bfe(a, 4, 12, 32, True), bfi(d, a, 28, 8, 32), (a >> 8) & 0xFF, signed(a << 4, 32) >> 20 & M32,
            (a & ~0xFF0 & M32) | ((d << 4) & 0xFF0), (a & 0xFFFF) | (d << 16) & M32, 0]


def split64(v: int) -> tuple:
    return v & M32, (v >> 32) & M32


def expect_permute(r) -> list:
    a, b, c, _ = r
    return [prmt(a, b, c), *[prmt(a, b, c, mode) for mode in ("f4e", "b4e", "rc8", "ecl", "ecr", "rc16")],
            prmt(a, b, c & 0x7777), prmt(a, 0, (0x3210 ^ 0x8880) & 0x7777),  # __byte_perm: 3-bit selectors
            ((a << 24) | ((a >> 8) & 0xFF00) | (b >> 24)) & M32]


def expect_shifts(r) -> list:
    a, b, c, d = r
    A = a | b << 32
    return [shf(a, b, c, True, False), shf(a, b, c, False, False), shf(a, b, c, True, True),
            shf(a, b, c, False, True), shf(a, b, c, True, False), shf(a, b, c, False, False),
            shf(a, b, c, True, True), shf(a, b, c, False, True), shift(a, c, 32, "shl"), shift(a, c, 32, "shr.u"),
            shift(a, c, 32, "shr.s"), *split64(shift(A, c, 64, "shr.s")), *split64(shift(A, c, 64, "shl")),
            ((a << 7) | (a >> 25)) & M32]


def expect_bitcount(r) -> list:
    a, b, c, d = r
    A = a | b << 32
    return [brev(a, 32), *split64(brev(A, 64)), clz(a, 32), clz(A, 64), bin(a).count("1"), bin(A).count("1"),
            bfind(a, 32, False, False), bfind(a, 32, True, False), bfind(A, 64, False, False),
            bfind(A, 64, True, False), bfind(a, 32, False, True), bfind(a, 32, True, True),
            bfind(A, 64, False, True), bfind(A, 64, True, True), ffs(a), ffs(A), clz(A, 64),
            bin(A).count("1") + bin(b).count("1"), brev(a, 32) ^ ((brev(A, 64) >> 13) & M32)]


def expect_multiply(r) -> list:
    a, b, c, d = r
    A, C = a | b << 32, c | d << 32
    sa, sb, sc = signed(a, 32), signed(b, 32), signed(c, 32)
    sA, sC = signed(A, 64), signed(C, 64)
    t24 = {s: int24(a, s) * int24(b, s) for s in (False, True)}
    return [(a * b) >> 32, (sa * sb >> 32) & M32, *split64(a * b), *split64((sa * sb) & M64),
            *split64((A * C) >> 64), *split64((sA * sC >> 64) & M64), *split64((A * C) & M64),
            ((a * b >> 32) + c) & M32, ((sa * sb >> 32) + c) & M32, clamp32((sa * sb >> 32) + sc),
            (sa * sb + sc) & M32, *split64((a * b + C) & M64), *split64((sa * sb + sC) & M64),
            *split64(((A * C >> 64) + A) & M64),
            t24[False] & M32, t24[True] & M32, (t24[False] >> 16) & M32, (t24[True] >> 16) & M32,
            (t24[False] + c) & M32, (signed(t24[True] >> 16, 32) + sc) & M32, clamp32(signed(t24[True] >> 16, 32) + sc),
            (c + abs(a - b)) & M32, (c + abs(sa - sb)) & M32,
            (a * b) >> 32, (sa * sb >> 32) & M32, *split64((A * C) >> 64), *split64((sA * sC >> 64) & M64),
            (t24[True] + int24(a, False) * int24(c, False)) & M32,
            ((abs(sa - sb) + c) & M32) ^ ((abs(a - c) + b) & M32),
            ((sa * sc >> 32) + ((a * c) >> 32)) & M32]


def expect_dots(r) -> list:
    a, b, c, _ = r
    mixes = [(False, False), (True, True), (False, True), (True, False)]
    return [dp(a, b, c, x, y, False, False) for x, y in mixes] + \
        [dp(a, b, c, x, y, True, False) for x, y in mixes] + [dp(a, b, c, x, y, True, True) for x, y in mixes] + \
        [dp(a, b, c, True, True, False, False), dp(a, b, c, False, False, True, False), dp(a, b, c, True, True, True, True)]


def expect_minmax(r) -> list:
    a, b, c, d = r
    A, C = a | b << 32, c | d << 32
    sa, sb = signed(a, 32), signed(b, 32)
    h = [lanes(a, 16, False), lanes(b, 16, False)]
    hs = [lanes(a, 16, True), lanes(b, 16, True)]
    fc = f32(c)
    fc_ftz = 0.0 if (fc != 0 and abs(fc) < 2.0 ** -126) else fc
    return [min(sa, sb) & M32, max(a, b), max(min(sa, sb), 0), max(max(sa, sb), 0),
            pack([min(x, y) for x, y in zip(*h)], 16), pack([max(x, y) for x, y in zip(*hs)], 16),
            pack([max(min(x, y), 0) for x, y in zip(*hs)], 16), pack([max(max(x, y), 0) for x, y in zip(*hs)], 16),
            min(signed(a, 16), signed(b, 16)) & 0xFFFF, max(a & 0xFFFF, b & 0xFFFF),
            *split64(min(signed(A, 64), signed(C, 64)) & M64), *split64(max(A, C)),
            abs(sa) & M32, abs(signed(a, 16)) & 0xFFFF, *split64(abs(signed(A, 64)) & M64), -sa & M32,
            *split64(-signed(A, 64) & M64), ~a & M32, int(a == 0), int(a & 0xFFFF == 0),
            clamp32(sa + sb), clamp32(sa - sb), a if signed(c, 32) >= 0 else b,
            a if (fc >= 0) else b, a if (fc_ftz >= 0) else b, c if sa < sb else d, (abs(sa) + abs(sb)) & M32,
            pack([max(x, y) for x, y in zip(*hs)], 16), pack([min(x, y) for x, y in zip(*h)], 16),
            pack([abs(x - y) for x, y in zip(lanes(a, 8, False), lanes(b, 8, False))], 8),
            pack([x + y for x, y in zip(*h)], 16),
            pack([int(x > y) for x, y in zip(lanes(a, 8, False), lanes(b, 8, False))], 8)]


def expect_divide(r) -> list:
    """Truncating division; a zero divisor's result is machine-specific (None: not compared here)."""
    a, b, c, d = r
    A, C = a | b << 32, c | d << 32

    def div(x, y, bits, is_signed, rem):
        if y == 0:  # machine-specific: only the GPU test checks these
            return (None,) * (bits // 32)
        if is_signed:
            x, y = signed(x, bits), signed(y, bits)
        q = abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)
        v = (x - q * y if rem else q) & ((1 << bits) - 1)
        return (v,) if bits == 32 else split64(v)
    return [*div(a, b, 32, False, False), *div(a, b, 32, False, True), *div(a, b, 32, True, False),
            *div(a, b, 32, True, True), *div(A, C, 64, False, False), *div(A, C, 64, False, True),
            *div(A, C, 64, True, False), *div(A, C, 64, True, True)]


INT_KERNELS = {
    "bitfield": (16, expect_bitfield), "permute": (10, expect_permute), "shifts": (16, expect_shifts),
    "bitcount": (20, expect_bitcount), "multiply": (40, expect_multiply), "dots": (15, expect_dots),
    "minmax": (36, expect_minmax), "divide": (12, expect_divide),
}


@pytest.mark.parametrize("entry", list(INT_KERNELS))
def test_integer_and_bit_instructions_follow_the_isa(tmp_path, nvcc_ptx, entry):
    width, expect = INT_KERNELS[entry]
    rows = int_rows(1024, seed=len(entry))
    out = run(tmp_path, nvcc_ptx("int_ops", "-O3"), entry,
              {"in": rows.reshape(-1), "out": np.zeros(len(rows) * width, np.uint32)}, grid=(8, 1, 1), block=(128, 1, 1))
    undefined, want = split_undefined([expect([int(x) for x in r]) for r in rows])
    want = want.astype(np.uint32)
    names = [f"{entry}[{j}]" for j in range(width)]
    assert_columns(np.where(undefined, 0, out["out"].reshape(len(rows), width)), want, names, rows)


def test_lop3_computes_every_immlut_from_its_truth_table(tmp_path, nvcc_ptx):
    rows = int_rows(256, seed=3, pairs=False)
    out = run(tmp_path, nvcc_ptx("int_ops", "-O3"), "logic3",
              {"in": rows.reshape(-1), "out": np.zeros(256 * 259, np.uint32)}, grid=(2, 1, 1), block=(128, 1, 1))
    got = out["out"].reshape(256, 259)
    a, b, c = rows[:, 0], rows[:, 1], rows[:, 2]
    want = np.stack([lop3_words(a, b, c, lut) for lut in range(256)]
                    + [(a & b) ^ (~a & c), (a | ~b) ^ c, ~(a ^ b ^ c)], 1)
    assert_columns(got, want, [f"lop3 immLut {k:#04x}" for k in range(256)] + ["select", "or-not-xor", "xnor3"], rows)


# -- float edge cases -----------------------------------------------------------------------------

F32_EDGE = [0, 0x80000000, 0x3F800000, 0xBF800000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001, 0x7F800001,
            1, 0x80000001, 0x007FFFFF, 0x00800000, 0x80800000, 0x7F7FFFFF, 0x3FC00000, 0xC0200000, 0x40490FDB]
F16_EDGE = [0, 0x8000, 0x3C00, 0xBC00, 0x7C00, 0xFC00, 0x7E00, 0xFE01, 0x7C01, 1, 0x8001, 0x03FF, 0x0400,
            0x7BFF, 0x3E00, 0xC100]
F64_EDGE = [0, 1 << 63, 0x3FF0000000000000, 0xBFF0000000000000, 0x7FF0000000000000, 0xFFF0000000000000,
            0x7FF8000000000000, 0xFFF8000000000001, 1, 0x800FFFFFFFFFFFFF, 0x0010000000000000, 0x7FEFFFFFFFFFFFFF,
            0x3FF8000000000000, 0xC004000000000000]


def float_rows(n: int, seed: int) -> np.ndarray:
    """(n, 6) words: f32 a, b (or two f16 halves each), f64 A, B; every pair of edge values."""
    rng = np.random.default_rng(seed)
    rows = []
    for i, (x, y) in enumerate(itertools.product(F32_EDGE, repeat=2)):
        p, q = F64_EDGE[i % len(F64_EDGE)], F64_EDGE[(i // len(F64_EDGE)) % len(F64_EDGE)]
        rows.append([x, y, p & M32, p >> 32, q & M32, q >> 32])
    for i, (x, y) in enumerate(itertools.product(F16_EDGE, repeat=2)):
        rows.append([x | F16_EDGE[(i + 5) % len(F16_EDGE)] << 16, y | F16_EDGE[(i * 3) % len(F16_EDGE)] << 16,
                     *[int(v) for v in rng.integers(0, 1 << 32, 4)]])
    while len(rows) < n:
        r = [int(v) for v in rng.integers(0, 1 << 32, 6)]
        r[0] = f32_bits(float(np.float32(rng.normal() * 10.0 ** rng.integers(-3, 4))))
        r[1] = f32_bits(float(np.float32(rng.normal()))) if rng.random() < 0.5 else r[0] ^ 0x80000000
        rows.append(r)
    return np.array(rows[:n], np.uint64).astype(np.uint32)


FORMATS = {"f16": (16, 5, 10), "bf16": (16, 8, 7), "f32": (32, 8, 23), "f64": (64, 11, 52)}


def decode_float(bits: int, fmt: str):
    """IEEE bits -> ('nan',), or (sign, Fraction or 'inf')."""
    width, ebits, mbits = FORMATS[fmt]
    sign = bits >> (width - 1) & 1
    e = bits >> mbits & ((1 << ebits) - 1)
    mant = bits & ((1 << mbits) - 1)
    bias = (1 << (ebits - 1)) - 1
    if e == (1 << ebits) - 1:
        return ("nan",) if mant else (sign, "inf")
    value = Fraction(mant, 1 << mbits) * Fraction(2) ** (1 - bias) if e == 0 else \
        (1 + Fraction(mant, 1 << mbits)) * Fraction(2) ** (e - bias)
    return sign, value


def is_nan(bits: int, fmt: str) -> bool:
    return decode_float(bits, fmt) == ("nan",)


def encode_float(sign: int, value, fmt: str) -> int:
    """An exactly representable value (or 'inf') -> IEEE bits."""
    width, ebits, mbits = FORMATS[fmt]
    bias = (1 << (ebits - 1)) - 1
    if value == "inf":
        e, mant = (1 << ebits) - 1, 0
    elif value == 0:
        e, mant = 0, 0
    else:
        exp = math.floor(math.log2(value.numerator)) - math.floor(math.log2(value.denominator))
        while Fraction(2) ** exp > value:
            exp -= 1
        while Fraction(2) ** (exp + 1) <= value:
            exp += 1
        if exp < 1 - bias:
            e, mant = 0, value / Fraction(2) ** (1 - bias) * (1 << mbits)
        else:
            e, mant = exp + bias, (value / Fraction(2) ** exp - 1) * (1 << mbits)
        assert mant.denominator == 1, "not representable"
        mant = int(mant)
    return sign << (width - 1) | e << mbits | mant


def round_to(sign: int, value, fmt: str, mode: str = "rn"):
    """(sign, exact value) rounded to the format: (sign, representable value or 'inf')."""
    width, ebits, mbits = FORMATS[fmt]
    if value == "inf" or value == 0:
        return sign, value
    bias = (1 << (ebits - 1)) - 1
    exp = 0
    while Fraction(2) ** exp > value:
        exp -= 1
    while Fraction(2) ** (exp + 1) <= value:
        exp += 1
    ulp = Fraction(2) ** (max(exp, 1 - bias) - mbits)
    q = value / ulp
    lo = math.floor(q)
    up = {"rn": q - lo > Fraction(1, 2) or (q - lo == Fraction(1, 2) and lo % 2 == 1), "rz": False,
          "rm": sign == 1 and q != lo, "rp": sign == 0 and q != lo}[mode]
    r = (lo + up) * ulp
    biggest = (2 - Fraction(2) ** -mbits) * Fraction(2) ** bias
    if r > biggest:
        return sign, "inf" if mode == "rn" or (mode == "rm" and sign) or (mode == "rp" and not sign) else biggest
    return sign, r


def float_min_max(x: int, y: int, fmt: str, minimum: bool, nan: bool = False, xorsign: bool = False) -> int:
    """PTX min/max: NaN operands give the other operand (both, or either with .NaN: the canonical
    NaN), -0 < +0; .xorsign.abs: the magnitudes compared, the sign the XOR of the inputs'."""
    width = FORMATS[fmt][0]
    canonical = (1 << (width - 1)) - 1
    sign_bit = 1 << (width - 1)
    s = (x ^ y) & sign_bit
    if xorsign:
        x, y = x & ~sign_bit, y & ~sign_bit
    nx_, ny = is_nan(x, fmt), is_nan(y, fmt)
    if nx_ and ny and fmt == "f64" and not nan:
        return x  # a NaN, the ISA says; the H200 returns the first operand as it is
    if (nx_ and ny) or (nan and (nx_ or ny)):
        return canonical
    if nx_ or ny:
        r = y if nx_ else x
    else:
        def key(v):
            sg, val = decode_float(v, fmt)
            mag = Fraction(10) ** 400 if val == "inf" else val
            return (-mag if sg else mag, -1 if sg else 1)  # -0 sorts below +0
        r = (x if key(x) <= key(y) else y) if minimum else (x if key(x) >= key(y) else y)
    return (r & ~sign_bit) | s if xorsign else r


def float_class(bits: int, fmt: str) -> dict:
    d = decode_float(bits, fmt)
    tiny = Fraction(2) ** (2 - (1 << (FORMATS[fmt][1] - 1)))
    nan, inf = d == ("nan",), len(d) == 2 and d[1] == "inf"
    sub = not nan and not inf and 0 < d[1] < tiny
    return {"finite": not nan and not inf, "infinite": inf, "number": not nan, "notanumber": nan,
            "normal": not nan and not inf and not sub, "subnormal": sub}


def exact_fma(a: int, b: int, c: int, fmt: str):
    """a*b + c exactly: ('nan',) or (sign, value or 'inf')."""
    x, y, z = (decode_float(v, fmt) for v in (a, b, c))
    if ("nan",) in (x, y, z):
        return ("nan",)
    ps = x[0] ^ y[0]
    if "inf" in (x[1], y[1]):
        if 0 in (x[1], y[1]):
            return ("nan",)
        if z[1] == "inf" and z[0] != ps:
            return ("nan",)
        return ps, "inf"
    if z[1] == "inf":
        return z
    p = x[1] * y[1] * (-1 if ps else 1)
    s = p + z[1] * (-1 if z[0] else 1)
    if s == 0:  # zeros of one sign add to that sign; an exact cancellation is +0 (round to nearest)
        return (ps & z[0] if p == 0 and z[1] == 0 else 0), Fraction(0)
    return (1 if s < 0 else 0), abs(s)


def fma_relu(a: int, b: int, c: int, fmt: str) -> int:
    width = FORMATS[fmt][0]
    e = exact_fma(a, b, c, fmt)
    if e == ("nan",):
        return (1 << (width - 1)) - 1  # .relu: NaN -> the canonical NaN
    sign, value = round_to(*e, fmt)
    if sign:  # negative, and -0 too (the H200 gives +0; the ISA says only "if negative")
        return 0
    return encode_float(sign, value, fmt)


def expect_float_ops(r):
    """The columns of float_ops; None where the ISA leaves a NaN's bits open (only NaN-ness is checked)."""
    a, b = r[0], r[1]
    A, B = r[2] | r[3] << 32, r[4] | r[5] << 32
    ta, tA = float_class(a, "f32"), float_class(A, "f64")
    out = [int(ta[k]) | 2 * int(tA[k]) for k in ("finite", "infinite", "number", "notanumber", "normal", "subnormal")]
    out += [(b & 0x7FFFFFFF) | (a & 0x80000000), *split64((B & ~(1 << 63)) | (A & (1 << 63)))]
    out += [float_min_max(a, b, "f32", True), float_min_max(a, b, "f32", False),
            float_min_max(a, b, "f32", True, nan=True), float_min_max(a, b, "f32", False, nan=True),
            float_min_max(a, b, "f32", True, xorsign=True), float_min_max(a, b, "f32", False, xorsign=True),
            float_min_max(*[v & 0x80000000 if 0 < v & 0x7FFFFFFF < 0x800000 else v for v in (a, b)], "f32", True)]
    out += [*split64(float_min_max(A, B, "f64", True)), *split64(float_min_max(A, B, "f64", False))]

    def halves(fn, fmt="f16"):
        return pack([fn(a >> s & 0xFFFF, b >> s & 0xFFFF, fmt) for s in (0, 16)], 16)
    out += [halves(lambda x, y, f: float_min_max(x, y, f, True)), halves(lambda x, y, f: float_min_max(x, y, f, False)),
            halves(lambda x, y, f: float_min_max(x, y, f, True, nan=True)),
            halves(lambda x, y, f: float_min_max(x, y, f, False, nan=True)),
            halves(lambda x, y, f: float_min_max(x, y, f, True), "bf16"),
            halves(lambda x, y, f: float_min_max(x, y, f, False), "bf16"),
            float_min_max(a & 0xFFFF, b & 0xFFFF, "f16", True),
            float_min_max(a & 0xFFFF, b & 0xFFFF, "f16", False, xorsign=True)]
    c16 = a ^ 0x80008000
    out += [pack([fma_relu(a >> s & 0xFFFF, b >> s & 0xFFFF, c16 >> s & 0xFFFF, "f16") for s in (0, 16)], 16),
            pack([fma_relu(a >> s & 0xFFFF, b >> s & 0xFFFF, b >> s & 0xFFFF, "bf16") for s in (0, 16)], 16)]
    out += [float_min_max(a, b, "f32", True), float_min_max(a, b, "f32", False), (a & 0x7FFFFFFF) | (b & 0x80000000)]
    fa, fb = f32(a), f32(b)
    out += [int(math.isnan(fa)) | int(math.isinf(fb)) << 1 | int(math.isfinite(fa)) << 2 | (b >> 31) << 3]
    out += [halves(lambda x, y, f: float_min_max(x, y, f, False)),
            halves(lambda x, y, f: float_min_max(x, y, f, True, nan=True)),
            pack([fma_relu(a >> s & 0xFFFF, b >> s & 0xFFFF, b >> s & 0xFFFF, "f16") for s in (0, 16)], 16),
            *split64(float_min_max(A, B, "f64", True))]
    # abs and neg of an f32 or f16 NaN give some NaN: only the NaN-ness is the ISA's
    out += [None if is_nan(a, "f32") else a & 0x7FFFFFFF, None if is_nan(a, "f32") else a ^ 0x80000000,
            None if is_nan(a & 0xFFFF, "f16") else a & 0x7FFF,
            pack([None if is_nan(b >> s & 0xFFFF, "f16") else (b >> s & 0xFFFF) ^ 0x8000 for s in (0, 16)], 16),
            *split64(A if is_nan(A, "f64") else A & ~(1 << 63)),  # abs.f64 passes a NaN through
            *split64(B if is_nan(B, "f64") else B ^ (1 << 63))]  # neg.f64 too, on the H200
    return out


FLOAT_OPS = 47  # columns of float_ops


def run_float_kernel(tmp_path, nvcc_ptx, entry: str, width: int, seed: int, expect) -> tuple:
    """float_ops.cu's kernel `entry` on 640 rows of float_rows: (rows, results, where the ISA
    leaves all but NaN-ness open, the expected values elsewhere)."""
    rows = float_rows(640, seed=seed)
    out = run(tmp_path, nvcc_ptx("float_ops", "-O3"), entry,
              {"in": rows.reshape(-1), "out": np.zeros(len(rows) * width, np.uint32)}, grid=(5, 1, 1), block=(128, 1, 1))
    loose, want = split_undefined([expect([int(x) for x in r], t) for t, r in enumerate(rows)])
    return rows, out["out"].reshape(len(rows), width), loose, want.astype(np.uint32)


def test_float_edge_cases_follow_the_isa(tmp_path, nvcc_ptx):
    rows, got, loose, want = run_float_kernel(tmp_path, nvcc_ptx, "float_ops", FLOAT_OPS, 4,
                                              lambda r, t: expect_float_ops(r))

    def f16_nan(v):
        return ((v & 0x7C00) == 0x7C00) & ((v & 0x3FF) != 0)
    for j, is_a_nan in ((39, lambda v: np.isnan(v.view(np.float32))), (40, lambda v: np.isnan(v.view(np.float32))),
                        (41, f16_nan), (42, lambda v: f16_nan(v) | f16_nan(v >> 16))):
        assert is_a_nan(got[loose[:, j], j]).all(), f"float_ops[{j}] of a NaN is not a NaN"
    assert_columns(np.where(loose, 0, got), want, [f"float_ops[{j}]" for j in range(FLOAT_OPS)], rows)


def exact_arith(op: str, operands: list, fmt: str, mode: str = "rn", ftz: bool = False, sat: bool = False):
    """One IEEE operation (add sub mul fma div sqrt rcp) on the bits of its operands, rounded once
    as `mode` says: the result's bits, or None for a NaN (only NaN-ness is the ISA's). .ftz flushes
    f32 subnormal inputs and results; .sat clamps to [0, 1] (-0 and NaN to +0)."""
    width = FORMATS[fmt][0]
    tiny = Fraction(2) ** -126
    if ftz:  # subnormal inputs become zeros of their sign
        operands = [x & (1 << (width - 1)) if (x & ((1 << (width - 1)) - 1)) < (1 << FORMATS[fmt][2]) else x
                    for x in operands]
    xs = [decode_float(x, fmt) for x in operands]
    if ("nan",) in xs:
        return 0 if sat else None
    signed_values = [None if v == "inf" else (-v if sg else v) for sg, v in xs]
    if any(v == "inf" for _, v in xs) or (op in ("div", "rcp") and xs[-1][1] == 0) or (op == "sqrt" and xs[0][0]
                                                                                        and xs[0][1] != 0):
        dt = np.float32 if fmt == "f32" else np.float64
        f = [np.array(x, np.uint32 if fmt == "f32" else np.uint64).view(dt) for x in operands]
        with np.errstate(all="ignore"):
            finite_product = op == "fma" and xs[0][1] != "inf" and xs[1][1] != "inf"
            r = {"add": lambda: f[0] + f[1], "sub": lambda: f[0] - f[1], "mul": lambda: f[0] * f[1],
                 "fma": lambda: f[2] if finite_product else np.float64(f[0]) * np.float64(f[1]) + np.float64(f[2]),
                 "div": lambda: f[0] / f[1],
                 "sqrt": lambda: np.sqrt(f[0]), "rcp": lambda: dt(1) / f[0]}[op]()
        r = np.asarray(r).astype(dt)
        if np.isnan(r):
            return 0 if sat else None
        bits = int(r.view(np.uint32 if fmt == "f32" else np.uint64))
        return (0 if bits >> (width - 1) else encode_float(0, Fraction(1), fmt) if np.isinf(r) else bits) if sat else bits
    a = signed_values
    if op in ("add", "sub", "fma"):
        terms = [a[0], -a[1] if op == "sub" else a[1]] if op != "fma" else [a[0] * a[1], a[2]]
        signs = [xs[0][0], xs[1][0] ^ (op == "sub")] if op != "fma" else [xs[0][0] ^ xs[1][0], xs[2][0]]
        exact = terms[0] + terms[1]
        if exact == 0:  # an exact zero: -0 if both terms are, or under round toward -inf unless both are +0
            zero_sign = int(all(signs)) if mode != "rm" else int(any(signs) or any(t != 0 for t in terms))
            sign, val = zero_sign, Fraction(0)
        else:
            sign, val = int(exact < 0), abs(exact)
    elif op == "mul":
        sign, val = xs[0][0] ^ xs[1][0], xs[0][1] * xs[1][1]
    elif op == "div":
        sign, val = xs[0][0] ^ xs[1][0], xs[0][1] / xs[1][1]
    elif op == "rcp":
        sign, val = xs[0][0], 1 / xs[0][1]
    else:  # sqrt: correctly rounded in f64 (f32 operands: innocuous double rounding, 53 >= 2 * 24 + 2)
        r = math.sqrt(float(xs[0][1]))
        if fmt == "f64":
            return f64_bits(math.copysign(r, -1.0 if xs[0][0] else 1.0))
        sign, val = xs[0][0], Fraction(r)
    sign, val = round_to(sign, val, fmt, mode)
    if ftz and val != "inf" and 0 < val < tiny:
        val = Fraction(0)
    if sat:
        if sign:
            return 0
        val = Fraction(1) if val == "inf" or val > 1 else val
    return encode_float(sign, val, fmt)


def f64_bits(x: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def twice_rounded(A: int, B: int, C: int):
    p = exact_arith("mul", [A, B], "f64")
    return None if p is None else exact_arith("add", [p, C], "f64")


def expect_float_arith(r, t: int) -> list:
    a, b = r[0], r[1]
    A, B = r[2] | r[3] << 32, r[4] | r[5] << 32
    modes = ("rn", "rz", "rm", "rp")
    if t & 1:  # the fmas' addend: the product's negation (rounded to nearest), or the operands' XOR
        p = exact_arith("mul", [a, b], "f32")
        c = (p ^ 0x80000000) if p is not None else 0x7FFFFFFF
        q = exact_arith("mul", [A, B], "f64")
        C = (q ^ (1 << 63)) if q is not None else 0x7FFFFFFFFFFFFFFF
    else:
        c, C = a ^ b, A ^ B
    f32 = [exact_arith(op, [a, b], "f32", m) for op in ("add", "sub", "mul") for m in modes]
    f32 += [exact_arith("fma", [a, b, c], "f32", m) for m in modes]
    f64 = [exact_arith("add", [A, B], "f64", m) for m in modes] + [exact_arith("sub", [A, B], "f64", "rm"),
                                                                    exact_arith("mul", [A, B], "f64")]
    f64 += [exact_arith("fma", [A, B, C], "f64", m) for m in modes]
    def wide(*values):  # f64 results as (low, high) words
        return [w for v in values for w in (split64(v) if v is not None else (None, None))]
    return f32 + wide(*f64) + [exact_arith(op, [a, b][:n], "f32") for op, n in (("div", 2), ("sqrt", 1), ("rcp", 1))] \
        + wide(*[exact_arith(op, [A, B][:n], "f64") for op, n in (("div", 2), ("sqrt", 1), ("rcp", 1))]) \
        + [exact_arith("mul", [a, b], "f32", sat=True), exact_arith("add", [a, b], "f32", sat=True),
           exact_arith("fma", [a, b, c], "f32", sat=True), exact_arith("add", [a, b], "f32", ftz=True),
           exact_arith("mul", [a, b], "f32", "rz", ftz=True), exact_arith("fma", [a, b, c], "f32", ftz=True),
           exact_arith("fma", [a, b, c], "f32")] \
        + wide(twice_rounded(A, B, C), exact_arith("fma", [A, B, C], "f64")) \
        + [exact_arith("fma", [a, b, c], "f32")] + wide(exact_arith("add", [A, B], "f64"), exact_arith("mul", [A, B], "f64")) \
        + [exact_arith("sub", [a, b], "f32"), exact_arith("add", [a, a ^ 0x80000000], "f32", "rm"),
           exact_arith("div", [a, c], "f32")]


FLOAT_ARITH = 64  # columns of float_arith
NAN_PROBES = Path(__file__).parent / "data/probes/nan_f64_h200.npz"


def nan_select_case() -> tuple:
    """The nan_select kernel's inputs: every (a, b, c) of the probed f64 patterns, one per thread."""
    patterns = np.load(NAN_PROBES)["patterns"]
    n = len(patterns)
    return {"p": patterns, "out": np.zeros(4 * n ** 3, np.uint64)}, ((n ** 3 + 127) // 128, 1, 1), (("int32", n),)


def test_an_f64_nan_result_is_the_operand_nan_the_h200_returns(tmp_path, nvcc_ptx):
    # DFMA returns b's NaN, else c's, else a's; DADD and DMUL b's before a's (quieted, sign kept)
    buffers, grid, scalars = nan_select_case()
    out = run(tmp_path, nvcc_ptx("nan_select", "-O3"), "nan64", buffers, grid=grid, block=(128, 1, 1),
              scalars=scalars)["out"].reshape(np.load(NAN_PROBES)["D"].shape)
    h200 = np.load(NAN_PROBES)
    for k, op in enumerate(h200["ops"]):
        bad = np.argwhere(out[..., k] != h200["D"][..., k])
        assert bad.size == 0, (op, [hex(int(h200["patterns"][i])) for i in bad[0][:3 if op == "fma" else 2]],
                               hex(int(out[tuple(bad[0])][k])), hex(int(h200["D"][tuple(bad[0])][k])))


def test_float_arithmetic_rounds_once_as_each_mode_says(tmp_path, nvcc_ptx):
    rows, got, loose, want = run_float_kernel(tmp_path, nvcc_ptx, "float_arith", FLOAT_ARITH, 5, expect_float_arith)
    assert_columns(np.where(loose, 0, got), want, [f"float_arith[{j}]" for j in range(FLOAT_ARITH)], rows)


# -- warps ----------------------------------------------------------------------------------------

def warp_values(n: int, seed: int) -> np.ndarray:
    """One word per thread: some lanes exit at once (0xdead); bits 0-4 steer the votes; some
    warps hold one value everywhere (match.all true)."""
    rng = np.random.default_rng(seed)
    v = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    v[rng.random(n) < 0.3] = rng.integers(0, 2000, int(np.sum(rng.random(n) < 0.3)) or 1)[0]
    v[::7] &= 0x3F
    v[rng.random(n) < 0.1] = 0xDEAD
    v[32:64] = 0x12345678  # a warp of one value
    v[64:96] = np.where(np.arange(32) % 5 == 0, 0xDEAD, 7)
    return v


def expect_warp(v: np.ndarray):
    """warp_ops' columns (lanes that exit write nothing) and its 64-bit matches, per the ISA."""
    n = len(v)
    out = np.zeros((n, 32), np.uint64)
    out64 = np.zeros((n, 2), np.uint64)
    for w in range(n // 32):
        vals = [int(x) for x in v[32 * w:32 * w + 32]]
        live = [x != 0xDEAD for x in vals]
        full = pack([int(x) for x in live], 1)

        def ballot(pred, members):
            return sum(1 << i for i in range(32) if members >> i & 1 and pred(vals[i]))

        def of(members):
            return [vals[i] for i in range(32) if members >> i & 1]
        for i in range(32):
            if not live[i]:
                continue
            x, o = vals[i], out[32 * w + i]
            mine = of(full)
            o[0], o[1] = full, ballot(lambda y: y & 1, full)
            o[2], o[3] = int(all(y != 7 for y in mine)), int(any(y == 7 for y in mine))
            o[4] = int(len({bool(y & 4) for y in mine}) == 1)
            o[5] = ballot(lambda y: y & 3 == x & 3, full)
            same = len({y >> 30 for y in mine}) == 1
            o[6], o[7] = full if same else 0, int(same)
            o[8] = sum(mine) & M32
            o[9], o[10] = min(mine), max(mine)
            o[11], o[12] = min(signed(y, 32) for y in mine) & M32, max(signed(y, 32) for y in mine) & M32
            o[13], o[14], o[15] = (reduce(f, mine) for f in (and_, or_, xor))
            out64[32 * w + i, 0] = ballot(lambda y: (y & 1) == (x & 1), full)
            same64 = len(set(mine)) == 1
            out64[32 * w + i, 1] = full if same64 else 0
            o[16] = int(same64)
            if x & 2:
                part = ballot(lambda y: y & 2, full)
                group = of(part)
                o[17], o[18] = part, ballot(lambda y: y & 1, part)
                o[19] = sum(group) & M32
                o[20] = ballot(lambda y: y & 8 == x & 8, part)
                o[21] = int(all(y & 1 for y in group))
                o[22] = int(len({y & 1 for y in group}) == 1)
                o[23] = int(any(not y & 16 for y in group))
                o[24] = ballot(lambda y: not y & 16, part)
            else:
                rest = ballot(lambda y: not y & 2, full)
                o[17], o[18] = rest, ballot(lambda y: y & 1, rest)
            if i % 2 == 0:
                even = full & 0x55555555
                o[25] = sum(1 << j for j in range(32) if even >> j & 1)
                o[26] = even
            o[27] = ballot(lambda y: y > 100, full) if x > 100 else 0
            o[28] = sum(signed(y, 32) for y in mine) & M32
            o[31] = bin(ballot(lambda y: y > 1000, full)).count("1") + i
    return out.astype(np.uint32), out64


def test_votes_matches_and_reductions_over_the_lanes_that_take_part(tmp_path, nvcc_ptx):
    v = warp_values(256, seed=8)
    out = run(tmp_path, nvcc_ptx("warp_ops", "-O3"), "warp_ops",
              {"in": v, "out": np.zeros(256 * 32, np.uint32), "out64": np.zeros(512, np.uint64)},
              grid=(2, 1, 1), block=(128, 1, 1))
    got, got64 = out["out"].reshape(256, 32), out["out64"].reshape(256, 2)
    want, want64 = expect_warp(v)
    elected = got[:, 29:31]
    checked = [j for j in range(32) if j not in (29, 30)]
    assert_columns(got[:, checked], want[:, checked], [f"warp_ops[{j}]" for j in checked], v[:, None])
    assert np.array_equal(got64, want64)
    # elect.sync: one leader per warp among the live lanes, its lane id seen by every live lane
    for w in range(8):
        live = v[32 * w:32 * w + 32] != 0xDEAD
        chosen = elected[32 * w:32 * w + 32]
        leaders = np.flatnonzero(live & (chosen[:, 1] == 1))
        assert len(leaders) == 1 and (chosen[live, 0] == leaders[0]).all()


# -- atomics ---------------------------------------------------------------------------------------

ATOMIC_BLOCKS, ATOMIC_THREADS = 3, 64


def serial_order(step, init, args: list, olds: list, final) -> bool:
    """Whether some order of the lanes, each applying step(value, *args) to the value left by the
    ones before and seeing it as its old value, explains the olds and the final value."""
    remaining = list(range(len(args)))

    def search(cur, left) -> bool:
        if not left:
            return cur == final
        tried = set()
        # lanes that leave the value as it is commute with everything: take them first
        for k in sorted(left, key=lambda k: step(cur, *args[k]) != cur):
            if olds[k] != cur or (olds[k], args[k]) in tried:
                continue
            tried.add((olds[k], args[k]))
            if search(step(cur, *args[k]), [j for j in left if j != k]):
                return True
        return False
    return search(init, remaining)


def atomic_inputs(seed: int) -> dict:
    rng = np.random.default_rng(seed)
    n = ATOMIC_BLOCKS * ATOMIC_THREADS
    v = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    v[::5] = rng.integers(0, 16, len(v[::5]))
    g = np.zeros(16 * ATOMIC_BLOCKS, np.uint32)
    g[2::16], g[5::16] = 0x7FFFFFFF, 3
    g[6::16] = 0xFFFFFFFF
    g[10::16] = 1  # cas: lanes with threadIdx & 3 == 1 may swap first
    return {"v": v, "g": g, "g64": np.zeros(8 * ATOMIC_BLOCKS, np.uint64), "olds": np.zeros(24 * n, np.uint32),
            "shared_out": np.zeros(16 * ATOMIC_BLOCKS, np.uint32)}


def f16_add(x: int, y: int) -> int:
    s = np.float16(np.float32(np.uint16(x).view(np.float16)) + np.float32(np.uint16(y).view(np.float16)))
    return int(s.view(np.uint16))


def half2_add(x: int, y: int) -> int:
    return f16_add(x & 0xFFFF, y & 0xFFFF) | f16_add(x >> 16, y >> 16) << 16


ATOMIC_STEPS = {  # slot of `olds` -> (word of `g`, the ISA's operation on the stored value, its operands)
    0: (0, lambda r, b: (r + b) & M32, lambda x, t: (x & 0xFFFF,)),
    1: (1, lambda r, b: (r + b) & M32, lambda x, t: (-(x & 0xFF) & M32,)),
    2: (2, lambda r, b: min(signed(r, 32), signed(b, 32)) & M32, lambda x, t: (x,)),
    3: (3, lambda r, b: max(r, b), lambda x, t: (x,)),
    4: (4, lambda r, s: 0 if r >= s else r + 1, lambda x, t: (13,)),
    5: (5, lambda r, s: s if r == 0 or r > s else r - 1, lambda x, t: (5,)),
    6: (6, lambda r, b: r & b, lambda x, t: (x | 0x10000,)),
    7: (7, lambda r, b: r | b, lambda x, t: (1 << (x & 31),)),
    8: (8, lambda r, b: r ^ b, lambda x, t: (x,)),
    9: (9, lambda r, s: s, lambda x, t: (x,)),
    10: (10, lambda r, s, u: u if r == s else r, lambda x, t: (t & 3, x)),
    11: (11, lambda r, b: f32_bits(f32(r) + f32(b)), lambda x, t: (f32_bits((x & 0xFF) * 0.25),)),
    12: (12, half2_add, lambda x, t: (int(np.array([x & 7, -(x & 3)], np.float16).view(np.uint32)[0]),)),
}
SHARED_STEPS = {  # slot -> (word of s, operation, operands, initial value)
    13: (0, lambda r, b: (r + b) & M32, lambda x, t: (x & 0xFF,), 0),
    14: (1, lambda r, b: max(r, b), lambda x, t: (x,), 0),
    15: (2, lambda r, b: min(r, b), lambda x, t: (x,), 0xFFFFFFFF),
    16: (3, lambda r, s: 0 if r >= s else r + 1, lambda x, t: (6,), 0),
    17: (4, lambda r, s, u: u if r == s else r, lambda x, t: (t & 1, x), 0),
    18: (5, lambda r, s: s, lambda x, t: (x,), 0),
}


def test_atomics_serialise_lanes_on_one_address(tmp_path, nvcc_ptx):
    inputs = atomic_inputs(9)
    out = run(tmp_path, nvcc_ptx("atomics", "-O3"), "atomics", inputs, grid=(ATOMIC_BLOCKS, 1, 1),
              block=(ATOMIC_THREADS, 1, 1))
    check_atomics(inputs, out)


def check_atomics(inputs: dict, out: dict) -> None:
    """Every atomic's returned values and final value are those of some serial order of the block's
    lanes (the ISA's atomicity), and order-free results are exact."""
    v, g0 = inputs["v"], inputs["g"]
    olds = out["olds"].reshape(-1, 24)
    for blk in range(ATOMIC_BLOCKS):
        rows = range(blk * ATOMIC_THREADS, (blk + 1) * ATOMIC_THREADS)
        g, s = out["g"][16 * blk:16 * blk + 16], out["shared_out"][16 * blk:16 * blk + 16]
        for slot, (word, step, operands) in ATOMIC_STEPS.items():
            args = [operands(int(v[i]), i % ATOMIC_THREADS) for i in rows]
            final = int(g[word]) if word != 0 else None
            init = int(g0[16 * blk + word])
            if word == 0:  # cnt[0] also takes the generic atomicAdd's 2s of the even lanes
                final = int(g[0]) - 2 * sum(1 - (int(v[i]) & 1) for i in rows) & M32
            assert serial_order(step, init, args, [int(olds[i, slot]) for i in rows], final), f"atomic slot {slot}"
        for slot, (word, step, operands, init) in SHARED_STEPS.items():
            args = [operands(int(v[i]), i % ATOMIC_THREADS) for i in rows]
            assert serial_order(step, init, args, [int(olds[i, slot]) for i in rows], int(s[word])), f"shared slot {slot}"
        vals = [int(v[i]) for i in rows]
        assert g[13] == ATOMIC_THREADS and g[14] == sum(x & 0xF for x in vals)
        assert f32(int(g[15])) == 0.5 * ATOMIC_THREADS
        assert s[6] == max(vals) and s[7] == 2 * sum(x & 1 for x in vals)
        wide = [(x << 20 | (x & 0xFFF)) & M64 for x in vals]
        g64 = out["g64"][8 * blk:8 * blk + 8]
        assert g64[0] == sum(wide) & M64 and g64[1] == max(wide) and g64[3] == 3 * ATOMIC_THREADS
        assert g64[2] in wide and g64[4] == reduce(or_, wide)
        assert int(s[8]) | int(s[9]) << 32 == sum(wide) & M64
        assert g64[5].view(np.float64) == sum((x & 0xFF) * 0.125 for x in vals)


def test_a_cas_loop_builds_an_atomic_max(tmp_path, nvcc_ptx):
    v = np.random.default_rng(10).uniform(0, 100, 256).astype(np.float32)
    out = run(tmp_path, nvcc_ptx("atomics", "-O3"), "cas_loop", {"v": v, "out": np.zeros(1, np.float32)},
              grid=(2, 1, 1), block=(128, 1, 1))
    assert out["out"][0] == v.max()


# -- constant memory, read-only loads, halves -------------------------------------------------------

def test_constant_tables_read_only_loads_and_half_joins(tmp_path, nvcc_ptx):
    rng = np.random.default_rng(11)
    idx = rng.integers(0, 1 << 32, 32, dtype=np.uint64).astype(np.uint32)
    halves = rng.integers(0, 1 << 16, 64).astype(np.uint16)
    plain = rng.integers(0, 1 << 32, 32, dtype=np.uint64).astype(np.uint32)
    out = run(tmp_path, nvcc_ptx("const_mem", "-O3"), "const_mem",
              {"idx": idx, "halves": halves, "plain": plain, "out": np.zeros(32 * 13, np.uint32)})
    got = out["out"].reshape(32, 13)
    scale = np.array([0.5, 1, 1.5, 2, -1, 1e-3, 3.25, 1e30], np.float32)
    mix = [0x9E3779B9, 0x85EBCA6B, 0xC2B2AE35, 0x27D4EB2F]
    pairs, wide, bias = [1, 2, 3, 0xFFFE, 0x8000, 7], [0x0123456789ABCDEF, 0xFEDCBA9876543210], [10, 20, 30, 40]
    for t in range(32):
        i, hx, hy, w = int(idx[t]), int(halves[2 * t]), int(halves[2 * t + 1]), int(plain[t])
        q = (wide[0] + i) & M64
        lo, hi = q & M32, q >> 32
        want = [f32_bits(float(scale[i & 7] * np.float32(t))), mix[i & 3] ^ mix[(i >> 2) & 3], pairs[i % 6],
                (wide[i & 1] >> (i & 31)) & M32, hy << 16 | hx, hx * hy, ((w >> 16) - (w & 0xFFFF)) & M32,
                lo ^ hi, ((lo << 32 | hi) >> 8) & M32, bias[i & 3] + int(plain[(t + 1) & 31]),
                (mix if i & 8 else bias)[i & 3], int(halves[2 * ((t + 3) & 31) + 1]),
                int(halves[2 * (t ^ 1)]) << 16 | int(halves[2 * (t ^ 1) + 1])]
        assert [int(x) for x in got[t]] == want, t


# -- ordinary kernels ---------------------------------------------------------------------------------

ORDINARY = ["reduce_sum", "histogram", "transpose", "switch_ops"]


def ordinary_case(name: str, rng) -> tuple:
    """(buffers, grid, block, scalars, expected outputs) for one of the ordinary kernels."""
    if name == "reduce_sum":
        x = rng.integers(-50, 50, 3000).astype(np.float32)  # integer-valued: the sum is exact in any order
        return {"in": x, "out": np.zeros(1, np.float32)}, (4, 1, 1), (256, 1, 1), (("int32", 3000),), \
            {"out": np.array([x.sum()], np.float32)}
    if name == "histogram":
        data = rng.integers(0, 256, 5000).astype(np.uint8)
        return {"data": data, "bins": np.zeros(256, np.uint32)}, (3, 1, 1), (128, 1, 1), (("int32", 5000),), \
            {"bins": np.bincount(data, minlength=256).astype(np.uint32)}
    if name == "transpose":
        a = rng.normal(size=(45, 70)).astype(np.float32)
        return {"in": a, "out": np.zeros((70, 45), np.float32)}, (3, 2, 1), (32, 8, 1), \
            (("int32", 45), ("int32", 70)), {"out": a.T.copy()}
    op = rng.integers(-1, 12, 300).astype(np.int32)
    v = rng.integers(-(1 << 31), 1 << 31, 300, dtype=np.int64).astype(np.int32)
    v[:8] = [0, -1, -(1 << 31), (1 << 31) - 1, 5, -5, 7, -7]

    def case(o: int, x: int) -> int:
        t = {0: x + 7, 1: x * 3, 2: x >> 2, 3: x ^ 0x5A5A, 4: -x, 5: x & 0xFF, 6: x | 0x100,
             7: int(x / 5), 8: int(math.fmod(x, 7)), 9: bin(x & M32).count("1")}.get(o, 0x7FFFFFFF)
        return signed(t, 32)
    return {"op": op, "v": v, "out": np.zeros(300, np.int32)}, (3, 1, 1), (128, 1, 1), (("int32", 300),), \
        {"out": np.array([case(int(o), int(x)) for o, x in zip(op, v)], np.int32)}


@pytest.mark.parametrize("name", ORDINARY)
def test_ordinary_kernels_decode_and_compute_their_results(tmp_path, nvcc_ptx, name):
    ptx = nvcc_ptx("ordinary", "-O3")
    prepare(ptx.read_text(), name)  # every opcode of the kernel decodes
    buffers, grid, block, scalars, expected = ordinary_case(name, np.random.default_rng(12))
    out = run(tmp_path, ptx, name, buffers, grid=grid, block=block, scalars=scalars)
    for key, want in expected.items():
        assert np.array_equal(out[key], want), key


@pytest.mark.parametrize("statement, named", [
    ("tanh.approx.f32 %f1, %f1;", "tanh.approx.f32"),
    ("mov.u64 %rd9, %clock64;", "special register %clock64"),
    ("div.rz.f32 %f1, %f1, %f1;", "div.rz.f32"),
    ("vabsdiff4.u32.u32.u32.add %r9, %r9.b3210, %r9, %r9;", "vabsdiff4"),
    ("atom.global.v2.f32.add {%f1, %f1}, [%rd9], {%f1, %f1};", "atom.global.v2.f32.add"),
])
def test_what_the_interpreter_does_not_do_is_named_at_decode(statement, named):
    """An instruction outside the interpreter's set stops decoding with its statement, line and
    opcode, before anything runs."""
    text = (".version 8.7\n.target sm_90\n.address_size 64\n.visible .entry k(.param .u64 p)\n{\n"
            " .reg .f32 %f<3>; .reg .b32 %r<10>; .reg .b64 %rd<10>;\n"
            " ld.param.u64 %rd9, [p];\n mov.f32 %f1, 0f3F800000;\n mov.u32 %r9, 1;\n"
            f" {statement}\n ret;\n}}\n")
    from rr.run.cpu import CpuUnsupported

    with pytest.raises(CpuUnsupported, match=rf"k s4 \(line 10\): .*{re.escape(named)}"):
        prepare(text, "k")


def test_every_test_kernel_decodes(nvcc_ptx):
    from rr.ptx import parse

    for source in ("int_ops", "float_ops", "conversions", "warp_ops", "atomics", "const_mem", "ordinary"):
        ptx = nvcc_ptx(source, "-O3")
        for f in parse(ptx.read_text(), str(ptx)).entries:
            prepare(ptx.read_text(), f.name)


# -- cvt ------------------------------------------------------------------------------------------

INT_TYPES = ["s8", "u8", "s16", "u16", "s32", "u32", "s64", "u64"]
FLOAT_SOURCES = ["f32", "f64", "f16", "bf16"]


def int_range(typ: str) -> tuple:
    bits = int(typ[1:])
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if typ[0] == "s" else (0, (1 << bits) - 1)


def register(value: int, typ: str) -> int:
    """An integer result in its register (16 bits for 8- and 16-bit types), sign-extended to
    the register's width for signed types."""
    return value & ((1 << max(int(typ[1:]), 16)) - 1)


def integral(x: Fraction, mode: str) -> int:
    lo = math.floor(x)
    if mode == "rmi":
        return lo
    if mode == "rpi":
        return math.ceil(x)
    if mode == "rzi":
        return math.trunc(x)
    diff = x - lo
    return lo + (diff > Fraction(1, 2) or (diff == Fraction(1, 2) and lo % 2 == 1))


def float_to_int(bits: int, fmt: str, typ: str, mode: str, ftz: bool = False) -> int:
    """cvt.<irnd>.<int>.<float>: rounded as asked, clamped to the type's range. A NaN: the ISA
    says 0; the H200 gives 0 from f32/f16/bf16 into at most 32 bits, and only the destination's
    sign bit from f64 or into 64 bits (measured)."""
    d = decode_float(bits, fmt)
    lo, hi = int_range(typ)
    if d == ("nan",):
        width = int(typ[1:])
        return register(signed(1 << (width - 1), width) if typ[0] == "s" else 1 << (width - 1), typ) \
            if fmt == "f64" or width == 64 else 0
    sign, val = d
    if ftz and val != "inf" and 0 < val < Fraction(2) ** -126:
        val = Fraction(0)
    v = (lo if sign else hi) if val == "inf" else integral(-val if sign else val, mode)
    return register(max(lo, min(hi, v)), typ)


def int_value(v: int, typ: str) -> int:
    bits = int(typ[1:])
    return signed(v, bits) if typ[0] == "s" else v & ((1 << bits) - 1)


def to_float_bits(sign: int, value, fmt: str, mode: str = "rn", flags: frozenset = frozenset()) -> int:
    """(sign, exact value or 'inf' or None for NaN) -> the bits cvt writes: rounded as `mode` says,
    then .ftz, .sat, .relu, .satfinite; NaN as the canonical NaN."""
    layout = "f32" if fmt == "tf32" else fmt
    width = FORMATS[layout][0]
    if value is None:
        return 0 if "sat" in flags else (1 << (width - 1)) - 1
    if fmt == "tf32":
        sign, value = round_tf32(sign, value, mode)
    elif mode == "rna":
        raise ValueError(mode)
    else:
        sign, value = round_to(sign, value, fmt, mode)
    if "ftz" in flags and fmt == "f32" and value != "inf" and 0 < value < Fraction(2) ** -126:
        value = Fraction(0)
    if "satfinite" in flags and value == "inf":
        mbits = 10 if fmt == "tf32" else FORMATS[fmt][2]
        value = (2 - Fraction(2) ** -mbits) * Fraction(2) ** ((1 << (FORMATS[layout][1] - 1)) - 1)
    if "relu" in flags and sign:  # -0 too: the H200 gives +0 (the ISA says "if negative")
        sign, value = 0, Fraction(0)
    if "sat" in flags:
        if sign:  # [0.0, 1.0], -0 included as +0 (the H200)
            sign, value = 0, Fraction(0)
        elif value == "inf" or value > 1:
            value = Fraction(1)
    return encode_float(sign, value, layout)


def round_tf32(sign: int, value, mode: str):
    """tf32: f32's exponent range, 10 fraction bits; .rna rounds ties away from zero."""
    if value == "inf" or value == 0:
        return sign, value
    exp = 0
    while Fraction(2) ** exp > value:
        exp -= 1
    while Fraction(2) ** (exp + 1) <= value:
        exp += 1
    ulp = Fraction(2) ** (max(exp, -126) - 10)
    q = value / ulp
    lo = math.floor(q)
    r = (lo + (q - lo >= Fraction(1, 2) if mode == "rna" else q - lo > Fraction(1, 2) or
               (q - lo == Fraction(1, 2) and lo % 2))) * ulp if mode in ("rna", "rn") else \
        (lo + (mode == "rp" and q != lo)) * ulp
    biggest = (2 - Fraction(2) ** -10) * Fraction(2) ** 127
    return sign, ("inf" if mode in ("rna", "rn") else biggest) if r > biggest else r


def cvt_float(bits: int, sfmt: str, dfmt: str, mode: str = "rn", flags: frozenset = frozenset()) -> int:
    d = decode_float(bits, sfmt)
    if d == ("nan",):
        return to_float_bits(0, None, dfmt, mode, flags)
    sign, val = d
    tiny = val != "inf" and 0 < val < Fraction(2) ** -126
    # .ftz flushes f32 subnormal inputs; for an f32 result the H200 flushes a value below the
    # normals before rounding (one that would round up to the smallest normal too)
    if "ftz" in flags and (sfmt == "f32" or dfmt == "f32") and tiny:
        val = Fraction(0)
    if mode in ("rni", "rzi", "rmi", "rpi"):
        if val != "inf":
            val = abs(Fraction(integral(-val if sign else val, mode)))
        mode = "rn"
    return to_float_bits(sign, val, dfmt, mode, flags)


def cvt_int_float(v: int, styp: str, dfmt: str, mode: str) -> int:
    x = int_value(v, styp)
    return to_float_bits(int(x < 0), Fraction(abs(x)), dfmt, mode)


F32_VALUES = [0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 0.49999997, 1.0, -1.0, 127.5, 128.5, -128.5, -129.0, 255.5, 256.0,
              32767.5, 32768.0, -32768.5, 65535.5, 65536.0, 2147483520.0, 2.0 ** 31, -2.0 ** 31, -2147483904.0,
              4294967040.0, 2.0 ** 32, 2.0 ** 63, -2.0 ** 63, 2.0 ** 64, 1e30, -1e30, 3.4e38, math.inf, -math.inf,
              math.nan, 2.0 ** -149, 2.0 ** -130, -2.0 ** -140, 2.0 ** -126, 65504.0, 65519.996, 65520.0, -65536.0,
              1e-8, 2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -26, 1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, 1 + 2.0 ** -8 + 2.0 ** -20,
              1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, 0.99999994, 1.0000001, -0.75, 0.25, 3.0e-39, -7.0e-40]
F64_VALUES = [1 + 2.0 ** -24, 1 + 2.0 ** -24 + 2.0 ** -50, 1 + 2.0 ** -11 + 2.0 ** -40, 1 + 2.0 ** -8 + 2.0 ** -45,
              2.0 ** 1000, -2.0 ** 1000, 1e-320, 1.5 * 2.0 ** -149, 2.0 ** -126 * (1 - 2.0 ** -24), 3.4028235677973366e38,
              2.0 ** 63 - 1024, -2.0 ** 63 - 2048, 2.0 ** 64 - 2048, 4294967295.5, -2147483648.5, 2.0 ** 53 + 2,
              65519.99999, 2.0 ** -1074, -2.0 ** -1022, 0.1, -1e300]


def cvt_float_inputs(n: int, seed: int) -> dict:
    """f32, f64, f16 and bf16 sources: the edge values (each format's own too) and random ones."""
    rng = np.random.default_rng(seed)
    with np.errstate(over="ignore"):  # f64 edge values past f32's range become its infinities
        f32s = np.array(F32_VALUES + [float(np.float32(x)) for x in F64_VALUES], np.float32)
    f32s = np.concatenate([f32s, (rng.normal(size=n) * 10.0 ** rng.integers(-6, 12, n)).astype(np.float32)])[:n]
    f32s[len(F32_VALUES) + 8::9] = rng.integers(0, 1 << 32, len(f32s[len(F32_VALUES) + 8::9]), dtype=np.uint64) \
        .astype(np.uint32).view(np.float32)
    f64s = np.concatenate([np.array(F64_VALUES + F32_VALUES, np.float64), f32s.astype(np.float64) * (1 + rng.random(n) * 2.0 ** -30)])[:n]
    f16s = np.concatenate([np.array(F16_EDGE + [0x3C01, 0x5BFF, 0x7800, 0xD800, 0x5640, 0x57FF, 0x4E00], np.uint16),
                           rng.integers(0, 1 << 16, n).astype(np.uint16)])[:n]
    bf16s = np.concatenate([np.array([0, 0x8000, 0x3F80, 0x7F80, 0xFF80, 0x7FC0, 0x0001, 0x807F, 0x4F00, 0xCF00, 0x5F00,
                                      0x5F80, 0x4700, 0x477F, 0x4780, 0x3F40, 0x3FC0, 0xC020, 0x437F, 0x4380, 0xC300],
                                     np.uint16), rng.integers(0, 1 << 16, n).astype(np.uint16)])[:n]
    return {"f32in": f32s.view(np.uint32), "f64in": f64s.view(np.uint64), "f16in": f16s, "bf16in": bf16s}


def cvt_int_inputs(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    edge = [0, 1, -1, 127, 128, 255, 256, -128, -129, 32767, 32768, 65535, 65536, 2 ** 24 + 1, 2 ** 24 + 3,
            -(2 ** 24) - 1, 2 ** 31 - 1, 2 ** 31, -(2 ** 31), 2 ** 32 - 1, 2 ** 53 + 1, 2 ** 53 + 3, 2 ** 63 - 1, -(2 ** 63),
            2 ** 64 - 1, 0x8000000000000001, 65519, 65520, 65504, 70000, -70000, 0x100000001, 0x7FFFFF80, 0x7FFFFFC0,
            0xFFFFFF7F, 0x1FFFFFFFFFFFFF, 0x7FFFFF0000000000, 2 ** 60 + 2 ** 36 + 1, 0xFF7F, 0x80FF, 0x7F80]
    v = [x & M64 for x in edge] + [int(x) for x in rng.integers(0, 1 << 63, n, dtype=np.int64)]
    v += [int(x) & M64 for x in rng.integers(-100000, 100000, n)]
    v = np.array(v[:n], np.uint64)
    v[len(edge)::3] >>= np.uint64(rng.integers(0, 60))
    return v


# float_to_int's intrinsic columns: (source, destination, rounding, bits kept) as nvcc lowers them
F2I_INTRINSICS = [("f32", "s32", m, M64) for m in ("rni", "rzi", "rmi", "rpi")] + [
    ("f32", "u32", "rni", M64), ("f32", "u32", "rzi", M64), ("f32", "s64", "rmi", M64), ("f32", "u64", "rpi", M64),
    ("f64", "s32", "rni", M64), ("f64", "u32", "rzi", M64), ("f64", "s64", "rmi", M64), ("f64", "u64", "rpi", M64),
    ("f32", "s32", "rzi", M64), ("f32", "u32", "rzi", M64), ("f64", "s64", "rzi", M64), ("f64", "u64", "rzi", M64),
    ("f16", "s32", "rni", M64), ("f16", "s32", "rzi", M64), ("f16", "s16", "rmi", M64), ("f16", "u16", "rpi", M64),
    ("bf16", "s32", "rni", M64), ("bf16", "s64", "rzi", M64), ("f32", "s64", "rni", M32), ("f64", "s64", "rni", M64),
    ("f32", "s32", "rzi", 0xFF), ("f16", "u32", "rni", M64)]


def expect_float_to_int(x: int, g: int, h: int, bh: int) -> list:
    out = []
    for src, bits in zip(FLOAT_SOURCES, (x, g, h, bh)):
        out += [float_to_int(bits, src, t, m) for t in INT_TYPES for m in ("rni", "rzi", "rmi", "rpi")]
    out += [float_to_int(x, "f32", "s32", "rni", True), float_to_int(x, "f32", "u32", "rzi", True),
            float_to_int(x, "f32", "s64", "rmi", True), float_to_int(x, "f32", "s32", "rpi", True),
            float_to_int(x, "f32", "s32", "rzi"), float_to_int(g, "f64", "u8", "rzi")]
    src = {"f32": x, "f64": g, "f16": h, "bf16": bh}
    out += [float_to_int(src[f], f, t, m) & mask for f, t, m, mask in F2I_INTRINSICS]
    return out


# int_to_float's intrinsic columns: (source, destination, rounding)
I2F_INTRINSICS = [("s32", "f32", "rn"), ("s32", "f32", "rz"), ("u32", "f32", "rm"), ("u32", "f32", "rp"),
                  ("s64", "f32", "rn"), ("u64", "f32", "rz"), ("s64", "f64", "rm"), ("u64", "f64", "rp"),
                  ("s32", "f64", "rn"), ("s64", "f32", "rn"), ("s32", "f16", "rn"), ("u32", "f16", "rz"),
                  ("s16", "f16", "rm"), ("s64", "f16", "rp"), ("s32", "bf16", "rn"), ("u32", "bf16", "rz"),
                  ("s64", "bf16", "rm"), ("u16", "bf16", "rp")]


def expect_int_to_float(v: int) -> list:
    out = [cvt_int_float(v, s, d, m) for s in INT_TYPES for d in ("f16", "bf16", "f32", "f64")
           for m in ("rn", "rz", "rm", "rp")]
    out += [cvt_int_float(v, s, d, m) for s, d, m in I2F_INTRINSICS]
    out += [cvt_int_float(v, "s8", "f32", "rn") ^ cvt_int_float(v, "u8", "f32", "rn"),
            f32_bits(float(np.float32(signed(v, 16)) + np.float32((v >> 16) & 0xFFFF)))]
    return out


def expect_float_to_float(x: int, g: int, h: int, bh: int) -> list:
    modes = ("rn", "rz", "rm", "rp")
    irnd = ("rni", "rzi", "rmi", "rpi")
    out = [cvt_float(g, "f64", d, m) for d in ("f32", "f16", "bf16") for m in modes]
    out += [cvt_float(x, "f32", d, m) for d in ("f16", "bf16") for m in modes]
    out += [cvt_float(h, "f16", "bf16", m) for m in modes] + [cvt_float(bh, "bf16", "f16", m) for m in modes]
    out += [cvt_float(bits, f, f, m) for bits, f in ((x, "f32"), (g, "f64"), (h, "f16"), (bh, "bf16")) for m in irnd]
    F = frozenset
    out += [cvt_float(x, "f32", "f64"), cvt_float(h, "f16", "f32"), cvt_float(h, "f16", "f64"), cvt_float(bh, "bf16", "f32"),
            cvt_float(bh, "bf16", "f64"), cvt_float(x, "f32", "f64", flags=F({"ftz"})),
            cvt_float(g, "f64", "f32", flags=F({"ftz"})), cvt_float(x, "f32", "f32", flags=F({"ftz"})),
            cvt_float(x, "f32", "f32", flags=F({"sat"})), cvt_float(x, "f32", "f32", "rzi", F({"sat"})),
            cvt_float(x, "f32", "f32", "rni", F({"ftz"})), cvt_float(x, "f32", "f16", flags=F({"sat"})),
            cvt_float(x, "f32", "f16", flags=F({"relu"})), cvt_float(x, "f32", "f16", "rz", F({"satfinite"})),
            cvt_float(x, "f32", "bf16", flags=F({"relu", "satfinite"})), cvt_float(x, "f32", "bf16", "rz", F({"relu"})),
            cvt_float(x, "f32", "tf32", "rna"), cvt_float(x, "f32", "tf32", "rna", F({"satfinite"})),
            cvt_float(g, "f64", "f64", flags=F({"sat"})), cvt_float(h, "f16", "f32", flags=F({"ftz"}))]
    x2 = x ^ 0x80000001

    def pair(fmt, mode, flags=F()):
        return cvt_float(x2, "f32", fmt, mode, flags) | cvt_float(x, "f32", fmt, mode, flags) << 16
    out += [pair("f16", "rn"), pair("f16", "rz", F({"relu"})), pair("f16", "rn", F({"satfinite"})), pair("bf16", "rn"),
            pair("bf16", "rz", F({"relu", "satfinite"}))]
    out += [cvt_float(g, "f64", "f32", m) for m in modes] + [cvt_float(x, "f32", "f16", m) for m in modes]
    out += [cvt_float(h, "f16", "f32"), cvt_float(x, "f32", "bf16"), cvt_float(x, "f32", "bf16", "rz"),
            cvt_float(bh, "bf16", "f32"), cvt_float(x, "f32", "f16") | cvt_float(x2, "f32", "f16") << 16,
            cvt_float(x, "f32", "bf16") | cvt_float(x2, "f32", "bf16") << 16, cvt_float(g, "f64", "f16"),
            cvt_float(g, "f64", "bf16")]
    out += [cvt_float(x, "f32", "f32", m) for m in ("rzi", "rni", "rmi", "rpi")]  # truncf rintf floorf ceilf
    out += [cvt_float(x, "f32", "f32", flags=F({"sat"}))]
    out += [None if is_nan(g, "f64") else cvt_float(g, "f64", "f64", "rzi") ^ cvt_float(g, "f64", "f64", "rmi"),
            cvt_float(x, "f32", "f64"), cvt_float(g, "f64", "f32"),
            cvt_float(h, "f16", "f16", "rzi") | cvt_float(h, "f16", "f16", "rni") << 16,
            cvt_float(x, "f32", "bf16", "rm") | cvt_float(x, "f32", "bf16", "rp") << 16,
            cvt_float(cvt_float(g, "f64", "f32"), "f32", "f16")]
    return out


# the result format of each column (its NaNs are the ISA's any-NaN, compared as the canonical one)
FLOAT_TO_FLOAT_FORMATS = (["f32"] * 4 + ["f16"] * 4 + ["bf16"] * 4 + ["f16"] * 4 + ["bf16"] * 8 + ["f16"] * 4
                          + ["f32"] * 4 + ["f64"] * 4 + ["f16"] * 4 + ["bf16"] * 4
                          + ["f64", "f32", "f64", "f32", "f64", "f64", "f32", "f32", "f32", "f32", "f32", "f16", "f16",
                             "f16", "bf16", "bf16", "f32", "f32", "f64", "f32"]
                          + ["f16x2"] * 3 + ["bf16x2"] * 2 + ["f32"] * 4 + ["f16"] * 4
                          + ["f32", "bf16", "bf16", "f32", "f16x2", "bf16x2", "f16", "bf16"] + ["f32"] * 5
                          + [None, "f64", "f32", "f16x2", "bf16x2", "f16"])


def canonical_nans(bits: np.ndarray, fmt: str | None) -> np.ndarray:
    """Every NaN of a column's format replaced by the canonical one (halves for the pairs)."""
    if fmt is None:
        return bits
    if fmt.endswith("x2"):
        lo, hi = canonical_nans(bits & 0xFFFF, fmt[:-2]), canonical_nans(bits >> 16 & 0xFFFF, fmt[:-2])
        return lo | hi << 16
    width, ebits, mbits = FORMATS[fmt]
    e = bits >> mbits & ((1 << ebits) - 1)
    nan = (e == (1 << ebits) - 1) & ((bits & ((1 << mbits) - 1)) != 0)
    return np.where(nan, (1 << (width - 1)) - 1, bits & ((1 << width) - 1))


CVT_KERNELS = {"float_to_int": 160, "int_to_float": 148, "float_to_float": 96, "int_to_int": 88}


def expect_int_to_int(v: int) -> list:
    out = [register(int_value(int_value(v, s), d), d) for s in INT_TYPES for d in INT_TYPES]
    sat = [("s8", "s32"), ("u8", "s32"), ("s8", "u8"), ("u8", "s8"), ("s16", "u16"), ("u16", "s64"), ("s32", "s64"),
           ("u32", "s64"), ("s32", "u32"), ("u32", "s32"), ("s64", "u64"), ("u64", "s64"), ("u64", "s8"), ("s8", "u64"),
           ("u16", "s16"), ("s16", "s32")]
    for d, s in sat:
        lo, hi = int_range(d)
        out.append(register(max(lo, min(hi, int_value(v, s))), d))
    out += [signed(v, 8) & M32, v & 0xFF, signed(v, 32) & M64, v & M32, signed(v >> 8, 8) & 0xFFFF,
            (signed(v, 16) * 3) & M32, (signed(v, 8) << 40) & M64, ((v & 0xFFFF) + ((v >> 32) & 0xFF)) & M32]
    return out


def cvt_case(entry: str, n: int = 384) -> tuple:
    """(buffers, expected (n, columns) with None where only NaN-ness is the ISA's, column formats)."""
    width = CVT_KERNELS[entry]
    if entry in ("float_to_int", "float_to_float"):
        buffers = cvt_float_inputs(n, seed=20)
        rows = list(zip(*(buffers[k] for k in ("f32in", "f64in", "f16in", "bf16in"))))
        fn = expect_float_to_int if entry == "float_to_int" else expect_float_to_float
        want = [fn(*[int(x) for x in r]) for r in rows]
    else:
        v = cvt_int_inputs(n, seed=21)
        buffers = {"in": v}
        want = [(expect_int_to_float if entry == "int_to_float" else expect_int_to_int)(int(x)) for x in v]
    formats = FLOAT_TO_FLOAT_FORMATS if entry == "float_to_float" else [None] * width
    return {**buffers, "out": np.zeros(n * width, np.uint64)}, want, formats


@pytest.mark.parametrize("entry", list(CVT_KERNELS))
def test_cvt_rounds_saturates_and_extends_as_the_isa_says(tmp_path, nvcc_ptx, entry):
    buffers, want, formats = cvt_case(entry)
    n, width = len(want), CVT_KERNELS[entry]
    out = run(tmp_path, nvcc_ptx("conversions", "-O3"), entry, buffers, grid=(n // 128, 1, 1), block=(128, 1, 1))
    loose, want = split_undefined(want)
    got = np.where(loose, 0, out["out"].reshape(n, width))
    for j, fmt in enumerate(formats):
        got[:, j] = canonical_nans(got[:, j].astype(np.uint64), fmt)
        want[:, j] = canonical_nans(want[:, j].astype(np.uint64), fmt)
    inputs = np.stack([buffers[k] for k in buffers if k != "out"], 1) if entry != "int_to_int" and \
        entry != "int_to_float" else buffers["in"][:, None]
    assert_columns(got.astype(np.uint64), want.astype(np.uint64), [f"{entry}[{j}]" for j in range(width)], inputs)


# -- the same kernels on the GPU ----------------------------------------------------------------------




def contraction_inputs(n: int) -> dict:
    """Four f32 in [1, 2) and two f16x2 words of halves in [1, 2) per thread: products and sums
    exact in f64, so one rounding and two tell apart in the last bit of most rows."""
    rng = np.random.default_rng(21)
    halves = rng.uniform(1, 2, (n, 4)).astype(np.float16)
    return {"in": rng.uniform(1, 2, (n, 4)).astype(np.float32).reshape(-1), "out": np.zeros(n * 10, np.float32),
            "hin": halves.view(np.uint32).reshape(-1), "hout": np.zeros(n * 2, np.uint32)}


def test_mul_add_pairs_round_once_where_ptxas_fuses_them_and_twice_where_it_does_not(tmp_path, nvcc_ptx):
    """ptxas makes one FFMA/HFMA2 of a modifier-free mul whose only reader is an add/sub of the same
    kind (nvdisasm of tests/cuda/contraction.cu); with a rounding modifier on either, .ftz on one,
    or a second reader of the product it keeps FMUL + FADD. The cpu backend rounds as the GPU."""
    buffers = contraction_inputs(256)
    out = run(tmp_path, nvcc_ptx("contraction", "-O3"), "contraction", buffers, grid=(2, 1, 1), block=(128, 1, 1))
    x, y, z, w = (buffers["in"].reshape(-1, 4)[:, k].astype(np.float64) for k in range(4))
    f32 = np.float32
    fused, twice = f32(x * y + z), f32(f32(x * y) + z)
    want = np.stack([fused, f32(x * y - z), f32(z - x * y), f32(x * y + f32(z * w)), twice, twice, twice, twice,
                     np.zeros_like(fused), f32(x * y)], axis=1)
    got = out["out"].reshape(-1, 10)
    assert (fused != twice).mean() > 0.1  # the inputs tell the two apart (17 % of these rows)
    assert_columns(got.view(np.uint32), want.view(np.uint32), ["x*y+z", "x*y-z", "z-x*y", "x*y+(z*w)", "mul.rn",
                                                                "add.rn", "mul.ftz", "two readers", "zero", "x*y"],
                   buffers["in"].reshape(-1, 4))
    a, b = (buffers["hin"].reshape(-1, 2)[:, k].copy().view(np.float16).reshape(-1, 2).astype(np.float64) for k in (0, 1))
    f16 = np.float16
    hwant = np.stack([f16(a * b + a).view(np.uint32)[:, 0], f16(f16(a * b) + a).view(np.uint32)[:, 0]], axis=1)
    hgot = out["hout"].reshape(-1, 2)
    assert np.array_equal(hgot, hwant), np.flatnonzero((hgot != hwant).any(axis=1))[:5]


def test_a_debug_build_rounds_every_mul_and_add_as_written(tmp_path, nvcc_ptx):
    """nvcc -G writes `.target sm_90, debug`, which ptxas compiles unoptimised: no mul/add pair is
    fused (0 FFMA in its SASS, against 3 for -O3), so the interpreter fuses none either."""
    buffers = contraction_inputs(256)
    ptx = nvcc_ptx("contraction", "-G")
    assert ".target sm_90, debug" in ptx.read_text()
    out = run(tmp_path, ptx, "contraction", buffers, grid=(2, 1, 1), block=(128, 1, 1))
    x, y, z, w = (buffers["in"].reshape(-1, 4)[:, k].astype(np.float64) for k in range(4))
    f32 = np.float32
    p = f32(x * y).astype(np.float64)
    twice = f32(p + z)
    want = np.stack([twice, f32(p - z), f32(z - p), f32(p + f32(z * w)), twice, twice, twice, twice,
                     np.zeros_like(twice), f32(x * y)], axis=1)
    assert_columns(out["out"].reshape(-1, 10).view(np.uint32), want.view(np.uint32),
                   ["x*y+z", "x*y-z", "z-x*y", "x*y+(z*w)", "mul.rn", "add.rn", "mul.ftz", "two readers", "zero",
                    "x*y"], buffers["in"].reshape(-1, 4))
    a, b = (buffers["hin"].reshape(-1, 2)[:, k].copy().view(np.float16).reshape(-1, 2).astype(np.float64) for k in (0, 1))
    f16 = np.float16
    hwant = f16(f16(a * b).astype(np.float64) + a).view(np.uint32)[:, 0]
    hgot = out["hout"].reshape(-1, 2)
    assert np.array_equal(hgot[:, 0], hwant) and np.array_equal(hgot[:, 1], hwant)


def gpu_case(name: str) -> tuple:
    """(source, entry, buffers, grid, block, scalars) of one kernel as the tests above run it."""
    rng = np.random.default_rng(13)
    if name in INT_KERNELS or name == "logic3":
        rows = int_rows(256, seed=3, pairs=False) if name == "logic3" else int_rows(1024, seed=len(name))
        width = 259 if name == "logic3" else INT_KERNELS[name][0]
        return "int_ops", name, {"in": rows.reshape(-1), "out": np.zeros(len(rows) * width, np.uint32)}, \
            (len(rows) // 128, 1, 1), (128, 1, 1), ()
    if name == "float_ops":
        return "float_ops", name, {"in": float_rows(640, 4).reshape(-1), "out": np.zeros(640 * FLOAT_OPS, np.uint32)}, \
            (5, 1, 1), (128, 1, 1), ()
    if name == "float_arith":
        return "float_ops", name, {"in": float_rows(640, 5).reshape(-1), "out": np.zeros(640 * FLOAT_ARITH, np.uint32)}, \
            (5, 1, 1), (128, 1, 1), ()
    if name == "warp_ops":
        return "warp_ops", name, {"in": warp_values(256, 8), "out": np.zeros(256 * 32, np.uint32),
                                  "out64": np.zeros(512, np.uint64)}, (2, 1, 1), (128, 1, 1), ()
    if name == "atomics":
        return "atomics", name, atomic_inputs(9), (ATOMIC_BLOCKS, 1, 1), (ATOMIC_THREADS, 1, 1), ()
    if name == "cas_loop":
        return "atomics", name, {"v": rng.uniform(0, 100, 256).astype(np.float32), "out": np.zeros(1, np.float32)}, \
            (2, 1, 1), (128, 1, 1), ()
    if name == "const_mem":
        return "const_mem", name, {"idx": rng.integers(0, 1 << 32, 32, dtype=np.uint64).astype(np.uint32),
                                   "halves": rng.integers(0, 1 << 16, 64).astype(np.uint16),
                                   "plain": rng.integers(0, 1 << 32, 32, dtype=np.uint64).astype(np.uint32),
                                   "out": np.zeros(32 * 13, np.uint32)}, (1, 1, 1), (32, 1, 1), ()
    if name in CVT_KERNELS:
        buffers, want, _ = cvt_case(name)
        return "conversions", name, buffers, (len(want) // 128, 1, 1), (128, 1, 1), ()
    if name == "contraction":
        return "contraction", name, contraction_inputs(256), (2, 1, 1), (128, 1, 1), ()
    if name == "nan_select":
        buffers, grid, scalars = nan_select_case()
        return "nan_select", "nan64", buffers, grid, (128, 1, 1), scalars
    buffers, grid, block, scalars, _ = ordinary_case(name, rng)
    return "ordinary", name, buffers, grid, block, scalars


def _rr(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "rr.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, check=False)


GPU_CASES = [*INT_KERNELS, "logic3", "float_ops", "float_arith", "warp_ops", "atomics", "cas_loop", "const_mem", *ORDINARY,
             *CVT_KERNELS, "contraction", "nan_select"]


@pytest.mark.gpu
@pytest.mark.parametrize("name", GPU_CASES)
def test_the_isa_kernels_give_the_gpus_bytes(tmp_path, nvcc_ptx, gpu, name):
    source, entry, buffers, grid, block, scalars = gpu_case(name)
    launch(tmp_path / "l", nvcc_ptx(source, "-O3"), entry, buffers, grid=grid, block=block, scalars=scalars)
    for backend in ("cuda", "cpu"):
        r = _rr("run", tmp_path / "l", "--backend", backend, "-o", tmp_path / backend)
        assert r.returncode == 0, r.stderr
    out = {b: {k: np.load(tmp_path / b / f"{k}.npy") for k in buffers} for b in ("cuda", "cpu")}
    if name != "atomics":
        for k in buffers:
            a, b = out["cuda"][k].reshape(-1), out["cpu"][k].reshape(-1)
            bad = np.flatnonzero(a.view(np.uint8) != b.view(np.uint8)) // a.itemsize
            assert bad.size == 0, f"{k}: {len(set(bad))} elements differ, first [{bad[0]}]: gpu {a[bad[0]]!r} cpu {b[bad[0]]!r}"
        return
    # the GPU serialises same-address atomics in an order of its own: what that order leaves
    # free (the old values, exch and cas) must be a serial order on both; the rest is exact
    for b in ("cuda", "cpu"):
        check_atomics(buffers, out[b])
    exact_g = [w for w in range(16) if w not in (9, 10)]
    g = {b: out[b]["g"].reshape(-1, 16)[:, exact_g] for b in out}
    assert np.array_equal(g["cuda"], g["cpu"])
    s = {b: out[b]["shared_out"].reshape(-1, 16)[:, [0, 1, 2, 3, 6, 7, 8, 9]] for b in out}
    assert np.array_equal(s["cuda"], s["cpu"])
    g64 = {b: out[b]["g64"].reshape(-1, 8)[:, [0, 1, 3, 4, 5]] for b in out}
    assert np.array_equal(g64["cuda"], g64["cpu"])
