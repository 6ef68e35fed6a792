// Two-phase fp8 kernels whose second mma takes an operand built from the first mma's accumulators,
// the way the engine's attention does: transpose(D) (the V transpose: movmatrix on the f16 D, then
// the e4m3 packs) and pack(D) (in-lane packs of D pairs, the score GEMM's operands). Phase 1 is
// 2 m-tiles x 2 n-tiles of m16n8k32 with A and B from memory; phase 2 reads the packed/transposed
// D. The packs come as nvcc makes them from cuda_fp8.h (each cvt in its own { } block), or as
// body-level inline asm (PACK_ASM), so both shapes of NVVM code are exercised.
#include <cstdint>
#include <cuda_fp8.h>

#include "nvvm/mma.cuh"

// the suite's mma (nvvm/mma.cuh) on fragments held as register arrays
__device__ __forceinline__ void mma_e4m3(uint32_t d[2], const uint32_t a[4], const uint32_t b[2],
                                         const uint32_t c[2]) {
  const uint2 r = mma(make_uint4(a[0], a[1], a[2], a[3]), make_uint2(b[0], b[1]), make_uint2(c[0], c[1]));
  d[0] = r.x;
  d[1] = r.y;
}

__device__ __forceinline__ uint16_t pack(uint32_t h2) {  // two f16 -> two e4m3 (satfinite)
#ifdef PACK_ASM
  uint16_t r;
  asm volatile("cvt.rn.satfinite.e4m3x2.f16x2 %0, %1;" : "=h"(r) : "r"(h2));
  return r;
#else
  __half2_raw h = *reinterpret_cast<__half2_raw*>(&h2);
  return __nv_cvt_halfraw2_to_fp8x2(h, __NV_SATFINITE, __NV_E4M3);
#endif
}

__device__ __forceinline__ uint32_t join(uint16_t lo, uint16_t hi) {
  uint32_t r;
  asm volatile("mov.b32 %0, {%1, %2};" : "=r"(r) : "h"(lo), "h"(hi));
  return r;
}

// phase 1: D[m][n] (two f16x2 registers each) from A (2 quads) and B (2 pairs) in memory
__device__ __forceinline__ void phase1(const uint32_t* a, const uint32_t* b, int lane, uint32_t d[2][2][2]) {
  const uint32_t zero[2] = {0, 0};
  uint32_t av[2][4], bv[2][2];
  for (int m = 0; m < 2; ++m)
    for (int i = 0; i < 4; ++i) av[m][i] = a[(m * 4 + i) * 32 + lane];
  for (int n = 0; n < 2; ++n)
    for (int i = 0; i < 2; ++i) bv[n][i] = b[(n * 2 + i) * 32 + lane];
  for (int m = 0; m < 2; ++m)
    for (int n = 0; n < 2; ++n) mma_e4m3(d[m][n], av[m], bv[n], zero);
}

// phase 2: one A quad against two B pairs (both mma, then the stores: one phase)
__device__ __forceinline__ void store2(const uint32_t a[4], const uint32_t b[2][2], int lane, uint32_t* out) {
  const uint32_t zero[2] = {0, 0};
  uint32_t e[2][2];
  for (int n = 0; n < 2; ++n) mma_e4m3(e[n], a, b[n], zero);
  for (int n = 0; n < 2; ++n)
    for (int r = 0; r < 2; ++r) out[(n * 2 + r) * 32 + lane] = e[n][r];
}

// B = transpose(D): b[n][0] from D tile (0, n), b[n][1] from tile (1, n), each word the packs of
// the two transposed 8x8 halves of the tile; A of phase 2 from memory
extern "C" __global__ void transpose_d(const uint32_t* a, const uint32_t* b, const uint32_t* a2,
                                       uint32_t* out) {
  const int lane = threadIdx.x & 31;
  uint32_t d[2][2][2];
  phase1(a, b, lane, d);
  uint32_t bt[2][2], av[4];
  for (int n = 0; n < 2; ++n)
    for (int m = 0; m < 2; ++m) bt[n][m] = join(pack(transpose(d[m][n][0])), pack(transpose(d[m][n][1])));
  for (int i = 0; i < 4; ++i) av[i] = a2[i * 32 + lane];
  store2(av, bt, lane, out);
}

