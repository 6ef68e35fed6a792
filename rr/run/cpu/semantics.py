"""What each instruction does, compiled once per statement into a closure `run(machine, mask)`.

Values are computed for every lane and written only to the lanes in `mask` (None: all); memory is
touched only by the lanes in `mask`. Arithmetic rounds as the PTX does, through `rr.numerics`
(f16 and f16x2 with one rounding, e4m3 packs with satfinite, the `.approx` functions, `mma`).
An instruction outside this set stops decoding with its statement, line and opcode.
"""

from __future__ import annotations

import numpy as np

from rr import numerics as nx
from rr.ptx.model import Addr, Imm, Pair, Reg, Sink, Sym, Vec
from rr.run.cpu.machine import (
    BITS,
    HANDLE_BASE,
    LOCAL_BASE,
    PARAM_BASE,
    SHARED_BASE,
    TYPES,
    ExecutionError,
    mma_sync,
)


class Unsupported(ValueError):
    """An instruction the interpreter does not implement."""


ROUNDING = {"rn", "rz", "rm", "rp", "rni", "rzi", "rmi", "rpi"}


def _type(parts: list[str]) -> str:
    for p in reversed(parts):
        if p in TYPES:
            return p
    raise Unsupported("no operand type in the opcode")


def view(bits, typ: str):
    """Raw register bits as `typ` (same width, or an integer resized)."""
    dt = np.dtype(TYPES[typ])
    if typ == "pred":
        return np.asarray(bits).astype(bool)
    bits = np.asarray(bits)
    if bits.dtype == np.bool_:
        return bits.astype(dt)
    if bits.dtype.itemsize == dt.itemsize:
        return bits.view(dt)
    return bits.astype(BITS[dt.itemsize * 8]).view(dt)  # narrower or wider integer view


def f16x2_split(u):
    u = np.asarray(u).view(np.uint32) if np.asarray(u).dtype != np.uint32 else np.asarray(u)
    return (u & np.uint32(0xFFFF)).astype(np.uint16).view(np.float16), (u >> np.uint32(16)).astype(np.uint16).view(np.float16)


def f16x2_join(lo, hi):
    lo = np.asarray(lo, np.float16).view(np.uint16).astype(np.uint32)
    hi = np.asarray(hi, np.float16).view(np.uint16).astype(np.uint32)
    return lo | (hi << np.uint32(16))


class Ctx:
    """Operand readers for one program: symbols resolve to shared offsets, parameter addresses."""

    def __init__(self, program, param_offsets: dict):
        self.program = program
        self.param_offsets = param_offsets

    def reader(self, operand, typ: str, op):
        """A function m -> the operand's value as `typ` (an array or a numpy scalar)."""
        dt = TYPES[typ]
        if isinstance(operand, Reg):
            name, neg = operand.name, operand.negated
            if operand.special:
                return lambda m: view(m.special[name], typ) if typ != "pred" else m.special[name]
            if typ == "pred":
                return (lambda m: ~m.get(name, op).astype(bool)) if neg else (lambda m: m.get(name, op).astype(bool))
            return lambda m: view(m.get(name, op), typ)
        if isinstance(operand, Imm):
            text = operand.text.rstrip("Uu")
            if text[:2].lower() in ("0f", "0d"):
                raw = int(text[2:], 16)
                value = np.array(raw, np.uint32 if text[1] in "fF" else np.uint64).view(
                    np.float32 if text[1] in "fF" else np.float64)
                value = value.astype(dt) if typ in ("f16", "f32", "f64") else value.view(BITS[value.dtype.itemsize * 8]).astype(dt)
            elif np.dtype(dt).kind == "f":
                value = np.array(operand.value, dt)
            else:
                bits = np.dtype(dt).itemsize * 8
                value = np.array(int(operand.value) & ((1 << bits) - 1), BITS[bits]).view(dt)
            return lambda m: value
        if isinstance(operand, Sym):
            v = self.symbol(operand.name, op)
            value = np.array(v, np.uint64).astype(dt) if np.dtype(dt).kind in "ui" else np.array(v, dt)
            return lambda m: value
        raise Unsupported(f"operand {operand} as a {typ} value")

    def symbol(self, name: str, op) -> int:
        if name in self.program.shared:
            return self.program.shared[name]
        if name in self.program.local:
            return self.program.local[name]
        if name in self.param_offsets:
            return PARAM_BASE + self.param_offsets[name]
        if name == "WARP_SZ":
            return 32
        raise Unsupported(f"symbol {name!r} (not a shared variable or kernel parameter)")

    def address(self, a: Addr, op):
        """A function m -> per-lane address (uint64), and the param-memory name if any."""
        if isinstance(a.base, Sym) and a.base.name in self.program.param_sizes:
            off = a.offset
            return (lambda m: np.full(m.n, off, np.uint64)), a.base.name
        if a.base is None:
            c = np.uint64(a.offset & (2 ** 64 - 1))
            return (lambda m: c), None
        base = self.reader(a.base, "u64", op)
        off = np.uint64(a.offset & (2 ** 64 - 1))
        return (lambda m: base(m) + off), None


