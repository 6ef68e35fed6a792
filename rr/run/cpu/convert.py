"""`cvt` for the CPU interpreter: between every integer and float type (f16, bf16, tf32, f32,
f64) with the rounding the opcode names (.rn/.rz/.rm/.rp/.rna for the float result, .rni/.rzi/
.rmi/.rpi for an integral one), float -> integer saturation and NaN -> 0, integer .sat, .ftz,
float .sat, .relu and .satfinite, the packed f16x2/bf16x2 pairs, and the fp8 packs of the engine's
kernels. Each statement is compiled once into the narrowest closure its types allow; the
rounding itself is `rr.numerics.rounding` (`round_float`, `round_integer`, `float_to_integer`).
"""

from __future__ import annotations

import numpy as np

from rr.numerics import fp8, half, rounding
from rr.ptx.model import Reg
from rr.run.cpu.machine import TYPES
from rr.run.cpu.values import Unsupported, dests, extend_to_register, f16_lanes, f16x2_join, type_bits

FLOATS = ("f16", "bf16", "tf32", "f32", "f64")
INTEGERS = ("u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64", "b8", "b16", "b32", "b64")
MODIFIERS = {"rn", "rz", "rm", "rp", "rna", "rni", "rzi", "rmi", "rpi", "ftz", "sat", "relu", "satfinite"}
_IT = {(8, True): np.int8, (16, True): np.int16, (32, True): np.int32, (64, True): np.int64,
       (8, False): np.uint8, (16, False): np.uint16, (32, False): np.uint32, (64, False): np.uint64}


def _source(ctx, operand, styp, op, ftz: bool):
    """A reader of the source as exact f64 (floats) or as its integer type."""
    if styp in FLOATS:
        raw = ctx.reader(operand, {"bf16": "b16", "tf32": "b32"}.get(styp, f"b{type_bits(styp)}"), op)
        fmt = styp

        def value(m):
            x = rounding.float_value(raw(m), fmt)
            return rounding.flush_subnormal(x) if ftz else x
        return value
    return ctx.reader(operand, styp, op)


def _finish(dfmt, mods):
    """The result modifiers on f64 values of the destination format: .ftz (f32), .sat ([0, 1],
    NaN -> +0), .relu (negatives -> +0, NaN -> canonical NaN), .satfinite (infinities ->
    the largest finite value of that sign). -0 counts as negative for .sat and .relu: the H200
    gives +0 (the ISA does not say)."""
    steps = []
    if "ftz" in mods and dfmt == "f32":
        steps.append(rounding.flush_subnormal)
    if "sat" in mods:
        steps.append(lambda r: np.where(np.isnan(r) | (r <= 0), 0.0, np.minimum(r, 1.0)))
    if "relu" in mods:
        steps.append(lambda r: np.where(np.signbit(r) & ~np.isnan(r), 0.0, r))
    if "satfinite" in mods:
        big = rounding.max_finite(dfmt)
        steps.append(lambda r: np.where(np.isinf(r), np.copysign(big, r), r))

    def finish(r):
        for s in steps:
            r = s(r)
        return r
    return finish


def to_float(styp: str, dfmt: str, mods: set):
    """The function value -> f64 of the destination format, for one source type."""
    rnd = next((r for r in mods if r in rounding.INTEGER_ROUNDING), None)
    frnd = next((r for r in ("rn", "rz", "rm", "rp", "rna") if r in mods), "rn")
    finish = _finish(dfmt, mods)
    p = rounding.FLOAT_FORMATS[dfmt][0]
    if styp in FLOATS:
        if rnd is not None:  # same size: an integral value in the same format
            integral = rounding.INTEGER_ROUNDING[rnd]
            to_integral = rounding.ROUNDINGS[integral]
            return lambda x: finish(rounding.round_float(np.where(np.isfinite(x), to_integral(x), x), dfmt))
        if "ftz" in mods and dfmt == "f32":  # the H200 flushes a value below f32's normals before rounding
            return lambda x: finish(rounding.round_float(rounding.flush_subnormal(x), dfmt, frnd))
        return lambda x: finish(rounding.round_float(x, dfmt, frnd))
    if type_bits(styp) <= 32:  # exact in f64
        return lambda v: finish(rounding.round_float(np.asarray(v).astype(np.float64), dfmt, frnd))
    return lambda v: finish(rounding.round_float(rounding.round_integer(v, p, frnd), dfmt, frnd))


