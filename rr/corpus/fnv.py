"""FNV-1a 64: the name of an extracted module is the hash of its text."""

from __future__ import annotations

_OFFSET = 0xCBF29CE484222325
_PRIME = 0x100000001B3
_MASK = 0xFFFFFFFFFFFFFFFF


def fnv1a64(data: bytes) -> int:
    h = _OFFSET
    for b in data:
        h = ((h ^ b) * _PRIME) & _MASK
    return h


def fnv1a64_hex(data: bytes) -> str:
    return f"{fnv1a64(data):016x}"
