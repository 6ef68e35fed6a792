// The engine's third kernel, in a translation unit (module) of its own (benchmarks/own_engine/run.sh):
//   out_proj_f16  f16 mma.sync (m16n8k16, f32 accumulate, as Triton and CUTLASS write their GEMMs)
//                 of attn_mm_2's f16 scores against f16 weights, plus a residual, stored as f16
#include <cuda_fp16.h>
#include <cstdint>

struct OutArgs {
  const uint2 *scores;   // 0: attn_mm_2's D tiles (f16x2 pairs)
  const uint2 *weights;  // 8: f16 B pairs, 2 per lane
  const float *residual; // 16: f32, 4 per lane and tile
  uint2 *out;            // 24: f16, 4 per lane and tile
  int tiles;             // 32
};

extern "C" __global__ void __launch_bounds__(128) out_proj_f16(OutArgs p) {
  const int lane = threadIdx.x & 31, tile = blockIdx.x * 4 + (threadIdx.x >> 5);
  if (tile >= p.tiles) return;
  // A (16x16 f16): this tile's scores and its neighbour's (4 f16x2 registers)
  uint2 s0 = p.scores[tile * 32 + lane], s1 = p.scores[((tile + 1) % p.tiles) * 32 + lane];
  uint2 w = p.weights[lane];
  float c[4], d[4];
  for (int i = 0; i < 4; ++i) c[i] = p.residual[(tile * 32 + lane) * 4 + i];
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%10, %11, %12, %13};"
               : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
               : "r"(s0.x), "r"(s0.y), "r"(s1.x), "r"(s1.y), "r"(w.x), "r"(w.y), "f"(c[0]), "f"(c[1]), "f"(c[2]),
                 "f"(c[3]));
  __half2 lo = __floats2half2_rn(d[0], d[1]), hi = __floats2half2_rn(d[2], d[3]);
  p.out[tile * 32 + lane] = make_uint2(*reinterpret_cast<uint32_t *>(&lo), *reinterpret_cast<uint32_t *>(&hi));
}
