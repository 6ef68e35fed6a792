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
kernel, plus `run.json`, so what a kernel read and what it wrote can be compared offline.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

FIELD_KINDS = ("scalar", "buffer", "texture", "surface")
ROLES = ("in", "out", "inout")
HANDLE_BYTES = 8  # device pointers, texture and surface objects are 64-bit


class LaunchError(ValueError):
    """A launch description that cannot be used; names the file and the key at fault."""


@dataclass(frozen=True)
class Field:
    kind: str
    offset: int = 0
    dtype: str | None = None  # scalars
    value: tuple = ()  # scalars
    buffer: str | None = None  # buffer, texture, surface

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
    return out


def _need(obj: dict, key: str, where: str):
    if key not in obj:
        raise LaunchError(f"{where}: missing key {key!r}")
    return obj[key]


def read_launch(directory: str | Path) -> Launch:
    """Read and check `directory/launch.json`."""
    path = Path(directory) / "launch.json"
    if not path.is_file():
        raise LaunchError(f"{path}: no launch.json in {directory}")
    try:
        raw = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise LaunchError(f"{path}:{e.lineno}:{e.colno}: not valid JSON: {e.msg}") from None
    where = str(path)
    buffers = {}
    for name, b in _need(raw, "buffers", where).items():
        role = b.get("role", "in")
        if role not in ROLES:
            raise LaunchError(f"{where}: buffers.{name}.role is {role!r}, expected one of {ROLES}")
        buffers[name] = Buffer(name, _need(b, "file", f"{where}: buffers.{name}"), role,
                               b.get("format"), b.get("dtype"))
    fields = []
    for i, f in enumerate(_need(raw, "fields", where)):
        kind = _need(f, "kind", f"{where}: fields[{i}]")
        if kind not in FIELD_KINDS:
            raise LaunchError(f"{where}: fields[{i}].kind is {kind!r}, expected one of {FIELD_KINDS}")
        if kind == "scalar":
            value = f.get("value")
            value = tuple(value) if isinstance(value, list) else (value,)
            try:
                np.dtype(_need(f, "dtype", f"{where}: fields[{i}]"))
            except TypeError:
                raise LaunchError(f"{where}: fields[{i}].dtype {f['dtype']!r} is not a numpy dtype") from None
            fields.append(Field(kind, int(f.get("offset", 0)), f["dtype"], value))
        else:
            name = _need(f, "buffer", f"{where}: fields[{i}]")
            if name not in buffers:
                raise LaunchError(f"{where}: fields[{i}].buffer {name!r} is not in buffers "
                                  f"({', '.join(buffers) or 'none'})")
            fields.append(Field(kind, int(f.get("offset", 0)), buffer=name))
    params = raw.get("params", {"layout": "list"})
    extra = []
    for i, f in enumerate(params.get("extra", [])):
        name = _need(f, "buffer", f"{where}: params.extra[{i}]")
        if name not in buffers:
            raise LaunchError(f"{where}: params.extra[{i}].buffer {name!r} is not in buffers")
        extra.append(Field(_need(f, "kind", f"{where}: params.extra[{i}]"), 0, buffer=name))
    layout = params.get("layout", "block")
    if layout not in ("block", "list"):
        raise LaunchError(f"{where}: params.layout is {layout!r}, expected 'block' or 'list'")
    launch = Launch(
        entry=_need(raw, "entry", where), module=_need(raw, "module", where),
        grid=tuple(_need(raw, "grid", where)), block=tuple(_need(raw, "block", where)),
        fields=tuple(fields), buffers=buffers, shared_bytes=int(raw.get("shared_bytes", 0)),
        layout=layout, params_size=int(params.get("size", 0)), extra=tuple(extra),
    )
    for axis in ("grid", "block"):
        dims = getattr(launch, axis)
        if len(dims) != 3 or not all(isinstance(d, int) and d > 0 for d in dims):
            raise LaunchError(f"{where}: {axis} must be three positive integers, got {list(dims)}")
    if layout == "block":
        for i, f in enumerate(launch.fields):
            if f.offset % min(f.size, 8) or f.offset + f.size > launch.params_size:
                raise LaunchError(f"{where}: fields[{i}] ({f.size} bytes at offset {f.offset}) is "
                                  f"misaligned or outside the {launch.params_size}-byte block")
    return launch


def load_buffers(directory: str | Path, launch: Launch) -> dict[str, np.ndarray]:
    """Every buffer's contents as numpy arrays, checked against its format."""
    arrays = {}
    for name, b in launch.buffers.items():
        path = Path(directory) / b.file
        if not path.is_file():
            raise LaunchError(f"{Path(directory) / 'launch.json'}: buffers.{name}.file {b.file!r} not found")
        a = np.load(path, allow_pickle=False)
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
            data = int(handles[f.buffer]).to_bytes(HANDLE_BYTES, "little")
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


def write_launch(directory: str | Path, launch: Launch, arrays: dict[str, np.ndarray],
                 module_source: str | Path | None = None) -> None:
    """Write a launch directory (used by generators and by runs for their outputs)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for name, b in launch.buffers.items():
        np.save(directory / b.file, arrays[name], allow_pickle=False)
    if module_source is not None and Path(module_source).resolve() != (directory / launch.module).resolve():
        shutil.copyfile(module_source, directory / launch.module)
    (directory / "launch.json").write_text(json.dumps(launch.to_json(), indent=2) + "\n")


def _probe_of(module: Path) -> dict | None:
    """The probe a spliced module writes, from its `splice.json` (beside the PTX it came from)."""
    for record in (Path(f"{module}.splice.json"), Path(f"{module.with_suffix('.ptx')}.splice.json")):
        if record.is_file():
            return json.loads(record.read_text()).get("probe")
    return None


def relaunch(src: str | Path, module: str | Path, out: str | Path) -> Launch:
    """A launch directory that is `src` with another module (a splice of its kernel, a cubin):
    the buffers are hard-linked (copied across file systems), the module copied in. A module made
    by the `probe` template also gets its probe buffer (zeros, one row of words per thread) as an
    extra kernel parameter. Written to a temporary directory and renamed, so `out` appears whole."""
    import os

    from rr.io import atomic_dir

    src, module, out = Path(src), Path(module), Path(out)
    launch = read_launch(src)
    if not module.is_file():
        raise LaunchError(f"{module}: no such module file")
    buffers, extra, probe = dict(launch.buffers), launch.extra, _probe_of(module)
    if probe:
        blocks = launch.grid[0] * launch.grid[1] * launch.grid[2]
        threads = launch.block[0] * launch.block[1] * launch.block[2]
        buffers["probe"] = Buffer("probe", "probe.npy", "out", dtype="uint32")
        extra = extra + (Field("buffer", 0, buffer="probe"),)
    moved = Launch(launch.entry, "kernel" + module.suffix, launch.grid, launch.block, launch.fields,
                   buffers, launch.shared_bytes, launch.layout, launch.params_size, extra)
    with atomic_dir(out) as tmp:
        for b in launch.buffers.values():
            try:
                os.link(src / b.file, tmp / b.file)
            except OSError:
                shutil.copyfile(src / b.file, tmp / b.file)
        shutil.copyfile(module, tmp / moved.module)
        if probe:
            np.save(tmp / "probe.npy", np.zeros((blocks, threads, probe["words_per_thread"]), np.uint32))
        (tmp / "launch.json").write_text(json.dumps(moved.to_json(), indent=2) + "\n")
    return moved
