"""Deterministic weights and inputs for the layers of the synthetic engine, and their files on disk.

`weight_image(seed, layer)` fills every region of the layer's `LayerLayout`: e4m3 tiles with a
spread of gain/√fan-in (so activations stay near unit scale through every GEMM), f16 RMS gains
near √C (the norm has no 1/N), small f16 biases and tables. `layer_arrays(layer, ex, ey, …)` gives
a layer's input buffers on their own (random e4m3 images, RGBA16F textures) for a launch of that
layer alone; `rr.synth.network` gives the inputs of a whole frame. The same seed always gives the
same bytes; enc2 keeps the plain seed (its bytes predate the other layers), the others draw from
(seed, layer index).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from rr.io import atomic_dir
from rr.numerics import fp8
from rr.records import Status
from rr.synth import layout as L
from rr.synth.family import NAMES, layer_spec, level_extents
from rr.validation import cut

WEIGHT_SEED = 2
INPUT_SEED = 7


def _rng(seed: int, layer: str) -> np.random.Generator:
    return np.random.default_rng(seed if layer == "enc2" else [seed, NAMES.index(layer)])


def weight_image(seed: int = WEIGHT_SEED, layer: str = "enc2") -> np.ndarray:
    lay = L.layer_layout(layer)
    rng = _rng(seed, layer)
    w = np.zeros(lay.weight_bytes, dtype=np.uint8)
    for r in lay.regions:
        if r.kind == "e4m3":
            vals = rng.normal(0.0, r.gain / np.sqrt(r.fan_in), r.size)
            w[r.offset:r.offset + r.size] = fp8.to_e4m3(vals.astype(np.float16))
            continue
        n = r.size // 2
        if "gain" in r.name:
            vals = rng.uniform(0.8, 1.2, n) * np.sqrt(float(lay.channels))
        elif "score bias" in r.name:
            vals = rng.normal(0.0, 1.0, n)
        else:
            vals = rng.normal(0.0, 0.1, n)
        w[r.offset:r.offset + r.size] = vals.astype(np.float16).view(np.uint8)
    return w


def frame_inputs(ex: int, ey: int, seed: int = INPUT_SEED) -> tuple[np.ndarray, np.ndarray]:
    """enc2's inputs: (input image (ey, ex, 96) e4m3 bytes, texture (ey, ex, 4) float16)."""
    rng = np.random.default_rng(seed)
    image = fp8.to_e4m3(rng.normal(0.0, 1.0, (ey, ex, 96)).astype(np.float16))
    texture = rng.uniform(0.0, 1.0, (ey, ex, 4)).astype(np.float16)
    return image, texture


class NoLaunch(ValueError):
    """A layer the synthetic engine has no launch for (a layer of a real corpus)."""

    status = Status.NO_LAUNCH


TOKEN = 16  # enc2 works on 16×16-pixel tokens: a 3840×2160 frame is 240×135 tokens
MAX_TOKENS = 1 << 20  # a synthesised frame's tokens: ~230 bytes of buffers each, 240 MB at the bound


