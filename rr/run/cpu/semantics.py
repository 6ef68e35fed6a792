"""What each instruction does, compiled once per statement into a closure `run(machine, mask)`.

Values are computed for every lane and written only to the lanes in `mask` (None: all); memory is
touched only by the lanes in `mask`. Arithmetic rounds as the PTX does, through `rr.numerics`
(f16 and f16x2 with one rounding, e4m3 packs with satfinite, the `.approx` functions, `mma`).
Integer and bit instructions are in `integer`, `cvt` in `convert`, warp votes and reductions in
`warp`, atomics in `atomic`, `cp.async`, `ldmatrix` and `stmatrix` in `matrix`; moves, memory,
floats, shuffles, barriers and images here. An instruction outside this set stops decoding with
its statement, line and opcode.
"""

from __future__ import annotations

import itertools

import numpy as np

from rr.numerics import half, mufu, rounding
from rr.numerics.forms import mma_form
from rr.ptx.model import Reg, Vec
from rr.ptx.opcodes import Kind, by_family, families
from rr.run.cpu import atomic, integer, matrix, warp
from rr.run.cpu.convert import compile_cvt
from rr.run.cpu.machine import (
    BITS,
    BUFFER_SHIFT,
    CONST_BASE,
    HANDLE_BASE,
    LOCAL_BASE,
    PARAM_BASE,
    SHARED_BASE,
    TYPES,
    ExecutionError,
    mma_sync,
    mma_sync_run,
)
from rr.run.cpu.values import (
    Ctx,
    Unsupported,
    dests,
    extend_to_register,
    f16_lanes,
    halves,
    join_halves,
    op_type,
    type_bits,
)

def compile_op(op, ctx: Ctx):
    if op.contract is not None:
        return _contracted(op, ctx)
    if op.contracted:
        return _contracted_mul(op, ctx)
    handler = _HANDLERS.get(op.code.family.name)
    if handler is None:
        raise Unsupported(f"{op.where()}: unsupported instruction {op.opcode!r}")
    try:
        return handler(op, op.code, ctx)
    except Unsupported as e:
        raise Unsupported(f"{op.where()}: {e}") from None


# -- moves, conversions -------------------------------------------------------------------------

def _mov(op, code, ctx):
    typ = op_type(code)
    d, s = op.operands[0], op.operands[1]
    if isinstance(s, Vec):  # pack {lo, hi}
        width = np.dtype(TYPES[typ]).itemsize * 8 // len(s.items)
        readers = [ctx.reader(x, {8: "b8", 16: "b16", 32: "b32"}[width], op) for x in s.items]
        out_t = BITS[np.dtype(TYPES[typ]).itemsize * 8]
        # two halfwords whose f16 values are held (Machine.halves) make a word held so
        halves = [x.name for x in s.items if isinstance(x, Reg) and not x.special] if width == 16 else []
        halves = halves if len(halves) == 2 == len(s.items) else None

        def run(m, mask):  # the items side by side, the first lowest (little-endian), one word a lane
            held = [m.halves.get(x) for x in halves] if halves and mask is None else ()
            if held and all(v is not None and v.size == m.n for v in held):
                both = np.empty((m.n, 2), np.float32)
                both[:, 0], both[:, 1] = held
                m.put_halves(d.name, both.reshape(-1), 2, None)
                return
            out = np.empty((m.n, len(readers)), BITS[width])
            for i, r in enumerate(readers):
                out[:, i] = r(m)
            m.put(d.name, out.view(out_t).reshape(m.n), mask)
        return run
    if isinstance(d, Vec):  # unpack
        names = dests(d)
        width = np.dtype(TYPES[typ]).itemsize * 8 // len(names)
        src = ctx.reader(s, typ, op)
        wide = BITS[np.dtype(TYPES[typ]).itemsize * 8]
        held = s.name if width == 16 and len(names) == 2 and isinstance(s, Reg) and not s.special else None

        def run(m, mask):  # a word's parts, the lowest first (little-endian)
            both = m.halves.get(held) if held and mask is None else None
            if both is not None and both.size == 2 * m.n:  # a word whose f16 values are held: so are its halves'
                for i, name in enumerate(names):
                    if name:
                        m.put_halves(name, both[i::2].copy(), 1, None)
                return
            v = np.asarray(src(m))
            v = np.ascontiguousarray(np.broadcast_to(v if v.dtype == wide else v.view(wide), (m.n,)))
            items = v.view(BITS[width]).reshape(m.n, len(names))
            for i, name in enumerate(names):
                if name:
                    m.put(name, items[:, i].copy(), mask)
        return run
    src = ctx.reader(s, typ, op)
    count = {16: 1, 32: 2}.get(type_bits(typ)) if isinstance(s, Reg) and not s.special else None
    if count is None:
        return lambda m, mask: m.put(d.name, src(m), mask)

    def run(m, mask):  # a register whose f16 values are held moves with them (Machine.move_halves)
        if not m.move_halves(d.name, s.name, count, mask):
            m.put(d.name, src(m), mask)
    return run


