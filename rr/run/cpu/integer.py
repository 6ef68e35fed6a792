"""Integer and bit instructions for the CPU interpreter, each compiled once per statement into a
closure over numpy arrays, with the PTX ISA's definitions at the edges: shift counts clamp at the
width, bfe/bfi read 8-bit positions and lengths (length 0, fields past the msb, sign replication),
prmt in all modes, lop3 from its look-up table, funnel shifts that wrap or clamp, mul/mad .hi
of 64-bit operands, 24-bit multiplies, carry chains (add.cc/addc/mad.cc/madc), byte and half-word
dot products, packed 16-bit halves, and the SIMD video instructions without selectors.
"""

from __future__ import annotations

import numpy as np

from rr.ptx.model import Imm
from rr.ptx.opcodes import by_family
from rr.run.cpu.machine import BITS, TYPES
from rr.run.cpu.values import Unsupported, dests, join_halves, op_type, type_bits

U32, U64 = np.uint32, np.uint64
_SIGNED = {8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}
_PACKED = ("u16x2", "s16x2")
CARRY = "%cc"  # the condition-code register's carry flag (CC.CF), one bool per lane


def _run(d, fn, readers):
    """`run(m, mask)`: fn of the operands' values, written to register d."""
    if len(readers) == 1:
        (a,) = readers
        return lambda m, mask: m.put(d, fn(a(m)), mask)
    if len(readers) == 2:
        a, b = readers
        return lambda m, mask: m.put(d, fn(a(m), b(m)), mask)
    if len(readers) == 3:
        a, b, c = readers
        return lambda m, mask: m.put(d, fn(a(m), b(m), c(m)), mask)
    return lambda m, mask: m.put(d, fn(*[r(m) for r in readers]), mask)


def _readers(op, ctx, types):
    return [ctx.reader(s, t, op) for s, t in zip(op.operands[1:], types)]


def _dest(op):
    names = dests(op.operands[0])
    if len(names) != 1 or names[0] is None:
        raise Unsupported(f"destination {op.operands[0]}")
    return names[0]


def _unsigned(typ: str) -> str:
    return f"u{type_bits(typ)}" if typ not in _PACKED else "b32"


def _bit_length(x):
    """Bits needed for each unsigned value (0 for 0), exact for 64-bit values."""
    x = np.asarray(x)
    if x.dtype.itemsize <= 4:
        return np.frexp(x.astype(np.float64))[1].astype(np.int64)
    x = x.astype(U64)
    hi = (x >> U64(32)).astype(np.float64)
    lo = (x & U64(0xFFFFFFFF)).astype(np.float64)
    return np.where(hi > 0, 32 + np.frexp(hi)[1], np.frexp(lo)[1]).astype(np.int64)


def _mask(w, bits):
    """All-ones in the low w bits (w from 0 to bits), as the unsigned type of that width."""
    ut = BITS[bits]
    w = np.asarray(w, np.int64)
    ones = ut(np.iinfo(ut).max)
    return np.where(w >= bits, ones, (ut(1) << np.clip(w, 0, bits - 1).astype(ut)) - ut(1)).astype(ut)


def _split16(v, signed: bool):
    lo, hi = (np.asarray(v).astype(U32, copy=False) & U32(0xFFFF)), (np.asarray(v).astype(U32, copy=False) >> U32(16))
    lo, hi = lo.astype(np.uint16), hi.astype(np.uint16)
    return (lo.view(np.int16), hi.view(np.int16)) if signed else (lo, hi)


def _packed(fn, signed: bool):
    """fn applied to the two 16-bit halves of each operand, the results packed again."""
    def run(*words):
        parts = [_split16(w, signed) for w in words]
        lo = fn(*[p[0] for p in parts])
        hi = fn(*[p[1] for p in parts])
        return join_halves(np.asarray(lo).astype(np.int64).astype(np.uint16),
                           np.asarray(hi).astype(np.int64).astype(np.uint16))
    return run


# -- add, sub (with saturation and carries), min, max, abs, neg ------------------------------------