def _dests(operand) -> list:
    if isinstance(operand, Vec):
        return [None if isinstance(x, Sink) else x.name for x in operand.items]
    if isinstance(operand, Pair):
        return [operand.first.name, None if isinstance(operand.second, Sink) else operand.second.name]
    return [operand.name]


def compile_op(op, ctx: Ctx):
    parts = op.opcode.split(".")
    base = parts[0]
    handler = _HANDLERS.get(base)
    if handler is None:
        raise Unsupported(f"{op.where()}: unsupported instruction {op.opcode!r}")
    try:
        return handler(op, parts, ctx)
    except Unsupported as e:
        raise Unsupported(f"{op.where()}: {e}") from None


# -- moves, conversions -------------------------------------------------------------------------

def _mov(op, parts, ctx):
    typ = _type(parts)
    d, s = op.operands[0], op.operands[1]
    if isinstance(s, Vec):  # pack {lo, hi}
        width = np.dtype(TYPES[typ]).itemsize * 8 // len(s.items)
        readers = [ctx.reader(x, {8: "b8", 16: "b16", 32: "b32"}[width], op) for x in s.items]
        out_t = BITS[np.dtype(TYPES[typ]).itemsize * 8]

        def run(m, mask):
            acc = np.zeros(m.n, out_t)
            for i, r in enumerate(readers):
                acc |= np.asarray(r(m)).astype(out_t) << out_t(width * i)
            m.put(d.name, acc, mask)
        return run
    if isinstance(d, Vec):  # unpack
        names = _dests(d)
        width = np.dtype(TYPES[typ]).itemsize * 8 // len(names)
        src = ctx.reader(s, typ, op)
        wide = BITS[np.dtype(TYPES[typ]).itemsize * 8]

        def run(m, mask):
            v = np.asarray(src(m)).view(wide) if np.asarray(src(m)).dtype != wide else np.asarray(src(m))
            for i, name in enumerate(names):
                if name:
                    m.put(name, ((v >> wide(width * i)) & wide((1 << width) - 1)).astype(BITS[width]), mask)
        return run
    src = ctx.reader(s, typ, op)
    return lambda m, mask: m.put(d.name, src(m), mask)


def _cvta(op, parts, ctx):
    """Generic ↔ state-space addresses: global addresses are the same in both; a shared or local
    offset becomes SHARED_BASE / LOCAL_BASE + offset as a generic address, and back."""
    typ = "u64" if parts[-1] == "u64" else "u32"
    src = ctx.reader(op.operands[1], typ, op)
    d = op.operands[0].name
    window = next((w for w in ("shared", "local") if w in parts), None)
    if window is None:
        return lambda m, mask: m.put(d, src(m), mask)
    base = np.uint64(SHARED_BASE if window == "shared" else LOCAL_BASE)
    if "to" in parts:
        return lambda m, mask: m.put(d, (np.asarray(src(m)).astype(np.uint64) - base).astype(TYPES[typ]), mask)
    return lambda m, mask: m.put(d, np.asarray(src(m)).astype(np.uint64) + base, mask)


