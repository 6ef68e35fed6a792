"""A replacement of a kernel's code (`rr inject --module ENTRY=FILE`), read and checked before the
program starts: FILE is PTX (parsed with rr's front end) or a cubin (its ELF symbol table and the
.nv.info attributes ptxas writes), it defines ENTRY, and what rr learns of it — ENTRY's parameter
list as the ABI lays it out, the module variables it declares — goes to the interposer with it.
Where the program's own executable carries PTX that defines ENTRY (a runtime-API program's
fatbin), the two parameter lists are compared now; the interposer compares them again, through
the driver, for every module of the program that defines ENTRY when it is loaded."""

from __future__ import annotations

import re
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path

from rr.capture.build import CaptureError
from rr.validation import cut, printable, read_bytes

MAX_MODULE_BYTES = 256 << 20  # rr.corpus.fatbin's cap on a module
ENTRY_NAME = re.compile(r"[A-Za-z_$%][\w$]*")  # a PTX identifier: what a driver's entry is called
# a module-scope declaration's name: the identifier before its dimensions, initialiser or ';'
_DECLARED = re.compile(r"([A-Za-z_$%][\w$]*)\s*(?:\[[^\]]*\]\s*)*(?:=|;|$)")
_LEGACY = re.compile(r"\.(texref|samplerref|surfref)\b")


@dataclass(frozen=True)
class Variable:
    """A module variable of the replacement: the program's of that name is copied to it before each
    launch, and a .global's back after it (docs/capture.md, Injection)."""
    name: str
    space: str  # const or global


@dataclass(frozen=True)
class Replacement:
    entry: str
    path: Path  # as the user named it
    kind: str  # ptx or cubin
    image: bytes  # what the driver is given: a cubin as it is, PTX with its NUL
    params: tuple  # ((offset, size), …): ENTRY's parameter list
    variables: tuple  # Variable, …

    def record(self) -> dict:
        return {"entry": self.entry, "file": str(self.path), "kind": self.kind,
                "params": [list(p) for p in self.params],
                "variables": [{"name": v.name, "space": v.space} for v in self.variables]}

    @property
    def shown(self) -> str:
        """The file's name for the interposer's messages: one line, no tab (its manifest's fields)."""
        return printable(str(self.path)).replace("\t", "\\t")


def module_option(text: str) -> tuple[str, Path]:
    """`--module ENTRY=FILE`: the entry's name (a PTX identifier) and the file."""
    entry, eq, file = text.partition("=")
    if not eq or not file or not ENTRY_NAME.fullmatch(entry):
        raise CaptureError(f"--module {cut(text)!r}: expected ENTRY=FILE, ENTRY a kernel's name as its PTX spells it "
                           "(extern \"C\" names as written, C++ ones mangled: _Z…)")
    return entry, Path(file)


def replacements(options: list[tuple[str, Path]], option: str = "--module") -> list[Replacement]:
    """Each (ENTRY, FILE) of `module_option` read and checked (read_replacement); an entry given
    twice is refused."""
    out: dict[str, Replacement] = {}
    for entry, path in options:
        if entry in out:
            raise CaptureError(f"{option} {entry}: given twice ({out[entry].path} and {path})")
        out[entry] = read_replacement(entry, path)
    return list(out.values())


