// Ordinary pointer parameters, the lane as threadIdx.x & 31, unrolled loops (-O3's default), a
// column bias table bias[n*4 + (lane & 3)] as the first phase's C, and a second phase whose C is
// the first phase's D. Every fragment is loaded before the mma that use it, so no load sits
// between two mma of one phase.
//   params: a +0, b +8, bias +16, out +24 (8-byte pointers in order)
//   phase 1: M=32 N=16 K=64  A tiles a[(m*2+k)*32+lane], B tiles b[(n*2+k)*32+lane], C bias
//   phase 2: M=32 N=16 K=32  A tiles a[(4+m)*32+lane],   B tiles b[(4+n)*32+lane],   C = D(1)
#include "mma.cuh"

extern "C" __global__ void nvvm_pointers(const uint4* __restrict__ a, const uint2* __restrict__ b,
                                         const uint32_t* __restrict__ bias, uint2* __restrict__ out) {
  const int lane = threadIdx.x & 31;
  uint4 fa[2][2];
  uint2 fb[2][2], acc[2][2];
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    fa[t / 2][t % 2] = a[t * 32 + lane];
    fb[t / 2][t % 2] = b[t * 32 + lane];
  }
#pragma unroll
  for (int n = 0; n < 2; ++n) {
    uint32_t c = bias[n * 4 + (lane & 3)];
    acc[0][n] = acc[1][n] = make_uint2(c, c);
  }
#pragma unroll
  for (int k = 0; k < 2; ++k)
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int n = 0; n < 2; ++n) acc[m][n] = mma(fa[m][k], fb[n][k], acc[m][n]);
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int n = 0; n < 2; ++n) out[(m * 2 + n) * 32 + lane] = acc[m][n];
#pragma unroll
  for (int t = 0; t < 2; ++t) {
    fa[t][0] = a[(4 + t) * 32 + lane];
    fb[t][0] = b[(4 + t) * 32 + lane];
  }
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int n = 0; n < 2; ++n) acc[m][n] = mma(fa[m][0], fb[n][0], acc[m][n]);
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int n = 0; n < 2; ++n) out[(4 + m * 2 + n) * 32 + lane] = acc[m][n];
}
