"""Writes the CUDA source of a large engine-style kernel for the front-end benchmarks.

The source is fully unrolled by construction (every statement is written out), so nvcc emits one
long NVVM entry: a chain of e4m3 `mma.sync` phases whose operands are loaded from a weight image,
separated by epilogues that requantise through f16 (clamped cubic, packs, butterfly row sums) —
the mix of the engine's Swin kernels, at tens of thousands of PTX statements.
"""

from __future__ import annotations

import argparse
from pathlib import Path

HEADER = r"""
#include <cstdint>
#include <cuda_fp16.h>

__device__ __forceinline__ void mma_e4m3(uint32_t& d0, uint32_t& d1, uint32_t c0, uint32_t c1,
                                         const uint4& a, const uint2& b) {
  asm volatile("mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16\n\t"
               "{%0, %1},\n\t{%2, %3, %4, %5},\n\t{%6, %7}, {%8, %9};"
               : "=r"(d0), "=r"(d1)
               : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b.x), "r"(b.y), "r"(c0), "r"(c1));
}

__device__ __forceinline__ uint32_t cubic_pack(uint32_t d) {
  __half2 x = *reinterpret_cast<__half2*>(&d);
  __half2 y = __hmin2(__hmax2(x, __float2half2_rn(-2.f)), __float2half2_rn(2.f));
  __half2 r = __hmul2(x, __hfma2(y, __hfma2(__habs2(y), __float2half2_rn(-0.0810546875f),
                                           __float2half2_rn(0.412109375f)), __float2half2_rn(0.5f)));
  r = __hadd2(r, __shfl_xor_sync(0xffffffffu, r, 1));
  return *reinterpret_cast<uint32_t*>(&r);
}
"""


def source(phases: int, n_tiles: int, k_steps: int) -> str:
    lines = [HEADER, 'extern "C" __global__ void big_kernel(const uint4* __restrict__ w, uint2* __restrict__ out,',
             '                                  unsigned long long phase_mask) {',
             "  const int lane = threadIdx.x & 31;",
             "  const uint2* wb = reinterpret_cast<const uint2*>(w);"]
    # phase 0's A comes from the weight image; later phases from the previous epilogue's packs
    lines += [f"  uint4 a{k} = w[{k} * 32 + lane];" for k in range(k_steps)]
    off = k_steps * 32
    for p in range(phases):
        # Each phase is its own basic block (taken when its mask bit is set), which keeps
        # nvcc's optimiser linear in the kernel's length.
        lines.append(f"  if (phase_mask >> {p % 64} & 1) {{  // phase {p + 1}")
        for n in range(n_tiles):
            lines.append(f"  uint32_t d{p}_{n}_0 = wb[{off} + lane].x, d{p}_{n}_1 = wb[{off} + lane].y;")
            off += 32
        for k in range(k_steps):
            for n in range(n_tiles):
                lines.append(f"  {{ uint2 b = wb[{off} + lane]; mma_e4m3(d{p}_{n}_0, d{p}_{n}_1, d{p}_{n}_0, d{p}_{n}_1, a{k}, b); }}")
                off += 32
        lines.append(f"  // epilogue {p + 1}")
        for k in range(k_steps):
            q = [f"cubic_pack(d{p}_{(4 * k + j) % n_tiles}_{j % 2})" for j in range(4)]
            lines.append(f"  a{k} = make_uint4({', '.join(q)});")
        lines.append("  }")
    lines.append("  out[lane] = make_uint2(a0.x ^ a1.y, a0.z ^ a1.w);")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--phases", type=int, default=40)
    p.add_argument("--n-tiles", type=int, default=12)
    p.add_argument("--k-steps", type=int, default=3)
    a = p.parse_args()
    Path(a.output).write_text(source(a.phases, a.n_tiles, a.k_steps))


if __name__ == "__main__":
    main()
