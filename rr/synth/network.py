"""The whole synthetic network over a frame, as plain data: which launches run in which order and
which buffers flow from one to the next, the host-made inputs, and the numpy model of the frame.

    layout = network_layout((W, H))            # NetworkLayout: layers in order, buffers by name
    arrays = network_inputs(layout)            # every buffer: host inputs filled, outputs zeroed
    after = network_model(arrays, layout)      # every buffer after the frame (the model of it)
    after["frame"]                             # the final W×H RGBA16F frame

Buffers are named `<layer>.<parameter>` by the layer that writes them (`enc2.arena`,
`dec1.expanded`, `enc0.surface2`) or, for what the host makes, `noisy`, `enc0.input`,
`enc0.texture`, `<layer>.weights`; the final frame is `frame`. A layer's `launch` is an
`rr.run.launch.Launch` whose buffers carry those names, so binding a buffer in two launches is
passing one device pointer (or one CUDA array, for a surface that the next layer samples as a
texture). The flow:

    noisy ─embed→ enc0.input, ─4×4 mean→ enc0.texture
    enc_l.half_out → enc_{l+1}.input (enc4's → dec5)      enc_l.surface2 → enc_{l+1}.texture (enc4's → dec5)
    enc_l.arena → dec_l.skip                               dec_l.expanded → dec_{l-1}.input
    dec_l.surface2 → dec_{l-1}.texture (dec1's → dec0's coarse texture at +96)
    noisy → dec0 (+88); dec0 writes `frame` (+112)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rr.numerics import fp8
from rr.numerics.mma import MmaModel
from rr.synth import model
from rr.synth.family import LAYERS, layer_spec, level_extents
from rr.synth.inputs import INPUT_SEED, WEIGHT_SEED, buffer_shapes, layer_launch_spec, model_inputs, weight_image
from rr.synth.layout import layer_layout

MIN_FRAME = 8  # pixels: enc0's tokens are 4 wide, and the coarsest level keeps one token
FINAL = "frame"


@dataclass(frozen=True)
class FrameBuffer:
    name: str
    shape: tuple
    dtype: str  # numpy dtype of the array: uint8 (e4m3 bytes, weights) or float16
    format: str | None  # rgba16f: a (height, width, 4) texture/surface
    element: str | None  # how its bytes compare: e4m3, float16, or None (raw)
    producer: str  # "host" or the layer that writes it
    consumers: tuple  # the layers that read it, in frame order
    role: str  # what it is, from the producer's parameter block


@dataclass(frozen=True)
class LayerLaunch:
    layer: str
    level: int  # tokens are 2**level pixels
    extents: tuple  # (ex, ey) tokens
    out_extents: tuple | None  # decoders: the level below's extents; dec0: the frame (W, H)
    launch: object  # rr.run.launch.Launch, buffers named as in NetworkLayout.buffers, module "<layer>.ptx"
    bindings: dict  # parameter name -> buffer name
    reads: tuple  # buffer names
    writes: tuple


@dataclass(frozen=True)
class NetworkLayout:
    frame: tuple  # (W, H) pixels
    layers: tuple  # LayerLaunch, in the order they run
    buffers: dict  # name -> FrameBuffer, host inputs first, then in the order they are written
    final: str = FINAL

    def layer(self, name: str) -> LayerLaunch:
        return next(lyr for lyr in self.layers if lyr.layer == name)


def _bindings(name: str) -> dict[str, str]:
    """Parameter name -> buffer name for one layer of the frame."""
    spec = layer_spec(name)
    lay = layer_layout(name)
    order = [s.name for s in LAYERS]
    prev = order[spec.index - 1] if spec.index else None
    b = {}
    for _, (param, _role) in sorted(lay.params.items()):
        if param in ("extents", "out_extents", "frame_extents", "origins"):
            continue
        if param == "weights" or (param in ("input", "texture") and prev is None):
            b[param] = f"{name}.{param}"
        elif param == "input":
            b[param] = f"{prev}.{'half_out' if layer_spec(prev).kind == 'enc' else 'expanded'}"
        elif param == "texture":
            b[param] = f"{prev}.surface2"
        elif param == "skip":
            b[param] = f"{spec.skip}.arena"
        elif param == "noisy":
            b[param] = "noisy"
        elif param == "frame":
            b[param] = FINAL
        else:  # what the layer writes
            b[param] = f"{name}.{param}"
    return b


def network_layout(frame: tuple[int, int]) -> NetworkLayout:
    """Every layer's launch over a W×H frame and the buffers between them (module docstring)."""
    W, H = frame
    if W < MIN_FRAME or H < MIN_FRAME:
        raise ValueError(f"frame {W}x{H}: the network needs at least {MIN_FRAME}x{MIN_FRAME} pixels")
    layers, buffers = [], {}
    launches = []
    readers, writers = {}, {}  # buffer -> (shape, dtype) as a reader and as its writer see it
    for spec in LAYERS:
        extents = level_extents(frame, spec.level)
        out = (W, H) if spec.final else level_extents(frame, spec.level - 1) if spec.kind == "dec" else None
        b = _bindings(spec.name)
        for param, view in buffer_shapes(spec.name, extents, out).items():
            (readers if param in ("input", "skip", "texture", "noisy", "weights") else writers)[b[param]] = view
        launches.append((spec, extents, out, b))
    shapes = {**writers, **readers}  # a buffer another layer reads is sized as that layer reads it
    roles = {}
    for spec, extents, out, b in launches:
        lay = layer_layout(spec.name)
        launch = layer_launch_spec(spec.name, extents, out, module=f"{spec.name}.ptx", names=b)
        reads = tuple(buf.name for buf in launch.buffers.values() if buf.role != "out")
        writes = tuple(buf.name for buf in launch.buffers.values() if buf.role == "out")
        layers.append(LayerLaunch(spec.name, spec.level, extents, out, launch, b, reads, writes))
        for _, (param, role) in sorted(lay.params.items()):
            if param in b:
                roles.setdefault(b[param], (launch.buffers[b[param]], role))
    producers = {w: lyr.layer for lyr in layers for w in lyr.writes}
    order = [n for n in roles if n not in producers] + [n for lyr in layers for n in lyr.writes]
    for name in order:
        buf, role = roles[name]
        shape, dtype = shapes[name]
        buffers[name] = FrameBuffer(
            name, tuple(shape), np.dtype(dtype).name, buf.format, buf.dtype, producers.get(name, "host"),
            tuple(lyr.layer for lyr in layers if name in lyr.reads), role)
    return NetworkLayout(tuple(frame), tuple(layers), buffers)


