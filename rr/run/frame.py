"""Frames: a network's launches in order over shared buffers — what a whole denoised frame is.

A frame directory holds `frame.json`, one `.npy` file per buffer and one module per layer:

    {
      "frame": [W, H], "final": "frame",
      "buffers": {"noisy": {"file": "noisy.npy", "format": "rgba16f", "dtype": "float16",
                            "producer": "host", "consumers": ["enc0", "dec0"], "role": "..."}, …},
      "layers": [{"layer": "enc0", "launch": {…launch.json of the layer…}}, …]
    }

Each layer's `launch` is a launch description (docs/formats.md) whose buffers are files of the
frame, so binding one buffer in two layers is passing one device pointer (or one CUDA array, for a
surface one layer writes and the next samples as a texture). `rr run` runs a frame in one child
process, the layers in order — on the GPU the buffers stay on the device between launches — and
writes every buffer after the frame; `rr relaunch --layer L --module X` replaces one layer's
module; `rr compare` compares two frame runs, the final frame first; `rr time` times whole frames.
"""

from __future__ import annotations

import json
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rr.records import Status
from rr.run.launch import (Buffer, Field, Launch, LaunchError, copy_file, link_or_copy, load_buffer,
                           parse_launch, replacing, save_buffer, save_outputs)
from rr.validation import InvalidInput

FRAME_FILE = "frame.json"


@dataclass(frozen=True)
class FrameBuffer:
    name: str
    file: str
    format: str | None  # rgba16f for an image
    dtype: str | None  # how its bytes compare: e4m3, float16, … (None: raw bytes)
    producer: str  # the layer that writes it, or "host"
    consumers: tuple
    role: str = ""


@dataclass(frozen=True)
class FrameLayer:
    layer: str
    launch: Launch


@dataclass(frozen=True)
class Frame:
    frame: tuple
    final: str
    buffers: dict  # name -> FrameBuffer, in frame order
    layers: tuple  # FrameLayer, in the order they run
    start: str | None = None  # a frame resumed at this layer: the layers before it are not run again
    reference: str | None = None  # with `start`: the subdirectory holding the reference run's outputs from there on

    def first(self) -> int:
        """The index of the first layer that runs."""
        return 0 if self.start is None else [lyr.layer for lyr in self.layers].index(self.start)

    def layer(self, name: str) -> FrameLayer:
        for lyr in self.layers:
            if lyr.layer == name:
                return lyr
        raise LaunchError(f"no layer {name!r} in the frame (layers: {', '.join(lyr.layer for lyr in self.layers)})")

    def to_json(self) -> dict:
        return {
            "frame": list(self.frame), "final": self.final,
            "buffers": {b.name: {k: v for k, v in (("file", b.file), ("format", b.format), ("dtype", b.dtype),
                                                    ("producer", b.producer), ("consumers", list(b.consumers)),
                                                    ("role", b.role)) if v is not None}
                        for b in self.buffers.values()},
            "layers": [{"layer": lyr.layer, "launch": lyr.launch.to_json()} for lyr in self.layers],
            **({"start": self.start} if self.start else {}),
            **({"reference": self.reference} if self.reference else {}),
        }


def is_frame(directory: str | Path) -> bool:
    """A frame directory: frame.json and no launch.json (a single layer's launch directory keeps
    a frame.json of its own that says which frame it covers)."""
    directory = Path(directory)
    return (directory / FRAME_FILE).exists() and not (directory / "launch.json").exists()