def _cvt(op, parts, ctx):
    types = [p for p in parts[1:] if p in TYPES]
    dtyp, styp = types[-2], types[-1]
    mods = set(parts[1:]) - set(types)
    d = op.operands[0].name
    if dtyp in ("e4m3x2", "e5m2x2"):
        to8 = nx.to_e4m3 if dtyp == "e4m3x2" else nx.to_e5m2
        if styp == "f16x2":
            a = ctx.reader(op.operands[1], "f16x2", op)

            def run(m, mask):
                lo, hi = f16x2_split(a(m))
                m.put(d, to8(lo).astype(np.uint16) | (to8(hi).astype(np.uint16) << np.uint16(8)), mask)
            return run
        if styp != "f32":
            raise Unsupported(f"cvt to {dtyp} from {styp}")
        # two f32: a → the upper byte. Rounding f32 → f16 → fp8 could round twice; fp8's 2–3
        # mantissa bits against f16's 10 make that innocuous except at f16 subnormals.
        a, b = ctx.reader(op.operands[1], "f32", op), ctx.reader(op.operands[2], "f32", op)
        return lambda m, mask: m.put(d, to8(nx.f16(b(m))).astype(np.uint16)
                                     | (to8(nx.f16(a(m))).astype(np.uint16) << np.uint16(8)), mask)
    if dtyp == "f16x2" and styp in ("e4m3x2", "e5m2x2"):
        from8 = nx.from_e4m3 if styp == "e4m3x2" else nx.from_e5m2
        a = ctx.reader(op.operands[1], "b16", op)

        def run(m, mask):
            v = np.asarray(a(m))
            m.put(d, f16x2_join(from8((v & np.uint16(0xFF)).astype(np.uint8)),
                                from8((v >> np.uint16(8)).astype(np.uint8))), mask)
        return run
    if dtyp == "f16x2" and styp == "f32":  # a → upper half, b → lower half
        a, b = ctx.reader(op.operands[1], "f32", op), ctx.reader(op.operands[2], "f32", op)
        return lambda m, mask: m.put(d, f16x2_join(nx.f16(b(m)), nx.f16(a(m))), mask)
    src = ctx.reader(op.operands[1], styp, op)
    dt = np.dtype(TYPES[dtyp])
    sat = "sat" in mods
    rnd = next((r for r in mods if r in ROUNDING), None)
    ftz = "ftz" in mods

    def run(m, mask):
        v = np.asarray(src(m))
        if dt.kind == "f":
            if ftz and v.dtype == np.float32:
                v = nx._ftz(v)
            r = v.astype(np.float64).astype(dt) if v.dtype.kind in "iu" and dt == np.float16 else v.astype(dt)
            if sat:
                r = np.clip(r, 0, 1).astype(dt)
        elif v.dtype.kind == "f":  # float → integer: round as asked, saturate, NaN → 0
            f = v.astype(np.float64)
            f = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}.get(rnd, np.trunc)(f)
            info = np.iinfo(dt)
            r = np.where(np.isnan(f), 0, np.clip(f, info.min, info.max)).astype(dt)
        else:  # integer → integer: sign or zero extension by the source, truncation to the dest
            r = v.astype(np.int64 if v.dtype.kind == "i" else np.uint64).astype(dt)
            if sat:
                info = np.iinfo(dt)
                r = np.clip(v.astype(np.int64), info.min, info.max).astype(dt)
        m.put(d, r, mask)
    return run


# -- integer and float arithmetic ------------------------------------------------------------------

_F16_BIN = {"add": nx.add, "sub": nx.sub, "mul": nx.mul, "min": nx.fmin, "max": nx.fmax}


def _arith(op, parts, ctx):
    base = parts[0]
    typ = _type(parts)
    mods = set(parts[1:])
    d = op.operands[0].name
    srcs = op.operands[1:]
    if typ in ("f16", "f16x2"):
        rt = "b16" if typ == "f16" else "f16x2"
        rs = [ctx.reader(s, rt, op) for s in srcs]
        fn = _f16_fn(base, parts)

        def run(m, mask):
            vals = [r(m) for r in rs]
            if typ == "f16":
                m.put(d, fn(*[np.asarray(v).view(np.float16) for v in vals]), mask)
            else:
                halves = [f16x2_split(v) for v in vals]
                lo = fn(*[h[0] for h in halves])
                hi = fn(*[h[1] for h in halves])
                m.put(d, f16x2_join(lo, hi), mask)
        return run
    rs = [ctx.reader(s, typ, op) for s in srcs]
    if typ in ("f32", "f64"):
        fn = _float_fn(base, mods, typ)
    else:
        fn = _int_fn(base, parts, typ)
    if fn is None:
        raise Unsupported(f"{op.opcode!r}")
    return lambda m, mask: m.put(d, fn(*[r(m) for r in rs]), mask)