def _carry_in(m, mask):
    c = m.regs.get(CARRY)
    return np.zeros(m.n, bool) if c is None else c


def _add_sub(op, code, ctx):
    base, typ = code.base, op_type(code)
    sub = base.startswith("sub")
    d = _dest(op)
    if typ in _PACKED:
        f = np.subtract if sub else np.add
        return _run(d, _packed(f, typ[0] == "s"), _readers(op, ctx, ("b32", "b32")))
    if typ == "pred":
        raise Unsupported(f"{base}.pred")
    bits = type_bits(typ)
    carry_in = base in ("addc", "subc")
    if "cc" in code.mods or carry_in:
        writes_cc = "cc" in code.mods
        ut = BITS[bits]
        a, b = _readers(op, ctx, (_unsigned(typ),) * 2)

        def run(m, mask):
            x, y = np.broadcast_to(a(m), (m.n,)).astype(ut), np.broadcast_to(b(m), (m.n,)).astype(ut)
            cin = _carry_in(m, mask).astype(ut) if carry_in else ut(0)
            if sub:
                r = x - y - cin
                cout = (x < y) | ((x == y) & (cin != 0))  # borrow out
            else:
                s = x + y
                r = s + cin
                cout = (s < x) | (r < s)
            m.put(d, r, mask)
            if writes_cc:
                m.put(CARRY, cout, mask)
        return run
    if "sat" in code.mods:
        if typ != "s32":
            raise Unsupported(f"{op.opcode!r} (saturation is for .s32)")
        f = np.subtract if sub else np.add
        return _run(d, lambda x, y: np.clip(f(np.asarray(x, np.int64), np.asarray(y, np.int64)),
                                            -2 ** 31, 2 ** 31 - 1).astype(np.int32), _readers(op, ctx, (typ, typ)))
    return _run(d, np.subtract if sub else np.add, _readers(op, ctx, (typ, typ)))


def _min_max(op, code, ctx):
    base, typ = code.base, op_type(code)
    f = np.minimum if base == "min" else np.maximum
    relu = "relu" in code.mods
    d = _dest(op)
    if typ in _PACKED:
        g = (lambda x, y: np.maximum(f(x, y), 0)) if relu else f
        return _run(d, _packed(g, typ[0] == "s"), _readers(op, ctx, ("b32", "b32")))
    if relu:
        if typ != "s32":
            raise Unsupported(f"{op.opcode!r}")
        return _run(d, lambda x, y: np.maximum(f(x, y), np.int32(0)), _readers(op, ctx, (typ, typ)))
    return _run(d, f, _readers(op, ctx, (typ, typ)))


def _abs_neg(op, code, ctx):
    typ = op_type(code)
    d = _dest(op)
    if typ in _PACKED:
        raise Unsupported(f"{op.opcode!r}")
    dt = TYPES[typ]
    ut = BITS[type_bits(typ)]
    if np.dtype(dt).kind != "i":
        raise Unsupported(f"{op.opcode!r}")
    if code.base == "neg":  # two's complement on the bits: -MIN is MIN
        return _run(d, lambda a: ut(0) - np.asarray(a).astype(ut), _readers(op, ctx, (typ,)))
    return _run(d, lambda a: np.where(np.asarray(a) < 0, ut(0) - np.asarray(a).astype(ut), np.asarray(a).astype(ut)),
                _readers(op, ctx, (typ,)))


# -- logic ----------------------------------------------------------------------------------------

def _logic(op, code, ctx):
    base, typ = code.base, op_type(code)
    d = _dest(op)
    if base == "not":
        return _run(d, (lambda a: ~np.asarray(a, bool)) if typ == "pred" else np.invert, _readers(op, ctx, (typ,)))
    if base == "cnot":
        dt = TYPES[typ]
        return _run(d, lambda a: (np.asarray(a) == 0).astype(dt), _readers(op, ctx, (typ,)))
    f = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[base]
    if typ == "pred":
        return _run(d, lambda a, b: f(np.asarray(a, bool), np.asarray(b, bool)), _readers(op, ctx, (typ, typ)))
    return _run(d, f, _readers(op, ctx, (typ, typ)))


