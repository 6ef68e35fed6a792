"""The measured tables rr ships in rr/data (`mufu_h200.npz`: the H200's MUFU results), decoded for
use and kept decoded in a per-machine cache.

A table of 2²³ or 2²⁴ uint32 results is shipped as its first value and the int8 differences
between neighbours (0.68 MiB for all four); decoding one is a cumulative sum over all of it (0.1 s
for the largest on the dev VM). Every process of the cpu backend needs several, so the decoded
table is written once to `$XDG_CACHE_HOME/rr/` (default `~/.cache/rr/`), named by the shipped
file's content hash, and later processes map it from there instead (a millisecond). A cache that
cannot be read or written (no home, a read-only or full disk, a damaged file) is passed by: the
table is decoded in memory as without it. The tables are the same bits either way.
"""

from __future__ import annotations

import functools
import hashlib
import io
import os
from importlib import resources
from pathlib import Path

import numpy as np

CACHE_FORMAT = 1  # bump when the cached files' meaning changes


def cache_dir() -> Path:
    """Where decoded tables are kept: $XDG_CACHE_HOME/rr, else ~/.cache/rr."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "rr"


@functools.cache
def _shipped(package_file: str) -> tuple[bytes, str]:
    """The shipped file's bytes and the key its decoded tables are cached under."""
    data = resources.files("rr.data").joinpath(package_file).read_bytes()
    return data, f"{hashlib.sha256(data).hexdigest()[:16]}-v{CACHE_FORMAT}"


def table(package_file: str, name: str) -> np.ndarray:
    """The table `name` of the shipped .npz `package_file`, read-only: stored whole, or decoded
    from `{name}_first` and the int8 `{name}_diff` (uint32 results, wrapping as the shipped
    differences do), through the cache."""
    data, key = _shipped(package_file)
    with np.load(io.BytesIO(data)) as z:
        if f"{name}_diff" not in z:
            out = z[name]
            out.flags.writeable = False
            return out
        first = z[f"{name}_first"]
        size = _stored_shape(z, f"{name}_diff")[0] + 1
        stem = Path(package_file).stem
        path = cache_dir() / f"{stem}-{key}-{name}.npy"
        cached = _cached(path, size, first)
        if cached is not None:
            return cached
        out = decode(first, z[f"{name}_diff"])
    _store(path, out, f"{stem}-*-{name}.npy")
    out.flags.writeable = False
    return out


def decode(first, diff: np.ndarray) -> np.ndarray:
    """first, first + d0, first + d0 + d1, …, in uint32 arithmetic (modulo 2³², as the int8
    differences of neighbouring uint32 results were taken)."""
    out = np.empty(diff.size + 1, np.uint32)
    out[0] = first
    np.cumsum(diff, dtype=np.uint32, out=out[1:])
    out[1:] += out[0]
    return out


def _stored_shape(z, member: str) -> tuple:
    """An .npz member's shape from its header, without decompressing the array."""
    with z.zip.open(f"{member}.npy") as f:
        version = np.lib.format.read_magic(f)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        return read(f)[0]


def _cached(path: Path, size: int, first) -> np.ndarray | None:
    """The cached table mapped read-only, or None when it is absent or not the table it should be."""
    try:
        t = np.load(path, mmap_mode="r")
    except (OSError, ValueError):
        return None
    if t.dtype != np.uint32 or t.shape != (size,) or t[0] != first:
        return None
    return np.asarray(t)  # a plain read-only ndarray over the mapping


def _store(path: Path, decoded: np.ndarray, versions: str) -> None:
    """Write the decoded table to the cache (atomically, as rr writes every file) and remove the
    same table cached from other versions of the shipped file (the glob `versions`); a failure
    leaves the cache as it was."""
    from rr.io import atomic_path

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp, open(tmp, "wb") as f:
            np.save(f, decoded)
        for old in path.parent.glob(versions):
            if old != path:
                old.unlink(missing_ok=True)
    except (OSError, ValueError):  # ValueError: rr.io's OutputRefused (the cache path is not rr's to write)
        pass
