"""Warp-wide instructions for the CPU interpreter: vote (.all/.any/.uni/.ballot), match.any/.all,
redux, activemask and elect. A warp is 32 consecutive lanes of the machine; the threads that take
part are those executing the statement (active, guard true) whose lane is in `membermask`.
Threads of the member mask that do not execute it contribute nothing (the GPU would wait for
them; PTX leaves a member that never arrives undefined).
"""

from __future__ import annotations

import numpy as np

from rr.run.cpu.values import Unsupported, dests

U32, U64 = np.uint32, np.uint64
_LANE_BITS = (np.uint64(1) << np.arange(32, dtype=np.uint64))[None, :]


def _participants(m, mask, member):
    """(warps, 32) bool: executing lanes whose bit is set in their member mask."""
    act = np.ones(m.n, bool) if mask is None else mask
    if member is not None:
        mm = np.broadcast_to(np.asarray(member(m)).astype(U32), (m.n,))
        act = act & (((mm >> m.special["%laneid"]) & U32(1)) != 0)
    return act.reshape(-1, 32)


def _bits(rows) -> np.ndarray:
    """Per warp, the 32-bit mask of the lanes set in a (warps, 32) bool array."""
    return (rows.astype(U64) * _LANE_BITS).sum(1).astype(U32)


def _per_lane(per_warp) -> np.ndarray:
    return np.repeat(per_warp, 32)


def _member_reader(op, ctx, index):
    return ctx.reader(op.operands[index], "b32", op) if len(op.operands) > index else None


def _vote(op, code, ctx):
    mode = next((p for p in code.mods if p in ("all", "any", "uni", "ballot")), None)
    if mode is None:
        raise Unsupported(f"{op.opcode!r}")
    d = dests(op.operands[0])[0]
    a = ctx.reader(op.operands[1], "pred", op)
    member = _member_reader(op, ctx, 2)

    def run(m, mask):
        part = _participants(m, mask, member)
        p = np.broadcast_to(a(m), (m.n,)).reshape(-1, 32)
        if mode == "ballot":
            r = _bits(p & part)
        elif mode == "all":
            r = (p | ~part).all(1)
        elif mode == "any":
            r = (p & part).any(1)
        else:
            r = (p | ~part).all(1) | (~p | ~part).all(1)
        m.put(d, _per_lane(r), mask)
    return run


def _activemask(op, code, ctx):
    d = dests(op.operands[0])[0]
    return lambda m, mask: m.put(d, _per_lane(_bits(_participants(m, mask, None))), mask)


def _match(op, code, ctx):
    typ = code.type
    if typ not in ("b32", "b64") or not ({"any", "all"} & set(code.mods)):
        raise Unsupported(f"{op.opcode!r}")
    names = dests(op.operands[0])
    a = ctx.reader(op.operands[1], typ, op)
    member = _member_reader(op, ctx, 2)
    every = "all" in code.mods

    def run(m, mask):
        part = _participants(m, mask, member)
        v = np.broadcast_to(a(m), (m.n,)).reshape(-1, 32)
        if not every:
            same = (v[:, :, None] == v[:, None, :]) & part[:, None, :]
            m.put(names[0], _bits(same.reshape(-1, 32)), mask)
            return
        big = np.iinfo(v.dtype).max
        lo = np.where(part, v, big).min(1)
        hi = np.where(part, v, 0).max(1)
        ok = lo == hi
        if names[0]:
            m.put(names[0], _per_lane(np.where(ok, _bits(part), U32(0))), mask)
        if len(names) > 1 and names[1]:
            m.put(names[1], _per_lane(ok), mask)
    return run


def _redux(op, code, ctx):
    kind = next((p for p in code.mods if p in ("add", "min", "max", "and", "or", "xor")), None)
    typ = code.type
    if kind is None or typ not in ("u32", "s32", "b32"):
        raise Unsupported(f"{op.opcode!r}")
    d = dests(op.operands[0])[0]
    a = ctx.reader(op.operands[1], typ, op)
    member = _member_reader(op, ctx, 2)

    def run(m, mask):
        part = _participants(m, mask, member)
        v = np.broadcast_to(a(m), (m.n,)).reshape(-1, 32)
        info = np.iinfo(v.dtype)
        if kind == "add":
            r = np.where(part, v.astype(np.int64), 0).sum(1) & 0xFFFFFFFF
        elif kind == "min":
            r = np.where(part, v, info.max).min(1)
        elif kind == "max":
            r = np.where(part, v, info.min).max(1)
        elif kind == "and":
            r = np.bitwise_and.reduce(np.where(part, v, v.dtype.type(info.max)), 1)
        else:
            r = (np.bitwise_or if kind == "or" else np.bitwise_xor).reduce(np.where(part, v, v.dtype.type(0)), 1)
        m.put(d, _per_lane(np.asarray(r).astype(np.int64).astype(U32)), mask)
    return run


def _elect(op, code, ctx):
    names = dests(op.operands[0])
    member = _member_reader(op, ctx, 1)

    def run(m, mask):
        part = _participants(m, mask, member)
        leader = np.where(part.any(1), part.argmax(1), 32).astype(U32)
        lanes = _per_lane(leader)
        if names[0]:
            m.put(names[0], lanes, mask)
        if len(names) > 1 and names[1]:
            m.put(names[1], lanes == m.special["%laneid"], mask)
    return run


HANDLERS = {"vote": _vote, "activemask": _activemask, "match": _match, "redux": _redux, "elect": _elect}
