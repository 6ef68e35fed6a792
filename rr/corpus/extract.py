"""Corpus extraction: find every PTX module in an engine binary (or .ptx files) and store each once.

A binary holds PTX in two ways: as plain NUL-terminated text (an NVVM banner or `.version` up to the
NUL) and inside fatbin containers (magic 0xBA55ED50), whose PTX entries may be LZ4 or Zstd
compressed. Containers are walked first and the bytes they cover are not scanned again for text,
so an uncompressed PTX entry is not found twice. Anything unreadable is skipped with a warning
naming its byte offset; nothing is written partially (see `rr.io`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from rr.corpus.fatbin import HEADER, MAGIC, FatbinError, read_container
from rr.corpus.fnv import fnv1a64_hex
from rr.io import write_parquet, write_text
from rr.ptx import ParseError, parse

_MAGIC_BYTES = MAGIC.to_bytes(4, "little")
_VERSION = re.compile(rb"\.version[ \t]+\d+\.\d+")
_BANNER = re.compile(rb"(?:[ \t\r\n]|//[^\n\0]*\n)*")
_TARGET = re.compile(r"^\s*\.target\s+([^\n/]+)", re.M)
_VERSION_TEXT = re.compile(r"^\s*\.version\s+(\S+)", re.M)
_ENTRY = re.compile(r"\.entry\s+([A-Za-z_$][\w$]*)")
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_TEXT_BYTES = frozenset(range(0x20, 0x7F)) | {0x09, 0x0A, 0x0D}


@dataclass(frozen=True)
class FoundModule:
    text: str
    source: str
    offset: int
    container: str  # 'text', 'fatbin' or 'file'
    compressed: str  # 'none', 'lz4' or 'zstd'
    arch: int | None = None

    @property
    def hash(self) -> str:
        return fnv1a64_hex(self.text.encode("utf-8"))

    @property
    def version(self) -> str | None:
        m = _VERSION_TEXT.search(self.text)
        return m.group(1) if m else None

    @property
    def target(self) -> str | None:
        m = _TARGET.search(self.text)
        return m.group(1).strip() if m else None

    @property
    def entries(self) -> list[str]:
        return _ENTRY.findall(_COMMENT.sub("", self.text))


@dataclass
class Extraction:
    modules: list = field(default_factory=list)  # FoundModule, in the order found
    warnings: list = field(default_factory=list)  # str


def scan_bytes(data: bytes, source: str) -> Extraction:
    """Every PTX module in a binary blob, fatbin containers first, then plain text."""
    out = Extraction()
    covered: list[tuple[int, int]] = []
    pos = data.find(_MAGIC_BYTES)
    while pos >= 0:
        try:
            container = read_container(data, pos)
        except FatbinError as e:
            out.warnings.append(f"{source}: {e}; skipped")
            pos = data.find(_MAGIC_BYTES, pos + 1)
            continue
        for err in container.errors:
            out.warnings.append(f"{source}: {err}; entry skipped")
        for entry in container.entries:
            covered.append((entry.offset, entry.end))
            if not entry.is_ptx:
                continue
            try:
                text = entry.ptx_text()
            except UnicodeDecodeError:
                out.warnings.append(f"{source}: fatbin entry at byte {entry.offset}: PTX payload "
                                    "is not text; skipped")
                continue
            out.modules.append(FoundModule(text, source, entry.offset, "fatbin", entry.compression,
                                           entry.arch))
        # A damaged container's size cannot be trusted: look for the next magic right after it.
        step = container.size if not container.errors else HEADER.size
        pos = data.find(_MAGIC_BYTES, pos + step)
    for m in _VERSION.finditer(data):
        start = m.start()
        if any(a <= start < b for a, b in covered):
            continue
        found = _text_module(data, start, source, out.warnings)
        if found is not None:
            out.modules.append(found)
    return out


def _text_module(data: bytes, at: int, source: str, warnings: list) -> FoundModule | None:
    # The module runs to the NUL; an NVVM banner (comment lines) in front of `.version` belongs to it.
    end = data.find(b"\0", at)
    if end < 0:
        end = len(data)
    run_start = data.rfind(b"\0", 0, at) + 1
    start = at
    prefix = data[run_start:at]
    if _BANNER.fullmatch(prefix):
        start = run_start
    raw = data[start:end]
    bad = next((i for i, b in enumerate(raw) if b not in _TEXT_BYTES), None)
    if bad is not None:
        warnings.append(f"{source}: text module at byte {start}: non-text byte 0x{raw[bad]:02x} at "
                        f"byte {start + bad} before its NUL terminator; skipped")
        return None
    text = raw.decode("ascii")
    if not _TARGET.search(text):
        warnings.append(f"{source}: '.version' at byte {at} has no '.target' after it; not a PTX "
                        "module, skipped")
        return None
    try:
        parse(text, source=f"{source}@{start}", validate=False)
    except ParseError as e:
        warnings.append(f"{source}: text at byte {start} looks like PTX but does not parse ({e.message}, "
                        f"module line {e.line}); skipped")
        return None
    return FoundModule(text, source, start, "text", "none")


def scan_source(source: str | Path) -> Extraction:
    """Scan a binary file, a .ptx file or a directory of them (recursively, in sorted order)."""
    source = Path(source)
    if not source.exists():
        raise FileNotFoundError(f"{source}: no such file or directory")
    files = sorted(p for p in source.rglob("*") if p.is_file()) if source.is_dir() else [source]
    out = Extraction()
    for path in files:
        if path.suffix == ".ptx":
            try:
                text = path.read_text(encoding="utf-8")
            except UnicodeDecodeError as e:
                out.warnings.append(f"{path}: .ptx file is not UTF-8 text (byte {e.start}); skipped")
                continue
            out.modules.append(FoundModule(text, str(path), 0, "file", "none"))
            continue
        found = scan_bytes(path.read_bytes(), str(path))
        out.modules.extend(found.modules)
        out.warnings.extend(found.warnings)
    return out


INDEX_SCHEMA = pa.schema([
    pa.field("hash", pa.string(), nullable=False),
    pa.field("source", pa.string(), nullable=False),
    pa.field("offset", pa.int64(), nullable=False),
    pa.field("container", pa.string(), nullable=False),
    pa.field("compressed", pa.string(), nullable=False),
    pa.field("arch", pa.int32()),
    pa.field("size", pa.int64(), nullable=False),
    pa.field("version", pa.string()),
    pa.field("target", pa.string()),
    pa.field("entries", pa.list_(pa.string()), nullable=False),
])


def write_corpus(extraction: Extraction, out_dir: str | Path) -> pa.Table:
    """Write `modules/<fnv1a64>.ptx` once per distinct module and `index.parquet`, one row per
    occurrence. Returns the index table."""
    out_dir = Path(out_dir)
    rows = {name: [] for name in INDEX_SCHEMA.names}
    written: set[str] = set()
    for m in extraction.modules:
        h = m.hash
        if h not in written:
            path = out_dir / "modules" / f"{h}.ptx"
            if not path.exists() or path.read_text(encoding="utf-8") != m.text:
                write_text(path, m.text)
            written.add(h)
        for name, value in (("hash", h), ("source", m.source), ("offset", m.offset),
                            ("container", m.container), ("compressed", m.compressed),
                            ("arch", m.arch), ("size", len(m.text.encode("utf-8"))),
                            ("version", m.version), ("target", m.target),
                            ("entries", m.entries)):
            rows[name].append(value)
    table = pa.Table.from_pydict(rows, schema=INDEX_SCHEMA)
    write_parquet(out_dir / "index.parquet", table)
    return table


def find_entry(corpus_dir: str | Path, pattern: str) -> list[tuple[Path, str]]:
    """(module path, entry) for every entry in the corpus whose name matches the regex `pattern`."""
    corpus_dir = Path(corpus_dir)
    index = pq.read_table(corpus_dir / "index.parquet").to_pylist()
    regex = re.compile(pattern)
    seen, hits = set(), []
    for row in index:
        for entry in row["entries"]:
            if regex.search(entry) and (row["hash"], entry) not in seen:
                seen.add((row["hash"], entry))
                hits.append((corpus_dir / "modules" / f"{row['hash']}.ptx", entry))
    return hits