def _f16_fn(base, parts):
    if base in _F16_BIN:
        return _F16_BIN[base]
    if base == "fma":
        return nx.fma
    if base == "neg":
        return nx.neg
    if base == "abs":
        return lambda a: np.abs(np.asarray(a, np.float16))
    raise Unsupported(f"f16 {'.'.join(parts)}")


def _float_fn(base, mods, typ):
    dt = TYPES[typ]
    ftz = (lambda x: nx._ftz(x)) if "ftz" in mods and typ == "f32" else (lambda x: np.asarray(x, dt))

    def r(x):
        return ftz(np.asarray(x, dt))

    if base in ("add", "sub", "mul"):
        f = {"add": np.add, "sub": np.subtract, "mul": np.multiply}[base]
        return lambda a, b: r(f(r(a), r(b)))
    if base == "fma" or base == "mad":
        return lambda a, b, c: r((r(a).astype(np.float64) * r(b).astype(np.float64) + r(c).astype(np.float64)).astype(dt)) \
            if typ == "f32" else r(np.asarray(a, dt) * b + c)
    if base == "div":
        if "approx" in mods or "full" in mods:
            return lambda a, b: nx.div_approx(a, b) if typ == "f32" else np.asarray(a, dt) / b
        return lambda a, b: r((np.asarray(a, np.float64) / np.asarray(b, np.float64)).astype(dt))
    if base in ("min", "max"):
        f = np.fmin if base == "min" else np.fmax
        return lambda a, b: r(f(r(a), r(b)))
    if base == "neg":
        return lambda a: -np.asarray(a, dt)
    if base == "abs":
        return lambda a: np.abs(np.asarray(a, dt))
    if base == "sqrt":
        return lambda a: r(np.sqrt(np.asarray(a, np.float64)).astype(dt))
    if base == "rcp":
        return nx.rcp_approx if "approx" in mods else (lambda a: r((1.0 / np.asarray(a, np.float64)).astype(dt)))
    if base == "rsqrt":
        return nx.rsqrt_approx
    if base == "ex2":
        return nx.ex2_approx
    if base == "lg2":
        return lambda a: r(np.log2(np.asarray(a, np.float64)).astype(dt))
    return None


