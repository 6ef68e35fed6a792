// A user's own engine, as a kernel engineer writes one (benchmarks/own_engine/run.sh): two of its
// three kernels, in their own translation unit (so in a module of their own in the fatbin), named
// as real engines name them (underscores, digits), with a struct parameter and a pointer list.
//   swin_qkv_proj_k32  e4m3 mma.sync (m16n8k32, f16 accumulate) chains over 2x3 tiles x 2 k steps,
//                      the first step's C from a bias table; writes its f16 D tiles
//   attn_mm_2          reads those D tiles, narrows them to e4m3 as its A operand and multiplies
//                      again (one chain of 2 k steps per tile): a splice of the first kernel reaches
//                      the second through memory, as the engine's layers do
#include <cuda_fp8.h>
#include <cstdint>

struct ProjArgs {
  const uint4 *a_frags;  // 0: A quads, 4 per tile and lane
  int tiles;             // 8
  float unused;          // 12: a scalar the kernel never reads
  const uint2 *b_frags;  // 16: B pairs, 6 per lane (shared by every tile)
  const uint32_t *bias;  // 24: f16x2 C table
  uint2 *out;            // 32: 6 D tiles per tile
};

__device__ __forceinline__ void mma_e4m3(uint32_t d[2], const uint32_t a[4], const uint32_t b[2], const uint32_t c[2]) {
  asm volatile("mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16 {%0, %1}, {%2, %3, %4, %5}, {%6, %7}, {%8, %9};"
               : "=r"(d[0]), "=r"(d[1])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(c[0]), "r"(c[1]));
}

extern "C" __global__ void __launch_bounds__(128) swin_qkv_proj_k32(ProjArgs p) {
  const int lane = threadIdx.x & 31, tile = blockIdx.x * 4 + (threadIdx.x >> 5);
  if (tile >= p.tiles) return;
  uint32_t a[2][2][4], b[3][2][2], acc[2][3][2];
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      uint4 v = p.a_frags[((tile * 2 + m) * 2 + k) * 32 + lane];
      a[m][k][0] = v.x; a[m][k][1] = v.y; a[m][k][2] = v.z; a[m][k][3] = v.w;
    }
#pragma unroll
  for (int n = 0; n < 3; ++n)
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      uint2 v = p.b_frags[(n * 2 + k) * 32 + lane];
      b[n][k][0] = v.x; b[n][k][1] = v.y;
    }
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int n = 0; n < 3; ++n) acc[m][n][0] = acc[m][n][1] = p.bias[n * 4 + (lane & 3)];
#pragma unroll
  for (int k = 0; k < 2; ++k)
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int n = 0; n < 3; ++n) {
        uint32_t d[2];
        mma_e4m3(d, a[m][k], b[n][k], acc[m][n]);
        acc[m][n][0] = d[0]; acc[m][n][1] = d[1];
      }
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int n = 0; n < 3; ++n) p.out[((tile * 2 + m) * 3 + n) * 32 + lane] = make_uint2(acc[m][n][0], acc[m][n][1]);
}

__device__ __forceinline__ uint32_t narrow(uint32_t lo_f16x2, uint32_t hi_f16x2) {
  __half2_raw lo, hi;
  lo.x = lo_f16x2 & 0xffff; lo.y = lo_f16x2 >> 16;
  hi.x = hi_f16x2 & 0xffff; hi.y = hi_f16x2 >> 16;
  uint32_t l = __nv_cvt_halfraw2_to_fp8x2(lo, __NV_SATFINITE, __NV_E4M3);
  uint32_t h = __nv_cvt_halfraw2_to_fp8x2(hi, __NV_SATFINITE, __NV_E4M3);
  return l | (h << 16);
}

extern "C" __global__ void __launch_bounds__(128) attn_mm_2(const uint2 *__restrict__ qkv, const uint2 *__restrict__ w,
                                                           uint2 *__restrict__ scores, int tiles) {
  const int lane = threadIdx.x & 31, tile = blockIdx.x * 4 + (threadIdx.x >> 5);
  if (tile >= tiles) return;
  uint32_t acc[2] = {0u, 0u};
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    // A of k step k from the first kernel's D tiles (m = k, n = 0..2): 6 f16 pairs into 4 e4m3 quads
    const uint2 *d = qkv + (tile * 6 + k * 3) * 32 + lane;
    uint2 d0 = d[0], d1 = d[32], d2 = d[64];
    uint32_t a[4] = {narrow(d0.x, d1.x), narrow(d0.y, d1.y), narrow(d2.x, d0.x), narrow(d2.y, d1.y)};
    uint2 bv = w[k * 32 + lane];
    uint32_t b[2] = {bv.x, bv.y};
    uint32_t out[2];
    mma_e4m3(out, a, b, acc);
    acc[0] = out[0]; acc[1] = out[1];
  }
  scores[tile * 32 + lane] = make_uint2(acc[0], acc[1]);
}
