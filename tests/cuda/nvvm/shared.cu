// Operands from shared memory: the warp stages its A and B fragments into __shared__ arrays,
// __syncthreads(), then the phase reads them back from there.
//   params: a +0, b +8, out +16;  shared: sm_a (uint4[64]), sm_b (uint2[64])
//   phase 1: M=32 N=16 K=32  A sm_a[m*32+lane], B sm_b[n*32+lane], C zero
#include "mma.cuh"

__shared__ uint4 sm_a[64];
__shared__ uint2 sm_b[64];

extern "C" __global__ void nvvm_shared(const uint4* __restrict__ a, const uint2* __restrict__ b,
                                       uint2* __restrict__ out) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int t = 0; t < 2; ++t) {
    sm_a[t * 32 + lane] = a[t * 32 + lane];
    sm_b[t * 32 + lane] = b[t * 32 + lane];
  }
  __syncthreads();
  uint4 fa[2];
  uint2 fb[2], acc[2][2];
#pragma unroll
  for (int t = 0; t < 2; ++t) {
    fa[t] = sm_a[t * 32 + lane];
    fb[t] = sm_b[t * 32 + lane];
  }
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int n = 0; n < 2; ++n) acc[m][n] = mma(fa[m], fb[n], make_uint2(0, 0));
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int n = 0; n < 2; ++n) out[(m * 2 + n) * 32 + lane] = acc[m][n];
}