def _int_fn(base, parts, typ):
    dt = np.dtype(TYPES[typ])
    bits = dt.itemsize * 8
    wide = np.int64 if dt.kind == "i" else np.uint64
    if base in ("add", "sub", "and", "or", "xor"):
        f = {"add": np.add, "sub": np.subtract, "and": np.bitwise_and, "or": np.bitwise_or,
             "xor": np.bitwise_xor}[base]
        if typ == "pred":
            if base in ("add", "sub"):
                raise Unsupported(f"{base}.pred")
            return lambda a, b: f(np.asarray(a, bool), np.asarray(b, bool))
        return lambda a, b: f(np.asarray(a, dt), np.asarray(b, dt))
    if base == "not":
        return (lambda a: ~np.asarray(a, bool)) if typ == "pred" else (lambda a: ~np.asarray(a, dt))
    if base == "neg":
        return lambda a: (-np.asarray(a, dt).astype(np.int64)).astype(dt)
    if base == "abs":
        return lambda a: np.abs(np.asarray(a, dt).astype(np.int64)).astype(dt)
    if base in ("min", "max"):
        return np.minimum if base == "min" else np.maximum
    if base == "mul":
        if "wide" in parts:
            out = np.int64 if dt.kind == "i" else np.uint64
            return lambda a, b: np.asarray(a, dt).astype(out) * np.asarray(b, dt).astype(out)
        if "hi" in parts:
            if bits == 64:
                raise Unsupported("mul.hi of 64-bit integers")
            return lambda a, b: ((np.asarray(a, dt).astype(wide) * np.asarray(b, dt).astype(wide)) >> bits).astype(dt)
        return lambda a, b: (np.asarray(a, dt).astype(wide) * np.asarray(b, dt).astype(wide)).astype(dt)
    if base == "mad":
        if "wide" in parts:
            out = np.int64 if dt.kind == "i" else np.uint64
            return lambda a, b, c: np.asarray(a, dt).astype(out) * np.asarray(b, dt).astype(out) + np.asarray(c, out)
        return lambda a, b, c: (np.asarray(a, dt).astype(wide) * np.asarray(b, dt).astype(wide)
                                + np.asarray(c, dt).astype(wide)).astype(dt)
    if base in ("div", "rem"):
        def f(a, b):
            a, b = np.asarray(a, dt).astype(np.int64), np.asarray(b, dt).astype(np.int64)
            safe = np.where(b == 0, 1, b)
            q = np.sign(a) * np.sign(safe) * (np.abs(a) // np.abs(safe))
            return (q if base == "div" else a - q * safe).astype(dt)
        return f
    if base in ("shl", "shr"):
        def f(a, b):
            a = np.asarray(a, dt)
            n = np.asarray(b).astype(np.int64)
            clipped = np.minimum(n, bits - 1).astype(dt)
            if base == "shl":
                return np.where(n >= bits, dt.type(0), a << clipped).astype(dt)
            if dt.kind == "i":  # arithmetic: the sign fills in
                return (a >> clipped).astype(dt)
            return np.where(n >= bits, dt.type(0), a >> clipped).astype(dt)
        if base == "shr" and typ.startswith("b"):  # shr.b is a logical shift: shr.u on the bits
            udt, logical = BITS[bits], _int_fn("shr", ["shr", f"u{bits}"], f"u{bits}")
            return lambda a, b: logical(np.asarray(a).view(udt), b)
        return f
    return None


def _setp(op, parts, ctx):
    typ = _type(parts)
    cmp = parts[1]
    boolop = next((p for p in parts[2:] if p in ("and", "or", "xor")), None)
    dests = _dests(op.operands[0])
    a, b = ctx.reader(op.operands[1], typ if typ not in ("f16",) else "f16", op), ctx.reader(op.operands[2], typ, op)
    c = ctx.reader(op.operands[3], "pred", op) if boolop else None
    unsigned = {"lo": "lt", "ls": "le", "hi": "gt", "hs": "ge"}
    base_cmp = unsigned.get(cmp, cmp.rstrip("u") if cmp.endswith("u") and cmp not in ("nu",) else cmp)
    fns = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
           "ge": np.greater_equal}

    def run(m, mask):
        x, y = a(m), b(m)
        if cmp == "num":
            r = ~(np.isnan(x) | np.isnan(y))
        elif cmp == "nan":
            r = np.isnan(x) | np.isnan(y)
        else:
            r = fns[base_cmp](x, y)
            if cmp.endswith("u") and cmp not in unsigned and np.asarray(x).dtype.kind == "f":
                r = r | np.isnan(x) | np.isnan(y)
        r = np.broadcast_to(r, (m.n,))
        if boolop:
            p = c(m)
            r2 = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}[boolop](~r, p)
            r = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}[boolop](r, p)
        else:
            r2 = ~r
        m.put(dests[0], r, mask)
        if len(dests) > 1 and dests[1]:
            m.put(dests[1], r2, mask)
    return run


def _selp(op, parts, ctx):
    typ = _type(parts)
    d = op.operands[0].name
    a, b = ctx.reader(op.operands[1], typ, op), ctx.reader(op.operands[2], typ, op)
    c = ctx.reader(op.operands[3], "pred", op)
    return lambda m, mask: m.put(d, np.where(c(m), a(m), b(m)).astype(TYPES[typ]), mask)


# -- memory -----------------------------------------------------------------------------------------

def _space(parts) -> str:
    for s in ("global", "shared", "param", "local", "const"):
        if s in parts:
            return s
    return "generic"