def read_frame(directory: str | Path) -> Frame:
    """Read and check `directory/frame.json`: its JSON schema (rr/data/frame.schema.json: types,
    names, plain file names), then what a schema cannot say — every layer's launch as `read_launch`
    checks one, its buffers the frame's, no file two buffers', each buffer file and module present,
    the final buffer, producers, consumers and start the frame's own, the reference a subdirectory
    (not a link). Every failure is a LaunchError naming the file, the key and the value."""
    from rr.validation import read_json, validate_against

    directory = Path(directory)
    path = directory / FRAME_FILE
    try:
        raw = read_json(path)
    except InvalidInput as e:
        raise LaunchError(str(e)) from None
    where = str(path)
    validate_against(raw, "frame.schema.json", where, LaunchError)

    def refuse(message: str):
        raise LaunchError(f"{where}: {message}")

    buffers, files = {}, {}
    for name, b in raw["buffers"].items():
        if b["file"] in files:
            refuse(f"buffers.{name}.file: {b['file']!r} is also the file of buffers.{files[b['file']]}")
        files[b["file"]] = name
        if not (directory / b["file"]).exists():  # one that is not a regular file is refused reading it
            refuse(f"buffers.{name}.file {b['file']!r}: no such file in {directory}")
        buffers[name] = FrameBuffer(name, b["file"], b.get("format"), b.get("dtype"), b.get("producer", "host"),
                                    tuple(b.get("consumers", ())), b.get("role", ""))
    layers = []
    for i, entry in enumerate(raw["layers"]):
        launch = parse_launch(entry["launch"], directory, f"{where}: layers[{i}].launch")
        for name, b in launch.buffers.items():
            if name not in buffers or buffers[name].file != b.file:
                refuse(f"layers[{i}].launch.buffers.{name}: not the frame's buffer of that name (file {b.file!r})")
        if any(lyr.layer == entry["layer"] for lyr in layers):
            refuse(f"layers[{i}].layer: {entry['layer']!r} names an earlier layer too")
        layers.append(FrameLayer(entry["layer"], launch))
    names = [lyr.layer for lyr in layers]
    if raw["final"] not in buffers:
        refuse(f"final: {raw['final']!r} is not one of the frame's buffers")
    for name, b in buffers.items():
        if b.producer not in ("host", *names):
            refuse(f"buffers.{name}.producer: {b.producer!r} is not host or one of the frame's layers")
        for j, consumer in enumerate(b.consumers):
            if consumer not in names:
                refuse(f"buffers.{name}.consumers[{j}]: {consumer!r} is not one of the frame's layers")
    start, reference = raw.get("start"), raw.get("reference")
    if start is not None and start not in names:
        refuse(f"start: {start!r} is not one of the frame's layers")
    if reference is not None and (start is None or not _subdirectory(directory / reference)):
        refuse(f"reference: {reference!r} is not a subdirectory of {directory} (it goes with start)")
    return Frame(tuple(raw["frame"]), raw["final"], buffers, tuple(layers), start, reference)


