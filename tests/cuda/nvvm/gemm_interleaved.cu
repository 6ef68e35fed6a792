// A 32x16x64 GEMM written as one loop nest that loads each fragment right before the mma that
// first uses it: NVVM keeps those loads between the mma statements (the volatile asm orders them),
// so DESIGN's "maximal run of consecutive mma" cuts the GEMM into several phases, which
// `--grouping gemm` joins into one. The output pointer is pinned (an empty asm) before the GEMM
// so that no statement unrelated to the GEMM lands between its mma.
//   params: a +0, b +8, bias +16, out +24
//   mma i = k*4 + m*2 + n: A a[(m*2+k)*32+lane], B b[(n*2+k)*32+lane], C bias[n*4+(lane&3)] at k=0
#include "mma.cuh"

extern "C" __global__ void nvvm_gemm_interleaved(const uint4* __restrict__ a, const uint2* __restrict__ b,
                                                 const uint32_t* __restrict__ bias, uint2* __restrict__ out) {
  const int lane = threadIdx.x & 31;
  uint2* o = out + lane;
  asm volatile("" : "+l"(o));
  uint2 acc[2][2];
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      uint32_t c = bias[n * 4 + (lane & 3)];
      acc[m][n] = make_uint2(c, c);
    }
#pragma unroll
  for (int k = 0; k < 2; ++k)
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int n = 0; n < 2; ++n)
        acc[m][n] = mma(a[(m * 2 + k) * 32 + lane], b[(n * 2 + k) * 32 + lane], acc[m][n]);
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int n = 0; n < 2; ++n) o[(m * 2 + n) * 32] = acc[m][n];
}