def to_integer(styp: str, dtyp: str, mods: set):
    """The function source value -> the destination integer type."""
    bits, signed = type_bits(dtyp), dtyp[0] == "s"
    dt = _IT[bits, signed]
    if styp in FLOATS:
        rnd = next((r for r in mods if r in rounding.INTEGER_ROUNDING), "rzi")
        mode = rounding.INTEGER_ROUNDING[rnd]
        # NaN: the ISA says 0; the H200 gives 0 only from f32/f16/bf16 to at most 32 bits, and the
        # destination's sign bit alone from f64 or into 64 bits
        nan = 1 << (bits - 1) if styp == "f64" or bits == 64 else 0
        return lambda x: rounding.float_to_integer(x, bits, signed, mode, nan)
    src_signed = styp[0] == "s"
    if "sat" not in mods:  # sign or zero extension by the source, truncation to the destination
        wide = np.int64 if src_signed else np.uint64
        return lambda v: np.asarray(v).astype(wide).astype(dt)
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    sbits = type_bits(styp)
    slo, shi = (-(1 << (sbits - 1)), (1 << (sbits - 1)) - 1) if src_signed else (0, (1 << sbits) - 1)
    st = _IT[sbits, src_signed]

    def sat(v):
        v = np.asarray(v).astype(st)
        if lo > slo:  # clamp in the source's own type, where the bound is representable
            v = np.maximum(v, st(lo))
        if hi < shi:
            v = np.minimum(v, st(hi))
        return v.astype(dt)
    return sat


def _packed_pair(op, code, ctx, dtyp, mods):
    """cvt.frnd{.relu}{.satfinite}.{f16x2,bf16x2}.f32 d, a, b: a to the upper half, b the lower."""
    fmt = dtyp[:-2]
    frnd = next((r for r in ("rn", "rz") if r in mods), None)
    if frnd is None:
        raise Unsupported(f"{op.opcode!r} (a packed conversion needs .rn or .rz)")
    d = dests(op.operands[0])[0]
    a, b = ctx.reader(op.operands[1], "f32", op), ctx.reader(op.operands[2], "f32", op)
    finish = _finish(fmt, mods)

    def bits(x):
        rounded = finish(rounding.round_float(np.asarray(x).astype(np.float64), fmt, frnd))
        return rounding.float_bits(rounded, fmt).astype(np.uint32)
    if fmt == "f16" and frnd == "rn" and not mods & {"relu", "satfinite"}:  # numpy rounds f32 -> f16 to nearest even
        return lambda m, mask: m.put(d, f16x2_join(_f16(b(m)), _f16(a(m))), mask)
    return lambda m, mask: m.put(d, bits(b(m)) | (bits(a(m)) << np.uint32(16)), mask)


def _f16(x):
    """`cvt.rn.f16.f32`: rounded to nearest even; a NaN becomes the canonical one."""
    h = half.f16(x)
    nan = np.isnan(x)
    return np.where(nan, np.uint16(rounding.CANONICAL_NAN["f16"]).view(np.float16), h) if nan.any() else h


def _fp8(op, code, ctx, dtyp, styp, mods):
    """The fp8 packs: cvt.rn.satfinite{.relu}.{e4m3x2,e5m2x2}.{f16x2,f32} and back to f16x2."""
    d = dests(op.operands[0])[0]
    relu = (lambda h: np.where(h < 0, np.float16(0), h)) if "relu" in mods else (lambda h: h)
    if dtyp in ("e4m3x2", "e5m2x2"):
        to8 = fp8.to_e4m3 if dtyp == "e4m3x2" else fp8.to_e5m2
        if styp == "f16x2":
            a = ctx.reader(op.operands[1], "f16x2", op)
            src = op.operands[1]
            held = src.name if dtyp == "e4m3x2" and not mods & {"relu"} and isinstance(src, Reg) else None

            def run(m, mask):  # a word's (low, high) f16 → its (low, high) bytes: the halfword
                values = m.halves.get(held) if held else None
                if values is not None and values.size == 2 * m.n:  # its f16 values held (Machine.halves)
                    m.put(d, fp8.e4m3_of_values(values).view(np.uint16), mask)
                    return
                m.put(d, to8(relu(f16_lanes(a, m))).view(np.uint16), mask)
            return run
        if styp != "f32":
            raise Unsupported(f"cvt to {dtyp} from {styp}")
        # two f32: a -> the upper byte. Rounding f32 -> f16 -> fp8 could round twice; fp8's 2-3
        # mantissa bits against f16's 10 make that innocuous except at f16 subnormals.
        a, b = ctx.reader(op.operands[1], "f32", op), ctx.reader(op.operands[2], "f32", op)
        return lambda m, mask: m.put(d, to8(relu(half.f16(b(m)))).astype(np.uint16)
                                     | (to8(relu(half.f16(a(m)))).astype(np.uint16) << np.uint16(8)), mask)
    if dtyp == "f16x2" and styp in ("e4m3x2", "e5m2x2"):
        from8 = fp8.from_e4m3 if styp == "e4m3x2" else fp8.from_e5m2
        a = ctx.reader(op.operands[1], "b16", op)

        def run(m, mask):  # a halfword's (low, high) bytes → the word's (low, high) f16
            v = np.ascontiguousarray(np.broadcast_to(a(m), (m.n,)), np.uint16)
            m.put(d, np.ascontiguousarray(relu(from8(v.view(np.uint8))), np.float16).view(np.uint32), mask)
        return run
    raise Unsupported(f"cvt to {dtyp} from {styp}")


