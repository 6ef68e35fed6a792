"""Compiling PTX with ptxas and reading its `-v` report: registers, spills, stack, shared memory.

ptxas comes from PATH or from the `nvidia-cuda-nvcc` wheel. A PTX that ptxas rejects is a
`compile_error` result carrying ptxas's message, never an exception. The workflow compiles each
layer's unspliced module too (`results/<layer>/reference.cubin.json`), so a splice's figures are
read against the reference's (`entry_figures`).
"""

from __future__ import annotations

import errno
import importlib.util
import os
import re
import shutil
import struct
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rr import children
from rr.records import Status
from rr.validation import open_regular

# what a results row shows of an entry's compile, per kernel: the ptxas figures a splice changes
FIGURES = ("registers", "spill_stores", "spill_loads", "stack_bytes", "shared_bytes", "constant_bytes")


PTXAS_NICENESS = 10
SHT_NOBITS = 8  # an ELF section that takes no room in the file (.bss, .nv.shared)


def find_ptxas() -> str | None:
    """ptxas on PATH, else the one shipped in the nvidia-cuda-nvcc wheel."""
    found = shutil.which("ptxas")
    if found:
        return found
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        for candidate in sorted(Path(root).glob("*/bin/ptxas")):
            return str(candidate)
    return None


@dataclass
class FunctionReport:
    name: str
    registers: int | None = None
    barriers: int | None = None
    stack_frame: int | None = None
    spill_stores: int | None = None
    spill_loads: int | None = None
    shared_bytes: int | None = None
    constant_bytes: dict = field(default_factory=dict)


@dataclass
class CompileResult:
    status: Status  # ok, compile_error, no_ptxas
    message: str
    arch: str
    ptxas: str | None
    compile_ms: float | None
    functions: dict = field(default_factory=dict)  # name -> FunctionReport
    warnings: list = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)


