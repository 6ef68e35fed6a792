// Tables in constant memory (a `.const` array with an initializer, read with ld.const at indices
// from data), read-only loads through the non-coherent path (__ldg, const __restrict__ pointers,
// ld.global.nc.v2.u16 pairs), halves joined and split with mov, and module-scope __device__ data.
#include <cstdint>

__constant__ float scale[8] = {0.5f, 1.f, 1.5f, 2.f, -1.f, 1e-3f, 3.25f, 1e30f};
__constant__ uint32_t mix[4] = {0x9e3779b9u, 0x85ebca6bu, 0xc2b2ae35u, 0x27d4eb2fu};
__constant__ uint16_t pairs[6] = {1, 2, 3, 0xfffe, 0x8000, 7};
__constant__ unsigned long long wide[2] = {0x0123456789abcdefull, 0xfedcba9876543210ull};
__device__ uint32_t bias[4] = {10, 20, 30, 40};

extern "C" __global__ void const_mem(const uint32_t* __restrict__ idx, const ushort2* __restrict__ halves,
                                     const uint32_t* plain, uint32_t* out) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  const uint32_t i = __ldg(&idx[t]);
  uint32_t* o = out + 13 * t;
  o[0] = __float_as_uint(scale[i & 7] * float(t));
  o[1] = mix[i & 3] ^ mix[(i >> 2) & 3];
  o[2] = pairs[i % 6];
  o[3] = uint32_t(wide[i & 1] >> (i & 31));
  const ushort2 h = halves[t];                      // ld.global.nc.v2.u16
  o[4] = (uint32_t(h.y) << 16) | h.x;               // mov.b32 %r, {%rs1, %rs2}
  o[5] = uint32_t(h.x) * h.y;
  const uint32_t w = __ldg(&plain[t]);
  uint16_t lo, hi;
  asm("mov.b32 {%0, %1}, %2;" : "=h"(lo), "=h"(hi) : "r"(w));
  o[6] = uint32_t(hi) - uint32_t(lo);
  uint32_t l32, h32;
  const unsigned long long q = wide[0] + i;
  asm("mov.b64 {%0, %1}, %2;" : "=r"(l32), "=r"(h32) : "l"(q));
  o[7] = l32 ^ h32;
  unsigned long long j;
  asm("mov.b64 %0, {%1, %2};" : "=l"(j) : "r"(h32), "r"(l32));
  o[8] = uint32_t(j >> 8);
  o[9] = bias[i & 3] + plain[(t + 1) & 31];
  const uint32_t* table = (i & 8) ? mix : bias;  // a generic pointer into either memory
  o[10] = table[i & 3];
  o[11] = __ldg(&halves[(t + 3) & 31].y);
  const ushort2 nc = __ldg(&halves[t ^ 1]);         // ld.global.nc.v2.u16
  o[12] = (uint32_t(nc.x) << 16) | nc.y;
}