def _cvta(op, code, ctx):
    """Generic ↔ state-space addresses: global addresses are the same in both; a shared, local or
    const offset becomes SHARED_BASE / LOCAL_BASE / CONST_BASE + offset as a generic address, and back."""
    typ = "u64" if code.type == "u64" else "u32"
    src = ctx.reader(op.operands[1], typ, op)
    d = op.operands[0].name
    window = code.space if code.space in ("shared", "local", "const") else None
    if window is None:
        if code.space == "param":
            raise Unsupported(f"{op.opcode!r}")
        return lambda m, mask: m.put(d, src(m), mask)
    base = np.uint64({"shared": SHARED_BASE, "local": LOCAL_BASE, "const": CONST_BASE}[window])
    if "to" in code.mods:
        return lambda m, mask: m.put(d, (np.asarray(src(m)).astype(np.uint64) - base).astype(TYPES[typ]), mask)
    return lambda m, mask: m.put(d, np.asarray(src(m)).astype(np.uint64) + base, mask)


def _isspacep(op, code, ctx):
    """isspacep.{global,shared,local,const,param}: the window a generic address falls in."""
    space = code.space or ""
    windows = {"shared": SHARED_BASE, "local": LOCAL_BASE, "const": CONST_BASE, "param": PARAM_BASE}
    if space not in windows and space != "global":
        raise Unsupported(f"{op.opcode!r}")
    d = op.operands[0].name
    a = ctx.reader(op.operands[1], "u64", op)
    tags = [np.uint64(b >> BUFFER_SHIFT) for b in windows.values()]

    def run(m, mask):
        tag = np.asarray(a(m), np.uint64) >> np.uint64(BUFFER_SHIFT)
        if space == "global":
            r = ~np.isin(tag, tags) & (tag != np.uint64(HANDLE_BASE >> BUFFER_SHIFT))
        else:
            r = tag == np.uint64(windows[space] >> BUFFER_SHIFT)
        m.put(d, np.broadcast_to(r, (m.n,)), mask)
    return run


# -- arithmetic: integers go to `integer`, floats stay here -------------------------------------

_F16_BIN = {"add": half.add, "sub": half.sub, "mul": half.mul, "min": half.fmin, "max": half.fmax}
_FLOATS = ("f16", "f16x2", "bf16", "bf16x2", "f32", "f64")


def _arith(op, code, ctx):
    base = code.base
    typ = op_type(code)
    if typ not in _FLOATS:
        handler = integer.HANDLERS.get(code.family.name)
        if handler is None:
            raise Unsupported(f"{op.opcode!r}")
        return handler(op, code, ctx)
    d = op.operands[0].name
    srcs = op.operands[1:]
    if typ in ("bf16", "bf16x2"):
        return _bf16(op, code, ctx, typ)
    if typ in ("f16", "f16x2"):
        count = 1 if typ == "f16" else 2
        on_values = _f16_values_fn(base, code)
        if on_values is not None:  # on the halves' f32 values (rr.numerics.half's *_values; Machine.halves)
            vs = [ctx.f16_reader(s, typ, op) for s in srcs]
            return lambda m, mask: m.put_halves(d, on_values(*[v(m) for v in vs]), count, mask)
        rt = "b16" if typ == "f16" else "f16x2"
        rs = [ctx.reader(s, rt, op) for s in srcs]
        fn = _f16_fn(base, code)

        if typ == "f16":
            return lambda m, mask: m.put(d, fn(*[np.asarray(r(m)).view(np.float16) for r in rs]), mask)

        def run(m, mask):  # both halves at once: a word's f16 view is its (low, high) pair
            halves = [f16_lanes(r, m) for r in rs]
            m.put(d, np.ascontiguousarray(fn(*halves), np.float16).view(np.uint32), mask)
        return run
    rs = [ctx.reader(s, typ, op) for s in srcs]
    fn = _float_fn(base, set(code.mods), typ)
    if fn is None:
        raise Unsupported(f"{op.opcode!r}")
    return integer._run(d, fn, rs)


def _contracted(op, ctx):
    """An add/sub fused with the mul feeding it (rr.run.cpu.program._contract): ±a·b ± c rounded
    once, with the add's modifiers (.ftz)."""
    code = op.code
    typ = op_type(code)
    a, b, c, negate_product, negate_c = op.contract
    d = op.operands[0].name
    if typ == "f32":
        fma = _float_fn("fma", set(code.mods) | {"rn"}, typ)
        ra, rb, rc = (ctx.reader(x, typ, op) for x in (a, b, c))

        def run(m, mask):
            x, z = np.asarray(ra(m), np.float32), np.asarray(rc(m), np.float32)
            m.put(d, fma(-x if negate_product else x, rb(m), -z if negate_c else z), mask)
        return run
    ra, rb, rc = (ctx.f16_reader(x, typ, op) for x in (a, b, c))
    count = 1 if typ == "f16" else 2

    def run(m, mask):  # on the halves' values, as in _arith
        x, z = ra(m), rc(m)
        m.put_halves(d, half.fma_values(-x if negate_product else x, rb(m), -z if negate_c else z), count, mask)
    return run


def _contracted_mul(op, ctx):
    """A mul that an add contracted (rr.run.cpu.program._contract): its product is read by that
    add alone, which computes the fma from the mul's operands, so nothing is computed here; its
    operands are read (for the record of registers read before any write)."""
    names = [x.name for x in op.operands[1:3] if isinstance(x, Reg) and not x.special]

    def run(m, mask):
        for name in names:
            m.touch(name, op)
    return run


