"""Launch directories for the hand-written kernels in tests/ptx, with their numpy truth."""

from __future__ import annotations

import shutil
from pathlib import Path

import ml_dtypes
import numpy as np

from rr.run.launch import Buffer, Field, Launch, write_launch

PTX = Path(__file__).parent / "ptx"


def struct_launch(directory: Path, height: int = 4, scale: float = 2.0, seed: int = 1) -> dict:
    """rr_test_struct: A = 1.0 and B = 0.5 (e4m3) so every D element is 32 * 0.5 = 16.0; the
    surface gets scale * texture. Returns the expected output arrays."""
    rng = np.random.default_rng(seed)
    one, half = (np.array([v], dtype=ml_dtypes.float8_e4m3fn).view(np.uint8)[0] for v in (1.0, 0.5))
    a = np.full((32, 16), one, dtype=np.uint8)
    b = np.full((32, 8), half, dtype=np.uint8)
    tex = rng.uniform(0, 1, size=(height, 32, 4)).astype(np.float16)
    launch = Launch(
        entry="rr_test_struct", module="kernel.ptx", grid=(height, 1, 1), block=(32, 1, 1),
        layout="block", params_size=48,
        fields=(Field("buffer", 0, buffer="a"), Field("buffer", 8, buffer="b"),
                Field("buffer", 16, buffer="d"), Field("texture", 24, buffer="tex"),
                Field("surface", 32, buffer="surf"), Field("scalar", 40, "float32", (scale,))),
        buffers={"a": Buffer("a", "a.npy", "in", dtype="e4m3"), "b": Buffer("b", "b.npy", "in", dtype="e4m3"),
                 "d": Buffer("d", "d.npy", "out", dtype="float16"),
                 "tex": Buffer("tex", "tex.npy", "in", "rgba16f"),
                 "surf": Buffer("surf", "surf.npy", "out", "rgba16f", "float16")},
    )
    arrays = {"a": a, "b": b, "d": np.zeros((32, 4), dtype=np.uint16), "tex": tex,
              "surf": np.zeros((height, 32, 4), dtype=np.float16)}
    write_launch(directory, launch, arrays, PTX / "struct_mma_tex_surf.ptx")
    return {"d": np.full((32, 4), 16.0, dtype=np.float16),
            "surf": (tex.astype(np.float32) * scale).astype(np.float16)}


def single_buffer_launch(directory: Path, kernel: str, entry: str, grid=(1, 1, 1), block=(32, 1, 1),
                         size: int = 4096, scalars: tuple = ()) -> None:
    """A kernel with ordinary parameters: one global buffer, then optional u32 scalars."""
    fields = (Field("buffer", buffer="buf"),) + tuple(Field("scalar", 0, "uint32", (v,)) for v in scalars)
    launch = Launch(entry=entry, module="kernel.ptx", grid=grid, block=block, layout="list",
                    fields=fields, buffers={"buf": Buffer("buf", "buf.npy", "inout")})
    write_launch(directory, launch, {"buf": np.zeros(size, dtype=np.uint8)}, PTX / kernel)


def copy_launch(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst

