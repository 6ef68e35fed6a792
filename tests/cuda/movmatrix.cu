// The V transpose of the engine's attention: movmatrix.sync.aligned.m8n8.trans.b16 on packed f16.
#include <cstdint>

extern "C" __global__ void transpose_tiles(const uint32_t* in, uint32_t* out, int tiles) {
  int lane = threadIdx.x & 31;
  for (int t = 0; t < tiles; ++t) {
    uint32_t a = in[t * 32 + lane], b;
    asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(b) : "r"(a));
    out[t * 32 + lane] = b;
  }
}
