"""`atom` and `red` for the CPU interpreter, on global, shared and generic addresses. The threads
of one statement that hit the same address are applied one after another in lane order, so each
gets the value the ones before it left: atom.add by 32 lanes on one word leaves the sum and hands
each lane a distinct old value. Within a warp that is the H200's order too; the order of warps
and blocks is the machine's (on the GPU it depends on scheduling).
Associative integer operations are scanned segment-wise in numpy; exch is a shift; the rest (the
float additions, which round at every step, and inc/dec/cas) run lane by lane within each address.
"""

from __future__ import annotations

import numpy as np

from rr.numerics import rounding
from rr.run.cpu.machine import BITS
from rr.run.cpu.values import Unsupported, dests, type_bits

OPS = ("add", "min", "max", "inc", "dec", "and", "or", "xor", "exch", "cas")
TYPES = {"b32", "b64", "u32", "s32", "u64", "s64", "f32", "f64", "f16", "f16x2", "bf16", "bf16x2"}
_SCAN = {"add": np.add, "min": np.minimum, "max": np.maximum, "and": np.bitwise_and, "or": np.bitwise_or,
         "xor": np.bitwise_xor}
_VALUE = {"u32": np.uint32, "s32": np.int32, "b32": np.uint32, "u64": np.uint64, "s64": np.int64, "b64": np.uint64}


def _segment_scan(vals, starts, ufunc):
    """Inclusive scan of `vals` restarting at each segment start (Hillis-Steele, log steps)."""
    out = vals.copy()
    seg = np.cumsum(starts) - 1
    step = 1
    while step < len(out):
        same = np.zeros(len(out), bool)
        same[step:] = seg[step:] == seg[:-step]
        if not same.any():
            break
        shifted = np.empty_like(out)
        shifted[step:] = out[:-step]
        out = np.where(same, ufunc(shifted, out), out)
        step *= 2
    return out


def _float_add(fmt: str, ftz: bool):
    """One float addition as the atom rounds it: f32/f64 in their own type, f16 through numpy's
    correctly rounded f16 add, bf16 (and packed halves) through `round_float`."""
    def add(old_bits, v_bits):
        if fmt in ("f32", "f64"):
            dt = np.float32 if fmt == "f32" else np.float64
            x, y = np.asarray(old_bits).view(dt), np.asarray(v_bits).view(dt)
            if ftz:
                x, y = rounding.flush_subnormal(x), rounding.flush_subnormal(y)
            r = x + y
            r = rounding.flush_subnormal(r) if ftz else r
            return rounding.float_bits(r.astype(np.float64), fmt)
        x, y = rounding.float_value(old_bits, fmt), rounding.float_value(v_bits, fmt)
        return rounding.float_bits(rounding.round_float(x + y, fmt), fmt)  # exact in f64, rounded once
    return add


def _packed_add(fmt: str):
    half = _float_add(fmt, False)

    def add(old, v):
        old, v = np.asarray(old).astype(np.uint32), np.asarray(v).astype(np.uint32)
        lo = half((old & np.uint32(0xFFFF)).astype(np.uint16), (v & np.uint32(0xFFFF)).astype(np.uint16))
        hi = half((old >> np.uint32(16)).astype(np.uint16), (v >> np.uint32(16)).astype(np.uint16))
        return lo.astype(np.uint32) | (hi.astype(np.uint32) << np.uint32(16))
    return add


def _sequential(kind: str, typ: str, ftz: bool):
    """step(old, b, c) -> new for the operations applied lane by lane."""
    if kind == "add":
        return _packed_add(typ[:-2]) if typ.endswith("x2") else _float_add(typ, ftz)
    if kind == "inc":
        return lambda r, s, _: r.dtype.type(0) if r >= s else r + r.dtype.type(1)
    if kind == "dec":
        return lambda r, s, _: s if (r == 0 or r > s) else r - r.dtype.type(1)
    return lambda r, s, t: t if r == s else r  # cas