def read_replacement(entry: str, path: Path) -> Replacement:
    """FILE for ENTRY, checked: CaptureError (`FILE: reason`) when it is not PTX or a cubin, does
    not define ENTRY, or declares what a module loaded on its own cannot have (an .extern
    variable, a texture reference); a ParseError for PTX rr cannot parse."""
    from rr.corpus.fatbin import MAGIC_BYTES

    try:
        image = read_bytes(path, MAX_MODULE_BYTES, error=CaptureError)
    except FileNotFoundError:
        raise CaptureError(f"{path}: no such file (the replacement of {entry})") from None
    if image.startswith(b"\x7fELF"):
        return _cubin(entry, path, image)
    if image.startswith(MAGIC_BYTES):
        raise CaptureError(f"{path}: a fatbin; rr inject takes the kernel's PTX or a cubin (cuobjdump -xptx or -xelf "
                           "extracts them from a fatbin)")
    if not image.rstrip(b"\0") or b"\0" in image.rstrip(b"\0"):
        raise CaptureError(f"{path}: neither PTX text nor a cubin (ELF)" if image.strip(b"\0")
                           else f"{path}: an empty file, not a module")
    try:
        text = image.rstrip(b"\0").decode()
    except UnicodeDecodeError as e:
        raise CaptureError(f"{path}: not PTX text (byte {e.start} is not UTF-8) nor a cubin (ELF)") from None
    return _ptx(entry, path, text)


def _ptx(entry: str, path: Path, text: str) -> Replacement:
    from rr.ptx import parse
    from rr.ptx.model import TopLevel

    module = parse(text, source=str(path))
    function = _entry_of(module, entry, path)
    variables = []
    for item in module.items:
        if not isinstance(item, TopLevel) or item.kind not in ("const", "global"):
            continue
        where = f"{path}:{item.line}"
        if _LEGACY.search(item.text):
            raise CaptureError(f"{where}: a .{_LEGACY.search(item.text).group(1)} (a legacy texture reference, bound "
                               "by the program to its own module): not supported in a replacement")
        if re.search(r"\.extern\b", item.text):
            raise CaptureError(f"{where}: an .extern variable: a replacement is loaded as a module of its own, so it "
                               "cannot refer to another module's variables")
        name = _DECLARED.search(item.text.split("=", 1)[0].rstrip() + ";")
        if name is None:
            raise CaptureError(f"{where}: a .{item.kind} declaration rr cannot read the name of")
        variables.append(Variable(name.group(1), item.kind))
    return Replacement(entry, path, "ptx", text.encode() + b"\0", ptx_params(function), tuple(variables))


def _entry_of(module, entry: str, path: Path):
    for f in module.entries:
        if f.name == entry:
            return f
    names = ", ".join(f.name for f in module.entries) or "none"
    raise CaptureError(f"{path}: defines no entry {entry} (its entries: {cut(names)})")


def ptx_params(function) -> tuple:
    """An entry's ((offset, size), …) as the ABI lays its `.param`s out (what cuFuncGetParamInfo says)."""
    from rr.describe.kernel import param_offsets

    offsets = param_offsets(function.params)
    return tuple((offsets[p.name], p.size) for p in function.params)


# -- cubins -----------------------------------------------------------------------------------------

# EIATTR_KPARAM_INFO in .nv.info.<entry>, one per parameter: after the attribute's 4-byte header a
# u32 index, the u16 ordinal, the u16 offset, and a u32 whose bits 18-31 are the size
KPARAM_INFO = 0x17
EIFMT_SVAL = 0x04
_CONSTANT_BANK = ".nv.constant3"  # __constant__ variables
_GLOBAL = (".nv.global", ".nv.global.init")  # __device__ variables


def _cubin(entry: str, path: Path, image: bytes) -> Replacement:
    try:
        sections, symbols = _elf(image)
    except (struct.error, IndexError, ValueError):
        raise CaptureError(f"{path}: an ELF file whose headers rr cannot read: not a cubin ptxas wrote") from None
    entries = [name for name, kind, _ in symbols if kind == "FUNC"]
    if entry not in entries:
        raise CaptureError(f"{path}: a cubin that defines no entry {entry} (its functions: "
                           f"{cut(', '.join(entries)) or 'none'})")
    info = next(((off, size) for name, off, size in sections if name == f".nv.info.{entry}"), None)
    params = []
    at, end = info if info else (0, 0)
    end += at
    while at + 4 <= end:
        fmt, attr, size = image[at], image[at + 1], struct.unpack_from("<H", image, at + 2)[0]
        if fmt == EIFMT_SVAL:
            if attr == KPARAM_INFO and size >= 12:
                _, ordinal, offset, bits = struct.unpack_from("<IHHI", image, at + 4)
                params.append((ordinal, offset, (bits >> 18) & 0x3FFF))
            at += 4 + size
        else:
            at += 4
    variables = tuple(Variable(name, "const" if section == _CONSTANT_BANK else "global")
                      for name, kind, section in symbols if kind == "OBJECT" and (section == _CONSTANT_BANK
                                                                                   or section in _GLOBAL))
    return Replacement(entry, path, "cubin", image, tuple((o, s) for _, o, s in sorted(params)), variables)


