// wmma phases: a 32x32 output (2x2 tiles of m16n16k16) over K = 48 (3 k-steps), f16 inputs, f32
// accumulators seeded from memory; a second GEMM of one tile reading the first's accumulator.
#include <mma.h>
using namespace nvcuda;

extern "C" __global__ void wmma_gemm(const half* a, const half* b, const float* c, float* d) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa[2][3];
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb[2][3];
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int k = 0; k < 3; ++k) wmma::load_matrix_sync(fa[m][k], a + (m * 3 + k) * 256, 16);
#pragma unroll
  for (int n = 0; n < 2; ++n)
#pragma unroll
    for (int k = 0; k < 3; ++k) wmma::load_matrix_sync(fb[n][k], b + (n * 3 + k) * 256, 16);
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int n = 0; n < 2; ++n) wmma::load_matrix_sync(acc[m][n], c + (m * 2 + n) * 256, 16, wmma::mem_row_major);
#pragma unroll
  for (int k = 0; k < 3; ++k)
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int n = 0; n < 2; ++n) wmma::mma_sync(acc[m][n], fa[m][k], fb[n][k], acc[m][n]);
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int n = 0; n < 2; ++n) wmma::store_matrix_sync(d + (m * 2 + n) * 256, acc[m][n], 16, wmma::mem_row_major);
}
