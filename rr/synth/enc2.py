"""The synthetic enc2: `cuda_dldn_engine_swin_enc2_kernel` as the reference document describes it —
the Swin-layer template of `rr.synth.swin` at 96 channels (docs/engine.md)."""

from __future__ import annotations

from rr.synth.layout import GATHER_TAPS
from rr.synth.swin import build_layer

__all__ = ["GATHER_TAPS", "build_enc2"]


def build_enc2(target: str = "sm_90") -> str:
    """The whole module text of the synthetic enc2."""
    return build_layer("enc2", target)