def _relu(x):
    """`.relu` on f16: negative results (-0 too, as on the H200) become +0, a NaN the canonical NaN."""
    r = np.where(np.signbit(x), np.float16(0), x)
    return np.where(np.isnan(x), np.uint16(rounding.CANONICAL_NAN["f16"]).view(np.float16), r)


def _min_max_fn(base, mods, dt):
    """PTX min/max on one float dtype, with .NaN, .xorsign.abs and .ftz (f32)."""
    minimum, nan = base == "min", "NaN" in mods
    xorsign = "xorsign" in mods
    ftz = "ftz" in mods and dt == np.float32

    def f(a, b):
        x, y = np.asarray(a, dt), np.asarray(b, dt)
        if ftz:
            x, y = rounding.flush_subnormal(x), rounding.flush_subnormal(y)
        if xorsign:
            sign = np.signbit(x) ^ np.signbit(y)
            x, y = np.abs(x), np.abs(y)
        r = half.ptx_min_max(x, y, minimum, nan)
        if xorsign:
            r = np.where(np.isnan(r), r, np.where(sign, -np.abs(r), np.abs(r)))
        return rounding.flush_subnormal(r) if ftz else r
    return f


def _f16_values_fn(base, code):
    """The f16 instruction on its operands' halves as f32 values (rr.numerics.half), where one
    computes it; None for the others (`_f16_fn`, on the bits)."""
    if base in ("add", "sub", "mul"):
        return {"add": half.add_values, "sub": half.sub_values, "mul": half.mul_values}[base]
    if base == "fma" and "relu" not in code.mods:
        return half.fma_values
    if base in ("min", "max") and "xorsign" not in code.mods:
        minimum, nan = base == "min", "NaN" in code.mods
        return lambda a, b: half.min_max_values(a, b, minimum, nan)
    if base in ("neg", "abs"):
        negate = base == "neg"
        return lambda a: half.sign_values(a, negate)
    return None


def _f16_fn(base, code):
    if base in ("min", "max"):
        return _min_max_fn(base, code.mods, np.float16)
    if base in _F16_BIN:
        return _F16_BIN[base]
    if base == "fma":
        return (lambda a, b, c: _relu(half.fma(a, b, c))) if "relu" in code.mods else half.fma
    if base in ("neg", "abs"):
        return _sign_op(base, np.float16)
    if base == "ex2" and "approx" in code.mods:  # MUFU.EX2.F16: the H200's table
        return mufu.ex2_approx_f16
    raise Unsupported(f"f16 {code.text}")


def _sign_op(base, dt):
    """neg/abs on f16, f32, f64, on the bits. A NaN: the ISA says some NaN (f16, f32) or the
    input (f64); the H200 gives the canonical NaN and the input."""
    size = np.dtype(dt).itemsize
    ut = BITS[8 * size]
    sign, mag = ut(1 << (8 * size - 1)), ut((1 << (8 * size - 1)) - 1)
    infinity = ut({2: 0x7C00, 4: 0x7F800000, 8: 0x7FF0000000000000}[size])
    canonical = ut(rounding.CANONICAL_NAN[{2: "f16", 4: "f32", 8: "f64"}[size]])

    def f(a):
        u = np.asarray(a, dt).view(ut)
        r = u ^ sign if base == "neg" else u & mag
        nan = (u & mag) > infinity
        if nan.any():
            r = np.where(nan, u if size == 8 else canonical, r)
        return r.view(dt)
    return f


def _bf16(op, code, ctx, typ):
    """bf16/bf16x2 add, sub, mul, fma (.relu), min, max, neg, abs: exact in f64 where a single
    f64 rounding cannot disturb the bf16 one (products and sums of two bf16), fma through a
    round-to-odd f64 sum, then rounded to bf16."""
    base = code.base
    d = op.operands[0].name
    rt = "b16" if typ == "bf16" else "b32"
    rs = [ctx.reader(s, rt, op) for s in op.operands[1:]]

    def val(bits):
        return rounding.float_value(bits, "bf16")

    def out(x):
        return rounding.float_bits(rounding.round_float(x, "bf16"), "bf16")
    if base in ("add", "sub", "mul"):
        g = {"add": np.add, "sub": np.subtract, "mul": np.multiply}[base]
        fn = lambda a, b: out(g(val(a), val(b)))  # noqa: E731
    elif base == "fma":
        relu = "relu" in code.mods

        def fn(a, b, c):
            r = out(rounding.round_to_odd_sum(val(a) * val(b), val(c)))
            if relu:
                x = val(r)
                r = np.where(np.isnan(x), np.uint16(rounding.CANONICAL_NAN["bf16"]),
                             np.where(np.signbit(x), np.uint16(0), r))
            return r
    elif base in ("min", "max"):
        mm = _min_max_fn(base, code.mods, np.float32)
        fn = lambda a, b: rounding.float_bits(mm(val(a).astype(np.float32), val(b).astype(np.float32)).astype(np.float64), "bf16")  # noqa: E731
    elif base in ("neg", "abs"):
        flip = np.uint16(0x8000)
        fn = (lambda a: np.asarray(a, np.uint16) ^ flip) if base == "neg" else (lambda a: np.asarray(a, np.uint16) & ~flip)
    else:
        raise Unsupported(f"{op.opcode!r}")
    if typ == "bf16":
        return integer._run(d, lambda *v: np.asarray(fn(*[np.asarray(x).astype(np.uint16) for x in v])).astype(np.uint16), rs)

    def packed(*words):
        pairs = [halves(w) for w in words]
        return join_halves(np.asarray(fn(*[p[0] for p in pairs])), np.asarray(fn(*[p[1] for p in pairs])))
    return integer._run(d, packed, rs)


