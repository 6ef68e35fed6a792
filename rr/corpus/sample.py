"""A small engine-style binary built from the bundled sample PTX, for the quick start and tests.

The bundled module (`rr/data/sample_swin.ptx`, made by nvcc from `tests/cuda/mma_chain.cu` with
M=64, N=32, K=96 — phase 8's geometry) is stored the ways a real engine DLL stores its modules: as
plain NUL-terminated text after an executable-like header, and inside LZ4 and Zstd fatbin
containers, so extraction is exercised for real. The synthetic engine replaces it as the default.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import ml_dtypes
import numpy as np

from rr.corpus.fatbin import KIND_ELF, KIND_PTX, write_container

SAMPLE_ENTRY = "cuda_dldn_engine_swin_sample_kernel"


def sample_ptx() -> str:
    return resources.files("rr.data").joinpath("sample_swin.ptx").read_text(encoding="utf-8")


def engine_image(label: bytes, text_module: bytes, lz4_modules: list[bytes], zstd_modules: list[bytes],
                 arch: int = 90) -> bytes:
    """An engine-DLL-like binary: an executable header, one PTX module as NUL-terminated text,
    then a fatbin of LZ4-compressed PTX (and an ELF stub) and one of Zstd-compressed PTX."""
    stub = b"MZ\x90\x00" + bytes(60) + b"This program cannot be run in DOS mode.\r\n$\0" + bytes(64)
    lz4 = [(KIND_PTX, arch, m, "lz4") for m in lz4_modules] + [(KIND_ELF, arch, b"\x7fELF" + bytes(120), "lz4")]
    zstd = [(KIND_PTX, arch - 1 if arch > 89 else arch, m, "zstd") for m in zstd_modules]
    return b"".join([stub, b".rdata\0" + label + b"\0", text_module, bytes(13), write_container(lz4), bytes(5),
                     write_container(zstd), b"\0trailing resources\0"])


def sample_engine() -> bytes:
    ptx = sample_ptx().encode("utf-8") + b"\0"
    return engine_image(b"engine build 1.0", ptx, [ptx], [ptx])


def sample_launch(directory: str | Path, module: str | Path, seed: int = 3) -> None:
    """A launch directory for the sample kernel (or a splice of it): random finite e4m3 A and B
    fragments, a random f16x2 bias, one warp, the 16 output tiles; whole or not at all."""
    from rr.io import atomic_dir
    from rr.run.launch import Buffer, Field, Launch, check_module, write_launch

    rng = np.random.default_rng(seed)

    def e4m3(n):
        return rng.uniform(-2, 2, n).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)

    m, n, k = 4, 4, 3
    arrays = {"a": e4m3(m * k * 32 * 16), "b": e4m3(n * k * 32 * 8),
              "bias": rng.uniform(-1, 1, n * 4 * 2).astype(np.float16).view(np.uint32).copy(),
              "out": np.zeros((m * n * 32, 2), dtype=np.uint32)}
    launch = Launch(entry=SAMPLE_ENTRY, module=f"kernel.{check_module(module)}", grid=(1, 1, 1), block=(32, 1, 1), layout="list",
                    fields=tuple(Field("buffer", buffer=b) for b in ("a", "b", "bias", "out")),
                    buffers={"a": Buffer("a", "a.npy", "in", dtype="e4m3"),
                             "b": Buffer("b", "b.npy", "in", dtype="e4m3"),
                             "bias": Buffer("bias", "bias.npy", "in", dtype="float16"),
                             "out": Buffer("out", "out.npy", "out", dtype="float16")})
    with atomic_dir(directory, inputs=(module,)) as tmp:
        write_launch(tmp, launch, arrays, module)
