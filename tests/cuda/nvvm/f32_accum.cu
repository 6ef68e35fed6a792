// The .f32 accumulate form (mma...f32.e4m3.e4m3.f32: four f32 C and D registers): a K=64 chain
// from a zero seed, then a second phase chained on the first one's D.
//   params: a +0, b +8, out +16
//   phase 1: M=16 N=8 K=64  A a[k*32+lane], B b[k*32+lane] k=0,1, C zero (0f00000000)
//   phase 2: M=16 N=8 K=32  A a[64+lane], B b[64+lane], C = D(1)
#include "mma.cuh"

extern "C" __global__ void nvvm_f32_accum(const uint4* __restrict__ a, const uint2* __restrict__ b,
                                          float4* __restrict__ out) {
  const int lane = threadIdx.x & 31;
  float4* o = out + lane;
  asm volatile("" : "+l"(o));  // the output address before the phases, not between their mma
  uint4 fa[3];
  uint2 fb[3];
#pragma unroll
  for (int t = 0; t < 3; ++t) {
    fa[t] = a[t * 32 + lane];
    fb[t] = b[t * 32 + lane];
  }
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  acc = mma_f32(fa[0], fb[0], acc);
  acc = mma_f32(fa[1], fb[1], acc);
  o[0] = acc;
  acc = mma_f32(fa[2], fb[2], acc);
  o[32] = acc;
}
