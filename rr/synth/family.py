"""The synthetic engine's eleven Swin layers as data: which layer has how many channels, at which
resolution it works, what it reads and what it writes. The generator (`rr.synth.swin`), the
offsets (`rr.synth.layout`), the model (`rr.synth.model`) and the frame (`rr.synth.network`) all
take a `LayerSpec` from here, so one table decides the network.

    enc0 32 → enc1 64 → enc2 96 → enc3 128 → enc4 160 → dec5 192 → dec4 160 → … → dec0 32

A layer's tokens are 2**level pixels wide (enc2, the reference document's kernel, works on
16-pixel tokens: a 3840×2160 frame is 240×135 of them). Encoders merge 2×2 tokens into the next
layer's width at half the extents; decoders expand each token 2×2 into the next layer's width at
the extents of the level below, and read the encoder of their level's plane arena as a skip
input; dec0 writes the final frame.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LayerSpec:
    name: str
    kind: str  # enc | dec
    channels: int  # C: a multiple of 32
    level: int  # tokens are 2**level pixels
    next_channels: int | None  # C' of the merge (enc) or expand (dec) output; None: dec0 writes the frame
    skip: str | None = None  # decoders: the encoder whose arena is the skip input
    token_input: bool = False  # input stored token-major (enc2's, the reference's); else in planes
    token_output: bool = False  # merge output token-major (enc1's, read by enc2); else in planes

    @property
    def entry(self) -> str:
        return f"cuda_dldn_engine_swin_{self.name}_kernel"

    @property
    def slices(self) -> int:
        """k32 slices of a C-wide operand (and planes of its arena)."""
        return self.channels // 32

    @property
    def ntiles(self) -> int:
        """n8 tiles of a C-wide accumulator row (and MLP branches: C/8)."""
        return self.channels // 8

    @property
    def final(self) -> bool:
        """dec0: no expand; its last epilogue writes the final frame."""
        return self.next_channels is None

    @property
    def index(self) -> int:
        return NAMES.index(self.name)


def _family() -> tuple[LayerSpec, ...]:
    enc = [LayerSpec(f"enc{i}", "enc", c, 2 + i, n, token_input=(i == 2), token_output=(i == 1))
           for i, (c, n) in enumerate(((32, 64), (64, 96), (96, 128), (128, 160), (160, 192)))]
    dec = [LayerSpec("dec5", "dec", 192, 7, 160)]
    for i, (c, n) in zip((4, 3, 2, 1, 0), ((160, 128), (128, 96), (96, 64), (64, 32), (32, None))):
        dec.append(LayerSpec(f"dec{i}", "dec", c, 2 + i, n, skip=f"enc{i}"))
    return tuple(enc + dec)


LAYERS = _family()  # in the order a frame runs them
NAMES = tuple(s.name for s in LAYERS)
BY_NAME = {s.name: s for s in LAYERS}


def layer_spec(name: str) -> LayerSpec:
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"no layer {name!r} in the synthetic engine ({', '.join(NAMES)})") from None


def level_extents(frame: tuple[int, int], level: int) -> tuple[int, int]:
    """The extents in tokens of a level over a frame of pixels: each level halves the one below it
    (floor, as a merge's `ex>>1`), never below one token."""
    return max(frame[0] >> level, 1), max(frame[1] >> level, 1)
