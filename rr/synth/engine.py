"""The synthetic engine binary: the default corpus. It bundles its layers' PTX modules the way a
real engine DLL does — one as plain NUL-terminated text after an executable-like header, others
in fatbin containers, LZ4- and Zstd-compressed — so `rr extract` is exercised for real.

Modules: the eleven Swin layers (`rr.synth.swin`; enc2 is the reference document's kernel), one of
them a module of two entries (dec2 and dec1, as an engine packs the kernels of one stage), one
stored twice (a duplicate copy of enc0, in both containers), and the bundled sample phase.
"""

from __future__ import annotations

from rr.synth.family import NAMES

LAYERS = NAMES + ("sample",)  # the workflow reads this at DAG time: the builders load with the binary
TEXT = "enc2"  # the module stored as plain text
PAIR = ("dec2", "dec1")  # the module of two entries
DUPLICATE = "enc0"  # stored in both containers


def engine_binary(target: str = "sm_90") -> bytes:
    from rr.corpus.sample import engine_image, sample_ptx
    from rr.synth.swin import build_layer, build_module

    arch = int(target.removeprefix("sm_").rstrip("a"))

    def nul(text: str) -> bytes:
        return text.encode("utf-8") + b"\0"

    singles = [n for n in NAMES if n != TEXT and n not in PAIR]
    modules = {n: nul(build_layer(n, target)) for n in singles}
    pair = nul(build_module(list(PAIR), target))
    sample = nul(sample_ptx())
    lz4 = [modules[n] for n in singles[::2]] + [pair]
    zstd = [modules[n] for n in singles[1::2]] + [sample]
    if DUPLICATE in singles[1::2]:
        lz4.append(modules[DUPLICATE])
    else:
        zstd.append(modules[DUPLICATE])
    return engine_image(b"rr synthetic engine 2.0", nul(build_layer(TEXT, target)), lz4, zstd, arch)