def _float_fn(base, mods, typ):
    """f32/f64 arithmetic: the rounding the opcode names (rn, rz, rm, rp), .ftz (f32 inputs and
    results), .sat ([0, 1], NaN and -0 -> +0). A modifier outside these is refused."""
    dt = TYPES[typ]
    rnd = next((m for m in ("rn", "rz", "rm", "rp") if m in mods), "rn")
    known = {"rn", "rz", "rm", "rp", "ftz", "sat", "approx", "full", "NaN", "xorsign", "abs", typ}
    if mods - known:
        raise Unsupported(f"{base}.{typ} with {', '.join(sorted(mods - known))}")
    ftz = (lambda x: rounding.flush_subnormal(np.asarray(x, dt))) if "ftz" in mods and typ == "f32" else (lambda x: np.asarray(x, dt))
    sat = (lambda x: np.where(np.isnan(x) | (x <= 0), dt(0), np.minimum(x, dt(1))).astype(dt)) if "sat" in mods else (lambda x: x)

    def r(x):
        return ftz(np.asarray(x, dt))

    canonical = (dt(np.array(rounding.CANONICAL_NAN[typ], BITS[8 * np.dtype(dt).itemsize]).view(dt)) if typ == "f32"
                 else None)

    def out(x):
        x = sat(r(x))
        if canonical is not None:  # an f32 NaN result is the canonical one (on the H200)
            nan = np.isnan(x)
            if nan.any():
                return np.where(nan, canonical, x)
        return x
    if rnd != "rn" and base not in ("add", "sub", "mul", "fma", "mad"):
        raise Unsupported(f"{base}.{rnd}.{typ}")
    if base in ("add", "sub", "mul", "fma", "mad"):
        exact = _exact_arith(base, typ, rnd)
        if exact is not None:
            return lambda *v: out(exact(*[r(x) for x in v]))
        f = {"add": np.add, "sub": np.subtract, "mul": np.multiply}[base]  # rn: numpy's own rounding
        if typ == "f64":
            return lambda a, b: rounding.nan_operand_f64(f(r(a), r(b)), b, a)
        return lambda a, b: out(f(r(a), r(b)))
    if base == "div":
        if "approx" in mods or "full" in mods:
            return lambda a, b: mufu.div_approx(a, b, ftz="ftz" in mods) if typ == "f32" else np.asarray(a, dt) / b
        return lambda a, b: out((np.asarray(a, np.float64) / np.asarray(b, np.float64)).astype(dt))
    if base in ("min", "max"):
        return _min_max_fn(base, mods, dt)
    if base in ("neg", "abs"):
        return _sign_op(base, dt)
    if base == "sqrt":
        if "approx" in mods and typ == "f32":  # MUFU.SQRT, as the H200 computes it
            return lambda a: mufu.sqrt_approx(a, ftz="ftz" in mods)
        return lambda a: out(np.sqrt(np.asarray(a, np.float64)).astype(dt))
    if typ == "f64" and base in ("rcp", "rsqrt"):  # .approx.ftz.f64: modelled as the exact value
        return (lambda a: r(1.0 / r(a))) if base == "rcp" else (lambda a: r(1.0 / np.sqrt(r(a))))
    if base == "rcp":
        return (lambda a: mufu.rcp_approx(a, ftz="ftz" in mods)) if "approx" in mods else \
            (lambda a: out((1.0 / np.asarray(a, np.float64)).astype(dt)))
    if base == "rsqrt":
        return lambda a: mufu.rsqrt_approx(a, ftz="ftz" in mods)
    if base == "ex2":
        return lambda a: mufu.ex2_approx(a, ftz="ftz" in mods)
    if base == "lg2":
        return lambda a: r(np.log2(np.asarray(a, np.float64)).astype(dt))
    if base == "copysign":  # the sign of a on the magnitude of b
        return lambda a, b: np.copysign(np.asarray(b, dt), np.asarray(a, dt))
    return None


def _exact_arith(base, typ, rnd):
    """add/sub/mul/fma rounded once from the exact result, as `rnd` says, or None where numpy's
    own arithmetic already is that (rn add, sub and mul)."""
    if typ == "f32":
        if base == "mul":  # the product of two f32 is exact in f64
            return None if rnd == "rn" else (lambda a, b: rounding.round_float(a.astype(np.float64) * b, "f32", rnd).astype(np.float32))

        def rounded(x, y):  # x + y (f64 terms) rounded once to f32
            odd = rounding.round_to_odd_sum(x, y)
            if rnd == "rn":  # numpy's f64 -> f32 rounds to nearest even
                return odd.astype(np.float32)
            return rounding.zero_sign(rounding.round_float(odd, "f32", rnd).astype(np.float32), x, y, rnd, odd)
        if base in ("add", "sub"):
            if rnd == "rn":
                return None
            sign = -1.0 if base == "sub" else 1.0
            return lambda a, b: rounded(a.astype(np.float64), sign * b.astype(np.float64))
        return lambda a, b, c: rounded(a.astype(np.float64) * b, c.astype(np.float64))
    if base in ("fma", "mad"):
        return lambda a, b, c: rounding.fma_f64(a, b, c, rnd)
    if rnd == "rn":
        return None
    if base == "mul":
        raise Unsupported(f"mul.{rnd}.f64")
    if base == "sub":  # a - b as a + (-b); a NaN b stays as it is
        return lambda a, b: rounding.nan_operand_f64(rounding.sum_f64(a, -b, rnd), b, a)
    return lambda a, b: rounding.sum_f64(a, b, rnd)


