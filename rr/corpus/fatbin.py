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

The sizes in a header are claims, not facts: a payload is decompressed only up to the size its
header declares, and only if that size is within a cap (`max_bytes`), so a hostile entry costs at
most the cap in memory. An entry that claims too much, inflates past its claim or is corrupt is an
error of that entry alone; the rest of the container is still read.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass


MAGIC = 0xBA55ED50
MAGIC_BYTES = MAGIC.to_bytes(4, "little")
HEADER = struct.Struct("<IHHQ")
ENTRY = struct.Struct("<HHIQIIHHIIIQQQ")
KIND_PTX, KIND_ELF = 1, 2
FLAG_64BIT, FLAG_LINUX = 0x1, 0x10
FLAG_LZ4, FLAG_ZSTD = 0x2000, 0x8000

# The largest module (decompressed or stored payload, or plain-text module) read: 256 MiB. The
# biggest PTX modules of real engines are a few MiB.
MAX_MODULE_BYTES = 256 << 20
# An LZ4 block cannot inflate more than 255-fold (a match-length byte adds at most 255 bytes), so a
# larger claim is refused before the output buffer is allocated.
_LZ4_MAX_RATIO = 255


class FatbinError(ValueError):
    """A container or entry that cannot be read; `offset` is the container's byte offset in the
    source, `entry` the entry header's (None for the container as a whole)."""

    def __init__(self, message: str, offset: int, entry: int | None = None):
        where = f"fatbin container at byte {offset}" + (f", entry at byte {entry}" if entry is not None else "")
        super().__init__(f"{where}: {message}")
        self.offset = offset
        self.entry = entry


@dataclass(frozen=True)
class FatbinEntry:
    kind: int  # KIND_PTX or KIND_ELF
    arch: int  # 90 for sm_90 / compute_90
    version: tuple  # (major, minor)
    flags: int
    offset: int  # byte offset of the entry header in the source
    end: int  # byte offset just past its stored payload
    payload: bytes | None  # decompressed; None where not asked for (iter_entries' kinds)

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
        end = self.payload.find(b"\0")  # not split: that would copy the rest of a huge payload
        return self.payload[:end if end >= 0 else len(self.payload)].decode("utf-8")


@dataclass(frozen=True)
class Container:
    offset: int
    size: int  # header + body (up to the next container where the header claims more)
    entries: list  # of FatbinEntry
    errors: list  # of FatbinError for the entries (or bytes) that could not be read


def read_container(data, offset: int, max_bytes: int = MAX_MODULE_BYTES) -> Container:
    """Read the container whose magic is at `offset` in `data` (bytes, or an mmap of the file).
    Raises FatbinError if the header is bad; entries that cannot be read are in `errors`."""
    end = container_end(data, offset)
    entries, errors = [], []
    for item in iter_entries(data, offset, end, max_bytes):
        (errors if isinstance(item, FatbinError) else entries).append(item)
    return Container(offset, end - offset, entries, errors)


def container_end(data, offset: int) -> int:
    """The byte offset just past the container whose magic is at `offset`, as its header says;
    FatbinError if the header is bad or the container runs past the end of `data`."""
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
    return end


