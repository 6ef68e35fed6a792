// A bias table of f16 values read as u16 pairs: each C word is two 16-bit loads joined into one
// 32-bit register, bias[n*8 + 2*(lane&3)] | bias[n*8 + 2*(lane&3) + 1] << 16.
//   params: a +0, b +8, bias +16, out +24
//   phase 1: M=16 N=16 K=32  A a[lane], B b[n*32+lane], C = the u16 pairs (byte 16n + 4*(lane&3))
#include "mma.cuh"

extern "C" __global__ void nvvm_bias_u16(const uint4* __restrict__ a, const uint2* __restrict__ b,
                                         const unsigned short* __restrict__ bias, uint2* __restrict__ out) {
  const int lane = threadIdx.x & 31;
  const uint4 fa = a[lane];
  uint2 fb[2], acc[2];
#pragma unroll
  for (int n = 0; n < 2; ++n) {
    fb[n] = b[n * 32 + lane];
    const int col = n * 8 + 2 * (lane & 3);
    const uint32_t c = uint32_t(bias[col]) | (uint32_t(bias[col + 1]) << 16);
    acc[n] = make_uint2(c, c);
  }
#pragma unroll
  for (int n = 0; n < 2; ++n) acc[n] = mma(fa, fb[n], acc[n]);
#pragma unroll
  for (int n = 0; n < 2; ++n) out[n * 32 + lane] = acc[n];
}