_TESTP = {
    "finite": np.isfinite, "infinite": np.isinf, "number": lambda x: ~np.isnan(x), "notanumber": np.isnan,
    "normal": lambda x: np.isfinite(x) & ((np.abs(x) >= np.finfo(x.dtype).tiny) | (x == 0)),
    "subnormal": lambda x: (np.abs(x) < np.finfo(x.dtype).tiny) & (x != 0),
}


def _testp(op, code, ctx):
    """testp: a predicate from the float's class (zeros count as normal, as the ISA says)."""
    test = next((p for p in code.mods if p in _TESTP), None)
    typ = op_type(code)
    if test is None or typ not in ("f32", "f64"):
        raise Unsupported(f"{op.opcode!r}")
    d = op.operands[0].name
    a = ctx.reader(op.operands[1], typ, op)
    fn = _TESTP[test]
    return lambda m, mask: m.put(d, np.broadcast_to(fn(np.asarray(a(m))), (m.n,)), mask)


def _compare(cmp: str):
    """setp/set's comparison on two typed values (the unordered forms true for a NaN)."""
    unsigned = {"lo": "lt", "ls": "le", "hi": "gt", "hs": "ge"}
    base_cmp = unsigned.get(cmp, cmp.rstrip("u") if cmp.endswith("u") and cmp not in ("nu",) else cmp)
    fns = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
           "ge": np.greater_equal}
    if cmp not in ("num", "nan") and base_cmp not in fns:
        raise Unsupported(f"comparison {cmp!r}")

    def f(x, y):
        if cmp == "num":
            return ~(np.isnan(x) | np.isnan(y))
        if cmp == "nan":
            return np.isnan(x) | np.isnan(y)
        r = fns[base_cmp](x, y)
        if cmp.endswith("u") and cmp not in unsigned and np.asarray(x).dtype.kind == "f":
            r = r | np.isnan(x) | np.isnan(y)
        return r
    return f


_BOOL = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}


def _setp(op, code, ctx):
    typ = op_type(code)
    cmp = code.compare
    boolop = next((p for p in code.mods[1:] if p in _BOOL), None)
    names = dests(op.operands[0])
    rt = {"bf16": "b16", "f16x2": "b32", "bf16x2": "b32"}.get(typ, typ)
    if rt != typ:
        raise Unsupported(f"{op.opcode!r}")
    a, b = ctx.reader(op.operands[1], typ, op), ctx.reader(op.operands[2], typ, op)
    c = ctx.reader(op.operands[3], "pred", op) if boolop else None
    compare = _compare(cmp)

    def run(m, mask):
        r = np.broadcast_to(compare(a(m), b(m)), (m.n,))
        if boolop:
            p = c(m)
            r2 = _BOOL[boolop](~r, p)
            r = _BOOL[boolop](r, p)
        else:
            r2 = ~r
        m.put(names[0], r, mask)
        if len(names) > 1 and names[1]:
            m.put(names[1], r2, mask)
    return run


def _set(op, code, ctx):
    """set.cmp.dtype.stype: all ones (integer destination) or 1.0f for true, 0 for false."""
    types = [p for p in code.mods[1:] if p in TYPES]
    if len(types) != 2 or types[0] not in ("u32", "s32", "b32", "f32"):
        raise Unsupported(f"{op.opcode!r}")
    dtyp, styp = types
    boolop = next((p for p in code.mods[1:] if p in _BOOL), None)
    d = op.operands[0].name
    a, b = ctx.reader(op.operands[1], styp, op), ctx.reader(op.operands[2], styp, op)
    c = ctx.reader(op.operands[3], "pred", op) if boolop else None
    compare = _compare(code.compare)
    true = np.float32(1.0).view(np.uint32) if dtyp == "f32" else np.uint32(0xFFFFFFFF)

    def run(m, mask):
        r = np.broadcast_to(compare(a(m), b(m)), (m.n,))
        if boolop:
            r = _BOOL[boolop](r, c(m))
        m.put(d, np.where(r, true, np.uint32(0)), mask)
    return run


def _selp(op, code, ctx):
    typ = op_type(code)
    d = op.operands[0].name
    a, b = ctx.reader(op.operands[1], typ, op), ctx.reader(op.operands[2], typ, op)
    c = ctx.reader(op.operands[3], "pred", op)
    return lambda m, mask: m.put(d, np.where(c(m), a(m), b(m)).astype(TYPES[typ]), mask)


