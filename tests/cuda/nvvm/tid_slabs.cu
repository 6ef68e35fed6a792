// The lane as plain threadIdx.x (the block is (32, 1, 4), declared with __block_size__ so the PTX
// says so in .reqntid), per-block activations a + blockIdx.x * 256 and %tid.z slabs
// + threadIdx.z * 64 (uint4 elements), and a zero C seed.
//   params: a +0, b +8, out +16
//   phase 1: M=32 N=16 K=32  A tiles a[blockIdx.x*256 + threadIdx.z*64 + m*32 + lane]
//            (4096 bytes a block, 1024 a slab), B tiles b[n*32 + lane], C zero
#include "mma.cuh"

extern "C" __global__ void __block_size__((32, 1, 4))
    nvvm_tid_slabs(const uint4* __restrict__ a, const uint2* __restrict__ b, uint2* __restrict__ out) {
  const unsigned lane = threadIdx.x;
  const uint4* slab = a + blockIdx.x * 256 + threadIdx.z * 64;
  uint4 fa[2];
  uint2 fb[2], acc[2][2];
#pragma unroll
  for (int t = 0; t < 2; ++t) {
    fa[t] = slab[t * 32 + lane];
    fb[t] = b[t * 32 + lane];
  }
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int n = 0; n < 2; ++n) acc[m][n] = mma(fa[m], fb[n], make_uint2(0, 0));
  uint2* o = out + (blockIdx.x * 4 + threadIdx.z) * 128;
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int n = 0; n < 2; ++n) o[(m * 2 + n) * 32 + lane] = acc[m][n];
}
