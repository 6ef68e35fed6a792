// Control flow around phases: an if/else that chooses the first phase's C seed (the bias column
// table, or zero) and a second phase under if (blockIdx.x & 1).
//   params: a +0, b +8, bias +16, out +24, use_bias +32 (int)
//   phase 1: M=16 N=8 K=64  A tiles a[k*32+lane], B tiles b[k*32+lane], k=0,1;
//            C = bias[lane & 3] (both halves) if use_bias else zero: a merge of table and zero
//   phase 2 (odd blocks only): M=16 N=8 K=32  A a[2*32+lane], B b[2*32+lane], C = D(1)
#include "mma.cuh"

extern "C" __global__ void nvvm_branches(const uint4* __restrict__ a, const uint2* __restrict__ b,
                                         const uint32_t* __restrict__ bias, uint2* __restrict__ out,
                                         int use_bias) {
  const int lane = threadIdx.x & 31;
  uint4 fa[3];
  uint2 fb[3];
#pragma unroll
  for (int t = 0; t < 3; ++t) {
    fa[t] = a[t * 32 + lane];
    fb[t] = b[t * 32 + lane];
  }
  uint2 acc;
  if (use_bias) {
    uint32_t c = bias[lane & 3];
    acc = make_uint2(c, c);
  } else {
    acc = make_uint2(0, 0);
  }
  acc = mma(fa[0], fb[0], acc);
  acc = mma(fa[1], fb[1], acc);
  out[blockIdx.x * 64 + lane] = acc;
  if (blockIdx.x & 1) {
    acc = mma(fa[2], fb[2], acc);
  }
  out[blockIdx.x * 64 + 32 + lane] = acc;
}
