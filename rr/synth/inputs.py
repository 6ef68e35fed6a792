"""Deterministic weights and inputs for the synthetic enc2, and its files on disk.

`weight_image(seed)` fills every region of `layout.weight_regions()`: e4m3 tiles with a spread of
gain/√fan-in (so activations stay near unit scale through every GEMM), f16 RMS gains near √96 (the
norm has no 1/N), small f16 biases and tables. `frame_inputs(ex, ey, seed)` gives the input image
(e4m3, fragment order) and the RGBA16F texture. The same seed always gives the same bytes.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from rr import numerics as nx
from rr.io import atomic_dir
from rr.validation import cut
from rr.synth import layout as L

WEIGHT_SEED = 2
INPUT_SEED = 7


def weight_image(seed: int = WEIGHT_SEED) -> np.ndarray:
    rng = np.random.default_rng(seed)
    w = np.zeros(L.WEIGHT_BYTES, dtype=np.uint8)
    for r in L.weight_regions():
        if r.kind == "e4m3":
            vals = rng.normal(0.0, r.gain / np.sqrt(r.fan_in), r.size)
            w[r.offset:r.offset + r.size] = nx.to_e4m3(vals.astype(np.float16))
            continue
        n = r.size // 2
        if "gain" in r.name:
            vals = rng.uniform(0.8, 1.2, n) * np.sqrt(96.0)
        elif "score bias" in r.name:
            vals = rng.normal(0.0, 1.0, n)
        else:
            vals = rng.normal(0.0, 0.1, n)
        w[r.offset:r.offset + r.size] = vals.astype(np.float16).view(np.uint8)
    return w


def frame_inputs(ex: int, ey: int, seed: int = INPUT_SEED) -> tuple[np.ndarray, np.ndarray]:
    """(input image (ey, ex, 96) e4m3 bytes, texture (ey, ex, 4) float16)."""
    rng = np.random.default_rng(seed)
    image = nx.to_e4m3(rng.normal(0.0, 1.0, (ey, ex, 96)).astype(np.float16))
    texture = rng.uniform(0.0, 1.0, (ey, ex, 4)).astype(np.float16)
    return image, texture


class NoLaunch(ValueError):
    """A layer the synthetic engine has no launch for (a layer of a real corpus)."""


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


def launch_for(ex: int, ey: int, module: str = "kernel.ptx"):
    """The launch description of enc2 over ceil(ex/8)×ceil(ey/8) windows, block (32, 1, 4)."""
    from rr.run.launch import Buffer, Field, Launch

    f = [Field("scalar", 0, "uint32", (ex, ey)), Field("buffer", 8, buffer="input"),
         Field("buffer", 40, buffer="weights"), Field("buffer", 48, buffer="arena"),
         Field("buffer", 56, buffer="half_out"), Field("scalar", 80, "uint16", (0, 0)),
         Field("texture", 88, buffer="texture"), Field("surface", 112, buffer="surface0"),
         Field("surface", 120, buffer="surface1"), Field("surface", 128, buffer="surface2")]
    b = {"input": Buffer("input", "input.npy", "in", dtype="e4m3"),
         "weights": Buffer("weights", "weights.npy", "in"),
         "arena": Buffer("arena", "arena.npy", "out", dtype="e4m3"),
         "half_out": Buffer("half_out", "half_out.npy", "out", dtype="e4m3"),
         "texture": Buffer("texture", "texture.npy", "in", format="rgba16f", dtype="float16"),
         "surface0": Buffer("surface0", "surface0.npy", "out", format="rgba16f", dtype="float16"),
         "surface1": Buffer("surface1", "surface1.npy", "out", format="rgba16f", dtype="float16"),
         "surface2": Buffer("surface2", "surface2.npy", "out", format="rgba16f", dtype="float16")}
    return Launch(entry=L.ENTRY, module=module, grid=(-(-ex // 8), -(-ey // 8), 1), block=L.BLOCK,
                  fields=tuple(f), buffers=b, layout="block", params_size=L.PARAM_BYTES)


def launch_arrays(ex: int, ey: int, weights: np.ndarray, seed: int = INPUT_SEED) -> dict[str, np.ndarray]:
    image, texture = frame_inputs(ex, ey, seed)
    hx, hy = ex >> 1, ey >> 1
    return {"input": image, "weights": weights, "texture": texture,
            "arena": np.zeros((3, ey, ex, 32), np.uint8), "half_out": np.zeros((4, hy, hx, 32), np.uint8),
            "surface0": np.zeros((ey, ex, 4), np.float16), "surface1": np.zeros((ey, ex, 4), np.float16),
            "surface2": np.zeros((hy, hx, 4), np.float16)}


def write_enc2(out: str | Path, extents: tuple[int, int] | None = None, target: str = "sm_90",
               weight_seed: int = WEIGHT_SEED, input_seed: int = INPUT_SEED) -> Path:
    """`rr synth enc2`: DIR/enc2.ptx, enc2.weights.bin, enc2.json and, with extents, DIR/launch/.
    Written into a temporary directory and renamed, so DIR appears whole."""
    with atomic_dir(out) as tmp:
        _write_enc2(tmp, extents, target, weight_seed, input_seed)
    return Path(out)


def _write_enc2(tmp: Path, extents, target: str, weight_seed: int, input_seed: int) -> None:
    from rr.run.launch import write_launch
    from rr.synth.enc2 import build_enc2

    ptx = build_enc2(target)
    weights = weight_image(weight_seed)
    (tmp / "enc2.ptx").write_text(ptx)
    (tmp / "enc2.weights.bin").write_bytes(weights.tobytes())
    meta = {
        "entry": L.ENTRY, "target": target, "block": list(L.BLOCK), "window": L.WINDOW,
        "channels": L.CHANNELS, "param_bytes": L.PARAM_BYTES,
        "params": {str(o): {"name": n, "role": r} for o, (n, r) in L.PARAMS.items()},
        "weight_bytes": L.WEIGHT_BYTES, "weight_seed": weight_seed,
        "weights_sha256": hashlib.sha256(weights.tobytes()).hexdigest(),
        "phases": [{"phase": p.phase, "m": p.m, "n": p.n, "k": p.k, "mma": p.mma,
                    "M": 16 * p.m, "N": 8 * p.n, "K": 32 * p.k,
                    "b_offset": p.b_offset if p.b_offset >= 0 else None, "b_slab": p.b_slab,
                    "bias_offset": p.bias_offset} for p in L.PHASES.values()],
        "regions": [{"offset": r.offset, "size": r.size, "kind": r.kind, "name": r.name}
                    for r in L.weight_regions()],
    }
    if extents:
        ex, ey = extents
        meta.update(extents=[ex, ey], input_seed=input_seed)
        write_launch(tmp / "launch", launch_for(ex, ey), launch_arrays(ex, ey, weights, input_seed))
        (tmp / "launch" / "kernel.ptx").write_text(ptx)
    (tmp / "enc2.json").write_text(json.dumps(meta, indent=2) + "\n")


def layer_launch(layer: str, module: Path, frame: tuple[int, int], out: str | Path,
                 input_seed: int = INPUT_SEED, weight_seed: int = WEIGHT_SEED) -> None:
    """The launch directory of one synthetic layer over a frame of `frame` pixels, with `module`
    (the layer's PTX as extracted from the corpus) as its kernel. Written whole or not at all."""
    from rr.corpus.sample import sample_launch
    from rr.run.launch import write_launch

    from rr.synth.engine import LAYERS

    if layer not in LAYERS:
        raise NoLaunch(f"no launch for layer {layer!r}: the synthetic engine has {' and '.join(LAYERS)}")
    with atomic_dir(out) as tmp:
        if layer == "enc2":
            ex, ey = max(frame[0] // TOKEN, 2), max(frame[1] // TOKEN, 2)
            write_launch(tmp, launch_for(ex, ey), launch_arrays(ex, ey, weight_image(weight_seed), input_seed),
                         module)
        else:
            sample_launch(tmp, module, input_seed)
        (tmp / "frame.json").write_text(json.dumps({"layer": layer, "frame": list(frame),
                                                    "input_seed": input_seed}) + "\n")