# Functions of two inputs by their 4-bit truth table (bit (b << 1) | c), for lop3's Shannon split.
_LUT2 = {
    0x0: lambda b, c: b & ~b, 0x1: lambda b, c: ~(b | c), 0x2: lambda b, c: ~b & c, 0x3: lambda b, c: ~b,
    0x4: lambda b, c: b & ~c, 0x5: lambda b, c: ~c, 0x6: lambda b, c: b ^ c, 0x7: lambda b, c: ~(b & c),
    0x8: lambda b, c: b & c, 0x9: lambda b, c: ~(b ^ c), 0xA: lambda b, c: c, 0xB: lambda b, c: ~b | c,
    0xC: lambda b, c: b, 0xD: lambda b, c: b | ~c, 0xE: lambda b, c: b | c, 0xF: lambda b, c: b | ~b,
}


def lop3_function(lut: int):
    """F(a, b, c) for lop3's immLut: the table's bit (a << 2) | (b << 1) | c (ta = 0xF0,
    tb = 0xCC, tc = 0xAA), split on a: F = F0(b, c) ^ (a & (F0(b, c) ^ F1(b, c)))."""
    f0, f1 = _LUT2[lut & 0xF], _LUT2[lut >> 4]
    if (lut & 0xF) == (lut >> 4):
        return lambda a, b, c: f0(b, c)
    return lambda a, b, c: (lambda x, y: x ^ (a & (x ^ y)))(f0(b, c), f1(b, c))


def _lop3(op, code, ctx):
    if op_type(code) != "b32":
        raise Unsupported(f"{op.opcode!r}")
    lut = ctx.immediate(op.operands[4], "immLut")
    if not 0 <= lut <= 255:
        raise Unsupported(f"immLut {lut} outside 0..255")
    fn = lop3_function(lut)
    boolop = next((p for p in code.mods if p in ("and", "or")), None)
    abc = _readers(op, ctx, ("b32",) * 3)
    if boolop is None:
        return _run(_dest(op), lambda a, b, c: np.asarray(fn(a, b, c), U32), abc)
    d, p = dests(op.operands[0])
    q = ctx.reader(op.operands[5], "pred", op)
    combine = np.logical_and if boolop == "and" else np.logical_or

    def run(m, mask):
        r = np.broadcast_to(np.asarray(fn(*[x(m) for x in abc]), U32), (m.n,))
        if d:
            m.put(d, r, mask)
        if p:
            m.put(p, combine(r != 0, q(m)), mask)
    return run


# -- shifts ---------------------------------------------------------------------------------------

def shift_function(base: str, typ: str):
    """shl/shr by a u32 count: counts past the width give 0 (or the sign, for shr.s)."""
    dt = np.dtype(TYPES[typ])
    bits = dt.itemsize * 8
    if base == "shr" and typ[0] == "b":  # shr.b is a logical shift: shr.u on the bits
        udt, logical = BITS[bits], shift_function("shr", f"u{bits}")
        return lambda a, n: logical(np.asarray(a).view(udt), n)

    def f(a, n):
        a = np.asarray(a, dt)
        n = np.asarray(n).astype(np.int64)
        clipped = np.minimum(n, bits - 1).astype(dt)
        if base == "shl":
            return np.where(n >= bits, dt.type(0), a << clipped).astype(dt)
        if dt.kind == "i":  # arithmetic: the sign fills in
            return (a >> clipped).astype(dt)
        return np.where(n >= bits, dt.type(0), a >> clipped).astype(dt)
    return f


def _shift(op, code, ctx):
    typ = op_type(code)
    return _run(_dest(op), shift_function(code.base, typ), _readers(op, ctx, (typ, "u32")))