def _access(op, parts, ctx, address) -> tuple:
    """(state space, vector length, bytes per element, address function, param-memory name)."""
    space = _space(parts)
    if space == "const":
        raise Unsupported(f"{parts[0]}.const")
    vec = next((int(p[1:]) for p in parts if p in ("v2", "v4", "v8")), 1)
    addr, pm = ctx.address(address, op)
    return space, vec, np.dtype(TYPES[_type(parts)]).itemsize, addr, pm


def _ld(op, parts, ctx):
    space, vec, width, addr, pm = _access(op, parts, ctx, op.operands[1])
    dests = _dests(op.operands[0]) if vec > 1 else [op.operands[0].name]

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
        for i, name in enumerate(dests):
            if name:
                m.put(name, vals[:, i].copy(), mask)
    return run


def _st(op, parts, ctx):
    space, vec, width, addr, pm = _access(op, parts, ctx, op.operands[0])
    items = op.operands[1].items if vec > 1 else (op.operands[1],)
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

def _shfl(op, parts, ctx):
    mode = parts[2]
    dests = _dests(op.operands[0])
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
        m.put(dests[0], out, mask)
        if len(dests) > 1 and dests[1]:
            m.put(dests[1], ok.reshape(-1), mask)
    return run


def _movmatrix(op, parts, ctx):
    d = op.operands[0].name
    a = ctx.reader(op.operands[1], "b32", op)

    def run(m, mask):
        halves = np.broadcast_to(a(m), (m.n,)).reshape(-1, 32).view(np.uint16).reshape(-1, 8, 8)  # [row, col]
        m.put(d, np.ascontiguousarray(halves.transpose(0, 2, 1)).reshape(-1, 64).view(np.uint32).reshape(-1), mask)
    return run


def _mma(op, parts, ctx):
    if "m16n8k32" not in parts or "e4m3" not in parts:
        raise Unsupported(f"{op.opcode!r} (only m16n8k32 e4m3 mma)")
    d, a, b, c = (_dests(x) if isinstance(x, Vec) else [x.name] for x in op.operands[:4])
    return lambda m, mask: mma_sync(m, op, mask, d, a, b, c)


def _bar(op, parts, ctx):
    def run(m, mask):
        if mask is None:
            return
        per_block = mask.reshape(m.nblocks, m.T)
        live = (~m.done).reshape(m.nblocks, m.T)
        reached = per_block.any(1)
        if not np.all(per_block[reached] == live[reached]):
            raise ExecutionError(f"{op.where()}: bar.sync reached by part of a block (a divergent barrier)")
    return run


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


def _tex(op, parts, ctx):
    if "2d" not in parts or "v4" not in parts:
        raise Unsupported(f"{op.opcode!r} (only tex.2d.v4 / tex.base.2d.v4)")
    dtyp, ctyp = parts[-2], parts[-1]
    dests = _dests(op.operands[0])
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
        xi = np.clip(coord(np.broadcast_to(x(m), (m.n,))), 0, w - 1)
        yi = np.clip(coord(np.broadcast_to(y(m), (m.n,))), 0, h - 1)
        texel = img[yi, xi]  # (n, 4) f16, point sampling, clamp addressing
        for i, name in enumerate(dests):
            if name:
                m.put(name, texel[:, i] if dtyp == "f16" else texel[:, i].astype(np.float32), mask)
    return run


def _sust(op, parts, ctx):
    if "2d" not in parts or "v4" not in parts or "b16" not in parts:
        raise Unsupported(f"{op.opcode!r} (only sust.b.2d.v4.b16)")
    mode = parts[-1]
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


_HANDLERS = {
    "mov": _mov, "cvta": _cvta, "cvt": _cvt, "setp": _setp, "selp": _selp, "ld": _ld, "st": _st,
    "shfl": _shfl, "movmatrix": _movmatrix, "mma": _mma, "bar": _bar, "barrier": _bar, "tex": _tex,
    "sust": _sust,
    **{k: _arith for k in ("add", "sub", "mul", "mad", "fma", "div", "rem", "min", "max", "neg", "abs", "and",
                           "or", "xor", "not", "shl", "shr", "sqrt", "rcp", "rsqrt", "ex2", "lg2")},
}
