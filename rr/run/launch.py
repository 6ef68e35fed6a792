"""Launch descriptions: everything one kernel launch needs, on disk, backend-independent.

A launch directory holds `launch.json` and one `.npy` file per buffer. `launch.json`:

    {
      "entry": "cuda_dldn_engine_swin_enc2_kernel",
      "module": "enc2.ptx",                 # PTX or cubin, relative to the directory
      "grid": [30, 17, 1], "block": [32, 1, 4], "shared_bytes": 0,
      "params": {"layout": "block", "size": 136},   # one `.param .align 8 .b8 p[136]`
                                                   # ("list": one kernel parameter per field)
      "fields": [
        {"offset": 0,  "kind": "scalar",  "dtype": "uint32", "value": [240, 135]},
        {"offset": 8,  "kind": "buffer",  "buffer": "input"},
        {"offset": 88, "kind": "texture", "buffer": "noisy"},
        {"offset": 112, "kind": "surface", "buffer": "out0"}
      ],
      "buffers": {
        "input": {"file": "input.npy", "role": "in"},
        "noisy": {"file": "noisy.npy", "role": "in", "format": "rgba16f"},
        "out0":  {"file": "out0.npy", "role": "out", "format": "rgba16f", "dtype": "float16"}
      }
    }

Buffer roles are `in` (read by the kernel), `out` (written; its file holds the initial contents,
usually zeros) and `inout`. Global buffers are any numpy array (their bytes are what the kernel
sees); texture and surface buffers are (height, width, 4) float16 arrays in RGBA16F. A buffer's
optional `dtype` names how its bytes are to be read when compared (`e4m3`, `float16`, …).

After a run the output directory has the same layout with every buffer as it was after the
kernel, plus `run.json`, so what a kernel read and what it wrote can be compared offline. A run
given its reference capture (`rr run --reference`) writes a buffer that holds the reference's bytes
as a hard link to the reference's file (`save_outputs`): a splice that changes nothing costs no disk.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rr.io import resolved
from rr.records import LAUNCH_ERROR, SPLICE, Status, failure, read_record, record_text
from rr.validation import InvalidInput, open_regular, read_bytes

HANDLE_BYTES = 8  # device pointers, texture and surface objects are 64-bit


class LaunchError(InvalidInput):
    """A launch description that cannot be used; names the file and the key at fault. `status`
    is the run record's: bad_launch, or what a launch directory made for a record says (no_launch)."""

    def __init__(self, message: str, status: Status = Status.BAD_LAUNCH, origin: str | None = None,
                 reason: str | None = None):
        super().__init__(message)
        self.status = status
        # read from a launch.error.json: the one that first said it (which lasts: a stage that passes
        # the failure on writes it again under its own directory, often a temporary one) and its reason
        self.origin, self.reason = origin, reason


ELF_MAGIC = b"\x7fELF"


def module_kind(image: bytes, where: str | Path) -> str:
    """What a module's bytes are — "cubin" (ELF), "fatbin" or "ptx" (text) —, read from the bytes,
    not the file's name; LaunchError for an empty file (status no_module: a refused splice or a
    failed compile leaves one, for pipelines) and for bytes that are none of the three."""
    from rr.corpus.fatbin import MAGIC_BYTES

    if not image:
        raise LaunchError(f"{where}: an empty module file, nothing to load (rr splice --record leaves one for a "
                          "refused splice, rr compile --record for a failed compile: their records say why)",
                          Status.NO_MODULE)
    if image.startswith(ELF_MAGIC):
        return "cubin"
    if image.startswith(MAGIC_BYTES):
        return "fatbin"
    nul = image.rstrip(b"\0").find(0)
    if nul >= 0:
        raise LaunchError(f"{where}: not a module: neither a cubin (ELF), a fatbin, nor PTX text (a NUL byte "
                          f"at offset {nul})")
    return "ptx"


def module_image(path: str | Path) -> bytes:
    """A module file's bytes as the driver's moduleLoadData takes them: a cubin or fatbin as it is,
    PTX text with the NUL that ends a C string (the driver reads PTX up to it)."""
    image = read_bytes(path, error=LaunchError)
    if module_kind(image, path) == "ptx" and not image.endswith(b"\0"):
        image += b"\0"
    return image


def check_module(path: str | Path) -> str:
    """The kind of a module file given to replace a launch's (rr relaunch --module); LaunchError
    if there is none to load."""
    return module_kind(_module_bytes(path), path)


