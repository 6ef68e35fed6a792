"""The synthetic engine binary: the default corpus. It bundles its layers' PTX modules the way a
real engine DLL does — one as plain NUL-terminated text after an executable-like header, others
in fatbin containers, LZ4- and Zstd-compressed — so `rr extract` is exercised for real.

Layers: enc2 (the reference document's kernel, `rr.synth.enc2`) and the bundled sample phase.
"""

from __future__ import annotations

from rr.corpus.sample import engine_image, sample_ptx
from rr.synth.enc2 import build_enc2

LAYERS = ("enc2", "sample")


def engine_binary(target: str = "sm_90") -> bytes:
    arch = int(target.removeprefix("sm_").rstrip("a"))
    enc2 = build_enc2(target).encode("utf-8") + b"\0"
    sample = sample_ptx().encode("utf-8") + b"\0"
    return engine_image(b"rr synthetic engine 1.0", sample, [enc2], [sample], arch)
