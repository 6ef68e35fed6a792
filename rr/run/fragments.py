"""The PTX ISA's m16n8k32 fragment layouts for e4m3 A and B and f16/f32 C and D, as numpy
gathers and scatters over a warp's 32 lanes. Used by the CPU interpreter's `mma` and by the
probe reader. Lane l has g = l >> 2 and t = l & 3.

A (16×32): a0 holds row g, k 4t…4t+3; a1 row g+8; a2, a3 the same rows at k 16+4t….
B (32×8):  b0 holds column g, k 4t…4t+3; b1 k 16+4t….
C/D f16 (16×8): c0 = row g, columns 2t, 2t+1 (low half first); c1 = row g+8.
C/D f32 (16×8): c0, c1 = row g, columns 2t, 2t+1; c2, c3 = row g+8.
"""

from __future__ import annotations

import numpy as np

_LANE = np.arange(32)
G, T = _LANE >> 2, _LANE & 3


def _source_index(shape: tuple, places) -> np.ndarray:
    """The flat index, into a warp's registers laid out lane-major, of each element of a matrix:
    `places` yields (flat register element, row, column) for every element a lane holds."""
    index = np.full(shape, -1, np.intp)
    for src, row, col in places:
        index[row, col] = src
    assert (index >= 0).all()
    return index.ravel()


# C's layouts as one gather each (a matrix element ← lane l's register r, half e), so a chunk's
# thousands of warps are permuted in one numpy call instead of one per register and half.
_C16 = _source_index((16, 8), ((l * 4 + r * 2 + e, G[l] + 8 * r, 2 * T[l] + e)
                               for l in range(32) for r in range(2) for e in range(2)))
_C32 = _source_index((16, 8), ((l * 4 + r, G[l] + 8 * (r >> 1), 2 * T[l] + (r & 1))
                               for l in range(32) for r in range(4)))
# and back (D has C's layout): the lane-major registers are the matrix gathered by the inverse
_D16, _D32 = np.argsort(_C16), np.argsort(_C32)


def _stacked(words: list) -> np.ndarray:
    """(warps, 32) uint32 registers → (warps, 32, registers) uint32."""
    return np.stack([np.asarray(w, dtype=np.uint32) for w in words], axis=-1)


def _lane_major(words: list, dtype) -> np.ndarray:
    """(warps, 32) uint32 registers → (warps, 32 · len(words) · elements) of `dtype`, lane-major:
    lane l's register r element e at (l · len(words) + r) · elements + e."""
    stacked = _stacked(words)
    return stacked.view(dtype).reshape(stacked.shape[0], -1)


def a_matrix(words: list) -> np.ndarray:
    """Four (warps, 32) uint32 registers → (warps, 16, 32) e4m3 bytes. A register holds four
    consecutive k of one row, so the layout is a transpose of words: lane (g, t), register
    (r >> 1, r & 1) → row (r & 1, g), word of the row (r >> 1, t)."""
    words = _stacked(words).reshape(-1, 8, 4, 2, 2)
    return np.ascontiguousarray(words.transpose(0, 4, 1, 3, 2)).view(np.uint8).reshape(-1, 16, 32)


def b_matrix(words: list) -> np.ndarray:
    """Two (warps, 32) uint32 registers → (warps, 32, 8) e4m3 bytes: column g's k run 4t…4t+3
    (and 16+4t…) is one word, so Bᵀ is a transpose of words (lane (g, t), register r → row g,
    word (r, t)); B is returned as a view of it."""
    words = _stacked(words).reshape(-1, 8, 4, 2)
    return np.ascontiguousarray(words.transpose(0, 1, 3, 2)).view(np.uint8).reshape(-1, 8, 32).transpose(0, 2, 1)


def c_matrix(words: list) -> np.ndarray:
    """Two f16x2 or four f32 (warps, 32) registers → (warps, 16, 8) f16 or f32."""
    if len(words) == 2:
        return _lane_major(words, np.float16)[:, _C16].reshape(-1, 16, 8)
    return _lane_major(words, np.float32)[:, _C32].reshape(-1, 16, 8)


def d_registers(d: np.ndarray) -> list:
    """(warps, 16, 8) f16 or f32 → the two f16x2 or four f32 registers as (warps, 32) uint32."""
    flat = d.reshape(d.shape[0], 128)
    f16 = d.dtype == np.float16
    lane_major = np.ascontiguousarray(flat[:, _D16 if f16 else _D32], dtype=np.float16 if f16 else np.float32)
    regs = lane_major.view(np.uint32).reshape(d.shape[0], 32, -1)
    return [np.ascontiguousarray(regs[..., r]) for r in range(regs.shape[-1])]
