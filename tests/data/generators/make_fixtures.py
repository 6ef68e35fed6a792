"""Makes the generator-built fixtures of tests/test_generators_forms.py: PTX that Triton's compiler
writes for sm_90 without a GPU (Triton 3.9.0, `pip install triton`; no torch needed).

    python tests/data/generators/make_fixtures.py

`triton_fp8_gemm.ptx`: a K-looped fp8 (e4m3) GEMM, one warp, 32×32×64 tiles, f32 accumulators:
Triton widens the e4m3 operands to f16 (`cvt.rn.f16x2.e4m3x2`) and multiplies them with
`mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32`, seeding each of the eight accumulator chains
with zero just before its first mma — the kernel whose runs of mma are no GEMM one by one.
"""

from __future__ import annotations

import os
from pathlib import Path

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

HERE = Path(__file__).resolve().parent


@triton.jit
def gemm(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a = a_ptr + rm[:, None] * K + rk[None, :]
    b = b_ptr + rk[:, None] * N + rn[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        acc += tl.dot(tl.load(a), tl.load(b))
        a += BK
        b += BK * N
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16))


def compile_gemm(dtype: str, tiles: tuple, warps: int, arch: int = 90) -> str:
    bm, bn, bk = tiles
    signature = {"a_ptr": f"*{dtype}", "b_ptr": f"*{dtype}", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32",
                 "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"}
    src = ASTSource(gemm, signature, constexprs={"BM": bm, "BN": bn, "BK": bk})
    kernel = triton.compile(src, target=GPUTarget("cuda", arch, 32), options={"num_warps": warps, "num_stages": 3})
    return kernel.asm["ptx"]


if __name__ == "__main__":
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    (HERE / "triton_fp8_gemm.ptx").write_text(compile_gemm("fp8e4nv", (32, 32, 64), 1))