def serialise(kind: str, typ: str, init, b, c, seg_start, ftz: bool = False):
    """Old values (one per lane, lanes sorted by address then lane) and the final value of each
    address, applying the lanes one after another. `init` holds one value per address."""
    n = len(b)
    seg = np.cumsum(seg_start) - 1
    first = np.flatnonzero(seg_start)
    if kind == "exch":
        old = np.empty_like(b)
        old[1:] = b[:-1]
        old[first] = init
        last = np.append(first[1:], n) - 1
        return old, b[last]
    if kind in _SCAN and typ[0] != "f":
        fn = _SCAN[kind]
        inclusive = fn(_segment_scan(b, seg_start, fn), init[seg])
        old = np.empty_like(b)
        old[1:] = inclusive[:-1]
        old[first] = init
        last = np.append(first[1:], n) - 1
        return old, inclusive[last]
    step = _sequential(kind, typ, ftz)
    old = np.empty_like(b)
    final = init.copy()
    for s, lo in enumerate(first):  # lane by lane within each address
        hi = first[s + 1] if s + 1 < len(first) else n
        cur = init[s]
        if kind == "add" and typ in ("f32", "f64"):  # a running sum, rounded at every step
            dt = np.float32 if typ == "f32" else np.float64
            terms = np.concatenate([[cur], b[lo:hi]]).view(dt)
            sums = np.cumsum(rounding.flush_subnormal(terms) if ftz else terms, dtype=dt)
            if not ftz or not np.any((sums != 0) & (np.abs(sums) < np.finfo(np.float32).tiny)):
                old[lo:hi] = sums[:-1].view(b.dtype)
                final[s] = sums[-1:].view(b.dtype)[0]
                continue
        for k in range(lo, hi):
            old[k] = cur
            cur = step(cur, b[k], None if c is None else c[k]) if kind != "add" else step(cur, b[k])
        final[s] = cur
    return old, final


def compile_atom(op, code, ctx):
    red = code.base == "red"
    kinds = [p for p in code.mods if p in OPS]
    typs = [p for p in code.types if p in TYPES]
    if len(kinds) != 1 or len(typs) != 1 or code.vector != 1:
        raise Unsupported(f"{op.opcode!r}")
    kind, typ = kinds[0], typs[0]
    if typ[0] == "f" and kind not in ("add", "exch", "cas"):  # float min/max (sm_90 bf16/f16) not modelled
        raise Unsupported(f"{op.opcode!r}")
    space = code.space if code.space in ("global", "shared") else "generic"
    if code.space in ("local", "const", "param"):
        raise Unsupported(f"{op.opcode!r} (atomics are on global or shared memory)")
    width = type_bits(typ) // 8
    ut = BITS[width * 8]
    vt = _VALUE.get(typ, ut)
    ops = op.operands if red else op.operands[1:]
    d = None if red else dests(op.operands[0])[0]
    addr_fn, pm = ctx.address(ops[0], op)
    if pm is not None:
        raise Unsupported(f"{op.opcode!r} on parameter memory")
    b = ctx.reader(ops[1], f"b{width * 8}" if typ[0] in "fb" else typ, op)
    c = ctx.reader(ops[2], f"b{width * 8}" if typ[0] in "fb" else typ, op) if kind == "cas" else None
    scan_type = vt if typ[0] != "f" else ut

    def run(m, mask):
        lanes = np.ones(m.n, bool) if mask is None else mask
        if not lanes.any():
            return
        addr = np.broadcast_to(np.asarray(addr_fn(m), np.uint64), (m.n,))
        bv = np.broadcast_to(np.asarray(b(m)), (m.n,)).astype(scan_type)
        cv = None if c is None else np.broadcast_to(np.asarray(c(m)), (m.n,)).astype(scan_type)
        old = np.zeros(m.n, ut)
        for mem, offs, sel in m.regions(space, addr, width, op, lanes, write=True):
            idx = np.flatnonzero(sel)
            order = np.argsort(offs, kind="stable")
            where, who = offs[order], idx[order]
            start = np.ones(len(where), bool)
            start[1:] = where[1:] != where[:-1]
            at = where[start][:, None] + np.arange(width)
            init = np.ascontiguousarray(mem[at]).view(scan_type).reshape(-1)
            ftz = kind == "add" and typ == "f32" and not np.may_share_memory(mem, m.shared)
            o, final = serialise(kind, typ, init, bv[who], None if cv is None else cv[who], start, ftz)
            mem[at] = np.ascontiguousarray(final.astype(scan_type)).view(np.uint8).reshape(-1, width)
            old[who] = o.astype(scan_type).view(ut)
        if d is not None:
            m.put(d, old, mask)
    return run