def _slct(op, code, ctx):
    """slct.dtype.{s32,f32} d, a, b, c: a where c >= 0 (-0 included, NaN not), else b."""
    types = [p for p in code.types if p in TYPES]
    if len(types) != 2 or types[1] not in ("s32", "f32"):
        raise Unsupported(f"{op.opcode!r}")
    dtyp, ctyp = types
    bt = f"b{type_bits(dtyp)}"
    d = op.operands[0].name
    a, b = ctx.reader(op.operands[1], bt, op), ctx.reader(op.operands[2], bt, op)
    c = ctx.reader(op.operands[3], ctyp, op)
    ftz = "ftz" in code.mods and ctyp == "f32"

    def run(m, mask):
        cv = c(m)
        if ftz:
            cv = rounding.flush_subnormal(cv)
        m.put(d, np.where(np.asarray(cv) >= 0, a(m), b(m)), mask)
    return run


# -- memory -----------------------------------------------------------------------------------------

_SPACES = ("global", "shared", "param", "local", "const")  # the interpreter's memories (else generic)


def _access(op, code, ctx, address) -> tuple:
    """(state space, vector length, bytes per element, address function, param-memory name)."""
    space = code.space if code.space in _SPACES else "generic"
    addr, pm = ctx.address(address, op)
    return space, code.vector, np.dtype(TYPES[op_type(code)]).itemsize, addr, pm


def _ld(op, code, ctx):
    space, vec, width, addr, pm = _access(op, code, ctx, op.operands[1])
    names = dests(op.operands[0]) if isinstance(op.operands[0], Vec) else [op.operands[0].name]  # Triton: `{ %rs1 }`
    typ = op_type(code)
    # a signed element narrower than its register is sign-extended to the register's width
    extend = [extend_to_register(ctx, name, typ) for name in names]

    def run(m, mask):
        a = addr(m)
        if pm is not None:
            mem = m.param_memory(pm)
            off = np.asarray(a, np.int64)
            if (off + width * vec > mem.shape[1]).any():
                raise ExecutionError(f"{op.where()}: read past the {mem.shape[1]}-byte parameter {pm}")
            raw = mem[np.arange(m.n)[:, None], off[:, None] + np.arange(width * vec)]
        else:
            raw = m.gather(space, a, width * vec, op, mask)
        vals = np.ascontiguousarray(raw).view(BITS[width * 8]).reshape(m.n, vec)
        # each element's lanes contiguous: one transpose, not a strided copy per element (4x slower)
        rows = np.ascontiguousarray(vals.T) if vec > 1 else vals.reshape(1, m.n)
        for name, v, ext in zip(names, rows, extend):
            if name:
                m.put(name, v if ext is None else ext(v), mask)
    return run


def _st(op, code, ctx):
    space, vec, width, addr, pm = _access(op, code, ctx, op.operands[0])
    items = op.operands[1].items if isinstance(op.operands[1], Vec) else (op.operands[1],)  # Triton: `{ %rs1 }`
    readers = [ctx.reader(x, f"b{8 * width}" if width > 1 else "b8", op) for x in items]

    def run(m, mask):
        data = np.stack([np.broadcast_to(np.asarray(r(m)).astype(BITS[8 * width]), (m.n,)) for r in readers],
                        axis=1)
        raw = np.ascontiguousarray(data).view(np.uint8).reshape(m.n, width * vec)
        a = addr(m)
        if pm is not None:
            mem = m.param_memory(pm)
            lanes = np.arange(m.n) if mask is None else np.flatnonzero(mask)
            off = np.asarray(a, np.int64)[lanes]
            mem[lanes[:, None], off[:, None] + np.arange(width * vec)] = raw[lanes]
            return
        m.scatter(space, a, raw, op, mask)
    return run


# -- warp-wide ----------------------------------------------------------------------------------------

def _shfl(op, code, ctx):
    mode = next((m for m in code.mods if m in ("up", "down", "bfly")), "idx")
    names = dests(op.operands[0])
    a = ctx.reader(op.operands[1], "b32", op)
    b = ctx.reader(op.operands[2], "u32", op)
    c = ctx.reader(op.operands[3], "u32", op)

    def run(m, mask):
        val = np.broadcast_to(a(m), (m.n,)).reshape(-1, 32)
        lane = np.arange(32, dtype=np.int64)[None, :]
        bv = np.broadcast_to(np.asarray(b(m)).astype(np.int64), (m.n,)).reshape(-1, 32)
        cv = np.broadcast_to(np.asarray(c(m)).astype(np.int64), (m.n,)).reshape(-1, 32)
        seg = (cv >> 8) & 31
        clamp = cv & 31
        max_lane = (lane & seg) | (clamp & ~seg)
        min_lane = lane & seg
        if mode == "up":
            j = lane - bv
            ok = j >= max_lane
        elif mode == "down":
            j = lane + bv
            ok = j <= max_lane
        elif mode == "bfly":
            j = lane ^ bv
            ok = j <= max_lane
        else:  # idx
            j = min_lane | (bv & ~seg)
            ok = j <= max_lane
        j = np.where(ok, j, lane)
        out = np.take_along_axis(val, j, axis=1).reshape(-1)
        m.put(names[0], out, mask)
        if len(names) > 1 and names[1]:
            m.put(names[1], ok.reshape(-1), mask)
    return run


