// Address arithmetic in NVVM's integer vocabulary: `or` (lane | k<<5), `bfi` ((lane>>2)*8 + (lane&3)),
// `prmt` (blockIdx.x << 8 | lane&3), `bfi` of a product with a parameter ((blockIdx.x*ld + 4)*32 + lane),
// `mad.lo` (blockIdx.x * (ld + 1) + 96 + lane) and 64-bit index math (size_t(blockIdx.x) * 2048: mul.wide, shl.b64).
//   params: a +0, b +8, bias +16, out +24, ld +32 (int)
//   phase 1: M=32 N=16 K=32  A a[lane | (m << 5)], B b[n*64 + (lane>>2)*8 + (lane&3)] (a table:
//            the lane part is not c*lane), C bias[(blockIdx.x << 8) | (lane & 3)] (1024 bytes a block)
//   phase 2: M=16 N=8 K=32   A a[size_t(blockIdx.x)*2048 + 64 + lane] (32768 bytes a block),
//            B b[(blockIdx.x*ld + 4)*32 + lane] (256*ld bytes a block), C = D(1) (m=0, n=0)
//   phase 3: M=16 N=8 K=32   A a[blockIdx.x*(ld+1) + 96 + lane] (16*ld + 16 bytes a block), B b[lane], C = D(2)
#include "mma.cuh"

extern "C" __global__ void nvvm_addr_math(const uint4* __restrict__ a, const uint2* __restrict__ b,
                                          const uint32_t* __restrict__ bias, uint2* __restrict__ out,
                                          int ld) {
  const unsigned lane = threadIdx.x & 31;
  uint2* o = out + blockIdx.x * 192 + lane;
  asm volatile("" : "+l"(o));  // the output address before the phases, not between their mma
  uint4 fa[2];
  uint2 fb[2], acc[2][2];
#pragma unroll
  for (int m = 0; m < 2; ++m) fa[m] = a[lane | (m << 5)];
#pragma unroll
  for (int n = 0; n < 2; ++n) fb[n] = b[n * 64 + (lane >> 2) * 8 + (lane & 3)];
  const uint32_t c = bias[(blockIdx.x << 8) | (lane & 3)];
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int n = 0; n < 2; ++n) acc[m][n] = mma(fa[m], fb[n], make_uint2(c, c));
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int n = 0; n < 2; ++n) o[(m * 2 + n) * 32] = acc[m][n];
  const uint4 a2 = a[size_t(blockIdx.x) * 2048 + 64 + lane];
  const uint2 b2 = b[(blockIdx.x * ld + 4) * 32 + lane];
  const uint2 d2 = mma(a2, b2, acc[0][0]);
  o[128] = d2;
  const uint4 a3 = a[blockIdx.x * (ld + 1) + 96 + lane];
  o[160] = mma(a3, b[lane], d2);
}