def _module_bytes(path: str | Path) -> bytes:
    try:
        return read_bytes(path, error=LaunchError)
    except FileNotFoundError:
        raise LaunchError(f"{path}: no such module file") from None


KPARAM_INFO = 0x17  # EIATTR_KPARAM_INFO, in a cubin's .nv.info.<entry>: one per kernel parameter
EIFMT_SVAL = 0x04  # an attribute with a 16-bit size and that many bytes of value (the others: 2 bytes)


def entry_parameters(image: bytes, kind: str, entry: str) -> int | None:
    """How many parameters `entry` takes in a module: the `.param`s of a PTX module's `.entry`, a
    cubin's KPARAM_INFO attributes; None where the module does not say (a fatbin, an entry it
    does not have)."""
    if kind == "ptx":
        found = re.search(rb"\.entry\s+" + re.escape(entry.encode()) + rb"(?![\w$])\s*(\(([^)]*)\))?", image)
        return None if found is None else found.group(2).count(b".param") if found.group(1) else 0
    if kind != "cubin" or len(image) < 64 or image[4:6] != b"\x02\x01":  # a 64-bit little-endian ELF file
        return None
    try:
        shoff, = struct.unpack_from("<Q", image, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", image, 0x3A)
        sections = [struct.unpack_from("<IIQQQQ", image, shoff + i * shentsize) for i in range(shnum)]
        names = sections[shstrndx][4]
        wanted = f".nv.info.{entry}\0".encode()
        for name, _, _, _, offset, size in sections:
            if image[names + name:names + name + len(wanted)] == wanted:
                count, at = 0, offset
                while at + 4 <= offset + size:
                    count += image[at + 1] == KPARAM_INFO
                    at += 4 + (struct.unpack_from("<H", image, at + 2)[0] if image[at] == EIFMT_SVAL else 0)
                return count
    except (struct.error, IndexError):  # headers that point past the file: not a cubin ptxas wrote
        return None
    return None


@dataclass(frozen=True)
class Field:
    kind: str
    offset: int = 0
    dtype: str | None = None  # scalars
    value: tuple = ()  # scalars
    buffer: str | None = None  # buffer, texture, surface
    at: int = 0  # buffer: the byte offset into it that the parameter holds (a pointer into an allocation)

    @property
    def size(self) -> int:
        if self.kind == "scalar":
            return np.dtype(self.dtype).itemsize * len(self.value)
        return HANDLE_BYTES


@dataclass(frozen=True)
class Buffer:
    name: str
    file: str
    role: str = "in"
    format: str | None = None  # rgba16f for textures and surfaces
    dtype: str | None = None  # how to read the bytes in comparisons


@dataclass(frozen=True)
class Launch:
    entry: str
    module: str
    grid: tuple
    block: tuple
    fields: tuple
    buffers: dict = field(default_factory=dict)
    shared_bytes: int = 0
    layout: str = "block"  # block or list
    params_size: int = 0
    extra: tuple = ()  # fields passed as kernel parameters of their own after the block (a probe buffer)

    @property
    def parameters(self) -> int:
        """How many kernel parameters the launch passes (`param_images`)."""
        return (1 if self.layout == "block" else len(self.fields)) + len(self.extra)

    def to_json(self) -> dict:
        return {
            "entry": self.entry, "module": self.module, "grid": list(self.grid),
            "block": list(self.block), "shared_bytes": self.shared_bytes,
            "params": {"layout": self.layout, "size": self.params_size,
                       **({"extra": [_field_json(f) for f in self.extra]} if self.extra else {})},
            "fields": [_field_json(f) for f in self.fields],
            "buffers": {b.name: {k: v for k, v in (("file", b.file), ("role", b.role),
                                                    ("format", b.format), ("dtype", b.dtype))
                                 if v is not None}
                        for b in self.buffers.values()},
        }


def _field_json(f: Field) -> dict:
    out = {"offset": f.offset, "kind": f.kind}
    if f.kind == "scalar":
        out.update(dtype=f.dtype, value=list(f.value))
    else:
        out["buffer"] = f.buffer
        if f.at:
            out["at"] = f.at
    return out


MAX_THREADS_PER_BLOCK = 1024


def read_launch(directory: str | Path) -> Launch:
    """Read and check `directory/launch.json`: its JSON schema (rr/data/launch.schema.json: types
    and CUDA's bounds), then what a schema cannot say — threads per block, fields that overlap or
    leave the parameter block, scalar values that do not fit their dtype, buffers that are named
    but not described, files that are not there. Every failure is a LaunchError naming the file,
    the key and the value."""
    from rr.validation import cut, read_json

    directory = Path(directory)
    path = directory / "launch.json"
    if not path.exists() and LAUNCH_ERROR.within(directory).is_file():
        error = read_record(LAUNCH_ERROR.within(directory), LAUNCH_ERROR, LaunchError)
        origin, reason = error.get("origin", str(LAUNCH_ERROR.within(directory))), cut(error["message"], 1000)
        raise LaunchError(f"{origin}: {reason}", Status(error["status"]), origin, reason)
    if not path.exists():  # a FIFO or a directory there is refused by read_json, naming it
        check_directory(directory)
        raise LaunchError(f"{path}: no launch.json in {directory}")
    try:
        raw = read_json(path)
    except InvalidInput as e:
        raise LaunchError(str(e)) from None
    return parse_launch(raw, directory, str(path))


def check_directory(directory: Path) -> None:
    """LaunchError naming `directory` when it is no directory to read a launch or frame from: absent,
    a loop of symbolic links, a file (the reason the operating system gives)."""
    try:
        if stat.S_ISDIR(os.stat(directory).st_mode):
            return
        reason = "not a directory"
    except OSError as e:
        reason = e.strerror
    raise LaunchError(f"{directory}: {reason}")


def parse_launch(raw, directory: str | Path, where: str) -> Launch:
    """A launch description's JSON object checked as `read_launch` checks launch.json (a frame's
    layers use it for theirs); `where` names it in errors."""
    from rr.validation import cut, validate_against

    directory = Path(directory)
    validate_against(raw, "launch.schema.json", where, LaunchError)

    def refuse(message: str):
        raise LaunchError(f"{where}: {message}")

    buffers = {name: Buffer(name, b["file"], b.get("role", "in"), b.get("format"), b.get("dtype"))
               for name, b in raw["buffers"].items()}
    files = {}
    for name, b in buffers.items():
        if b.file in files:
            refuse(f"buffers.{name}.file: {b.file!r} is also the file of buffers.{files[b.file]}")
        files[b.file] = name
    if raw["module"] in files:
        refuse(f"module: {raw['module']!r} is also the file of buffers.{files[raw['module']]}")

    def handle(f: dict, key: str) -> Field:
        if f["buffer"] not in buffers:
            refuse(f"{key}.buffer: {cut(repr(f['buffer']))} is not in buffers ({cut(', '.join(buffers)) or 'none'})")
        return Field(f["kind"], f.get("offset", 0), buffer=f["buffer"], at=f.get("at", 0))

    fields = []
    for i, f in enumerate(raw["fields"]):
        if f["kind"] != "scalar":
            fields.append(handle(f, f"fields[{i}]"))
            continue
        value = tuple(f["value"]) if isinstance(f["value"], list) else (f["value"],)
        bad = _unrepresentable(value, f["dtype"])
        if bad is not None:
            refuse(f"fields[{i}].value: {cut(repr(bad))} does not fit {f['dtype']}")
        fields.append(Field("scalar", f.get("offset", 0), f["dtype"], value))
    params = raw.get("params", {"layout": "list"})
    layout = params.get("layout", "block")
    launch = Launch(
        entry=raw["entry"], module=raw["module"], grid=tuple(raw["grid"]), block=tuple(raw["block"]),
        fields=tuple(fields), buffers=buffers, shared_bytes=raw.get("shared_bytes", 0), layout=layout,
        params_size=params.get("size", 0),
        extra=tuple(handle(f, f"params.extra[{i}]") for i, f in enumerate(params.get("extra", []))),
    )
    threads = launch.block[0] * launch.block[1] * launch.block[2]
    if threads > MAX_THREADS_PER_BLOCK:
        refuse(f"block: {list(launch.block)} is {threads} threads, more than CUDA's {MAX_THREADS_PER_BLOCK} per block")
    if layout == "block":
        placed = []
        for i, f in enumerate(launch.fields):
            what = f"fields[{i}] ({f.size} bytes at offset {f.offset})"
            if f.offset % min(f.size, 8) or f.offset + f.size > launch.params_size:
                refuse(f"{what} is misaligned or outside the {launch.params_size}-byte block")
            for j, g in placed:
                if f.offset < g.offset + g.size and g.offset < f.offset + f.size:
                    refuse(f"{what} overlaps fields[{j}] ({g.size} bytes at offset {g.offset})")
            placed.append((i, f))
    if not (directory / launch.module).is_file():
        refuse(f"module: {launch.module!r}: no such file in {directory}")
    return launch


def _unrepresentable(values: tuple, dtype: str):
    """The first of `values` a `dtype` scalar cannot hold exactly in range, or None."""
    t = np.dtype(dtype)
    for v in values:
        if t.kind in "iu":
            info = np.iinfo(t)
            if not isinstance(v, int) or isinstance(v, bool) or not info.min <= v <= info.max:
                return v
        elif abs(v) > float(np.finfo(t).max) and abs(v) != float("inf"):  # inf is a value, 1e300 no f32
            return v
    return None


def load_buffer(path: Path, mmap: bool = False) -> np.ndarray:
    """One `.npy` buffer, refused naming the file when it is not a whole .npy array of plain
    numbers in a regular file: a header that cannot be read, a size its header does not account
    for, object arrays (never unpickled), a FIFO or device (rr.validation.open_regular). `mmap`:
    mapped read-only, its bytes read only where they are used. Read through the one file object
    that was checked, never opened again by name."""
    from rr.validation import cut

    readers = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
    with open_regular(path, LaunchError) as f:
        try:
            version = np.lib.format.read_magic(f)
            if version not in readers:
                raise ValueError(f".npy format version {version[0]}.{version[1]}")
            shape, fortran, dtype = readers[version](f, max_header_size=10000)
            header = f.tell()
        except (ValueError, EOFError, SyntaxError) as e:
            raise LaunchError(f"{path}: not a .npy array ({cut(str(e))})") from None
        if dtype.hasobject:
            raise LaunchError(f"{path}: an array of Python objects ({dtype}); buffers hold numbers (never unpickled)")
        expected = header + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        actual = os.fstat(f.fileno()).st_size
        if actual != expected:
            raise LaunchError(f"{path}: truncated or padded: its header ({dtype} {shape}) needs {expected} bytes, "
                              f"the file has {actual}")
        try:
            if mmap:
                return np.memmap(f, dtype, "r", header, shape, "F" if fortran else "C")
            f.seek(0)
            return np.lib.format.read_array(f, allow_pickle=False, max_header_size=10000)
        except ValueError as e:
            raise LaunchError(f"{path}: not a .npy array ({cut(str(e))})") from None


def load_buffers(directory: str | Path, launch: Launch, names=None) -> dict[str, np.ndarray]:
    """Every buffer's contents (or those of `names`) as numpy arrays, checked against its format."""
    arrays = {}
    for name, b in launch.buffers.items():
        if names is not None and name not in names:
            continue
        path = Path(directory) / b.file
        if not path.exists():  # one that is not a regular file is refused by load_buffer, naming it
            raise LaunchError(f"{Path(directory) / 'launch.json'}: buffers.{name}.file {b.file!r} not found")
        a = load_buffer(path)
        if b.format == "rgba16f" and (a.ndim != 3 or a.shape[2] != 4 or a.dtype != np.float16):
            raise LaunchError(f"{path}: an rgba16f buffer must be a (height, width, 4) float16 array, "
                              f"got {a.dtype} {a.shape}")
        arrays[name] = a
    return arrays


def param_images(launch: Launch, handles: dict[str, int]) -> list[bytes]:
    """The kernel's parameter bytes: one image (the block) or one per field, then one per extra
    field, with the 64-bit handle of each buffer, texture and surface (`handles[buffer name]`)."""
    def put(image: bytearray, f: Field, at: int) -> None:
        if f.kind == "scalar":
            data = np.asarray(f.value, dtype=f.dtype).tobytes()
        else:
            data = (int(handles[f.buffer]) + f.at).to_bytes(HANDLE_BYTES, "little")
        image[at:at + len(data)] = data

    images = []
    if launch.layout == "block":
        image = bytearray(launch.params_size)
        for f in launch.fields:
            put(image, f, f.offset)
        images.append(bytes(image))
    for f in (launch.extra if launch.layout == "block" else launch.fields + launch.extra):
        image = bytearray(f.size)
        put(image, f, 0)
        images.append(bytes(image))
    return images


def _npy_header(a: np.ndarray) -> bytes:
    """The .npy header `save_buffer` writes for the C-ordered array `a` (version 1.0, 2.0 past 64 KiB)."""
    import io

    header, f = np.lib.format.header_data_from_array_1_0(a), io.BytesIO()
    try:
        np.lib.format.write_array_header_1_0(f, header)
    except ValueError:  # a header over 64 KiB
        f = io.BytesIO()
        np.lib.format.write_array_header_2_0(f, header)
    return f.getvalue()


def save_buffer(path: Path, array: np.ndarray) -> None:
    """`np.save` of a plain array, written through Python's file object so that a full disk is
    ENOSPC naming the file (np.save's own short-write error says neither)."""
    a = np.require(array, requirements="C")  # keeps a 0-d array 0-d, as np.save does
    try:
        with open(path, "wb") as f:
            f.write(_npy_header(a))
            f.write(a.reshape(-1).view(np.uint8))
    except OSError as e:
        if e.filename is None:
            raise OSError(e.errno, e.strerror or str(e), str(path)) from e
        raise


def holds_buffer(path: Path, array: np.ndarray) -> bool:
    """Whether the file at `path` holds exactly the bytes `save_buffer(path, array)` would write:
    the same header (shape, dtype, order) and the same data, compared byte for byte."""
    from rr.run.compare import bytes_equal

    a = np.require(array, requirements="C")
    header = _npy_header(a)
    try:
        with open_regular(path) as f:
            if os.fstat(f.fileno()).st_size != len(header) + a.nbytes or f.read(len(header)) != header:
                return False
            if a.nbytes == 0:
                return True
            held = np.memmap(f, np.uint8, "r", offset=len(header), shape=(a.nbytes,))
    except (OSError, InvalidInput):
        return False
    return bytes_equal(a.reshape(-1).view(np.uint8), held)


def save_outputs(directory: Path, files: dict[str, str], arrays: dict[str, np.ndarray],
                 reference: str | Path | None = None, equal=()) -> dict:
    """A run's buffers (`arrays[name]` as `directory/files[name]`). With `reference` (a capture of
    the unspliced launch or frame), a buffer whose file would hold the bytes of the reference's
    file of that name is a hard link to it instead of a copy of its own — the identity recipes'
    captures are mostly the reference's own bytes, and a sweep of them would not fit on a disk —,
    copied where no link can be made (another file system). Returns what the run record says of
    it: the reference, the buffers linked, those copied from it and why (nothing without one).
    `equal`: the names already known to hold the reference's bytes (compared on the device:
    rr.run.cuda.equal_on_device), which `arrays` need not have."""
    linked, copied, why = [], [], None
    for name, file in files.items():
        held = Path(reference) / file if reference is not None else None
        if name not in equal and (held is None or not held.is_file() or not holds_buffer(held, arrays[name])):
            save_buffer(directory / file, arrays[name])
            continue
        error = link_or_copy(held, directory / file)
        if error is None:
            linked.append(name)
        else:
            copied.append(name)
            why = why or f"{held}: not hard-linked ({error.strerror or error}): copied"
    if reference is None:
        return {}
    return {"reference": str(reference), "linked_to_reference": linked,
            **({"copied_from_reference": copied, "reference_link_error": why} if copied else {})}


def write_launch(directory: str | Path, launch: Launch, arrays: dict[str, np.ndarray],
                 module_source: str | Path | None = None, reference: str | Path | None = None,
                 equal=()) -> dict:
    """Write a launch directory (used by generators and by runs for their outputs); with
    `reference`, buffers equal to its (or named in `equal`) are hard links to its files
    (`save_outputs`, whose record part it returns)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    written = save_outputs(directory, {name: b.file for name, b in launch.buffers.items()}, arrays, reference,
                           equal)
    if module_source is not None and resolved(module_source) != resolved(directory / launch.module):
        copy_file(module_source, directory / launch.module)
    (directory / "launch.json").write_text(json.dumps(launch.to_json(), indent=2) + "\n")
    return written


def write_launch_error(directory: str | Path, error: BaseException) -> None:
    """A launch directory that holds only why there is no launch (its launch.error.json: the
    failure's record, rr.records.failure of `error`), for pipelines: every later stage reads it as
    a LaunchError of that status and records it, so the sweep goes on. An error read from another
    launch.error.json keeps that one as its origin and its reason as it was, so the message a row
    shows names the file that said it once, not each directory that passed it on."""
    from rr.io import atomic_dir

    record = failure(error)
    if isinstance(error, LaunchError) and error.origin is not None:
        record.update(message=error.reason, origin=error.origin)
    with atomic_dir(directory) as tmp:
        LAUNCH_ERROR.within(tmp).write_text(record_text(record))


def replacing(module: Path, launch: Launch, splice_record: str | Path | None) -> tuple[str, dict | None]:
    """(its kind, the probe it writes) of a module that replaces `launch`'s: the probe from its
    splice record (what rr splice wrote beside it: a probe splice's names the buffer its extra
    parameter points to), which the caller declares — nothing is looked for beside the module.
    LaunchError when there is no module to load, or when its entry takes more parameters than the
    launch passes (with the probe buffer, if the record names one): a probe splice's module
    without its record, whose kernel would store through a pointer it was never given."""
    image = _module_bytes(module)
    kind = module_kind(image, module)  # named by what it holds, which PreparedLaunch loads it as
    probe = None if splice_record is None else read_record(splice_record, SPLICE, LaunchError).get("probe")
    passed = launch.parameters + bool(probe)
    takes = entry_parameters(image, kind, launch.entry)
    if takes is not None and takes > passed:
        record = SPLICE.next_to(module) if kind == "ptx" else "the OUT.ptx.splice.json of the PTX it was compiled from"
        raise LaunchError(f"{module}: its entry {launch.entry} takes {takes} parameters, the launch passes {passed}"
                          + ("" if splice_record is not None else
                             ": a probe splice's module takes its probe buffer as one parameter more — give its "
                             f"splice record (--splice-record {record}), which says what to pass"))
    return kind, probe


COPY_CHUNK = 1 << 20  # bytes copy_file moves at a time


def copy_file(src: str | Path, dst: str | Path) -> None:
    """A copy of a regular file only (rr.validation.open_regular: a FIFO would block the copy,
    /dev/zero never end it), read through the file object that was checked."""
    with open_regular(src, LaunchError) as f, open(dst, "wb") as out:
        shutil.copyfileobj(f, out, COPY_CHUNK)


def link_or_copy(src: Path, dst: Path) -> OSError | None:
    """A hard link (a copy across file systems) of the file `src`: a relaunch shares its inputs'
    buffer files, a run its reference's. A `src` that is a symbolic link is followed to its file,
    which must be in the directory `src` is in (a link is never linked as it is: a relative one
    would name another file from `dst`); one that leads out of it is refused naming `src`. Returns
    why it was copied, not linked (None: linked)."""
    real = resolved(src)
    if resolved(src.parent) not in real.parents:
        raise LaunchError(f"{src}: a buffer file that is a symbolic link to {real}, outside {src.parent}: refused "
                          "(a buffer is a file of the directory's own)")
    open_regular(real, LaunchError).close()  # a FIFO or device is no buffer, linked or copied
    try:
        os.link(real, dst)
    except OSError as e:
        copy_file(real, dst)
        return e
    return None


def relaunch(src: str | Path, module: str | Path, out: str | Path, splice_record: str | Path | None = None) -> Launch:
    """A launch directory that is `src` with another module (a splice of its kernel, a cubin):
    the buffers are hard-linked (copied across file systems), the module copied in. A module made
    by the `probe` template also gets its probe buffer (zeros, one row of words per thread) as an
    extra kernel parameter, as its `splice_record` says (`replacing`). Written to a temporary
    directory and renamed, so `out` appears whole."""
    from rr.io import atomic_dir

    src, module, out = Path(src), Path(module), Path(out)
    launch = read_launch(src)
    kind, probe = replacing(module, launch, splice_record)
    buffers, extra = dict(launch.buffers), launch.extra
    if probe:
        blocks = launch.grid[0] * launch.grid[1] * launch.grid[2]
        threads = launch.block[0] * launch.block[1] * launch.block[2]
        buffers["probe"] = Buffer("probe", "probe.npy", "out", dtype="uint32")
        extra = extra + (Field("buffer", 0, buffer="probe"),)
    moved = Launch(launch.entry, f"kernel.{kind}", launch.grid, launch.block, launch.fields,
                   buffers, launch.shared_bytes, launch.layout, launch.params_size, extra)
    with atomic_dir(out, inputs=(src, module, splice_record)) as tmp:
        for b in launch.buffers.values():
            link_or_copy(src / b.file, tmp / b.file)
        copy_file(module, tmp / moved.module)
        if probe:
            save_buffer(tmp / "probe.npy", np.zeros((blocks, threads, probe["words_per_thread"]), np.uint32))
        (tmp / "launch.json").write_text(json.dumps(moved.to_json(), indent=2) + "\n")
    return moved
