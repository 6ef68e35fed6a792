"""`rr launch-template`: a launch directory for a PTX entry made from its `.param` list, for a
user with a PTX file and no GPU (or no program to capture).

    rr launch-template k.ptx --entry saxpy -o L --grid 4 --block 256 \
        --buffer param_0=4096:f32 --buffer param_1=4096:f32 --scalar param_2=1024 --scalar param_3=2.0

The parameters are laid out as the ABI lays them out (`rr.describe.kernel.param_offsets`).
Each is one *slot* the user gives a value for, named as in the PTX less the `ENTRY_` prefix nvcc
puts on it (`param_0`); a struct or array parameter (`.b8 p[N]`) is one slot per member the
kernel reads, `p.OFFSET`, typed as the kernel's `ld.param` reads it (bytes it never reads are
zero). A 64-bit slot is a pointer — a buffer — when the kernel addresses memory through it: a
load, store, atomic or reduction whose address is the parameter plus offsets, generic or after
`cvta.to.global` (what `rr spec` lists as read / written, rr.describe.summary.summarise_params);
every other slot is a scalar of its type. `--buffer` on a 64-bit slot makes it a buffer whatever
the analysis saw (a pointer only passed to a `.func`, or read through `cp.async`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rr.validation import InvalidInput

# PTX scalar types and the numpy types of launch.json's scalar fields (rr/data/launch.schema.json)
DTYPES = {f"{k}{bits}": f"{t}{bits}" for k, t in (("u", "uint"), ("s", "int"), ("b", "uint"))
          for bits in (8, 16, 32, 64)}
DTYPES.update(f16="float16", f32="float32", f64="float64")
BUFFER_TYPES = {"e4m3": (np.uint8, "e4m3"), "f16": (np.float16, None), "f32": (np.float32, None)}
FILLS = ("zeros", "random")
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,123}")  # a buffer's name; its file adds `.npy`


class TemplateError(InvalidInput):
    """What the template cannot be made from: missing or unknown names, values that do not fit."""


@dataclass(frozen=True)
class BufferRequest:
    """`--buffer NAME=BYTES[:TYPE][:FILL]`: the buffer's size, number type and initial contents
    (None: random for a buffer the kernel reads, zeros for one it only writes)."""

    nbytes: int
    type: str | None = None  # e4m3, f16, f32; None: bytes
    fill: str | None = None  # zeros or random


@dataclass(frozen=True)
class Slot:
    """One value of the parameter space the user gives: a scalar of `dtype` or, for a pointer
    the kernel addresses memory through, a buffer (`role`)."""

    name: str
    offset: int  # in the parameter space
    dtype: str
    role: str | None = None  # in, out, inout: a pointer the kernel reads or writes through
    read: bool = True  # whether the kernel reads the slot at all (one it never reads is zero)
    unsupported: str | None = None  # why it cannot be a buffer or a scalar (a texture or surface object)

    @property
    def size(self) -> int:
        return np.dtype(self.dtype).itemsize

    @property
    def wide(self) -> bool:
        """A 64-bit slot, which --buffer may make a buffer."""
        return self.size == 8


@dataclass(frozen=True)
class EntryParam:
    """A kernel parameter and its slots: one for a scalar, one per member read for an aggregate."""

    name: str
    offset: int
    size: int
    aggregate: bool
    slots: tuple


def short_name(param: str, entry: str) -> str:
    """A parameter's name without the `ENTRY_` prefix nvcc gives it (`saxpy_param_0` → `param_0`)."""
    return param[len(entry) + 1:] if param.startswith(f"{entry}_") and len(param) > len(entry) + 1 else param


def entry_params(function, module) -> list[EntryParam]:
    """The entry's parameters as the ABI lays them out, each with its slots and what the kernel
    does with them (rr.describe.summary.summarise_params)."""
    from rr.describe.dataflow import Dataflow
    from rr.describe.kernel import param_offsets
    from rr.describe.summary import summarise_params

    flow = Dataflow(function, None, module)
    uses = summarise_params(flow)
    offsets = param_offsets(function.params)
    out = []
    for p in function.params:
        name, at = short_name(p.name, function.name), offsets[p.name]
        if p.dims:
            slots = tuple(s for o in sorted(uses) if at <= o < at + p.size for s in _members(name, at, uses[o], flow))
            for a, b in zip(slots, slots[1:]):
                if a.offset + a.size > b.offset:
                    raise TemplateError(f"parameter {name}: the kernel reads {a.name} "
                                        f"({a.size} bytes) and {b.name} over each other: write its launch.json "
                                        "by hand (docs/formats.md)")
        else:
            dtype = _dtype(p.type, f"parameter {name}")
            use = uses.get(at)
            slots = (_slot(name, use, dtype) if use is not None else Slot(name, at, dtype, read=False),)
        out.append(EntryParam(name, at, p.size, bool(p.dims), slots))
    return out