def _shf(op, code, ctx):
    """Funnel shift of the 64-bit (b:a) by c, clamped to 32 or wrapped modulo 32."""
    left, clamp = "l" in code.mods, "clamp" in code.mods

    def f(a, b, c):
        n = np.minimum(np.asarray(c, U32), U32(32)) if clamp else np.asarray(c, U32) & U32(31)
        v = (np.asarray(b, U32).astype(U64) << U64(32)) | np.asarray(a, U32).astype(U64)
        n = n.astype(U64)
        return ((v << n) >> U64(32)).astype(U32) if left else (v >> n).astype(U32)
    return _run(_dest(op), f, _readers(op, ctx, ("b32", "b32", "u32")))


# -- bit fields, bytes ----------------------------------------------------------------------------

def _field(b, c, bits: int):
    """bfe/bfi's position and length: the low 8 bits of b and c (the ISA), but for 64-bit
    types the whole 32-bit values, as the H200 reads them."""
    pos, length = np.asarray(b, U32).astype(np.int64), np.asarray(c, U32).astype(np.int64)
    return (pos & 0xFF, length & 0xFF) if bits == 32 else (pos, length)


def bfe_function(typ: str):
    """bfe: field bits past the msb and the rest of d take the sign bit a[min(pos + len - 1,
    msb)] (.s types, len > 0) or 0."""
    bits = type_bits(typ)
    ut = BITS[bits]
    signed = typ[0] == "s"

    def f(a, b, c):
        a = np.asarray(a).view(ut) if np.ndim(a) else np.asarray(a).astype(ut)
        pos, length = _field(b, c, bits)
        w = np.clip(np.minimum(length, bits - pos), 0, bits)
        field = (a >> np.minimum(pos, bits - 1).astype(ut)) & _mask(w, bits)
        if not signed:
            return field
        top = np.minimum(pos + length - 1, bits - 1)
        sign = ((a >> np.clip(top, 0, bits - 1).astype(ut)) & ut(1)).astype(bool) & (length > 0)
        return np.where(sign, field | ~_mask(w, bits), field).astype(ut)
    return f


def bfi_function(typ: str):
    """bfi: b with the low len bits of a inserted at pos (nothing past the msb; len 0 or
    pos past the msb gives b)."""
    bits = type_bits(typ)
    ut = BITS[bits]

    def f(a, b, c, d):
        a, b = np.asarray(a).astype(ut, copy=False), np.asarray(b).astype(ut, copy=False)
        pos, length = _field(c, d, bits)
        w = np.clip(np.minimum(length, bits - pos), 0, bits)
        p = np.minimum(pos, bits - 1).astype(ut)
        m = _mask(w, bits) << p
        return ((b & ~m) | ((a << p) & m)).astype(ut)
    return f


def _bfe(op, code, ctx):
    typ = op_type(code)
    return _run(_dest(op), bfe_function(typ), _readers(op, ctx, (typ, "u32", "u32")))


def _bfi(op, code, ctx):
    typ = op_type(code)
    return _run(_dest(op), bfi_function(typ), _readers(op, ctx, (typ, typ, "u32", "u32")))


# prmt's modes: the source byte of d.b0..d.b3 for each value of c[1:0] (PTX ISA, prmt table)
PRMT_MODES = {
    "f4e": ((0, 1, 2, 3), (1, 2, 3, 4), (2, 3, 4, 5), (3, 4, 5, 6)),
    "b4e": ((0, 7, 6, 5), (1, 0, 7, 6), (2, 1, 0, 7), (3, 2, 1, 0)),
    "rc8": ((0, 0, 0, 0), (1, 1, 1, 1), (2, 2, 2, 2), (3, 3, 3, 3)),
    "ecl": ((0, 1, 2, 3), (1, 1, 2, 3), (2, 2, 2, 3), (3, 3, 3, 3)),
    "ecr": ((0, 0, 0, 0), (0, 1, 1, 1), (0, 1, 2, 2), (0, 1, 2, 3)),
    "rc16": ((0, 1, 0, 1), (2, 3, 2, 3), (0, 1, 0, 1), (2, 3, 2, 3)),
}


