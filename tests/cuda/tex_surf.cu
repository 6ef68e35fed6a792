// Texture reads and surface writes in the engine's RGBA16F style: tex.2d.v4.f16 and sust.b.2d.
#include <cuda_fp16.h>

extern "C" __global__ void blur3(cudaTextureObject_t src, cudaSurfaceObject_t dst, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= w || y >= h) return;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int dy = -1; dy <= 1; ++dy)
    for (int dx = -1; dx <= 1; ++dx) {
      float4 v = tex2D<float4>(src, x + dx + 0.5f, y + dy + 0.5f);
      acc.x += v.x; acc.y += v.y; acc.z += v.z; acc.w += v.w;
    }
  ushort4 o;
  o.x = __half_as_ushort(__float2half(acc.x * (1.f / 9)));
  o.y = __half_as_ushort(__float2half(acc.y * (1.f / 9)));
  o.z = __half_as_ushort(__float2half(acc.z * (1.f / 9)));
  o.w = __half_as_ushort(__float2half(acc.w));
  surf2Dwrite(o, dst, x * 8, y, cudaBoundaryModeZero);
}

// The engine's texture reads: tex.2d.v4.f16 at integer coordinates (.s32), here one step past
// every edge. Each thread stores the nine taps around its pixel, four halves each.
extern "C" __global__ void texel_taps(cudaTextureObject_t src, unsigned short* out, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= w || y >= h) return;
  unsigned short* o = out + 36 * (y * w + x);
  for (int dy = -1; dy <= 1; ++dy)
    for (int dx = -1; dx <= 1; ++dx, o += 4) {
      unsigned short r, g, b, a;
      asm volatile("tex.2d.v4.f16.s32 {%0, %1, %2, %3}, [%4, {%5, %6}];"
                   : "=h"(r), "=h"(g), "=h"(b), "=h"(a) : "l"(src), "r"(x + dx), "r"(y + dy));
      o[0] = r; o[1] = g; o[2] = b; o[3] = a;
    }
}
