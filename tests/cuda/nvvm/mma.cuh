// The engine's fp8 mma as inline asm (one m16n8k32 e4m3 tile, A quad x B pair), in the three forms
// the suite's kernels use, and the ways a kernel spells its lane. A fragment is a uint4 per lane,
// a B fragment a uint2, an f16 accumulator a uint2 of two f16x2 words.
#pragma once
#include <cstdint>

// d = a.b + c with f16 accumulate: D and C are separate registers in the PTX
__device__ __forceinline__ uint2 mma(uint4 a, uint2 b, uint2 c) {
  uint2 d;
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16\n\t"
      "{%0, %1},\n\t"
      "{%2, %3, %4, %5},\n\t"
      "{%6, %7}, {%8, %9};"
      : "=r"(d.x), "=r"(d.y)
      : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b.x), "r"(b.y), "r"(c.x), "r"(c.y));
  return d;
}

// acc += a.b in place: "+r" ties D to C, so NVVM writes the same registers in both positions
__device__ __forceinline__ void mma_acc(uint2& acc, uint4 a, uint2 b) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16\n\t"
      "{%0, %1},\n\t"
      "{%2, %3, %4, %5},\n\t"
      "{%6, %7}, {%0, %1};"
      : "+r"(acc.x), "+r"(acc.y)
      : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b.x), "r"(b.y));
}

// d = a.b + c with f32 accumulate (four f32 registers)
__device__ __forceinline__ float4 mma_f32(uint4 a, uint2 b, float4 c) {
  float4 d;
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32\n\t"
      "{%0, %1, %2, %3},\n\t"
      "{%4, %5, %6, %7},\n\t"
      "{%8, %9}, {%10, %11, %12, %13};"
      : "=f"(d.x), "=f"(d.y), "=f"(d.z), "=f"(d.w)
      : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b.x), "r"(b.y), "f"(c.x), "f"(c.y), "f"(c.z), "f"(c.w));
  return d;
}

// the lane as the hardware names it
__device__ __forceinline__ uint32_t laneid() {
  uint32_t l;
  asm("mov.u32 %0, %%laneid;" : "=r"(l));
  return l;
}

// an f16x2 pair of D words requantised to four e4m3 bytes (the engine's pack between phases)
__device__ __forceinline__ uint32_t pack_e4m3(uint32_t lo, uint32_t hi) {
  uint16_t l, h;
  asm("cvt.rn.satfinite.e4m3x2.f16x2 %0, %1;" : "=h"(l) : "r"(lo));
  asm("cvt.rn.satfinite.e4m3x2.f16x2 %0, %1;" : "=h"(h) : "r"(hi));
  return uint32_t(l) | (uint32_t(h) << 16);
}

// the transpose of an 8x8 f16 tile held one f16x2 word per lane
__device__ __forceinline__ uint32_t transpose(uint32_t x) {
  uint32_t y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(y) : "r"(x));
  return y;
}