def prmt_function(mode: str | None, selector: int | None = None):
    """prmt.b32{.mode}: bytes of {b, a} picked by c (four 4-bit selectors whose msb replicates the
    byte's sign, or a mode's row for c[1:0]). A constant c is decoded once."""
    if mode is None:
        def select(c):
            c = np.asarray(c, U32)
            sel = np.stack([(c >> U32(4 * i)) & U32(0xF) for i in range(4)], -1).astype(np.int64)
            return sel & 7, (sel & 8) != 0
    else:
        table = np.array(PRMT_MODES[mode], np.int64)

        def select(c):
            return table[np.asarray(c, U32).astype(np.int64) & 3], None
    fixed = None if selector is None else select(np.uint32(selector & 0xFFFFFFFF))

    def f(a, b, c):
        a, b = np.atleast_1d(np.asarray(a, U32)), np.atleast_1d(np.asarray(b, U32))
        a, b = np.broadcast_arrays(a, b)
        src = np.stack([a, b], -1).view(np.uint8).reshape(-1, 8)  # bytes b0..b7 of {b, a}
        idx, sign = fixed if fixed is not None else select(c)
        if idx.ndim == 1:
            out = src[:, idx]
        else:
            idx, src = np.broadcast_to(idx, (src.shape[0], 4)), src
            out = np.take_along_axis(src, idx, 1)
        if sign is not None:
            out = np.where(np.broadcast_to(sign, out.shape), np.where(out & 0x80, np.uint8(0xFF), np.uint8(0)), out)
        return np.ascontiguousarray(out, np.uint8).view(U32).reshape(-1)
    return f


def _prmt(op, code, ctx):
    mode = next((p for p in code.mods if p in PRMT_MODES), None)
    c = op.operands[3]
    selector = ctx.immediate(c, "selector") if isinstance(c, Imm) else None
    return _run(_dest(op), prmt_function(mode, selector), _readers(op, ctx, ("b32", "b32", "b32")))


_REV8 = np.array([int(f"{i:08b}"[::-1], 2) for i in range(256)], np.uint8)


