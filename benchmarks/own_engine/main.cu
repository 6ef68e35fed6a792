// The host side of the user's own engine (benchmarks/own_engine/run.sh), through the CUDA runtime
// API only: `engine [TILES [ITERATIONS]]` (default 4096 1) fills its inputs from a fixed seed,
// runs swin_qkv_proj_k32 -> attn_mm_2 -> out_proj_f16 ITERATIONS times on one stream and prints
// an FNV-1a checksum of the last output, so that two runs with the same code print the same line.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

struct ProjArgs { const uint4 *a_frags; int tiles; float unused; const uint2 *b_frags; const uint32_t *bias; uint2 *out; };
struct OutArgs { const uint2 *scores; const uint2 *weights; const float *residual; uint2 *out; int tiles; };
extern "C" __global__ void swin_qkv_proj_k32(ProjArgs p);
extern "C" __global__ void attn_mm_2(const uint2 *qkv, const uint2 *w, uint2 *scores, int tiles);
extern "C" __global__ void out_proj_f16(OutArgs p);

#define CHECK(call)                                                                  \
  do {                                                                               \
    cudaError_t e = (call);                                                          \
    if (e != cudaSuccess) {                                                          \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e)); \
      return 1;                                                                      \
    }                                                                                \
  } while (0)

static uint32_t state = 12345u;
static uint32_t next() { state = state * 1664525u + 1013904223u; return state; }
// e4m3 bytes without NaN (exponent bit 3 cleared: at most 1110) and f16 values in [-1, 1)
static std::vector<uint8_t> fp8(size_t n) { std::vector<uint8_t> v(n); for (auto &b : v) b = (next() >> 13) & 0xf7; return v; }
static std::vector<__half> f16(size_t n) {
  std::vector<__half> v(n);
  for (auto &h : v) h = __float2half((float)(next() >> 8) / 8388608.0f - 1.0f);
  return v;
}

template <class T> static T *upload(const std::vector<T> &host) {
  T *d = nullptr;
  if (cudaMalloc(&d, host.size() * sizeof(T)) != cudaSuccess) return nullptr;
  cudaMemcpy(d, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
  return d;
}

int main(int argc, char **argv) {
  int tiles = argc > 1 ? atoi(argv[1]) : 4096, iterations = argc > 2 ? atoi(argv[2]) : 1;
  if (tiles <= 0 || tiles % 4 || iterations <= 0) { fprintf(stderr, "usage: engine [TILES (a multiple of 4) [ITERATIONS]]\n"); return 2; }
  auto a = upload(fp8((size_t)tiles * 4 * 32 * 16));
  auto b = upload(fp8(6 * 32 * 8));
  auto w2 = upload(fp8(2 * 32 * 8));
  auto bias = upload(f16(12 * 2));
  auto w3 = upload(f16(32 * 4));
  std::vector<float> res((size_t)tiles * 32 * 4);
  for (auto &r : res) r = (float)(next() >> 8) / 8388608.0f - 1.0f;
  auto residual = upload(res);
  uint2 *qkv, *scores, *out;
  CHECK(cudaMalloc(&qkv, (size_t)tiles * 6 * 32 * sizeof(uint2)));
  CHECK(cudaMalloc(&scores, (size_t)tiles * 32 * sizeof(uint2)));
  CHECK(cudaMalloc(&out, (size_t)tiles * 32 * sizeof(uint2)));
  if (!a || !b || !w2 || !bias || !w3 || !residual) { fprintf(stderr, "cudaMalloc failed\n"); return 1; }
  ProjArgs pa{reinterpret_cast<const uint4 *>(a), tiles, 0.5f, reinterpret_cast<const uint2 *>(b),
              reinterpret_cast<const uint32_t *>(bias), qkv};
  OutArgs po{scores, reinterpret_cast<const uint2 *>(w3), residual, out, tiles};
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  for (int i = 0; i < iterations; ++i) {
    swin_qkv_proj_k32<<<tiles / 4, 128, 0, s>>>(pa);
    CHECK(cudaGetLastError());
    attn_mm_2<<<tiles / 4, 128, 0, s>>>(qkv, reinterpret_cast<const uint2 *>(w2), scores, tiles);
    CHECK(cudaGetLastError());
    out_proj_f16<<<tiles / 4, 128, 0, s>>>(po);
    CHECK(cudaGetLastError());
  }
  CHECK(cudaStreamSynchronize(s));
  std::vector<uint8_t> host((size_t)tiles * 32 * sizeof(uint2));
  CHECK(cudaMemcpy(host.data(), out, host.size(), cudaMemcpyDeviceToHost));
  uint64_t h = 1469598103934665603ull;
  for (uint8_t c : host) h = (h ^ c) * 1099511628211ull;
  printf("engine: %d tiles, %d iterations, output fnv1a64 %016llx\n", tiles, iterations, (unsigned long long)h);
  return 0;
}
