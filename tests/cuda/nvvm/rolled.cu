// Rolled loops (#pragma unroll 1): a loop over k of constant trip count with two mma per trip
// (one per n tile) accumulating in place (acc is both C and D), then a loop of `pairs` trips (a
// scalar parameter) with two chained mma per trip.
//   params: a +0, b +8, bias +16, out +24, pairs +32 (int)
//   phase 1 (loop 1, 4 trips): per trip k: A a[k*32+lane], B b[(k*2+n)*32+lane] n=0,1; C bias
//            column table; M=16 N=16 K=32 per trip, A +512 and B +512 bytes a trip
//   phase 2 (loop 2, `pairs` trips): per trip j: A a[(4+2j+i)*32+lane], B b[(8+2j+i)*32+lane],
//            i=0,1 chained; C = D(1) (n tile 0); M=16 N=8 K=64 per trip, A +1024 and B +512 a trip
#include "mma.cuh"

extern "C" __global__ void nvvm_rolled(const uint4* __restrict__ a, const uint2* __restrict__ b,
                                       const uint32_t* __restrict__ bias, uint2* __restrict__ out,
                                       int pairs) {
  const int lane = threadIdx.x & 31;
  uint2 acc[2];
#pragma unroll
  for (int n = 0; n < 2; ++n) {
    uint32_t c = bias[n * 4 + (lane & 3)];
    acc[n] = make_uint2(c, c);
  }
#pragma unroll 1
  for (int k = 0; k < 4; ++k) {
    uint4 fa = a[k * 32 + lane];
    uint2 fb0 = b[(k * 2) * 32 + lane], fb1 = b[(k * 2 + 1) * 32 + lane];
    mma_acc(acc[0], fa, fb0);
    mma_acc(acc[1], fa, fb1);
  }
  out[lane] = acc[0];
  out[32 + lane] = acc[1];
  uint2 d = acc[0];
#pragma unroll 1
  for (int j = 0; j < pairs; ++j) {
    uint4 fa0 = a[(4 + 2 * j) * 32 + lane], fa1 = a[(5 + 2 * j) * 32 + lane];
    uint2 fb0 = b[(8 + 2 * j) * 32 + lane], fb1 = b[(9 + 2 * j) * 32 + lane];
    d = mma(fa0, fb0, d);
    d = mma(fa1, fb1, d);
  }
  out[64 + lane] = d;
}
