"""A small engine-style binary built from the bundled sample PTX, for the quick start and tests.

The bundled module (`rr/data/sample_swin.ptx`, made by nvcc from `tests/cuda/mma_chain.cu` with
M=64, N=32, K=96 — phase 8's geometry) is stored the ways a real engine DLL stores its modules: as
plain NUL-terminated text after an executable-like header, and inside LZ4 and Zstd fatbin
containers, so extraction is exercised for real. The synthetic engine replaces it as the default.
"""

from __future__ import annotations

from importlib import resources

from rr.corpus.fatbin import KIND_ELF, KIND_PTX, write_container

SAMPLE_ENTRY = "cuda_dldn_engine_swin_sample_kernel"


def sample_ptx() -> str:
    return resources.files("rr.data").joinpath("sample_swin.ptx").read_text(encoding="utf-8")


def sample_engine() -> bytes:
    ptx = sample_ptx().encode("utf-8") + b"\0"
    stub = b"MZ\x90\x00" + bytes(60) + b"This program cannot be run in DOS mode.\r\n$\0" + bytes(64)
    return b"".join([
        stub,
        b".rdata\0engine build 1.0\0",
        ptx,
        bytes(13),
        write_container([(KIND_PTX, 90, ptx, "lz4"), (KIND_ELF, 90, b"\x7fELF" + bytes(120), "lz4")]),
        bytes(5),
        write_container([(KIND_PTX, 89, ptx, "zstd")]),
        b"\0trailing resources\0",
    ])
