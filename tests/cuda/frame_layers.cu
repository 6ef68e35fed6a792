// Two layers of a frame sharing buffers: `scale` writes y = k·x and paints it into an RGBA16F
// surface; `blend` reads y and samples that surface as a texture: z = y + pixel.x (the f16 of y).
// With -DOFFSET=v, `scale` adds v (a replacement module whose output differs).
#include <cuda_fp16.h>
#include <cstdint>

#ifndef OFFSET
#define OFFSET 0.0f
#endif

extern "C" __global__ void frame_scale(const float* __restrict__ x, float* __restrict__ y, float k,
                                       cudaSurfaceObject_t image) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const float v = x[i] * k + OFFSET;
  y[i] = v;
  const unsigned short h = __half_as_ushort(__float2half_rn(v));
  surf2Dwrite(make_ushort4(h, h, h, 0x3C00), image, (i % 8) * 8, i / 8);
}

extern "C" __global__ void frame_blend(const float* __restrict__ y, cudaTextureObject_t image,
                                       float* __restrict__ z) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const float4 p = tex2D<float4>(image, i % 8, i / 8);
  z[i] = y[i] + p.x;
}
