"""Fatbin containers: reading the entries of one (PTX or ELF, plain, LZ4 or Zstd) and writing one.

Layout (little-endian), as nvcc writes it:

    container header, 16 bytes:  u32 magic 0xBA55ED50 | u16 version 1 | u16 header size 16
                                 | u64 size of everything after the header
    entry header, ≥ 64 bytes:    u16 kind (1 PTX, 2 ELF) | u16 0x0101 | u32 entry header size
                                 | u64 payload size (padded) | u32 compressed size | u32 (0x40)
                                 | u16 minor | u16 major | u32 arch (sm) | u32 name offset
                                 | u32 name length | u64 flags | u64 0 | u64 decompressed size
                                 [ extension up to the entry header size ]
    payload                      right after the entry header; the next entry follows it.

Flags: 0x1 64-bit, 0x10 Linux host, 0x2000 LZ4-compressed payload, 0x8000 Zstd-compressed payload.
A compressed payload's `decompressed size` is checked after decompression.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import lz4.block
import zstandard

MAGIC = 0xBA55ED50
HEADER = struct.Struct("<IHHQ")
ENTRY = struct.Struct("<HHIQIIHHIIIQQQ")
KIND_PTX, KIND_ELF = 1, 2
FLAG_64BIT, FLAG_LINUX = 0x1, 0x10
FLAG_LZ4, FLAG_ZSTD = 0x2000, 0x8000


class FatbinError(ValueError):
    """A container or entry that cannot be read; `offset` is the byte offset in the source."""

    def __init__(self, message: str, offset: int):
        super().__init__(f"fatbin at byte {offset}: {message}")
        self.offset = offset


@dataclass(frozen=True)
class FatbinEntry:
    kind: int  # KIND_PTX or KIND_ELF
    arch: int  # 90 for sm_90 / compute_90
    version: tuple  # (major, minor)
    flags: int
    offset: int  # byte offset of the entry header in the source
    end: int  # byte offset just past its stored payload
    payload: bytes  # decompressed

    @property
    def compression(self) -> str:
        if self.flags & FLAG_ZSTD:
            return "zstd"
        if self.flags & FLAG_LZ4:
            return "lz4"
        return "none"

    @property
    def is_ptx(self) -> bool:
        return self.kind == KIND_PTX

    def ptx_text(self) -> str:
        """The PTX text of a PTX entry: the payload up to its NUL terminator."""
        return self.payload.split(b"\0", 1)[0].decode("utf-8")


@dataclass(frozen=True)
class Container:
    offset: int
    size: int  # header + body
    entries: list  # of FatbinEntry
    errors: list  # of FatbinError for entries that could not be read


def read_container(data: bytes | memoryview, offset: int) -> Container:
    """Read the container whose magic is at `offset`. Raises FatbinError if the header is bad."""
    if offset + HEADER.size > len(data):
        raise FatbinError("truncated container header", offset)
    magic, version, header_size, body_size = HEADER.unpack_from(data, offset)
    if magic != MAGIC:
        raise FatbinError(f"bad magic 0x{magic:08x}", offset)
    if header_size != HEADER.size or version != 1:
        raise FatbinError(f"unknown header (version {version}, header size {header_size})", offset)
    end = offset + HEADER.size + body_size
    if end > len(data):
        raise FatbinError(f"truncated container: needs {body_size} bytes after the header, "
                          f"{len(data) - offset - HEADER.size} present", offset)
    entries, errors = [], []
    pos = offset + HEADER.size
    while pos + ENTRY.size <= end:
        (kind, _, entry_size, payload_size, compressed_size, _, minor, major, arch, _, _, flags,
         _, decompressed_size) = ENTRY.unpack_from(data, pos)
        if entry_size < ENTRY.size or pos + entry_size + payload_size > end:
            errors.append(FatbinError(f"entry header size {entry_size} / payload {payload_size} "
                                      "runs past the container", pos))
            break
        start = pos + entry_size
        raw = bytes(data[start:start + payload_size])
        try:
            payload = _decompress(raw, flags, compressed_size, decompressed_size, pos)
            entries.append(FatbinEntry(kind, arch, (major, minor), flags, pos,
                                      start + payload_size, payload))
        except FatbinError as e:
            errors.append(e)
        pos = start + payload_size
    return Container(offset, end - offset, entries, errors)


def _decompress(raw: bytes, flags: int, compressed_size: int, decompressed_size: int,
                pos: int) -> bytes:
    if not flags & (FLAG_LZ4 | FLAG_ZSTD):
        return raw
    body = raw[:compressed_size] if compressed_size else raw
    try:
        if flags & FLAG_ZSTD:
            out = zstandard.ZstdDecompressor().decompress(body, max_output_size=decompressed_size)
        else:
            out = lz4.block.decompress(body, uncompressed_size=decompressed_size)
    except (zstandard.ZstdError, lz4.block.LZ4BlockError) as e:
        raise FatbinError(f"corrupt {'Zstd' if flags & FLAG_ZSTD else 'LZ4'} payload: {e}", pos) from None
    if len(out) != decompressed_size:
        raise FatbinError(f"payload decompressed to {len(out)} bytes, header says "
                          f"{decompressed_size}", pos)
    return out


def write_container(entries: list[tuple[int, int, bytes, str]], ptx_version: tuple = (9, 0)) -> bytes:
    """A container holding `(kind, arch, payload, compression)` entries; compression is
    'none', 'lz4' or 'zstd'. PTX payloads should carry their NUL terminator."""
    body = bytearray()
    for kind, arch, payload, compression in entries:
        flags = FLAG_64BIT | FLAG_LINUX
        if compression == "lz4":
            stored = lz4.block.compress(payload, store_size=False)
            flags |= FLAG_LZ4
        elif compression == "zstd":
            stored = zstandard.ZstdCompressor(level=19).compress(payload)
            flags |= FLAG_ZSTD
        elif compression == "none":
            stored = payload
        else:
            raise ValueError(f"unknown compression {compression!r} (none, lz4, zstd)")
        padded = stored + b"\0" * (-len(stored) % 8)
        major, minor = ptx_version if kind == KIND_PTX else (1, 8)
        body += ENTRY.pack(kind, 0x0101, ENTRY.size, len(padded),
                           len(stored) if compression != "none" else 0, 0x40, minor, major, arch,
                           0, 0, flags, 0, len(payload) if compression != "none" else 0)
        body += padded
    return HEADER.pack(MAGIC, 1, HEADER.size, len(body)) + bytes(body)
