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


def _bytes(word: np.ndarray) -> np.ndarray:
    """(warps, 32) uint32 → (warps, 32, 4) bytes, least significant first."""
    return np.ascontiguousarray(word, dtype=np.uint32).view(np.uint8).reshape(word.shape + (4,))


def a_matrix(words: list) -> np.ndarray:
    """Four (warps, 32) uint32 registers → (warps, 16, 32) e4m3 bytes."""
    out = np.zeros((words[0].shape[0], 16, 32), np.uint8)
    for r, w in enumerate(words):
        b = _bytes(w)
        for i in range(4):
            out[:, G + 8 * (r & 1), 16 * (r >> 1) + 4 * T + i] = b[:, :, i]
    return out


def b_matrix(words: list) -> np.ndarray:
    """Two (warps, 32) uint32 registers → (warps, 32, 8) e4m3 bytes."""
    out = np.zeros((words[0].shape[0], 32, 8), np.uint8)
    for r, w in enumerate(words):
        b = _bytes(w)
        for i in range(4):
            out[:, 16 * r + 4 * T + i, G] = b[:, :, i]
    return out


def c_matrix(words: list) -> np.ndarray:
    """Two f16x2 or four f32 (warps, 32) registers → (warps, 16, 8) f16 or f32."""
    warps = words[0].shape[0]
    if len(words) == 2:
        out = np.zeros((warps, 16, 8), np.float16)
        for r, w in enumerate(words):
            halves = np.ascontiguousarray(w, dtype=np.uint32).view(np.float16).reshape(warps, 32, 2)
            for e in range(2):
                out[:, G + 8 * r, 2 * T + e] = halves[:, :, e]
        return out
    out = np.zeros((warps, 16, 8), np.float32)
    for r, w in enumerate(words):
        out[:, G + 8 * (r >> 1), 2 * T + (r & 1)] = np.ascontiguousarray(w, dtype=np.uint32).view(np.float32)
    return out


def d_registers(d: np.ndarray) -> list:
    """(warps, 16, 8) f16 or f32 → the two f16x2 or four f32 registers as (warps, 32) uint32."""
    if d.dtype == np.float16:
        regs = []
        for r in range(2):
            pair = np.stack([d[:, G + 8 * r, 2 * T], d[:, G + 8 * r, 2 * T + 1]], axis=-1)
            regs.append(np.ascontiguousarray(pair).view(np.uint32)[..., 0])
        return regs
    return [np.ascontiguousarray(d[:, G + 8 * (r >> 1), 2 * T + (r & 1)], dtype=np.float32).view(np.uint32)
            for r in range(4)]