def compile_cvt(op, code, ctx):
    types = [p for p in code.types if p in TYPES]
    if len(types) != 2:
        raise Unsupported(f"{op.opcode!r} (a cvt names two types)")
    dtyp, styp = types
    mods = set(code.mods) - set(types)
    if mods - MODIFIERS:
        raise Unsupported(f"{op.opcode!r} (modifier {', '.join(sorted(mods - MODIFIERS))})")
    if "e4m3x2" in types or "e5m2x2" in types:
        return _fp8(op, code, ctx, dtyp, styp, mods)
    if dtyp in ("f16x2", "bf16x2") and styp == "f32":
        return _packed_pair(op, code, ctx, dtyp, mods)
    if dtyp not in FLOATS + INTEGERS or styp not in FLOATS + INTEGERS:
        raise Unsupported(f"cvt to {dtyp} from {styp}")
    d = dests(op.operands[0])[0]
    ftz = "ftz" in mods and styp == "f32"
    fast = _fast(op, ctx, dtyp, styp, mods, d)
    if fast is not None:
        return fast
    src = _source(ctx, op.operands[1], styp, op, ftz)
    if dtyp in FLOATS:
        convert, fmt = to_float(styp, dtyp, mods), dtyp
        nan = _nan_rule(styp, dtyp, mods)
        if nan is None:
            return lambda m, mask: m.put(d, rounding.float_bits(convert(src(m)), fmt), mask)

        def run(m, mask):
            x = src(m)
            r = rounding.float_bits(convert(x), fmt)
            m.put(d, np.where(np.isnan(x), nan(x), r), mask)
        return run
    convert = to_integer(styp, dtyp, mods)
    extend = extend_to_register(ctx, d, dtyp)
    if extend is not None:
        return lambda m, mask: m.put(d, extend(convert(src(m))), mask)
    return lambda m, mask: m.put(d, convert(src(m)), mask)


def _nan_rule(styp: str, dtyp: str, mods: set):
    """The NaN a float -> float cvt writes, where it is not the canonical one (None): the ISA
    leaves it open; the H200 keeps the payload converting to or from f64, bf16 -> f32 and
    f32 -> tf32 (.rna), but canonicalises an f32 source under .ftz first, and gives 0x7FBFE000
    for tf32 under .satfinite. .sat and .relu results are the ISA's (+0, the canonical NaN)."""
    if styp not in FLOATS or mods & {"sat", "relu"}:
        return None
    if dtyp == "tf32":
        if "satfinite" in mods:
            return lambda x: np.uint32(0x7FBFE000)
        return lambda x: rounding.quiet_nan_bits(x, "tf32")
    if "ftz" in mods and styp == "f32" and dtyp == "f64":
        return lambda x: np.uint64(0x7FFFFFFFE0000000)  # the canonical f32 NaN, widened
    if styp == "f64" or dtyp == "f64" or (styp, dtyp) == ("bf16", "f32"):
        return lambda x: rounding.quiet_nan_bits(x, dtyp)
    return None


def _fast(op, ctx, dtyp, styp, mods, d):
    """The conversions of the engine's hot loops, straight through numpy where it rounds as the
    PTX does: f16 -> f32, f32 and f64 -> f16 (nearest even), and plain integer widening."""
    if mods <= {"rn"} and dtyp == "f16" and styp == "f32":  # as `_f16`, its result held as a value (Machine.halves)
        a = ctx.reader(op.operands[1], styp, op)
        canonical_f16 = half.f16_as_f32(np.uint16(rounding.CANONICAL_NAN["f16"]).view(np.float16))

        def run(m, mask):
            x = np.asarray(a(m), np.float32)
            v = half.f16_values_of_f32(x)
            nan = np.isnan(x)
            m.put_halves(d, np.where(nan, canonical_f16, v) if nan.any() else v, 1, mask)
        return run
    if mods <= {"rn"} and dtyp == "f16" and styp == "f64":  # a NaN keeps its payload
        a = ctx.reader(op.operands[1], styp, op)

        def run(m, mask):
            x = a(m)
            m.put(d, np.where(np.isnan(x), rounding.quiet_nan_bits(x, "f16"), half.f16(x).view(np.uint16)), mask)
        return run
    if not mods and styp == "f16" and dtyp == "f32":
        a = ctx.f16_reader(op.operands[1], "f16", op)
        dt = TYPES[dtyp]
        canonical = np.array(rounding.CANONICAL_NAN[dtyp], TYPES[f"u{type_bits(dtyp)}"]).view(dt)

        def run(m, mask):
            v = a(m)
            m.put(d, np.where(np.isnan(v), canonical, v), mask)
        return run
    if not mods and styp in INTEGERS and dtyp in INTEGERS and styp[0] != "s" and (
            type_bits(dtyp) > type_bits(styp) or (dtyp[0] != "s" and type_bits(dtyp) == type_bits(styp))):
        # zero extension, a result that is never negative: the bits as they are
        a = ctx.reader(op.operands[1], styp, op)
        dt = TYPES[dtyp]
        return lambda m, mask: m.put(d, np.asarray(a(m)).astype(dt), mask)
    return None
