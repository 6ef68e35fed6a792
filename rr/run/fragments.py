"""The PTX ISA's m16n8k32 fragment layouts for e4m3 A and B and f16/f32 C and D, as numpy
gathers and scatters over a warp's 32 lanes. Used by the CPU interpreter's `mma` and by the
probe reader. Lane l has g = l >> 2 and t = l & 3. In bytes the m16n8k16 f16/bf16, m16n8k8 tf32
and m16n8k32 s8/u8 forms have the same layouts (rr.numerics.forms reads the bytes as their
elements; an s32 C/D is the f32 layout).

A (16×32): a0 holds row g, k 4t…4t+3; a1 row g+8; a2, a3 the same rows at k 16+4t….
B (32×8):  b0 holds column g, k 4t…4t+3; b1 k 16+4t….
C/D f16 (16×8): c0 = row g, columns 2t, 2t+1 (low half first); c1 = row g+8.
C/D f32 (16×8): c0, c1 = row g, columns 2t, 2t+1; c2, c3 = row g+8.
"""

from __future__ import annotations

import numpy as np

# Every layout is a transpose of whole words: lane l = 4g + t of register r holds a word of
# matrix row (or column) g of one of the register's 8-row blocks, at word t of that row's run;
# so each is one strided copy per register instead of a gather. A and B's runs of a row are the
# four lanes t of one g: 16 bytes, copied as one opaque element.
_RUN = np.dtype((np.void, 16))


def _words(words: list) -> list:
    """(warps, 32) uint32 registers → each as (warps, 8 g, 4 t)."""
    return [np.asarray(w, dtype=np.uint32).reshape(-1, 8, 4) for w in words]


def _runs(words: list) -> list:
    """(warps, 32) uint32 registers → each as (warps, 8 g) runs of its four lanes t."""
    return [np.ascontiguousarray(w, dtype=np.uint32).reshape(-1, 32).view(_RUN) for w in words]


def a_matrix(words: list) -> np.ndarray:
    """Four (warps, 32) uint32 registers → (warps, 16, 32) e4m3 bytes. A register holds four
    consecutive k of one row: register r's lane (g, t) → row (r & 1, g), word of the row
    (r >> 1, t)."""
    regs = _runs(words)
    out = np.empty((regs[0].shape[0], 2, 8, 2), _RUN)
    for r, w in enumerate(regs):
        out[:, r & 1, :, r >> 1] = w
    return out.view(np.uint8).reshape(-1, 16, 32)


def b_matrix(words: list) -> np.ndarray:
    """Two (warps, 32) uint32 registers → (warps, 32, 8) e4m3 bytes: column g's k run 4t…4t+3
    (and 16+4t…) is one word, so Bᵀ is a transpose of words (lane (g, t), register r → row g,
    word (r, t)); B is returned as a view of it."""
    regs = _runs(words)
    out = np.empty((regs[0].shape[0], 8, 2), _RUN)
    for r, w in enumerate(regs):
        out[:, :, r] = w
    return out.view(np.uint8).reshape(-1, 8, 32).transpose(0, 2, 1)


def c_matrix(words: list) -> np.ndarray:
    """Two f16x2 or four f32 (warps, 32) registers → (warps, 16, 8) f16 or f32: f16 register r's
    lane (g, t) is row 8r + g, columns 2t, 2t + 1; f32 register r's is row 8(r >> 1) + g,
    column 2t + (r & 1)."""
    regs = _words(words)
    if len(regs) == 2:
        out = np.empty((regs[0].shape[0], 2, 8, 4), np.uint32)
        out[:, 0], out[:, 1] = regs
        return out.view(np.float16).reshape(-1, 16, 8)
    out = np.empty((regs[0].shape[0], 2, 8, 4, 2), np.uint32)
    for r, w in enumerate(regs):
        out[:, r >> 1, :, :, r & 1] = w
    return out.view(np.float32).reshape(-1, 16, 8)


def d_registers(d: np.ndarray) -> list:
    """(warps, 16, 8) f16 or f32 → the two f16x2 or four f32 registers as (warps, 32) uint32."""
    if d.dtype == np.float16:
        rows = np.ascontiguousarray(d).view(np.uint32).reshape(-1, 2, 32)
        return [np.ascontiguousarray(rows[:, r]) for r in range(2)]
    cells = np.ascontiguousarray(d, np.float32).view(np.uint32).reshape(-1, 2, 8, 4, 2)
    return [np.ascontiguousarray(cells[:, r >> 1, :, :, r & 1]).reshape(-1, 32) for r in range(4)]


def a_registers(a: np.ndarray) -> list:
    """(warps, 16, 32) A bytes → its four (warps, 32) uint32 registers: the inverse of a_matrix."""
    w = np.ascontiguousarray(a, np.uint8).view(np.uint32).reshape(-1, 2, 8, 2, 4)  # row block, g, half, t
    return [np.ascontiguousarray(w[:, r & 1, :, r >> 1]).reshape(-1, 32) for r in range(4)]


def b_registers(b: np.ndarray) -> list:
    """(warps, 32, 8) B bytes (k-major) → its two (warps, 32) uint32 registers: the inverse of b_matrix."""
    w = np.ascontiguousarray(np.swapaxes(b, -1, -2), np.uint8).view(np.uint32).reshape(-1, 8, 2, 4)  # g, half, t
    return [np.ascontiguousarray(w[:, :, r]).reshape(-1, 32) for r in range(2)]
