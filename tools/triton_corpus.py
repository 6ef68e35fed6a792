"""The Triton kernels of rr's generator corpus (issue 38), compiled to PTX without a GPU.

    python tools/triton_corpus.py -o tests/data/triton        # the checked-in fixtures
    python tools/triton_corpus.py -o DIR --only gemm_f16_64x64x32

Triton's compiler targets a GPU it is told of (`GPUTarget("cuda", 89, 32)`): no device is needed
to make PTX. `cuda:89` gives `mma.sync` (Triton's MMAv2: `cp.async` → shared → `ldmatrix` → `mma`,
fp8 natively as `m16n8k32.e4m3`); `cuda:90` with `DISABLE_MMA_V3=1` gives what the H200 ran in
issue 38 — MMAv2 on Hopper, fp8 widened to f16 and multiplied by `m16n8k16.f32.f16.f16.f32`.
Every pointer is declared 16-byte aligned (`tt.divisibility`, what Triton's launcher specialises
an aligned tensor to), which is what makes its loads vectorised `cp.async`; line information is
left out (`TRITON_DISABLE_LINE_INFO`), so the PTX names no path of this machine.

`KERNELS` is the corpus: each entry names its kernel, target, constexprs and launch options. The
tests (tests/test_generators_shared.py) read the same entries to derive, from the kernels' own
pointer arithmetic below, where every operand element must come from; `corpus.json` in the output
directory records them, with the dynamic shared memory each launches with (`shared_bytes`) and
the Triton version that made the files.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

os.environ.setdefault("TRITON_DISABLE_LINE_INFO", "1")
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # Triton 3.9 warns without it; 1 is its default

import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def gemm(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
         SA: tl.constexpr, SB: tl.constexpr, SC: tl.constexpr):
    """C[BM×BN tile] = A[rows, :K] · B[:K, cols]: A row-major with row stride SA elements, B
    row-major (K rows) with row stride SB, the K loop advancing A by BK columns and B by BK rows."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a = a_ptr + rm[:, None] * SA + rk[None, :]
    b = b_ptr + rk[:, None] * SB + rn[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for _ in range(0, K, BK):
        acc += tl.dot(tl.load(a), tl.load(b))
        a += BK
        b += BK * SB
    tl.store(c_ptr + rm[:, None] * SC + rn[None, :], acc.to(tl.float16))


@triton.jit
def window_attention(q_ptr, k_ptr, v_ptr, o_ptr, scale, T: tl.constexpr, D: tl.constexpr):
    """One window of T tokens with head dimension D per program: O = softmax(Q·Kᵀ·scale)·V, each
    of Q, K, V, O a row-major T×D block at w·T·D elements."""
    w = tl.program_id(0)
    t = tl.arange(0, T)
    d = tl.arange(0, D)
    base = w * T * D
    q = tl.load(q_ptr + base + t[:, None] * D + d[None, :])
    k = tl.load(k_ptr + base + t[None, :] * D + d[:, None])
    v = tl.load(v_ptr + base + t[:, None] * D + d[None, :])
    s = tl.dot(q, k) * scale
    s = s - tl.max(s, axis=1)[:, None]
    p = tl.exp(s)
    p = p / tl.sum(p, axis=1)[:, None]
    o = tl.dot(p.to(q.dtype), v)
    tl.store(o_ptr + base + t[:, None] * D + d[None, :], o.to(tl.float16))


FUNCTIONS = {"gemm": gemm, "window_attention": window_attention}


@dataclass(frozen=True)
class Kernel:
    """One file of the corpus: `kernel` compiled with `constexprs` for `cuda:arch`."""

    name: str
    kernel: str  # a key of FUNCTIONS
    dtype: str  # the element type of the inputs (Triton's: fp16, fp8e4nv)
    arch: int
    constexprs: dict
    num_warps: int = 4
    num_stages: int = 3
    mma_v3: bool = True  # False: DISABLE_MMA_V3=1 (MMAv2 on Hopper)
    scalars: dict = field(default_factory=dict)  # the runtime scalar parameters and their Triton types


def _gemm(name: str, dtype: str, arch: int, bm: int, bn: int, bk: int, warps: int, stages: int = 3,
          mma_v3: bool = True) -> Kernel:
    return Kernel(name, "gemm", dtype, arch, {"BM": bm, "BN": bn, "BK": bk, "SA": 1024, "SB": 512, "SC": 512},
                  warps, stages, mma_v3, {"K": "i32"})


KERNELS = [
    _gemm("gemm_f16_64x64x32", "fp16", 89, 64, 64, 32, 4),
    _gemm("gemm_f16_32x64x64", "fp16", 89, 32, 64, 64, 2),
    _gemm("gemm_fp8_64x64x64", "fp8e4nv", 89, 64, 64, 64, 4),
    _gemm("gemm_fp8_h200_64x64x32", "fp8e4nv", 90, 64, 64, 32, 4, mma_v3=False),
    Kernel("attention_f16_64x32", "window_attention", "fp16", 89, {"T": 64, "D": 32}, 4, 1, True, {"scale": "fp32"}),
    Kernel("attention_fp8_64x32", "window_attention", "fp8e4nv", 89, {"T": 64, "D": 32}, 4, 1, True,
           {"scale": "fp32"}),
]


def compile_ptx(k: Kernel) -> tuple[str, int]:
    """The PTX Triton makes of `k` (no GPU), and the bytes of dynamic shared memory it launches with."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fn = FUNCTIONS[k.kernel]
    signature, attrs = {}, {}
    for i, arg in enumerate(fn.arg_names):
        if arg in k.constexprs:
            signature[arg] = "constexpr"
        elif arg in k.scalars:
            signature[arg] = k.scalars[arg]
        else:
            signature[arg] = "*" + (k.dtype if arg != ("c_ptr" if k.kernel == "gemm" else "o_ptr") else "fp16")
            attrs[(i,)] = [["tt.divisibility", 16]]
        if signature[arg] == "i32":
            attrs[(i,)] = [["tt.divisibility", 16]]
    saved = os.environ.get("DISABLE_MMA_V3")
    if not k.mma_v3:
        os.environ["DISABLE_MMA_V3"] = "1"
    try:
        compiled = triton.compile(ASTSource(fn=fn, signature=signature, constexprs=k.constexprs, attrs=attrs),
                                  target=GPUTarget("cuda", k.arch, 32),
                                  options={"num_warps": k.num_warps, "num_stages": k.num_stages})
    finally:
        if saved is None:
            os.environ.pop("DISABLE_MMA_V3", None)
        else:
            os.environ["DISABLE_MMA_V3"] = saved
    return compiled.asm["ptx"], compiled.metadata.shared


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--out", type=Path, required=True, help="directory for NAME.ptx and corpus.json")
    ap.add_argument("--only", action="append", help="make only this kernel (repeatable)")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    made = []
    for k in KERNELS:
        if args.only and k.name not in args.only:
            continue
        ptx, shared = compile_ptx(k)
        (args.out / f"{k.name}.ptx").write_text(ptx)
        made.append({**asdict(k), "shared_bytes": shared})
        print(f"{k.name}.ptx", file=sys.stderr)
    (args.out / "corpus.json").write_text(json.dumps({"triton": triton.__version__, "kernels": made}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
