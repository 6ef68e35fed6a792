"""The moves between global memory, shared memory and a warp's fragments for the CPU interpreter:
`cp.async` (the asynchronous copy of 4, 8 or 16 bytes from global to shared memory, `.ca` and
`.cg`, with its `src-size` or `ignore-src` operand), its groups (`commit_group`, `wait_group`,
`wait_all`), and the warp's matrix loads and stores `ldmatrix` / `stmatrix` (`.m8n8`, `.x1`,
`.x2`, `.x4`, `.trans`, `.b16`), by the PTX ISA's fragment layout.

The interpreter's memory is sequentially consistent and a statement's lanes run together, so an
asynchronous copy is done when it is issued: a program that waits for its groups (`wait_group`,
then a barrier) before it reads what they copy reads exactly that; the waits themselves do
nothing. Bytes past `src-size` (all of them under a true `ignore-src`) are zeros, as the PTX says,
and are not read from global memory.

`ldmatrix`: lane 8·i + r gives the shared address of row r of matrix i (16 bytes, eight b16
elements); register i of lane l = 4g + t holds elements 2t and 2t + 1 of row g of matrix i, or,
with `.trans`, elements g of rows 2t and 2t + 1. `stmatrix` is the inverse: it writes those rows.
"""

from __future__ import annotations

import numpy as np

from rr.ptx.model import Reg, Vec
from rr.run.cpu.machine import ExecutionError
from rr.run.cpu.values import Unsupported, dests

_MATRICES = {"x1": 1, "x2": 2, "x4": 4}


def _cp(op, code, ctx):
    kind = code.mods[1] if len(code.mods) > 1 else ""
    if kind in ("commit_group", "wait_group", "wait_all"):
        return lambda m, mask: None  # done when issued (the module docstring)
    if code.mods[:1] != ("async",) or kind not in ("ca", "cg") or code.spaces != ("shared", "global"):
        raise Unsupported(f"{op.opcode!r} (cp.async.{{ca,cg}}.shared.global and its groups)")
    ops = op.operands
    dst, _ = ctx.address(ops[0], op)
    src, _ = ctx.address(ops[1], op)
    size = ctx.immediate(ops[2], "cp-size")
    if size not in (4, 8, 16):
        raise Unsupported(f"{op.opcode!r} with cp-size {size}")
    extra = ops[3] if len(ops) > 3 else None
    predicate = isinstance(extra, Reg) and ctx.reg_bits(extra.name) == 1
    if extra is None:
        filled = None
    elif predicate:  # ignore-src: a true predicate copies nothing and fills zeros
        ignore = ctx.reader(extra, "pred", op)
        filled = lambda m: np.where(np.broadcast_to(ignore(m), (m.n,)), 0, size)  # noqa: E731
    else:
        reader = ctx.reader(extra, "u32", op)
        filled = lambda m: np.minimum(np.broadcast_to(reader(m), (m.n,)).astype(np.int64), size)  # noqa: E731

    def run(m, mask):
        live = np.ones(m.n, bool) if mask is None else mask
        if filled is None:
            data = m.gather("global", src(m), size, op, mask)
        else:
            n = filled(m)
            data = np.zeros((m.n, size), np.uint8)
            whole = live & (n == size)
            if whole.any():
                data[whole] = m.gather("global", src(m), size, op, whole)[whole]
            for k in range(size):  # a partial copy: byte by byte, only the bytes it reads
                part = live & (n > k) & (n < size)
                if part.any():
                    data[part, k] = m.gather("global", src(m) + np.uint64(k), 1, op, part)[part, 0]
        m.scatter("shared", dst(m), data, op, mask)
    return run


def _form(op, code) -> tuple[int, bool]:
    """(matrices, transposed) of an ldmatrix or stmatrix; Unsupported for other shapes and types."""
    count = next((_MATRICES[x] for x in code.mods if x in _MATRICES), None)
    if "m8n8" not in code.mods or code.type != "b16" or count is None:
        raise Unsupported(f"{op.opcode!r} (m8n8 .b16 with .x1, .x2 or .x4)")
    if code.space not in (None, "shared"):
        raise Unsupported(f"{op.opcode!r} (shared memory)")
    return count, "trans" in code.mods


def _space(code) -> str:
    return "shared" if code.space == "shared" else "generic"


def _whole_warps(m, op, mask) -> np.ndarray:
    """The lanes taking part, as (warps, 32); a warp reaching the statement in part is an error."""
    live = np.ones(m.n, bool) if mask is None else mask
    rows = live.reshape(-1, 32)
    if not np.all(rows.all(1) | ~rows.any(1)):
        raise ExecutionError(f"{op.where()}: {op.code.base} reached by part of a warp")
    return rows


def _providers(rows: np.ndarray, count: int) -> np.ndarray:
    """The lanes whose address is read: 8 per matrix, of the warps that take part."""
    lanes = np.zeros((1, 32), bool)
    lanes[0, :8 * count] = True
    return (rows & lanes).reshape(-1)


def _ldmatrix(op, code, ctx):
    count, trans = _form(op, code)
    names = dests(op.operands[0])
    if len(names) != count:
        raise Unsupported(f"{op.opcode!r} with {len(names)} destination registers")
    addr, _ = ctx.address(op.operands[1], op)
    space = _space(code)

    def run(m, mask):
        rows = _whole_warps(m, op, mask)
        # every providing lane's 16-byte row: (warps, matrix, row, 8 b16 elements)
        got = m.gather(space, addr(m), 16, op, _providers(rows, count))
        mats = got.view(np.uint16).reshape(-1, 32, 8)[:, :8 * count].reshape(-1, count, 8, 8)
        if trans:
            mats = mats.transpose(0, 1, 3, 2)
        # register i of lane 4g + t: elements 2t, 2t + 1 of row g
        words = np.ascontiguousarray(mats).view(np.uint32).reshape(-1, count, 32)
        for i, name in enumerate(names):
            if name:
                m.put(name, np.ascontiguousarray(words[:, i]).reshape(-1), mask)
    return run


def _stmatrix(op, code, ctx):
    count, trans = _form(op, code)
    addr, _ = ctx.address(op.operands[0], op)
    items = op.operands[1].items if isinstance(op.operands[1], Vec) else (op.operands[1],)
    if len(items) != count:
        raise Unsupported(f"{op.opcode!r} with {len(items)} source registers")
    readers = [ctx.reader(x, "b32", op) for x in items]
    space = _space(code)

    def run(m, mask):
        rows = _whole_warps(m, op, mask)
        words = np.stack([np.broadcast_to(np.asarray(r(m)).astype(np.uint32), (m.n,)).reshape(-1, 32)
                          for r in readers], 1)  # (warps, matrix, lane)
        mats = np.ascontiguousarray(words).view(np.uint16).reshape(-1, count, 8, 8)
        if trans:
            mats = mats.transpose(0, 1, 3, 2)
        data = np.zeros((rows.shape[0], 32, 16), np.uint8)
        data[:, :8 * count] = np.ascontiguousarray(mats).reshape(-1, 8 * count, 8).view(np.uint8)
        m.scatter(space, addr(m), data.reshape(-1, 16), op, _providers(rows, count))
    return run


HANDLERS = {"cp": _cp, "ldmatrix": _ldmatrix, "stmatrix": _stmatrix}