def _movmatrix(op, code, ctx):
    d = op.operands[0].name
    a = ctx.reader(op.operands[1], "b32", op)

    def run(m, mask):
        halves = np.broadcast_to(a(m), (m.n,)).reshape(-1, 32).view(np.uint16).reshape(-1, 8, 8)  # [row, col]
        m.put(d, np.ascontiguousarray(halves.transpose(0, 2, 1)).reshape(-1, 64).view(np.uint32).reshape(-1), mask)
    return run


def _mma_registers(op) -> tuple:
    """An mma's (D, A, B, C) register names."""
    return tuple(dests(x) if isinstance(x, Vec) else [x.name] for x in op.operands[:4])


def _runs_mma(code) -> bool:
    """The mma the interpreter runs (rr.run.cpu.machine.mma_sync): `mma.sync…row.col` of the forms
    rr.numerics.forms knows — m16n8k32 e4m3, m16n8k16 f16/bf16, m16n8k8 tf32, m16n8k32 s8/u8."""
    if code.shape == (16, 8, 32) and "e4m3" in code.types:
        return True
    form = mma_form(code.shape, code.types, code.mods)
    return form is not None and not form.fp8 and {"row", "col"} <= set(code.mods)


def _mma(op, code, ctx):
    if not _runs_mma(code):
        raise Unsupported(f"{op.opcode!r} (the mma forms run: m16n8k32 e4m3, m16n8k16 f16/bf16, m16n8k8 tf32, "
                          "m16n8k32 s8/u8)")
    d, a, b, c = _mma_registers(op)
    return lambda m, mask: mma_sync(m, op, mask, d, a, b, c)


def _skip(m, mask):
    """A statement of a fused run whose work its run's first statement did."""


def fuse_mma_runs(program) -> None:
    """Consecutive `mma` statements of one form with the same A registers (a layer multiplies one
    A by several B: enc2 has 630 mma in 179 such runs) run as one: the first computes them all
    (rr.run.cpu.machine.mma_sync_run: A's fragments and values made once), the others do nothing.
    A statement joins the run only where doing so changes nothing: no guard, no branch target,
    call return or function start at it (so every thread reaches it through the run's first
    statement, with the same mask), and none of its registers (D, A, B, C) is a D of an earlier
    statement of the run (so reading all operands before writing any D reads what each read)."""
    ops = program.ops
    entries = {op.target for op in ops if op.target is not None} | set(program.func_start.values())
    entries |= {op.pc + 1 for op in ops if op.call is not None}

    def fusable(op) -> bool:
        return (op.kind == "plain" and op.guard is None and op.contract is None and op.code.family.name == "mma"
                and _runs_mma(op.code))

    i = 0
    while i < len(ops):
        head = ops[i]
        run = [head]
        if fusable(head):
            members = [_mma_registers(head)]
            written = {r for r in members[0][0] if r is not None}
            for op in itertools.islice(ops, i + 1, None):
                if op.pc in entries or not fusable(op) or op.opcode != head.opcode:
                    break
                regs = _mma_registers(op)
                touched = {r for group in regs for r in group if r is not None}
                if regs[1] != members[0][1] or touched & written:
                    break
                run.append(op)
                members.append(regs)
                written |= {r for r in regs[0] if r is not None}
        if len(run) > 1:
            head.run = (lambda ops_, members_: lambda m, mask: mma_sync_run(m, ops_, mask, members_))(run, members)
            for op in run[1:]:
                op.run = _skip
        i += len(run)


def _block_check(m, op, mask):
    """A block barrier must be reached by every live thread of each block that reaches it."""
    if mask is None:
        return
    per_block = mask.reshape(m.nblocks, m.T)
    live = (~m.done).reshape(m.nblocks, m.T)
    reached = per_block.any(1)
    if not np.all(per_block[reached] == live[reached]):
        raise ExecutionError(f"{op.where()}: bar.sync reached by part of a block (a divergent barrier)")


def _bar(op, code, ctx):
    if "warp" in code.mods:  # bar.warp.sync: the interpreter's warps run in lockstep
        return lambda m, mask: None
    if "arrive" in code.mods or len(op.operands) > 1:
        raise Unsupported(f"{op.opcode!r} (named barriers with a thread count)")
    return lambda m, mask: _block_check(m, op, mask)


def _bar_red(op, code, ctx):
    """bar.red.popc.u32 d, 0, {!}c (threads of the block with c true), bar.red.{and,or}.pred."""
    kind = next((p for p in code.mods if p in ("popc", "and", "or")), None)
    if kind is None or len(op.operands) != 3:
        raise Unsupported(f"{op.opcode!r}")
    d = op.operands[0].name
    c = ctx.reader(op.operands[2], "pred", op)

    def run(m, mask):
        _block_check(m, op, mask)
        act = (np.ones(m.n, bool) if mask is None else mask).reshape(m.nblocks, m.T)
        p = np.broadcast_to(c(m), (m.n,)).reshape(m.nblocks, m.T)
        if kind == "popc":
            r = (p & act).sum(1).astype(np.uint32)
        elif kind == "and":
            r = (p | ~act).all(1)
        else:
            r = (p & act).any(1)
        m.put(d, np.repeat(r, m.T), mask)
    return run


def _nothing(op, code, ctx):
    """Memory fences and hints: the interpreter's memory is sequentially consistent."""
    return lambda m, mask: None


# -- textures and surfaces ------------------------------------------------------------------------