def _subdirectory(path: Path) -> bool:
    """Whether `path` is a directory itself, not a symbolic link to one (which could lead anywhere)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def load_frame_buffers(directory: str | Path, frame: Frame) -> dict[str, np.ndarray]:
    """Every buffer of the frame, C-ordered (the cpu backend writes into them in place)."""
    return {name: np.ascontiguousarray(load_buffer(Path(directory) / b.file)) for name, b in frame.buffers.items()}


def write_frame(directory: str | Path, frame: Frame, arrays: dict[str, np.ndarray], modules: dict,
                inputs=()) -> None:
    """A frame directory (whole or not at all): frame.json, the buffers, each layer's module
    (`modules[layer]`: the file to copy in as the layer's launch's module)."""
    from rr.io import atomic_dir, json_text

    with atomic_dir(directory, inputs=inputs) as tmp:
        for name, b in frame.buffers.items():
            save_buffer(tmp / b.file, arrays[name])
        for lyr in frame.layers:
            copy_file(modules[lyr.layer], tmp / lyr.launch.module)
        (tmp / FRAME_FILE).write_text(json_text(frame.to_json()))


def network_frame(layout, modules: dict) -> Frame:
    """The Frame of a `rr.synth.network.NetworkLayout` (its launches name the frame's buffers)."""
    buffers = {name: FrameBuffer(name, _file(name), b.format, b.element, b.producer, b.consumers, b.role)
               for name, b in layout.buffers.items()}
    layers = []
    for lyr in layout.layers:
        launch = lyr.launch
        named = {n: Buffer(n, _file(n), b.role, b.format, b.dtype) for n, b in launch.buffers.items()}
        module = f"{lyr.layer}{Path(modules[lyr.layer]).suffix or '.ptx'}"
        layers.append(FrameLayer(lyr.layer, _with(launch, module=module, buffers=named)))
    return Frame(tuple(layout.frame), layout.final, buffers, tuple(layers))


def _file(name: str) -> str:
    return f"{name}.npy"


def _with(launch: Launch, **changes) -> Launch:
    from dataclasses import replace

    return replace(launch, **changes)


def replace_layer(src: str | Path, layer: str, module: str | Path, out: str | Path,
                  resume: str | Path | None = None, splice_record: str | Path | None = None) -> Frame:
    """`src` with one layer's module replaced (a splice of its kernel, a cubin): the buffers
    hard-linked (copied across file systems), the other modules copied. A probe splice's module
    also gets its probe buffer `<layer>.probe` (zeros) as an extra kernel parameter, as its
    `splice_record` says (rr.run.launch.replacing).

    With `resume` — a run of `src` (its reference capture) — the frame starts at the replaced
    layer: what the layers before it wrote is taken from that run (the same kernels on the same
    inputs write the same bytes), what the replaced layer and those after it write starts as in
    `src`, and what the reference run wrote from there on goes into `reference/`: on the cpu
    backend, when the replaced layer writes exactly what the reference's did, every later layer
    would too, and the frame is completed from there (`completed_from_reference_after` in the run
    record). The frame's outputs are those of the whole frame, for the cost of the layers that can
    differ."""
    from rr.io import atomic_dir, json_text

    src, module, out = Path(src), Path(module), Path(out)
    frame = read_frame(src)
    target = frame.layer(layer)
    launch = target.launch
    kind, probe = replacing(module, launch, splice_record)
    buffers, extra = dict(frame.buffers), launch.extra
    layer_buffers = dict(launch.buffers)
    if probe:
        name = f"{layer}.probe"
        buffers[name] = FrameBuffer(name, _file(name), None, "uint32", layer, (), "probe")
        layer_buffers[name] = Buffer(name, _file(name), "out", dtype="uint32")
        extra = extra + (Field("buffer", 0, buffer=name),)
    replaced = _with(launch, module=f"{layer}.replaced.{kind}", buffers=layer_buffers, extra=extra)
    layers = tuple(FrameLayer(lyr.layer, replaced) if lyr.layer == layer else lyr for lyr in frame.layers)
    new = Frame(frame.frame, frame.final, buffers, layers, layer if resume is not None else None,
                REFERENCE_DIR if resume is not None else None)
    before = {lyr.layer for lyr in frame.layers[:[x.layer for x in frame.layers].index(layer)]}
    if resume is not None and not frame.buffers.keys() <= read_frame(resume).buffers.keys():
        raise LaunchError(f"{resume}: not a run of {src} (its buffers are not the frame's)")
    with atomic_dir(out, inputs=(src, module, splice_record) + ((resume,) if resume else ())) as tmp:
        for b in frame.buffers.values():
            origin = Path(resume) if resume is not None and b.producer in before else src
            link_or_copy(origin / b.file, tmp / b.file)
            if resume is not None and b.producer not in before and b.producer != "host":
                (tmp / REFERENCE_DIR).mkdir(exist_ok=True)  # what the reference run wrote from here on
                link_or_copy(Path(resume) / b.file, tmp / REFERENCE_DIR / b.file)
        for lyr in frame.layers:
            if lyr.layer != layer:
                copy_file(src / lyr.launch.module, tmp / lyr.launch.module)
        copy_file(module, tmp / replaced.module)
        if probe:
            g, b = launch.grid, launch.block
            save_buffer(tmp / _file(f"{layer}.probe"),
                        np.zeros((g[0] * g[1] * g[2], b[0] * b[1] * b[2], probe["words_per_thread"]), np.uint32))
        (tmp / FRAME_FILE).write_text(json_text(new.to_json()))
    return new


REFERENCE_DIR = "reference"


# -- running ----------------------------------------------------------------------------------------

def run_frame_cpu(directory: str | Path, progress: bool = False,
                  mma: str | None = None) -> tuple[dict, dict[str, np.ndarray]]:
    """Every layer on the cpu backend, in order, on one set of arrays, with the `mma` model named
    (rr.numerics.mma.MMA_MODELS): (record, buffers after)."""
    from rr.numerics.mma import DEFAULT_MMA
    from rr.run.cpu import CpuUnsupported, ExecutionError, ResourceLimit, run_cpu_launch

    mma = mma or DEFAULT_MMA
    directory = Path(directory)
    frame = read_frame(directory)
    arrays = load_frame_buffers(directory, frame)
    layers = []
    completed = None
    t0 = time.perf_counter()
    for i, lyr in enumerate(frame.layers[frame.first():]):
        try:
            record = run_cpu_launch(lyr.launch, directory / lyr.launch.module, arrays, mma, progress=progress)
        except (CpuUnsupported, ExecutionError, ResourceLimit) as e:
            raise type(e)(f"layer {lyr.layer}: {e}") from None
        layers.append({"layer": lyr.layer, "times_ms": record["times_ms"], "lanes": record["lanes"],
                       "unwritten_registers": record["unwritten_registers"]})
        if i == 0 and frame.reference and _as_in_reference(directory / frame.reference, frame, lyr, arrays):
            # the replaced layer wrote what the reference run's did: every later layer reads what it
            # read there, so it writes what it wrote there (deterministic kernels, the same inputs)
            for name, b in frame.buffers.items():
                if (directory / frame.reference / b.file).is_file():
                    arrays[name] = load_buffer(directory / frame.reference / b.file)
            completed = lyr.layer
            break
    return {"status": Status.OK, "message": "", "backend": "cpu", "frame": list(frame.frame), "start": frame.start,
            "completed_from_reference_after": completed,
            "device": {"name": "rr PTX interpreter (numpy)", "mma_model": mma}, "layers": layers,
            "times_ms": {"frame": (time.perf_counter() - t0) * 1e3}}, arrays


def _as_in_reference(reference: Path, frame: Frame, lyr: FrameLayer, arrays: dict) -> bool:
    """Whether every buffer the layer wrote holds the reference run's bytes (a buffer the reference
    has none of — a probe's — is new, and does not count)."""
    for name, b in lyr.launch.buffers.items():
        if b.role == "in" or not (reference / frame.buffers[name].file).is_file():
            continue
        if not np.array_equal(np.asarray(arrays[name]).view(np.uint8),
                              load_buffer(reference / frame.buffers[name].file).view(np.uint8)):
            return False
    return True


def write_frame_outputs(out: Path, directory: Path, outputs: dict[str, np.ndarray],
                        reference: str | Path | None = None, equal=(), frame: Frame | None = None) -> dict:
    """A frame run's output: the frame as it was launched, with every buffer as it was after; with
    `reference` (a run of the unspliced frame), those equal to its are hard links to its files
    (rr.run.launch.save_outputs, whose record part it returns; `equal`: those known to be).
    `frame`: the directory's, read already."""
    frame = frame or read_frame(directory)
    written = save_outputs(out, {name: b.file for name, b in frame.buffers.items()}, outputs, reference, equal)
    for lyr in frame.layers:
        copy_file(directory / lyr.launch.module, out / lyr.launch.module)
    ran = _with(frame, reference=None)  # the reference's outputs stay with the resumed frame
    (out / FRAME_FILE).write_text(json.dumps(ran.to_json(), indent=2) + "\n")
    return written


# -- comparing --------------------------------------------------------------------------------------

def comparison_order(frame: Frame) -> list[str]:
    """The buffers two frame runs are compared in: the final frame first, then what each layer
    writes, layer by layer in frame order (so the first that differs names where it began)."""
    written = [n for lyr in frame.layers for n, b in lyr.launch.buffers.items() if b.role != "in"]
    return [frame.final] + [n for n in dict.fromkeys(written) if n != frame.final]


@dataclass(frozen=True)
class Comparable:
    """One buffer of a run as `rr compare` reads it."""

    name: str
    path: Path
    dtype: str | None
    layer: str | None  # for a frame: the layer that writes it ("host" for an input)


def comparables(directory: str | Path) -> list[Comparable]:
    """The buffers of a run (a launch's, or a frame's in `comparison_order`, then its inputs)."""
    from rr.run.launch import read_launch

    directory = Path(directory)
    if not is_frame(directory):
        launch = read_launch(directory)
        return [Comparable(n, directory / b.file, b.dtype, None) for n, b in launch.buffers.items()]
    frame = read_frame(directory)
    order = comparison_order(frame)
    order += [n for n in frame.buffers if n not in order]
    return [Comparable(n, directory / frame.buffers[n].file, frame.buffers[n].dtype, frame.buffers[n].producer)
            for n in order]


@dataclass(frozen=True)
class RunComparison:
    """Two runs compared buffer by buffer (`compare_runs`)."""

    rows: list  # rr.run.compare.BufferComparison, in comparables' order
    layers: dict  # buffer -> the layer that writes it (None for a launch's)
    linked: list  # buffers that are one file in both runs: identical, their bytes not read
    only: list  # buffers one run has and the other not (a probe's): not compared

    def records(self) -> list[dict]:
        """The comparison as `rr compare --json` writes it: a frame's first row, the final frame's,
        says so (`final`)."""
        dicts = [{**r.as_dict(), **({"layer": self.layers[r.buffer]} if self.layers[r.buffer] else {})}
                 for r in self.rows]
        if dicts and "layer" in dicts[0]:
            dicts[0]["final"] = True
        return dicts


def compare_runs(a: str | Path, b: str | Path) -> RunComparison:
    """The buffers two runs of one launch or frame both have, compared (rr.run.compare): a
    LaunchError when either is not a run (a failed capture has no buffers), a ValueError naming the
    buffer when they are not runs of one launch."""
    from rr.run.compare import compare_buffer, identical_buffer, same_file
    from rr.run.launch import load_buffer  # looked up when called: what a test counts the reads of

    la, lb = ({c.name: c for c in comparables(d)} for d in (a, b))
    common = [name for name in la if name in lb]
    if not common:
        raise ValueError(f"{a} and {b} have no buffer in common: the runs are not of one launch")
    rows, linked = [], []
    for name in common:
        if same_file(la[name].path, lb[name].path):  # a hard link to the reference's file (rr run --reference)
            rows.append(identical_buffer(name, load_buffer(la[name].path, mmap=True), la[name].dtype))
            linked.append(name)
        else:
            rows.append(compare_buffer(name, load_buffer(la[name].path), load_buffer(lb[name].path), la[name].dtype))
    return RunComparison(rows, {name: la[name].layer for name in common}, linked, sorted(set(la) ^ set(lb)))


def extract_layer(src: str | Path, layer: str, out: str | Path, module: str | Path | None = None,
                  splice_record: str | Path | None = None) -> Launch:
    """One layer of a frame (a layout, or a run of one) as a launch directory of its own: its
    buffers as they are in `src` — after a run, what the layers before it left for it to read —
    and its module (or `module` instead, a probe splice's with the buffer its `splice_record`
    says). What `rr time` times a layer alone on."""
    from rr.io import atomic_dir, scratch_dir
    from rr.run.launch import relaunch

    src, out = Path(src), Path(out)
    lyr = read_frame(src).layer(layer)
    launch = lyr.launch
    files = {name: f"{name}.npy" for name in launch.buffers}
    single = _with(launch, module=f"kernel{Path(launch.module).suffix}",
                   buffers={n: _with(b, file=files[n]) for n, b in launch.buffers.items()})
    if module is not None:  # the same layer with another module: through relaunch (a probe's buffer too)
        with scratch_dir(out) as tmp:
            extract_layer(src, layer, tmp / "layer")
            return relaunch(tmp / "layer", module, out, splice_record)
    with atomic_dir(out, inputs=(src,)) as tmp:
        for name, b in launch.buffers.items():
            link_or_copy(src / b.file, tmp / files[name])
        copy_file(src / launch.module, tmp / single.module)
        (tmp / "launch.json").write_text(json.dumps(single.to_json(), indent=2) + "\n")
    return single
