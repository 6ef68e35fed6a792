"""A PyTorch + Triton program, as a user of rr runs one (benchmarks/own_engine/run.sh): an fp8
GEMM and an f16 window attention, Triton's own kernels (tools/triton_corpus.py's `gemm` and
`window_attention`), and a GEMM of the program's own that accumulates f16 inputs in f16
(`gemm_f16acc`: `mma…f16.f16.f16.f16`, the one kernel of the three f32acc applies to), launched by
Triton on PyTorch tensors from a fixed seed, ITERATIONS times; it prints a digest of the outputs,
so two runs of the same code print the same line.

    DISABLE_MMA_V3=1 TRITON_CACHE_DIR=DIR python benchmarks/own_engine/triton_program.py [ITERATIONS [SCALE]]

SCALE (default 4) sets the problem: the GEMM's M is 256·SCALE, the attention's windows 128·SCALE
(SCALE 1 makes a capture small enough to carry about).

With DISABLE_MMA_V3=1 Triton writes `mma.sync` on Hopper (fp8 widened to f16, m16n8k16) instead
of wgmma; its PTX is in TRITON_CACHE_DIR, which is the corpus rr sweeps.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

os.environ.setdefault("DISABLE_MMA_V3", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from triton_corpus import gemm, window_attention  # noqa: E402


@triton.jit
def gemm_f16acc(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                SA: tl.constexpr, SB: tl.constexpr, SC: tl.constexpr):
    """tools/triton_corpus.py's `gemm` with its accumulator in f16 (out_dtype): what a user trades
    precision for speed with, and what rr's f32acc recipe widens back."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a = a_ptr + rm[:, None] * SA + rk[None, :]
    b = b_ptr + rk[:, None] * SB + rn[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float16)
    for _ in range(0, K, BK):
        acc = tl.dot(tl.load(a), tl.load(b), acc, out_dtype=tl.float16)
        a += BK
        b += BK * SB
    tl.store(c_ptr + rm[:, None] * SC + rn[None, :], acc)

N, K = 512, 1024  # the GEMM: A M×K, B K×N, C M×N (row-major, the strides tools/triton_corpus.py uses)
T, D = 64, 32  # the attention: windows of 64 tokens, head dimension 32


def main() -> int:
    iterations = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    scale = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    M, WINDOWS = 256 * scale, 128 * scale
    g = torch.Generator(device="cuda").manual_seed(7)
    a = (torch.randn(M, K, device="cuda", generator=g) * 0.5).to(torch.float8_e4m3fn)
    b = (torch.randn(K, N, device="cuda", generator=g) * 0.5).to(torch.float8_e4m3fn)
    c = torch.empty(M, N, device="cuda", dtype=torch.float16)
    q, k, v = (torch.randn(WINDOWS * T, D, device="cuda", generator=g, dtype=torch.float16) for _ in range(3))
    o = torch.empty_like(q)
    a16 = (torch.randn(M, K, device="cuda", generator=g) * 0.25).to(torch.float16)
    b16 = (torch.randn(K, N, device="cuda", generator=g) * 0.25).to(torch.float16)
    c16 = torch.empty(M, N, device="cuda", dtype=torch.float16)
    for _ in range(iterations):
        gemm[(M // 64, N // 64)](a, b, c, K, BM=64, BN=64, BK=32, SA=K, SB=N, SC=N, num_warps=4, num_stages=3)
        window_attention[(WINDOWS,)](q, k, v, o, D ** -0.5, T=T, D=D, num_warps=4, num_stages=1)
        gemm_f16acc[(M // 64, N // 64)](a16, b16, c16, K, BM=64, BN=64, BK=32, SA=K, SB=N, SC=N, num_warps=4,
                                        num_stages=3)
    torch.cuda.synchronize()
    digest = hashlib.sha256(b"".join(t.cpu().numpy().tobytes() for t in (c, o, c16))).hexdigest()[:16]
    print(f"triton program: {iterations} iterations, outputs sha256 {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