def _members(name: str, at: int, use, flow) -> list[Slot]:
    """The members of aggregate parameter `name` (at offset `at`) that one offset's `ld.param`
    reads (`use`, a ParamUse), typed as the first of them reads it: one per element of a vector
    load (`ld.param.v2.u32` of n and k is two members)."""
    code = flow.statements[use.stmts[0] - 1].code
    dtype = _dtype(code.type or "", f"{name}.{use.offset - at} (read by {code.text})")
    step = np.dtype(dtype).itemsize
    return [_slot(f"{name}.{o - at}", use, dtype, o)
            for o in range(use.offset, use.offset + use.width, step)]


def _slot(name: str, use, dtype: str, offset: int | None = None) -> Slot:
    """The slot of a value the kernel reads (`use`, a ParamUse, of which it is the element at
    `offset`, by default the first)."""
    offset = use.offset if offset is None else offset
    pointer = use.kind == "pointer" and (use.read or use.written)
    unsupported = None
    if use.sampled or use.surface:
        unsupported = (f"{name} is a {'texture' if use.sampled else 'surface'} object: launch-template makes "
                       "global buffers only; write its launch.json by hand (docs/formats.md) or capture the launch")
    role = ({(True, True): "inout", (True, False): "in", (False, True): "out"}[(use.read, use.written)]
            if pointer else None)
    return Slot(name, offset, dtype, role, unsupported=unsupported)


def _dtype(ptx_type: str, what: str) -> str:
    if ptx_type not in DTYPES:
        raise TemplateError(f"{what}: a .{ptx_type} value, which launch-template cannot give "
                            f"({', '.join('.' + t for t in DTYPES)}); write its launch.json by hand (docs/formats.md)")
    return DTYPES[ptx_type]


def template_launch(function, module, grid: tuple, block: tuple, buffers: dict[str, BufferRequest],
                    scalars: dict[str, str], seed: int, where: str):
    """(Launch, arrays, lines) for the entry: the launch description with module `kernel.ptx`,
    each buffer's initial contents, and one line per slot saying what it became. Every name that
    is missing, unknown or given the wrong way is refused at once, in one TemplateError."""
    from rr.run.launch import Buffer, Field, Launch

    try:
        params = entry_params(function, module)
    except TemplateError as e:
        raise TemplateError(f"{where}: {function.name}: {e}") from None
    slots = {s.name: s for p in params for s in p.slots}
    problems = [s.unsupported for s in slots.values() if s.unsupported]
    known = ", ".join(f"{s.name} ({_what(s)})" for s in slots.values()) or "none"
    for name in list(buffers) + list(scalars):
        if name not in slots:
            option = "--buffer" if name in buffers else "--scalar"
            problems.append(f"{option} {name}: {function.name} has no such parameter (its parameters: {known})")
    for name, slot in slots.items():
        if slot.unsupported:
            continue
        if name in buffers and name in scalars:
            problems.append(f"{name}: given both --buffer and --scalar")
        elif name in buffers and not (slot.role or slot.wide):
            problems.append(f"--buffer {name}: a {slot.dtype} scalar, not a pointer: give it with --scalar")
        elif name in scalars and slot.role:
            problems.append(f"--scalar {name}: a pointer the kernel {_verb(slot.role)} through: give it with "
                            f"--buffer {name}=BYTES")
    missing = [f"--buffer {s.name}=BYTES (a pointer it {_verb(s.role)} through)" for s in slots.values()
               if s.role and not s.unsupported and s.name not in buffers and s.name not in scalars]
    missing += [f"--scalar {s.name}=VALUE ({_what(s)})" for s in slots.values()
                if not s.role and s.read and not s.unsupported and s.name not in buffers and s.name not in scalars]
    if missing:
        problems.append("missing " + ", ".join(missing))
    problems += [f"--buffer {name}: a buffer's name is letters, digits, `_`, `.` and `-` (at most 124), as its "
                 "file NAME.npy is named" for name in buffers if name in slots and not _NAME.fullmatch(name)]
    problems += [f"--buffer {name}={r.nbytes}:{r.type}: not a whole number of {_itemsize(r)}-byte values"
                 for name, r in buffers.items() if r.nbytes % _itemsize(r)]
    if not problems:
        values = {name: _scalar(slots[name], text) for name, text in scalars.items() if name not in buffers}
        problems += [v for v in values.values() if isinstance(v, str)]
    block_layout = len(params) == 1 and params[0].aggregate
    if not problems and not block_layout:
        problems += [f"{s.name}: a pointer inside a struct parameter of a kernel of several parameters, which "
                     "launch.json's list layout cannot express (docs/formats.md)"
                     for p in params if p.aggregate for s in p.slots if s.role or s.name in buffers]
    if problems:
        raise TemplateError(f"{where}: {function.name}: " + "; ".join(problems))

    rng = np.random.default_rng(seed)
    arrays, described, lines = {}, {}, []

    def field_of(s: Slot) -> Field:
        if s.name in buffers:
            request = buffers[s.name]
            role = s.role or "in"
            arrays[s.name], dtype = _contents(request, role, rng)
            described[s.name] = Buffer(s.name, f"{s.name}.npy", role, dtype=dtype)
            lines.append(f"  {s.name:<12} +{s.offset:<4} buffer  {role:<5} {request.nbytes} bytes as "
                         f"{request.type or 'uint8'}, {_fill(request, role)}")
            return Field("buffer", s.offset, buffer=s.name)
        value = values.get(s.name, 0)
        note = "" if s.read or s.name in values else " (never read by the kernel: zero)"
        lines.append(f"  {s.name:<12} +{s.offset:<4} {s.dtype:<7} {value}{note}")
        return Field("scalar", s.offset, s.dtype, (value,))

    fields = []
    for p in params:
        if p.aggregate and not p.slots:
            lines.append(f"  {p.name:<12} +{p.offset:<4} {p.size} bytes never read by the kernel: zero")
        fields += [field_of(s) for s in p.slots]
    if block_layout:
        launch = Launch(function.name, "kernel.ptx", grid, block, tuple(fields), described, layout="block",
                        params_size=params[0].size)
    else:
        by_param = iter(fields)
        listed = [next(by_param) if not p.aggregate else _aggregate(p, [next(by_param) for _ in p.slots])
                  for p in params]
        launch = Launch(function.name, "kernel.ptx", grid, block, tuple(listed), described, layout="list")
    return launch, arrays, lines


