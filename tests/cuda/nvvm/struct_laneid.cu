// A struct parameter passed by value (one `.param .align 8 .b8 p[40]`, like the engine's 136-byte
// block), the lane read from %laneid, and per-block activations at a stride the kernel reads from
// the struct: A = p.a[blockIdx.x * p.stride + t*32 + lane].
//   struct members: a +0, b +8, bias +16, out +24, stride +32 (int)
//   phase 1: M=16 N=16 K=64  A tiles t = k (per block), B tiles b[(n*2+k)*32+lane], C bias column table
//   phase 2: M=16 N=16 K=32  A tile t = 2 (per block),  B tiles b[(4+n)*32+lane],   C = D(1)
#include "mma.cuh"

struct Params {
  const uint4* a;
  const uint2* b;
  const uint32_t* bias;
  uint2* out;
  int stride;  // uint4 elements between two blocks' activations
};

extern "C" __global__ void nvvm_struct_laneid(const Params p) {
  const int lane = laneid();
  const uint4* a = p.a + blockIdx.x * p.stride;
  uint4 fa[3];
  uint2 fb[6], acc[2];
#pragma unroll
  for (int t = 0; t < 3; ++t) fa[t] = a[t * 32 + lane];
#pragma unroll
  for (int t = 0; t < 6; ++t) fb[t] = p.b[t * 32 + lane];
#pragma unroll
  for (int n = 0; n < 2; ++n) {
    uint32_t c = p.bias[n * 4 + (lane & 3)];
    acc[n] = make_uint2(c, c);
  }
#pragma unroll
  for (int k = 0; k < 2; ++k)
#pragma unroll
    for (int n = 0; n < 2; ++n) acc[n] = mma(fa[k], fb[n * 2 + k], acc[n]);
  uint2* out = p.out + blockIdx.x * 4 * 32;
#pragma unroll
  for (int n = 0; n < 2; ++n) out[n * 32 + lane] = acc[n];
#pragma unroll
  for (int n = 0; n < 2; ++n) acc[n] = mma(fa[2], fb[4 + n], acc[n]);
#pragma unroll
  for (int n = 0; n < 2; ++n) out[(2 + n) * 32 + lane] = acc[n];
}
