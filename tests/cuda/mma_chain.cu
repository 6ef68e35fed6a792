// An fp8 GEMM phase of known shape, written as the engine's kernels are: a chain of
// mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16 over M_TILES x N_TILES x K_STEPS, with the
// C operand of the first step from a bias table and each later step chained on the previous D.
#include <cstdint>

#ifndef M_TILES
#define M_TILES 2
#endif
#ifndef N_TILES
#define N_TILES 3
#endif
#ifndef K_STEPS
#define K_STEPS 2
#endif
#ifndef KERNEL_NAME
#define KERNEL_NAME gemm_phase
#endif

__device__ __forceinline__ void mma_e4m3(uint32_t d[2], const uint32_t a[4], const uint32_t b[2],
                                         const uint32_t c[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16\n\t"
      "{%0, %1},\n\t"
      "{%2, %3, %4, %5},\n\t"
      "{%6, %7}, {%8, %9};"
      : "=r"(d[0]), "=r"(d[1])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(c[0]), "r"(c[1]));
}

extern "C" __global__ void KERNEL_NAME(const uint4* __restrict__ a_frags, const uint2* __restrict__ b_frags,
                                      const uint32_t* __restrict__ bias, uint2* __restrict__ out) {
  const int lane = threadIdx.x & 31;
  uint32_t a[M_TILES][K_STEPS][4];
  uint32_t b[N_TILES][K_STEPS][2];
#pragma unroll
  for (int m = 0; m < M_TILES; ++m)
#pragma unroll
    for (int k = 0; k < K_STEPS; ++k) {
      uint4 v = a_frags[(m * K_STEPS + k) * 32 + lane];
      a[m][k][0] = v.x; a[m][k][1] = v.y; a[m][k][2] = v.z; a[m][k][3] = v.w;
    }
#pragma unroll
  for (int n = 0; n < N_TILES; ++n)
#pragma unroll
    for (int k = 0; k < K_STEPS; ++k) {
      uint2 v = b_frags[(n * K_STEPS + k) * 32 + lane];
      b[n][k][0] = v.x; b[n][k][1] = v.y;
    }
  uint32_t acc[M_TILES][N_TILES][2];
#pragma unroll
  for (int m = 0; m < M_TILES; ++m)
#pragma unroll
    for (int n = 0; n < N_TILES; ++n) {
      acc[m][n][0] = bias[n * 4 + (lane & 3)];
      acc[m][n][1] = acc[m][n][0];
    }
#pragma unroll
  for (int k = 0; k < K_STEPS; ++k)
#pragma unroll
    for (int m = 0; m < M_TILES; ++m)
#pragma unroll
      for (int n = 0; n < N_TILES; ++n) {
        uint32_t d[2];
        mma_e4m3(d, a[m][k], b[n][k], acc[m][n]);
        acc[m][n][0] = d[0];
        acc[m][n][1] = d[1];
      }
#pragma unroll
  for (int m = 0; m < M_TILES; ++m)
#pragma unroll
    for (int n = 0; n < N_TILES; ++n)
      out[(m * N_TILES + n) * 32 + lane] = make_uint2(acc[m][n][0], acc[m][n][1]);
}