def iter_entries(data, offset: int, end: int, max_bytes: int = MAX_MODULE_BYTES,
                 kinds: frozenset | None = None) -> Iterator[FatbinEntry | FatbinError]:
    """The entries of the container at `offset` (ending at `end`), one at a time so that one
    payload at most is in memory, each a FatbinEntry or the FatbinError that skipped it. Only
    entries of `kinds` (all if None) are decompressed; the others come with payload None."""
    pos = offset + HEADER.size
    walked = False
    while pos < end:
        if data[pos:pos + len(MAGIC_BYTES)] == MAGIC_BYTES:
            # nvcc never nests containers: the header claims more than this container holds.
            yield FatbinError(f"its size runs {end - pos} bytes over the next container, at byte {pos}; "
                              "read up to it", offset)
            return
        if pos + ENTRY.size > end:
            after = "the last entry" if walked else "the container header"
            yield FatbinError(f"{end - pos} bytes left after {after}, fewer than an entry header "
                              f"({ENTRY.size}); skipped", offset, pos)
            return
        (kind, _, entry_size, payload_size, compressed_size, _, minor, major, arch, _, _, flags,
         _, decompressed_size) = ENTRY.unpack_from(data, pos)
        if entry_size < ENTRY.size or pos + entry_size + payload_size > end:
            yield FatbinError(f"entry header size {entry_size} / payload {payload_size} runs past the "
                              "container; the rest of it skipped", offset, pos)
            return
        start, walked = pos + entry_size, True
        try:
            payload = (_payload(data, start, payload_size, flags, compressed_size, decompressed_size, max_bytes)
                       if kinds is None or kind in kinds else None)
            yield FatbinEntry(kind, arch, (major, minor), flags, pos, start + payload_size, payload)
        except _BadPayload as e:
            yield FatbinError(f"{e}; entry skipped", offset, pos)
        pos = start + payload_size


class _BadPayload(Exception):
    pass


def _payload(data, start: int, payload_size: int, flags: int, compressed_size: int,
             decompressed_size: int, max_bytes: int) -> bytes:
    """An entry's payload, decompressed within its declared size and the cap; _BadPayload if not."""
    if payload_size > max_bytes:
        raise _BadPayload(f"payload of {payload_size} bytes is over the module cap of {max_bytes} bytes")
    if not flags & (FLAG_LZ4 | FLAG_ZSTD):
        return bytes(data[start:start + payload_size])
    name = "Zstd" if flags & FLAG_ZSTD else "LZ4"
    if compressed_size > payload_size:
        raise _BadPayload(f"compressed size {compressed_size} runs past its {payload_size}-byte payload")
    if decompressed_size > max_bytes:
        raise _BadPayload(f"{name} payload claims {decompressed_size} bytes decompressed, over the "
                          f"module cap of {max_bytes} bytes")
    body = bytes(data[start:start + (compressed_size or payload_size)])
    # the codecs are imported where a payload needs one: reading a corpus (`rr spec CORPUS`) needs none
    if flags & FLAG_ZSTD:
        import zstandard

        try:
            # A stream read stops one byte past the claim: the frame's own content size (which
            # may claim terabytes) is never allocated.
            with zstandard.ZstdDecompressor().stream_reader(body) as reader:
                out = reader.read(decompressed_size + 1)
        except zstandard.ZstdError as e:
            raise _BadPayload(f"corrupt Zstd payload: {e}") from None
    else:
        import lz4.block

        if decompressed_size > _LZ4_MAX_RATIO * len(body):
            raise _BadPayload(f"LZ4 payload claims {decompressed_size} bytes from {len(body)}, more "
                              f"than LZ4 inflates to ({_LZ4_MAX_RATIO}x)")
        try:
            out = lz4.block.decompress(body, uncompressed_size=decompressed_size)
        except lz4.block.LZ4BlockError as e:
            # LZ4 fills a buffer of the declared size: more output than that is an error too.
            raise _BadPayload(f"corrupt LZ4 payload, or it inflates past its declared "
                              f"{decompressed_size} bytes: {e}") from None
    if len(out) > decompressed_size:
        raise _BadPayload(f"{name} payload inflates past its declared {decompressed_size} bytes")
    if len(out) != decompressed_size:
        raise _BadPayload(f"{name} payload decompressed to {len(out)} bytes, header says {decompressed_size}")
    return out


def write_container(entries: list[tuple[int, int, bytes, str]], ptx_version: tuple = (9, 0)) -> bytes:
    """A container holding `(kind, arch, payload, compression)` entries; compression is
    'none', 'lz4' or 'zstd'. PTX payloads should carry their NUL terminator."""
    import lz4.block
    import zstandard

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