def _elf(image: bytes) -> tuple[list, list]:
    """A 64-bit little-endian ELF file's sections (name, offset, size) and symbols (name, FUNC or
    OBJECT or another type, the name of its section)."""
    if image[4:6] != b"\x02\x01":
        raise ValueError("not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", image, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", image, 0x3A)
    raw = [struct.unpack_from("<IIQQQQII", image, shoff + i * shentsize) for i in range(shnum)]

    def name_at(table: int, offset: int) -> str:
        start = raw[table][4] + offset
        return image[start:image.index(b"\0", start)].decode("utf-8", "replace")

    sections = [(name_at(shstrndx, s[0]), s[4], s[5]) for s in raw]
    symbols = []
    for s in raw:
        if s[1] != 2:  # SHT_SYMTAB
            continue
        strtab = s[6]
        for k in range(s[5] // 24):
            st_name, st_info, _, st_shndx = struct.unpack_from("<IBBH", image, s[4] + 24 * k)
            kind = {1: "OBJECT", 2: "FUNC"}.get(st_info & 0xF, "OTHER")
            section = sections[st_shndx][0] if 0 < st_shndx < len(sections) else ""
            symbols.append((name_at(strtab, st_name), kind, section))
    return sections, symbols


# -- the program's own PTX ----------------------------------------------------------------------------

def check_program(found: list[Replacement], command: list[str]) -> list[str]:
    """Each replacement's parameter list against its entry in the PTX the program's executable
    carries (a runtime-API program's fatbin, PTX text in it), where it has some: CaptureError when
    no definition there has the replacement's list. What was checked, as notes."""
    from rr.corpus.extract import iter_source
    from rr.ptx import parse
    from rr.ptx.errors import ParseError

    if not command:
        return []
    executable = shutil.which(command[0]) if "/" not in command[0] else command[0]
    if executable is None or not Path(executable).is_file():
        return []
    wanted = {r.entry: r for r in found}
    seen: dict[str, list[tuple[tuple, int]]] = {}
    try:
        for module in iter_source(executable, lambda warning: None):
            for entry in set(module.entries) & set(wanted):
                try:
                    function = _entry_of(parse(module.text, source=executable, validate=False), entry, Path(executable))
                except (ParseError, CaptureError):
                    continue  # PTX rr cannot read: the interposer checks it through the driver
                seen.setdefault(entry, []).append((ptx_params(function), module.offset))
    except (OSError, ValueError):
        return []  # not a file rr can scan: the interposer checks every module at load time
    notes = []
    for entry, definitions in seen.items():
        r = wanted[entry]
        if any(params == r.params for params, _ in definitions):
            notes.append(f"{entry}: {r.path}'s parameters are those of {entry} in {executable}'s PTX")
            continue
        params, offset = definitions[0]
        raise CaptureError(f"{r.path}: {entry}'s parameters (offset:size) {layout(r.params)} are not those of {entry} "
                           f"in {executable} (its PTX at byte {offset}): {layout(params)}")
    return notes


def layout(params: tuple) -> str:
    """A parameter list as the interposer writes one: `0:8, 8:8, 16:4` (offset:size), or `none`."""
    return ", ".join(f"{o}:{s}" for o, s in params) or "none"