# -- what the host makes --------------------------------------------------------------------------

def noisy_frame(frame: tuple[int, int], seed: int = INPUT_SEED) -> np.ndarray:
    """A seeded noisy RGBA16F frame (H, W, 4): smooth colour ramps plus N(0, 0.1) noise in [0, 1]."""
    W, H = frame
    rng = np.random.default_rng([seed, 0x6E6F])
    y, x = np.meshgrid(np.linspace(0, 1, H), np.linspace(0, 1, W), indexing="ij")
    clean = np.stack([x, y, 0.5 + 0.5 * np.sin(6.0 * (x + y)), np.ones_like(x)], -1)
    return np.clip(clean + rng.normal(0.0, 0.1, clean.shape), 0.0, 1.0).astype(np.float16)


def _patches(noisy: np.ndarray, extents: tuple[int, int]) -> np.ndarray:
    """(ey, ex, 16, 4) f32: each enc0 token's 4×4 pixels, row-major."""
    ex, ey = extents
    p = noisy[:4 * ey, :4 * ex].astype(np.float32).reshape(ey, 4, ex, 4, 4)
    return p.transpose(0, 2, 1, 3, 4).reshape(ey, ex, 16, 4)


def embed(noisy: np.ndarray, extents: tuple[int, int]) -> np.ndarray:
    """enc0's input from the noisy frame: channel p (0…15) is pixel p's luma (R + 2G + B)/4,
    channel 16 + p its chroma (R − B)/2, of the token's 4×4 pixels (row-major), in e4m3 planes."""
    px = _patches(noisy, extents)
    luma = (px[..., 0] + 2 * px[..., 1] + px[..., 2]) / 4
    chroma = (px[..., 0] - px[..., 2]) / 2
    tokens = fp8.to_e4m3(np.concatenate([luma, chroma], -1).astype(np.float16))  # (ey, ex, 32) channel order
    return model.planes_of(tokens)