def _bits_op(op, code, ctx):
    """brev, clz, popc, bfind (.shiftamt)."""
    base, typ = code.base, op_type(code)
    bits = type_bits(typ)
    ut = BITS[bits]
    d = _dest(op)
    if base == "brev":
        def f(a):
            a = np.atleast_1d(np.asarray(a).astype(ut, copy=False))
            return np.ascontiguousarray(_REV8[a.view(np.uint8).reshape(-1, bits // 8)[:, ::-1]]).view(ut).reshape(-1)
        return _run(d, f, _readers(op, ctx, (typ,)))
    if base == "popc":
        return _run(d, lambda a: np.bitwise_count(np.asarray(a).astype(ut, copy=False)).astype(U32),
                    _readers(op, ctx, (typ,)))
    if base == "clz":
        return _run(d, lambda a: (bits - _bit_length(np.asarray(a).astype(ut, copy=False))).astype(U32),
                    _readers(op, ctx, (typ,)))
    shiftamt = "shiftamt" in code.mods  # bfind

    def f(a):
        a = np.asarray(a)
        u = a.view(ut) if a.ndim else a.astype(ut)
        if typ[0] == "s":
            u = np.where(a < 0, ~u, u).astype(ut)
        pos = _bit_length(u) - 1
        r = (bits - 1 - pos) if shiftamt else pos
        return np.where(pos < 0, U32(0xFFFFFFFF), r.astype(np.int64).astype(U32)).astype(U32)
    return _run(d, f, _readers(op, ctx, (typ,)))


# -- multiplications --------------------------------------------------------------------------------

def _mul_hi64(a, b, signed: bool):
    """The high 64 bits of the 128-bit product of 64-bit operands (through 32-bit limbs)."""
    x, y = np.asarray(a).astype(np.int64 if signed else U64).view(U64), np.asarray(b).astype(np.int64 if signed else U64).view(U64)
    m32 = U64(0xFFFFFFFF)
    x0, x1, y0, y1 = x & m32, x >> U64(32), y & m32, y >> U64(32)
    p00, p01, p10, p11 = x0 * y0, x0 * y1, x1 * y0, x1 * y1
    mid = (p00 >> U64(32)) + (p01 & m32) + (p10 & m32)
    hi = p11 + (p01 >> U64(32)) + (p10 >> U64(32)) + (mid >> U64(32))
    if signed:  # two's complement correction: subtract b where a < 0 and a where b < 0
        hi = hi - np.where(x >> U64(63) != 0, y, U64(0)) - np.where(y >> U64(63) != 0, x, U64(0))
        return hi.view(np.int64)
    return hi


def mul_function(mode: str, typ: str):
    """mul.lo/.hi/.wide of two `typ` operands (the product's low or high half, or all of it)."""
    bits = type_bits(typ)
    signed = typ[0] == "s"
    dt = TYPES[typ]
    wide = np.int64 if signed else U64
    if mode == "wide":
        if bits > 32:
            raise Unsupported(f"mul.wide.{typ}")
        out = {16: np.int32 if signed else U32, 32: wide}[bits]
        return lambda a, b: np.asarray(a, dt).astype(out) * np.asarray(b, dt).astype(out)
    if mode == "hi":
        if bits == 64:
            return lambda a, b: _mul_hi64(a, b, signed)
        return lambda a, b: ((np.asarray(a, dt).astype(wide) * np.asarray(b, dt).astype(wide)) >> bits).astype(dt)
    if bits == 64:
        return lambda a, b: np.asarray(a).astype(dt).view(U64) * np.asarray(b).astype(dt).view(U64)
    return lambda a, b: (np.asarray(a, dt).astype(wide) * np.asarray(b, dt).astype(wide)).astype(dt)


def _mul(op, code, ctx):
    typ = op_type(code)
    mode = next((p for p in code.mods if p in ("hi", "lo", "wide")), "lo")
    return _run(_dest(op), mul_function(mode, typ), _readers(op, ctx, (typ, typ)))


def _mad(op, code, ctx):
    typ = op_type(code)
    mode = next((p for p in code.mods if p in ("hi", "lo", "wide")), "lo")
    mul = mul_function(mode, typ)
    bits = type_bits(typ)
    ctyp = f"{typ[0]}{2 * bits}" if mode == "wide" else typ
    d = _dest(op)
    carry_in, writes_cc = code.base == "madc", "cc" in code.mods
    a, b, c = _readers(op, ctx, (typ, typ, ctyp))
    if carry_in or writes_cc:
        ut = BITS[type_bits(ctyp)]

        def run(m, mask):
            p = np.broadcast_to(np.asarray(mul(a(m), b(m))).astype(ut), (m.n,))
            s = p + np.asarray(c(m)).astype(ut)
            r = s + (_carry_in(m, mask).astype(ut) if carry_in else ut(0))
            m.put(d, r, mask)
            if writes_cc:
                m.put(CARRY, (s < p) | (r < s), mask)
        return run
    if "sat" in code.mods:
        if typ != "s32" or mode != "hi":
            raise Unsupported(f"{op.opcode!r} (saturation is for mad.hi.s32)")
        return _run(d, lambda x, y, z: np.clip(mul(x, y).astype(np.int64) + np.asarray(z, np.int64),
                                               -2 ** 31, 2 ** 31 - 1).astype(np.int32), [a, b, c])
    out = TYPES[ctyp]
    return _run(d, lambda x, y, z: (np.asarray(mul(x, y)).astype(out) + np.asarray(z, out)).astype(out), [a, b, c])


def _int24(v, signed: bool):
    """A 32-bit register's low 24 bits as a 24-bit integer (int64)."""
    v = np.asarray(v).astype(U32, copy=False).astype(np.int64) & 0xFFFFFF
    return np.where(v >= 1 << 23, v - (1 << 24), v) if signed else v


def _mul24(op, code, ctx):
    """mul24/mad24 .lo/.hi: t = a[23:0] * b[23:0] (48 bits); d = t[31:0] or t[47:16] (+ c)."""
    typ = op_type(code)
    signed = typ[0] == "s"
    hi = "hi" in code.mods
    dt = TYPES[typ]

    def product(a, b):
        t = _int24(a, signed) * _int24(b, signed)
        return ((t >> 16) if hi else t) & 0xFFFFFFFF

    def wrap(v):
        return np.asarray(v & 0xFFFFFFFF, np.int64).astype(U32).view(dt)
    if code.base == "mul24":
        return _run(_dest(op), lambda a, b: wrap(product(a, b)), _readers(op, ctx, (typ, typ)))
    if "sat" in code.mods:  # mad24.hi.sat.s32: the 32-bit signed addition saturates
        return _run(_dest(op), lambda a, b, c: np.clip(wrap(product(a, b)).astype(np.int64) + np.asarray(c, np.int64),
                                                       -2 ** 31, 2 ** 31 - 1).astype(np.int32),
                    _readers(op, ctx, (typ, typ, typ)))
    return _run(_dest(op), lambda a, b, c: wrap(product(a, b) + np.asarray(c).astype(U32, copy=False).astype(np.int64)),
                _readers(op, ctx, (typ, typ, typ)))


def _sad(op, code, ctx):
    """d = c + |a - b| (the difference taken in the signedness of the type, the sum wrapping)."""
    typ = op_type(code)
    ut = BITS[type_bits(typ)]

    def f(a, b, c):
        a, b = np.asarray(a), np.asarray(b)
        ua, ub = a.astype(ut), b.astype(ut)
        return (np.asarray(c).astype(ut) + np.where(a < b, ub - ua, ua - ub)).astype(ut)
    return _run(_dest(op), f, _readers(op, ctx, (typ, typ, typ)))


def _div_rem(op, code, ctx):
    """Integer div/rem, truncating. A zero divisor (machine-specific, the ISA says) gives what
    the H200 gives: all ones, but the dividend for a 64-bit rem."""
    typ = op_type(code)
    dt = np.dtype(TYPES[typ])
    ut = BITS[dt.itemsize * 8]
    rem = code.base == "rem"
    rem_by_zero_is_dividend = rem and dt.itemsize == 8
    if dt.kind == "u":
        def f(a, b):
            a, b = np.asarray(a, dt), np.asarray(b, dt)
            safe = np.where(b == 0, dt.type(1), b)
            by_zero = a if rem_by_zero_is_dividend else dt.type(np.iinfo(dt).max)
            return np.where(b == 0, by_zero, a % safe if rem else a // safe).astype(dt)
        return _run(_dest(op), f, _readers(op, ctx, (typ, typ)))

    def g(a, b):  # truncating division on magnitudes, in unsigned arithmetic (MIN / -1 wraps)
        a, b = np.asarray(a, dt), np.asarray(b, dt)
        ma = np.where(a < 0, ut(0) - a.astype(ut), a.astype(ut))
        mb = np.where(b < 0, ut(0) - b.astype(ut), b.astype(ut))
        safe = np.where(mb == 0, ut(1), mb)
        q, r = ma // safe, ma % safe
        q = np.where((a < 0) != (b < 0), ut(0) - q, q)
        r = np.where(a < 0, ut(0) - r, r)
        out = np.where(mb == 0, a.astype(ut) if rem_by_zero_is_dividend else ut(np.iinfo(ut).max), r if rem else q)
        return out.astype(ut).view(dt)
    return _run(_dest(op), g, _readers(op, ctx, (typ, typ)))


# -- dot products, SIMD video instructions ------------------------------------------------------

def _lanes(v, n: int, signed: bool):
    """A 32-bit word's n-byte elements (1 or 2 bytes) as int64, sign- or zero-extended."""
    v = np.atleast_1d(np.asarray(v).astype(U32, copy=False))
    el = np.ascontiguousarray(v).view(np.uint8 if n == 1 else np.uint16).reshape(v.shape[0], 4 // n)
    if signed:
        el = el.view(np.int8 if n == 1 else np.int16)
    return el.astype(np.int64)


def _dot(op, code, ctx):
    """dp4a (four byte products) and dp2a.lo/.hi (two half-word by byte products) + c."""
    atyp, btyp = [p for p in code.mods if p in ("u32", "s32")][:2]
    both_u = atyp == btyp == "u32"
    ctyp = "u32" if both_u else "s32"
    four = code.base == "dp4a"
    pick = 0 if "lo" in code.mods else 2

    def f(a, b, c):
        va = _lanes(a, 1 if four else 2, atyp == "s32")
        vb = _lanes(b, 1, btyp == "s32")
        if not four:
            vb = vb[:, pick:pick + 2]
        s = (va * vb).sum(1) + np.asarray(c).astype(np.int64)
        return (s & 0xFFFFFFFF).astype(U32)
    return _run(_dest(op), f, _readers(op, ctx, ("b32", "b32", ctyp)))


_VOPS = {
    "vadd": lambda x, y: x + y, "vsub": lambda x, y: x - y,
    "vavrg": lambda x, y: np.where(x + y >= 0, (x + y + 1) >> 1, (x + y) >> 1),
    "vabsdiff": lambda x, y: np.abs(x - y), "vmin": np.minimum, "vmax": np.maximum,
}


def _video(op, code, ctx):
    """vadd2/4 … vmax2/4 with the default selectors and mask, .sat or the .add accumulate."""
    base = code.base
    n = 1 if base.endswith("4") else 2
    kind = base[:-1]
    types = [p for p in code.mods if p in ("u32", "s32")]
    if len(types) != 3 or kind not in _VOPS:
        raise Unsupported(f"{op.opcode!r}")
    dtyp, atyp, btyp = types
    for o in op.operands:
        if getattr(o, "name", "").count(".") and not getattr(o, "special", False):
            raise Unsupported(f"{op.opcode!r} with a byte or mask selector ({o})")
    sat, add = "sat" in code.mods, "add" in code.mods
    fn = _VOPS[kind]
    lo, hi = ((-128, 127) if dtyp == "s32" else (0, 255)) if n == 1 else ((-2 ** 15, 2 ** 15 - 1) if dtyp == "s32" else (0, 2 ** 16 - 1))

    def f(a, b, c):
        t = fn(_lanes(a, n, atyp == "s32"), _lanes(b, n, btyp == "s32"))
        if add:
            return ((t.sum(1) + np.asarray(c).astype(U32, copy=False).astype(np.int64)) & 0xFFFFFFFF).astype(U32)
        if sat:
            t = np.clip(t, lo, hi)
        el = (t & ((1 << (8 * n)) - 1)).astype(np.uint8 if n == 1 else np.uint16)
        return np.ascontiguousarray(el).view(U32).reshape(-1)
    return _run(_dest(op), f, _readers(op, ctx, ("b32", "b32", "b32")))


HANDLERS = by_family({
    "add": _add_sub, "sub": _add_sub, "addc": _add_sub, "subc": _add_sub, "min": _min_max, "max": _min_max,
    "abs": _abs_neg, "neg": _abs_neg, "and": _logic, "or": _logic, "xor": _logic, "not": _logic, "cnot": _logic,
    "lop3": _lop3, "shl": _shift, "shr": _shift, "shf": _shf, "bfe": _bfe, "bfi": _bfi, "prmt": _prmt,
    "brev": _bits_op, "clz": _bits_op, "popc": _bits_op, "bfind": _bits_op, "mul": _mul, "mad": _mad,
    "madc": _mad, "mul24": _mul24, "mad24": _mul24, "sad": _sad, "div": _div_rem, "rem": _div_rem,
    "dp4a": _dot, "dp2a": _dot,
    **{f"{k}{n}": _video for k in _VOPS for n in (2, 4)},
})
"""family (rr.ptx.opcodes) -> compile(op, code, ctx) for integer types (floats go elsewhere)."""