def parse_extents(text: str, pixels: bool = False) -> tuple[int, int]:
    """WIDTHxHEIGHT in tokens (or in pixels, 16 to a token), refused past MAX_TOKENS tokens: the
    buffers of a launch are allocated whole."""
    unit = "pixels" if pixels else "tokens"
    try:
        ex, ey = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"extents {cut(text)!r}: expected WIDTHxHEIGHT in {unit}, e.g. "
                         f"{'3840x2160' if pixels else '240x135'}") from None
    if ex < 2 or ey < 2:
        raise ValueError(f"extents {text!r}: both must be at least 2")
    tokens = max(ex // TOKEN, 2) * max(ey // TOKEN, 2) if pixels else ex * ey
    if tokens > MAX_TOKENS:
        raise ValueError(f"extents {text!r}: {tokens} tokens; rr synthesises at most {MAX_TOKENS} "
                         f"(a {'16384x16384-pixel' if pixels else '1024x1024-token'} frame)")
    return ex, ey


# -- a layer's launch ------------------------------------------------------------------------------

def buffer_shapes(layer: str, extents: tuple[int, int], out_extents: tuple[int, int] | None = None) -> dict:
    """Every buffer of the layer's parameter block, by its name there: (shape, dtype)."""
    spec, lay = layer_spec(layer), L.layer_layout(layer)
    ex, ey = extents
    S = spec.slices
    planes = (S, ey, ex, 32)
    shapes = {"input": ((ey, ex, spec.channels) if spec.token_input else planes, np.uint8),
              "skip": (planes, np.uint8), "weights": ((lay.weight_bytes,), np.uint8), "arena": (planes, np.uint8),
              "texture": ((ey, ex, 4), np.float16),
              "surface0": ((ey, ex, 4), np.float16), "surface1": ((ey, ex, 4), np.float16)}
    if spec.kind == "enc":
        hx, hy = ex >> 1, ey >> 1
        n = spec.next_channels
        shapes["half_out"] = ((hy, hx, n) if spec.token_output else (n // 32, hy, hx, 32), np.uint8)
        shapes["surface2"] = ((hy, hx, 4), np.float16)
    elif not spec.final:
        oex, oey = out_extents
        shapes["expanded"] = ((spec.next_channels // 32, oey, oex, 32), np.uint8)
        shapes["surface2"] = ((oey, oex, 4), np.float16)
    else:
        fw, fh = out_extents
        shapes["noisy"] = ((fh, fw, 4), np.float16)
        shapes["frame"] = ((fh, fw, 4), np.float16)
    return {name: shapes[name] for _, (name, _) in sorted(lay.params.items()) if name in shapes}


_E4M3_BUFFERS = ("input", "skip", "arena", "half_out", "expanded")
_WRITTEN = ("arena", "half_out", "expanded", "surface0", "surface1", "surface2", "frame")


def layer_launch_spec(layer: str, extents: tuple[int, int], out_extents: tuple[int, int] | None = None,
                      module: str = "kernel.ptx", names: dict | None = None, origins=(0, 0)):
    """The launch of one layer over extents (tokens) with block (32, 1, 4), one window a block: its
    parameter block field by field. `names` maps a parameter's name to the buffer it is bound to
    (default: the same name); textures and surfaces are RGBA16F."""
    from rr.run.launch import Buffer, Field, Launch

    lay = L.layer_layout(layer)
    names = names or {}
    ex, ey = extents
    fields, buffers = [], {}
    for offset, (name, _role) in sorted(lay.params.items()):
        if name == "extents":
            fields.append(Field("scalar", offset, "uint32", (ex, ey)))
        elif name in ("out_extents", "frame_extents"):
            fields.append(Field("scalar", offset, "uint32", tuple(out_extents)))
        elif name == "origins":
            fields.append(Field("scalar", offset, "uint16", tuple(origins)))
        else:
            image = name in ("texture", "noisy", "frame") or name.startswith("surface")
            kind = ("surface" if name in _WRITTEN else "texture") if image else "buffer"
            bname = names.get(name, name)
            fields.append(Field(kind, offset, buffer=bname))
            buffers[bname] = Buffer(bname, f"{bname}.npy", "out" if name in _WRITTEN else "in",
                                    format="rgba16f" if image else None,
                                    dtype="float16" if image else ("e4m3" if name in _E4M3_BUFFERS else None))
    return Launch(entry=lay.entry, module=module, grid=(-(-ex // 8), -(-ey // 8), 1), block=L.BLOCK,
                  fields=tuple(fields), buffers=buffers, layout="block", params_size=L.PARAM_BYTES)


def default_out_extents(layer: str, extents: tuple[int, int]) -> tuple[int, int] | None:
    """For a layer launched on its own: the level below twice as wide (decoders), the frame four
    times as wide (dec0)."""
    spec = layer_spec(layer)
    if spec.kind == "enc":
        return None
    f = 4 if spec.final else 2
    return f * extents[0], f * extents[1]


def layer_arrays(layer: str, extents: tuple[int, int], weights: np.ndarray, seed: int = INPUT_SEED,
                 out_extents: tuple[int, int] | None = None) -> dict[str, np.ndarray]:
    """A layer's buffers for a launch of it alone: seeded random inputs (e4m3 N(0, 1) images,
    textures uniform in [0, 1]), zeroed outputs."""
    ex, ey = extents
    if layer == "enc2":
        image, texture = frame_inputs(ex, ey, seed)
        arrays = {"input": image, "texture": texture}
    else:
        rng = _rng(seed, layer)
        arrays = {}
        for name, (shape, dtype) in buffer_shapes(layer, extents, out_extents).items():
            if name in ("input", "skip"):
                arrays[name] = fp8.to_e4m3(rng.normal(0.0, 1.0, shape).astype(np.float16))
            elif name in ("texture", "noisy"):
                arrays[name] = rng.uniform(0.0, 1.0, shape).astype(np.float16)
    for name, (shape, dtype) in buffer_shapes(layer, extents, out_extents).items():
        if name == "weights":
            arrays[name] = weights
        elif name not in arrays:
            arrays[name] = np.zeros(shape, dtype)
    return arrays


def model_inputs(layer: str, arrays: dict[str, np.ndarray], launch=None):
    """The numpy model's inputs from a layer's buffers (by parameter name)."""
    from rr.synth.model import LayerInputs

    spec = layer_spec(layer)
    out_extents = None
    if launch is not None and spec.kind == "dec":
        key = "frame_extents" if spec.final else "out_extents"
        offset = next(o for o, (n, _) in L.layer_layout(layer).params.items() if n == key)
        out_extents = next(f.value for f in launch.fields if f.offset == offset)
    elif spec.kind == "dec":
        shape = arrays["frame" if spec.final else "surface2"].shape
        out_extents = (shape[1], shape[0])
    if spec.final:
        return LayerInputs(arrays["weights"], arrays["input"], arrays["noisy"], layer=layer,
                           skip=arrays["skip"], coarse=arrays["texture"], out_extents=out_extents)
    return LayerInputs(arrays["weights"], arrays["input"], arrays["texture"], layer=layer,
                       skip=arrays.get("skip"), out_extents=out_extents,
                       surface2_shape=arrays["surface2"].shape[:2] if spec.kind == "enc" else None)


def write_layer(out: str | Path, layer: str, extents: tuple[int, int] | None = None, target: str = "sm_90",
                weight_seed: int = WEIGHT_SEED, input_seed: int = INPUT_SEED) -> Path:
    """`rr synth LAYER`: DIR/LAYER.ptx, LAYER.weights.bin, LAYER.json and, with extents (tokens),
    DIR/launch/. Written into a temporary directory and renamed, so DIR appears whole."""
    with atomic_dir(out) as tmp:
        _write_layer(tmp, layer, extents, target, weight_seed, input_seed)
    return Path(out)


def write_enc2(out: str | Path, extents: tuple[int, int] | None = None, target: str = "sm_90",
               weight_seed: int = WEIGHT_SEED, input_seed: int = INPUT_SEED) -> Path:
    """`rr synth enc2`: DIR/enc2.ptx, enc2.weights.bin, enc2.json and, with extents, DIR/launch/."""
    return write_layer(out, "enc2", extents, target, weight_seed, input_seed)


def _write_layer(tmp: Path, layer: str, extents, target: str, weight_seed: int, input_seed: int) -> None:
    from rr.run.launch import write_launch
    from rr.synth.swin import build_layer

    lay = L.layer_layout(layer)
    ptx = build_layer(layer, target)
    weights = weight_image(weight_seed, layer)
    (tmp / f"{layer}.ptx").write_text(ptx)
    (tmp / f"{layer}.weights.bin").write_bytes(weights.tobytes())
    meta = {
        "entry": lay.entry, "target": target, "block": list(L.BLOCK), "window": L.WINDOW,
        "channels": lay.channels, "param_bytes": L.PARAM_BYTES,
        "params": {str(o): {"name": n, "role": r} for o, (n, r) in lay.params.items()},
        "weight_bytes": lay.weight_bytes, "weight_seed": weight_seed,
        "weights_sha256": hashlib.sha256(weights.tobytes()).hexdigest(),
        "phases": [{"phase": p.phase, "m": p.m, "n": p.n, "k": p.k, "mma": p.mma,
                    "M": 16 * p.m, "N": 8 * p.n, "K": 32 * p.k,
                    "b_offset": p.b_offset if p.b_offset >= 0 else None, "b_slab": p.b_slab,
                    "bias_offset": p.bias_offset} for p in lay.phases.values()],
        "regions": [{"offset": r.offset, "size": r.size, "kind": r.kind, "name": r.name}
                    for r in lay.regions],
    }
    if extents:
        ex, ey = extents
        meta.update(extents=[ex, ey], input_seed=input_seed)
        oext = default_out_extents(layer, extents)
        write_launch(tmp / "launch", layer_launch_spec(layer, extents, oext),
                     layer_arrays(layer, extents, weights, input_seed, oext))
        (tmp / "launch" / "kernel.ptx").write_text(ptx)
    (tmp / f"{layer}.json").write_text(json.dumps(meta, indent=2) + "\n")


def layer_launch(layer: str, module: Path, frame: tuple[int, int], out: str | Path,
                 input_seed: int = INPUT_SEED, weight_seed: int = WEIGHT_SEED) -> None:
    """The launch directory of one synthetic layer over a frame of `frame` pixels (the layer's
    extents are those it has in the whole network's frame, `rr.synth.network`), with `module` (the
    layer's PTX as extracted from the corpus) as its kernel and seeded random inputs in place of
    the layers before it. Written whole or not at all."""
    from rr.corpus.sample import sample_launch
    from rr.run.launch import check_module, write_launch
    from rr.synth.engine import LAYERS

    if layer not in LAYERS:
        raise NoLaunch(f"no launch for layer {layer!r}: rr makes launches only for the synthetic engine's layers; "
                       "give a corpus of your own its launches with corpus.launches in the config (rr launch "
                       "--launches): a capture of your program (`rr capture -o DIR -- PROGRAM`) or a directory of "
                       "<layer>/launch.json (`rr launch-template`)")
    with atomic_dir(out) as tmp:
        if layer == "sample":
            sample_launch(tmp, module, input_seed)
        else:
            spec = layer_spec(layer)
            extents = level_extents(frame, spec.level)
            oext = None
            if spec.final:
                oext = tuple(frame)
            elif spec.kind == "dec":
                oext = level_extents(frame, spec.level - 1)
            # the module is named by what it holds: the layer's PTX, or its cubin (rr launch --module)
            write_launch(tmp, layer_launch_spec(layer, extents, oext, module=f"kernel.{check_module(module)}"),
                         layer_arrays(layer, extents, weight_image(weight_seed, layer), input_seed, oext), module)
        (tmp / "frame.json").write_text(json.dumps({"layer": layer, "frame": list(frame),
                                                    "input_seed": input_seed}) + "\n")