def downsample(noisy: np.ndarray, extents: tuple[int, int]) -> np.ndarray:
    """enc0's texture: the mean of each token's 4×4 pixels, RGBA16F at enc0's extents."""
    return _patches(noisy, extents).mean(axis=2).astype(np.float16)


def network_inputs(layout: NetworkLayout, input_seed: int = INPUT_SEED,
                   weight_seed: int = WEIGHT_SEED) -> dict[str, np.ndarray]:
    """Every buffer of the frame: the noisy frame and what the host makes of it, each layer's
    weights, and zeroed outputs."""
    enc0 = layout.layers[0]
    noisy = noisy_frame(layout.frame, input_seed)
    made = {"noisy": noisy, "enc0.input": embed(noisy, enc0.extents),
            "enc0.texture": downsample(noisy, enc0.extents)}
    arrays = {}
    for name, b in layout.buffers.items():
        if name in made:
            arrays[name] = made[name]
        elif name.endswith(".weights"):
            arrays[name] = weight_image(weight_seed, b.consumers[0])
        else:
            arrays[name] = np.zeros(b.shape, b.dtype)
        assert arrays[name].shape == b.shape and arrays[name].dtype == np.dtype(b.dtype), name
    return arrays


# Per pixel, what network_inputs holds beside the frame's buffers (measured at 2048x1024 and
# 3840x2160: 112 and 20-21 bytes): noisy_frame's peak — the x and y ramps, then the clean frame,
# the noise and their sum, four float64 planes each — and, while the buffers are made, the noisy
# frame and enc0's pixels in float32.
NOISY_FRAME_PEAK = 112
BESIDE_BUFFERS = 24


def inputs_bytes(layout: NetworkLayout) -> tuple[int, int]:
    """(the bytes of the frame's buffers, at most what `network_inputs` holds at once making them)."""
    buffers = sum(int(np.prod(b.shape, dtype=np.int64)) * np.dtype(b.dtype).itemsize for b in layout.buffers.values())
    pixels = layout.frame[0] * layout.frame[1]
    return buffers, max(NOISY_FRAME_PEAK * pixels, buffers + BESIDE_BUFFERS * pixels)


def available_memory() -> int | None:
    """The bytes this machine can still give a process without swapping (MemAvailable of
    /proc/meminfo), or None where there is no such figure."""
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def check_memory(layout: NetworkLayout) -> None:
    """ValueError naming the sizes when making the frame's buffers would take more memory than the
    machine has available: refused before anything is allocated, not a MemoryError (or the
    kernel's OOM killer) halfway through."""
    buffers, need = inputs_bytes(layout)
    have = available_memory()
    if have is not None and need > have:
        w, h = layout.frame
        raise ValueError(f"a {w}x{h} frame: its buffers take {buffers / 1e9:.1f} GB, {need / 1e9:.1f} GB of memory "
                         f"while they are made, and this machine has {have / 1e9:.1f} GB available")


# -- the model of a frame --------------------------------------------------------------------------

def layer_buffers(lyr: LayerLaunch, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """One layer's buffers by its parameter names."""
    return {param: arrays[name] for param, name in lyr.bindings.items()}


def place(buffer: np.ndarray, produced: np.ndarray, image: bool) -> np.ndarray:
    """What a kernel that wrote `produced` leaves in `buffer`: a surface at its top left; a global
    buffer from its first byte on (the kernel's linear index with its own row stride: equal to the
    buffer's wherever the level below has two tokens or more, and nothing written where it has
    none)."""
    out = buffer.copy()
    if image:
        out[:produced.shape[0], :produced.shape[1]] = produced
    else:
        out.reshape(-1)[:produced.size] = produced.reshape(-1)
    return out


def network_model(arrays: dict[str, np.ndarray], layout: NetworkLayout, mma: MmaModel | None = None,
                  layers=None) -> dict[str, np.ndarray]:
    """Every buffer after the frame, each layer by `model.forward` in order (only those named in
    `layers`, if given, on the buffers as they are)."""
    after = dict(arrays)
    for lyr in layout.layers:
        if layers is not None and lyr.layer not in layers:
            continue
        produced = model.forward(model_inputs(lyr.layer, layer_buffers(lyr, after), lyr.launch), mma)
        for param, value in produced.items():
            name = lyr.bindings[param]
            after[name] = place(after[name], value, layout.buffers[name].format == "rgba16f")
    return after