def _image(m, handle, op, surface: bool, mask):
    handle = np.broadcast_to(np.asarray(handle).astype(np.uint64), (m.n,))
    h = np.unique(handle if mask is None else handle[mask])
    if h.size == 0:
        return None
    if h.size != 1:
        raise ExecutionError(f"{op.where()}: texture or surface handle differs across threads")
    i = int(h[0]) - HANDLE_BASE
    if not 0 <= i < len(m.images) or m.images[i][1] != surface:
        raise ExecutionError(f"{op.where()}: 0x{int(h[0]):x} is not a {'surface' if surface else 'texture'} object")
    return m.images[i][0]


def _tex(op, code, ctx):
    if "2d" not in code.mods or code.vector != 4 or len(code.types) != 2:
        raise Unsupported(f"{op.opcode!r} (only tex.2d.v4 / tex.base.2d.v4)")
    dtyp, ctyp = code.types
    names = dests(op.operands[0])
    addr = op.operands[1]
    handle = ctx.reader(addr.base, "u64", op)
    x, y = (ctx.reader(c, "f32" if ctyp == "f32" else "s32", op) for c in addr.extra[0].items[:2])

    def coord(v):  # unnormalised coordinates, point sampling: the texel the coordinate falls in
        v = np.asarray(v)
        return np.floor(v).astype(np.int64) if v.dtype.kind == "f" else v.astype(np.int64)

    def run(m, mask):
        img = _image(m, handle(m), op, False, mask)
        if img is None:
            return
        h, w, _ = img.shape
        xr, yr = coord(np.broadcast_to(x(m), (m.n,))), coord(np.broadcast_to(y(m), (m.n,)))
        texel = img[np.clip(yr, 0, h - 1), np.clip(xr, 0, w - 1)]  # (n, 4) f16, point sampling, clamp
        if ctyp == "s32":  # integer coordinates outside the image read zeros on the H200: no clamp
            texel = np.where(((xr >= 0) & (xr < w) & (yr >= 0) & (yr < h))[:, None], texel, np.zeros_like(texel))
        for i, name in enumerate(names):
            if name:
                m.put(name, texel[:, i] if dtyp == "f16" else texel[:, i].astype(np.float32), mask)
    return run


def _sust(op, code, ctx):
    if "2d" not in code.mods or code.vector != 4 or code.type != "b16":
        raise Unsupported(f"{op.opcode!r} (only sust.b.2d.v4.b16)")
    mode = code.mods[-1]
    addr = op.operands[0]
    handle = ctx.reader(addr.base, "u64", op)
    x, y = (ctx.reader(c, "s32", op) for c in addr.extra[0].items[:2])
    values = [ctx.reader(v, "b16", op) for v in op.operands[1].items]

    def run(m, mask):
        img = _image(m, handle(m), op, True, mask)
        if img is None:
            return
        h, w, _ = img.shape
        lanes = np.ones(m.n, bool) if mask is None else mask.copy()
        xb = np.broadcast_to(x(m), (m.n,)).astype(np.int64)
        yi = np.broadcast_to(y(m), (m.n,)).astype(np.int64)
        xi = xb // 8
        inside = (xb >= 0) & (xi < w) & (yi >= 0) & (yi < h)
        if mode == "trap" and (lanes & ~inside).any():
            raise ExecutionError(f"{op.where()}: surface write outside the {w}×{h} surface")
        lanes &= inside  # .zero and .clamp: out-of-range writes are dropped
        data = np.stack([np.broadcast_to(np.asarray(v(m)), (m.n,)) for v in values], 1).astype(np.uint16)
        img.view(np.uint16)[yi[lanes], xi[lanes]] = data[lanes]
    return run


# family (rr.ptx.opcodes) -> compile(op, code, ctx); `by_family` checks every name against the table
_HANDLERS = by_family({
    "mov": _mov, "cvta": _cvta, "cvt": compile_cvt, "setp": _setp, "setp.bool": _setp, "set": _set, "selp": _selp,
    "slct": _slct, "ld": _ld, "ldu": _ld, "st": _st, "isspacep": _isspacep, "testp": _testp,
    "shfl": _shfl, "shfl.sync": _shfl, "movmatrix": _movmatrix, "mma": _mma, "bar": _bar, "barrier": _bar,
    "bar.red": _bar_red, "barrier.red": _bar_red, "tex": _tex, "sust": _sust, "atom": atomic.compile_atom,
    "red": atomic.compile_atom, "membar": _nothing, "fence": _nothing, "nanosleep": _nothing, "prefetch": _nothing,
    "prefetchu": _nothing,
    **warp.HANDLERS,
    **matrix.HANDLERS,
    **{k: integer.HANDLERS[k] for k in ("lop3", "shf", "bfe", "bfi", "prmt", "brev", "clz", "popc", "bfind",
                                        "mul24", "mad24", "sad", "dp4a", "dp2a", "cnot", "addc", "subc", "madc")},
    **{k: integer.HANDLERS[k] for k in families(Kind.VIDEO) if k in integer.HANDLERS},
    **{k: _arith for k in ("add", "sub", "mul", "mad", "fma", "div", "rem", "min", "max", "neg", "abs", "and",
                           "or", "xor", "not", "shl", "shr", "sqrt", "rcp", "rsqrt", "ex2", "lg2", "copysign")},
})