def _what(s: Slot) -> str:
    if s.unsupported:
        return "texture or surface"
    if s.role:
        return f"pointer, {s.role}"
    hint = ", or --buffer if it is a pointer" if s.wide else ""
    return s.dtype + ("" if s.read else ", never read") + hint


def _verb(role: str) -> str:
    return {"in": "reads", "out": "writes", "inout": "reads and writes"}[role]


def _scalar(s: Slot, text: str) -> int | float | str:
    """`--scalar` text as the slot's value, or why not (a str)."""
    from rr.run.launch import _unrepresentable

    integer = np.dtype(s.dtype).kind in "iu"
    try:
        value = int(text, 0) if integer else float(text)
    except ValueError:
        return f"--scalar {s.name}={text}: not {'an integer' if integer else 'a number'} ({s.dtype})"
    bits = np.dtype(s.dtype).itemsize * 8
    if np.dtype(s.dtype).kind == "u" and -(1 << (bits - 1)) <= value < 0:
        value += 1 << bits  # nvcc declares every int .u32: -1 is 0xffffffff, as C passes it
    bad = _unrepresentable((value,), s.dtype)
    return f"--scalar {s.name}={text}: does not fit {s.dtype}" if bad is not None else value


def _itemsize(request: BufferRequest) -> int:
    return np.dtype(BUFFER_TYPES.get(request.type, (np.uint8,))[0]).itemsize


def _fill(request: BufferRequest, role: str) -> str:
    """The fill asked for, else random for a buffer the kernel reads, zeros for one it only writes."""
    return request.fill or ("zeros" if role == "out" else "random")


def _contents(request: BufferRequest, role: str, rng):
    """A buffer's initial array (of `request.nbytes`, a whole number of values) and its
    launch.json dtype (None: the array's own)."""
    dtype, compared = BUFFER_TYPES.get(request.type, (np.uint8, None))
    n = request.nbytes // _itemsize(request)
    if _fill(request, role) == "zeros":
        return np.zeros(n, dtype), compared
    if request.type == "e4m3":  # every finite e4m3 value: both signs, all but the NaNs 0x7f / 0xff
        return (rng.integers(0, 0x7f, n, dtype=np.uint8) | (rng.integers(0, 2, n, dtype=np.uint8) << 7)), compared
    if request.type in ("f16", "f32"):
        return rng.uniform(-1, 1, n).astype(dtype), compared
    return rng.integers(0, 256, n, dtype=np.uint8), compared


def _aggregate(p: EntryParam, fields: list):
    """A struct parameter of a list layout as one field: its bytes, the members the user gave at
    their offsets, zero elsewhere."""
    from rr.run.launch import Field

    image = bytearray(p.size)
    for f in fields:
        data = np.asarray(f.value, dtype=f.dtype).tobytes()
        image[f.offset - p.offset:f.offset - p.offset + len(data)] = data
    return Field("scalar", p.offset, "uint8", tuple(image))


def write_template(ptx: Path, function, module, out: Path, grid: tuple, block: tuple,
                   buffers: dict[str, BufferRequest], scalars: dict[str, str], seed: int) -> list[str]:
    """The launch directory `out` (written whole or not at all): kernel.ptx (a copy of `ptx`),
    launch.json and the buffers; checked as `rr run` reads it. Returns the lines saying what
    each slot became."""
    import shutil

    from rr.io import atomic_dir, json_text
    from rr.run.launch import parse_launch, save_buffer

    launch, arrays, lines = template_launch(function, module, grid, block, buffers, scalars, seed, str(ptx))
    with atomic_dir(out, inputs=(ptx,)) as tmp:
        shutil.copyfile(ptx, tmp / launch.module)
        for name, b in launch.buffers.items():
            save_buffer(tmp / b.file, arrays[name])
        raw = launch.to_json()
        parse_launch(raw, tmp, str(out / "launch.json"))  # what rr run will check: CUDA's bounds
        (tmp / "launch.json").write_text(json_text(raw))
    return lines
