// Warp-level reductions: butterfly, down, up and indexed shuffles, as the engine's row sums use them.
#include <cuda_fp16.h>

extern "C" __global__ void reduce(const float* in, float* out, __half2* hout) {
  float v = in[blockIdx.x * 32 + threadIdx.x];
  float s = v;
  s += __shfl_xor_sync(0xffffffffu, s, 1);
  s += __shfl_xor_sync(0xffffffffu, s, 2);
  float d = __shfl_down_sync(0xffffffffu, v, 1);
  d += __shfl_down_sync(0xffffffffu, d, 8);
  float u = __shfl_up_sync(0xffffffffu, v, 4);
  float i = __shfl_sync(0xffffffffu, v, 0);
  __half2 h = __floats2half2_rn(s, d);
  h = __hadd2(h, __shfl_xor_sync(0xffffffffu, h, 4, 8));
  out[blockIdx.x * 32 + threadIdx.x] = s + d + u + i;
  hout[blockIdx.x * 32 + threadIdx.x] = h;
}