// A = pack(D) and B = pack(D) of phase 1, in-lane (A quad word i joins the packs of tiles (m, 0)
// and (m, 1); B's words the same data with the halves swapped, as the engine's score GEMM has it)
extern "C" __global__ void pack_d(const uint32_t* a, const uint32_t* b, uint32_t* out) {
  const int lane = threadIdx.x & 31;
  uint32_t d[2][2][2];
  phase1(a, b, lane, d);
  uint32_t aq[4], bp[2][2];
  for (int r = 0; r < 2; ++r) {
    aq[r] = join(pack(d[0][0][r]), pack(d[0][1][r]));
    aq[2 + r] = join(pack(d[1][0][r]), pack(d[1][1][r]));
  }
  for (int n = 0; n < 2; ++n)
    for (int r = 0; r < 2; ++r) bp[n][r] = join(pack(d[n][1][r]), pack(d[n][0][r]));
  store2(aq, bp, lane, out);
}

// the packed operand is stored as well: no staging statement exists only for the operand
extern "C" __global__ void pack_d_stored(const uint32_t* a, const uint32_t* b, uint32_t* out) {
  const int lane = threadIdx.x & 31;
  uint32_t d[2][2][2];
  phase1(a, b, lane, d);
  uint32_t aq[4], bp[2];
  for (int r = 0; r < 2; ++r) {
    aq[r] = join(pack(d[0][0][r]), pack(d[0][1][r]));
    aq[2 + r] = join(pack(d[1][0][r]), pack(d[1][1][r]));
  }
  for (int i = 0; i < 4; ++i) out[(4 + i) * 32 + lane] = aq[i];
  for (int i = 0; i < 2; ++i) bp[i] = b[(4 + i) * 32 + lane];
  const uint32_t zero[2] = {0, 0};
  uint32_t e[2];
  mma_e4m3(e, aq, bp, zero);
  out[lane] = e[0];
  out[32 + lane] = e[1];
}

// B = pack(transpose(transpose(D))): the lanes' own data again, so no movmatrix is needed
extern "C" __global__ void transpose_twice_d(const uint32_t* a, const uint32_t* b, const uint32_t* a2,
                                             uint32_t* out) {
  const int lane = threadIdx.x & 31;
  uint32_t d[2][2][2];
  phase1(a, b, lane, d);
  uint32_t bt[2][2], av[4];
  for (int n = 0; n < 2; ++n)
    for (int m = 0; m < 2; ++m) bt[n][m] = join(pack(transpose(transpose(d[m][n][0]))), pack(transpose(transpose(d[m][n][1]))));
  for (int i = 0; i < 4; ++i) av[i] = a2[i * 32 + lane];
  store2(av, bt, lane, out);
}

// transpose_d's two phases inside a loop whose trip count is a parameter (kept rolled), each trip
// its own A (a + trip parity) and A of phase 2 (a2 ^ trip), the results xor-accumulated across
// trips, then a lane-dependent branch: the staging, the construction and an outlined phase sit in
// the loop body, with the accumulator live across its back edge
extern "C" __global__ void transpose_d_loop(const uint32_t* a, const uint32_t* b, const uint32_t* a2,
                                            uint32_t* out, int trips) {
  const int lane = threadIdx.x & 31;
  const uint32_t zero[2] = {0, 0};
  uint32_t acc[4] = {0, 0, 0, 0};
#pragma unroll 1
  for (int t = 0; t < trips; ++t) {
    uint32_t d[2][2][2];
    phase1(a + (t & 1) * 8 * 32, b, lane, d);
    uint32_t bt[2][2], av[4];
    for (int n = 0; n < 2; ++n)
      for (int m = 0; m < 2; ++m) bt[n][m] = join(pack(transpose(d[m][n][0])), pack(transpose(d[m][n][1])));
    for (int i = 0; i < 4; ++i) av[i] = a2[i * 32 + lane] ^ (uint32_t)t;
    uint32_t e[2][2];
    for (int n = 0; n < 2; ++n) mma_e4m3(e[n], av, bt[n], zero);
    for (int n = 0; n < 2; ++n)
      for (int r = 0; r < 2; ++r) acc[n * 2 + r] ^= e[n][r];
  }
  if (lane < 16) acc[0] = ~acc[0];
  for (int i = 0; i < 4; ++i) out[i * 32 + lane] = acc[i];
}
