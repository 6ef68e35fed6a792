// The kernels of the fake CUDA programs (tests/capture/fake_app.c): nvcc makes their PTX at test
// time, the fake programs load it as their module, and tests/capture/fake_cuda.c's "launch" runs
// a host function that computes exactly what these do — so a captured launch replayed on rr's cpu
// backend must give back the captured after-state, byte for byte.
#include <cstdint>

// The engine's shape: one 136-byte parameter block with pointers, a texture and a surface inside.
struct Block {
  uint32_t n, scale;          // 0
  const uint32_t *in;         // 8
  uint64_t cookie;            // 16: a plain integer
  uint32_t pad0[4];           // 24
  uint32_t *out;              // 40: points 64 bytes into its allocation
  uint32_t pad1[10];          // 48
  unsigned long long tex;     // 88: texture object (RGBA16F)
  uint32_t pad2[4];           // 96
  unsigned long long surf;    // 112: surface object (RGBA16F)
  uint32_t pad3[2];           // 120
  uint32_t w, h;              // 128
};
static_assert(sizeof(Block) == 136, "the engine's block is 136 bytes");

extern "C" __global__ void rr_cap_struct(Block p) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < p.n) p.out[i] = p.in[i] * p.scale + i + (uint32_t)p.cookie;
  if (i < p.w * p.h) {
    int x = i % p.w, y = i / p.w;
    unsigned short r, g, b, a;  // the texel's four f16 channels, written to the surface reversed
    asm volatile("tex.base.2d.v4.f16.s32 {%0, %1, %2, %3}, [%4, {%5, %6}];"
                 : "=h"(r), "=h"(g), "=h"(b), "=h"(a) : "l"(p.tex), "r"(x), "r"(y));
    asm volatile("sust.b.2d.v4.b16.zero [%0, {%1, %2}], {%3, %4, %5, %6};"
                 :: "l"(p.surf), "r"(x * 8), "r"(y), "h"(a), "h"(b), "h"(g), "h"(r) : "memory");
  }
}

// A kernel of several parameters (the runtime API's usual shape).
extern "C" __global__ void rr_cap_list(const uint32_t *a, uint32_t *b, uint32_t n, uint32_t add) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) b[i] = a[i] + add;
}

// The fake driver's launch of this one kills the program mid-capture.
extern "C" __global__ void rr_cap_crash(uint32_t *a) { a[threadIdx.x] = 0; }

// A kernel that reads a module variable the program sets (cuModuleGetGlobal, or cudaMemcpyToSymbol)
// and counts its launches in another: what a replacement (rr inject) must be given and give back.
__constant__ uint32_t rr_cap_coef[4];
__device__ uint32_t rr_cap_launches;

extern "C" __global__ void rr_cap_const(uint32_t *out, uint32_t n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = rr_cap_coef[i % 4];
  if (i == 0) rr_cap_launches += 1;
}