_FUNC = re.compile(r"(?:Compiling entry function|Function properties for) '?([\w$.]+)'?")
_USED = re.compile(r"Used (\d+) registers(?:, used (\d+) barriers)?(.*)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM = re.compile(r"(\d+) bytes cmem\[(\d+)\]")


def parse_report(text: str) -> tuple[dict, list]:
    """Per-function figures and the warnings from ptxas -v output."""
    functions: dict[str, FunctionReport] = {}
    warnings = []
    current = None
    for line in text.splitlines():
        if "warning" in line.lower():
            warnings.append(line.strip())
        m = _FUNC.search(line)
        if m:
            current = functions.setdefault(m.group(1), FunctionReport(m.group(1)))
            continue
        if current is None:
            continue
        m = _FRAME.search(line)
        if m:
            current.stack_frame, current.spill_stores, current.spill_loads = map(int, m.groups())
        m = _USED.search(line)
        if m:
            current.registers = int(m.group(1))
            current.barriers = int(m.group(2)) if m.group(2) else None
            rest = m.group(3)
            s = _SMEM.search(rest)
            current.shared_bytes = int(s.group(1)) if s else 0
            current.constant_bytes = {f"cmem[{b}]": int(n) for n, b in _CMEM.findall(rest)}
    return functions, warnings


_TARGET = re.compile(rb"^[ \t]*\.target[ \t]+(sm_[0-9]+[af]?)\b", re.M)
_SM = re.compile(r"sm_([0-9]+)([af]?)")


def module_target(text: bytes) -> str | None:
    """The architecture a PTX module's `.target` directive names (`sm_90a` of `.target sm_90a,
    debug`), or None where it names none."""
    m = _TARGET.search(text)
    return m.group(1).decode() if m else None


def compile_arch(target: str | None, arch: str) -> str:
    """What ptxas compiles a module for on a GPU of architecture `arch` (the config's `arch`): the
    module's own `.target` where it is `arch`'s arch- or family-specific variant (Triton writes
    `.target sm_90a`, and ptxas refuses such PTX for plain sm_90, though it runs on every sm_90
    GPU), else `arch` (PTX of an older target compiles forward). ValueError where the module
    needs a newer GPU than `arch`."""
    want, have = _SM.fullmatch(target or ""), _SM.fullmatch(arch)
    if want is None or have is None:
        return arch
    if int(want.group(1)) > int(have.group(1)):
        raise ValueError(f"the module's .target {target} needs a newer GPU than {arch} (the config's `arch`, "
                         f"rr compile --arch)")
    if int(want.group(1)) == int(have.group(1)) and want.group(2) and not have.group(2):
        return target
    return arch


def compile_ptx(ptx: str | Path, output: str | Path, arch: str = "sm_90",
                extra: tuple = (), timeout_s: float = 600) -> CompileResult:
    """ptxas -arch=ARCH -v PTX -o OUTPUT, ARCH as compile_arch chooses it for the module (the
    result's `arch` says which). OUTPUT is the caller's temporary (rr.io.atomic_paths: the
    cubin appears beside its report, and only when both are written): what ptxas leaves there when
    it fails is the caller's to remove. A cubin shorter than its own ELF headers say (ptxas exits 0
    when its writes fail: a full disk) is an OSError, not a compile."""
    ptxas = find_ptxas()
    if ptxas is None:
        return CompileResult(Status.NO_PTXAS, "ptxas not found: put the CUDA toolkit's bin on PATH or "
                             "pip install nvidia-cuda-nvcc", arch, None, None)
    with open_regular(ptx) as f:  # ptxas opens it by name: a FIFO would block it until the timeout
        target = module_target(f.read())
    try:
        arch = compile_arch(target, arch)
    except ValueError as e:
        return CompileResult(Status.COMPILE_ERROR, str(e), arch, ptxas, None)
    output = Path(output)
    t0 = time.perf_counter()
    try:
        # at a lower CPU priority: in a sweep the GPU waits on the capture and timing jobs' own
        # Python, which a machine full of ptxas would otherwise starve; the paths absolute, so that
        # a file named `-x.ptx` is a file, not an option of ptxas
        r = children.run([ptxas, f"-arch={arch}", "-v", *extra, os.path.abspath(ptx), "-o", os.path.abspath(output)],
                         capture=True, timeout=timeout_s, niceness=PTXAS_NICENESS)
    except subprocess.TimeoutExpired:
        return CompileResult(Status.COMPILE_ERROR, f"ptxas did not finish in {timeout_s} s", arch, ptxas,
                             timeout_s * 1000)
    ms = (time.perf_counter() - t0) * 1000
    report = r.stdout + r.stderr
    functions, warnings = parse_report(report)
    if r.returncode != 0:
        errors = [l.strip() for l in report.splitlines() if "error" in l.lower() or "fatal" in l.lower()]
        return CompileResult(Status.COMPILE_ERROR, "\n".join(errors) or report.strip(), arch, ptxas, ms,
                             functions, warnings)
    _check_whole(output)
    return CompileResult(Status.OK, "", arch, ptxas, ms, functions, warnings)


def _elf_length(data: bytes) -> int | None:
    """The size a 64-bit little-endian ELF file's headers say it has — the end of its header tables
    and of every section with contents —, or None for bytes that are not one."""
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    phoff, shoff = struct.unpack_from("<QQ", data, 0x20)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", data, 0x36)
    end = max(64, phoff + phentsize * phnum, shoff + shentsize * shnum)
    if end > len(data):
        return end
    for i in range(shnum):
        kind, = struct.unpack_from("<I", data, shoff + i * shentsize + 4)
        offset, size = struct.unpack_from("<QQ", data, shoff + i * shentsize + 0x18)
        if kind != SHT_NOBITS:
            end = max(end, offset + size)
    return end


def _check_whole(cubin: Path) -> None:
    """OSError (without a file name: the caller's rr.io names its output) for a cubin ptxas did not
    write whole; ENOSPC where the file system has no room left, the likely cause."""
    data = cubin.read_bytes()
    whole = _elf_length(data)
    if whole is not None and len(data) >= whole:
        return
    told = f"ptxas exited 0 but wrote {len(data)} bytes of a cubin" + (f" of {whole}" if whole else "")
    if os.statvfs(cubin.parent).f_bavail == 0:
        raise OSError(errno.ENOSPC, f"{os.strerror(errno.ENOSPC)} ({told})")
    raise OSError(errno.EIO, f"the cubin is incomplete ({told})")


def entry_figures(record: dict, entry: str) -> dict | None:
    """FIGURES of `entry` in a compile record (X.cubin.json as `rr compile` writes it), None when
    ptxas reported nothing for it; constant_bytes adds every cmem bank (bank 0 holds the parameters)."""
    fn = record.get("functions", {}).get(entry)
    if not fn:
        return None
    return {"registers": fn.get("registers"), "spill_stores": fn.get("spill_stores"),
            "spill_loads": fn.get("spill_loads"), "stack_bytes": fn.get("stack_frame"),
            "shared_bytes": fn.get("shared_bytes"), "constant_bytes": sum((fn.get("constant_bytes") or {}).values())}
