// Atomics and reductions on global and shared memory. Every lane of a block hits the same few
// addresses (its warp's, its block's), so lanes of one warp contend and must serialise; each atom
// returns the value it found. `v` holds one word per thread; `g` 16 words of global counters per
// block, `g64` 8 double words per block; `olds` the returned values, 24 per thread.
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

extern "C" __global__ void atomics(const uint32_t* v, uint32_t* g, unsigned long long* g64, uint32_t* olds,
                                   uint32_t* shared_out) {
  __shared__ uint32_t s[8];
  __shared__ unsigned long long s64[2];
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  const uint32_t x = v[t];
  uint32_t* cnt = g + 16 * blockIdx.x;
  unsigned long long* cnt64 = g64 + 8 * blockIdx.x;
  uint32_t* o = olds + 24 * t;
  if (threadIdx.x < 8) s[threadIdx.x] = threadIdx.x == 2 ? 0xffffffffu : 0;
  if (threadIdx.x < 2) s64[threadIdx.x] = 0;
  __syncthreads();
  o[0] = atomicAdd(&cnt[0], x & 0xffff);
  o[1] = atomicSub(&cnt[1], x & 0xff);
  o[2] = uint32_t(atomicMin((int*)&cnt[2], int(x)));
  o[3] = atomicMax(&cnt[3], x);
  o[4] = atomicInc(&cnt[4], 13u);
  o[5] = atomicDec(&cnt[5], 5u);
  o[6] = atomicAnd(&cnt[6], x | 0x10000u);
  o[7] = atomicOr(&cnt[7], 1u << (x & 31));
  o[8] = atomicXor(&cnt[8], x);
  o[9] = atomicExch(&cnt[9], x);
  o[10] = atomicCAS(&cnt[10], threadIdx.x & 3, x);  // succeeds while the stored value matches
  o[11] = __float_as_uint(atomicAdd((float*)&cnt[11], float(x & 0xff) * 0.25f));
  const __half2 h = __floats2half2_rn(float(x & 7), -float(x & 3));
  const __half2 oh = atomicAdd((__half2*)&cnt[12], h);
  o[12] = *reinterpret_cast<const uint32_t*>(&oh);
  o[13] = atomicAdd(&s[0], x & 0xff);
  o[14] = atomicMax(&s[1], x);
  o[15] = atomicMin(&s[2], x);
  o[16] = atomicInc(&s[3], 6u);
  o[17] = atomicCAS(&s[4], threadIdx.x & 1, x);
  o[18] = atomicExch(&s[5], x);
  const unsigned long long y = (unsigned long long)x << 20 | (x & 0xfff);
  const unsigned long long a0 = atomicAdd(&cnt64[0], y);
  const unsigned long long a1 = atomicMax(&cnt64[1], y);
  const unsigned long long a2 = atomicCAS(&cnt64[2], 0ull, y);
  const unsigned long long a3 = atomicAdd(&s64[0], y);
  o[19] = uint32_t(a0) ^ uint32_t(a0 >> 32);
  o[20] = uint32_t(a1) ^ uint32_t(a1 >> 32);
  o[21] = uint32_t(a2) ^ uint32_t(a2 >> 32);
  o[22] = uint32_t(a3) ^ uint32_t(a3 >> 32);
  atomicAdd(&cnt[13], 1u);  // result unused: red
  asm volatile("red.global.add.u32 [%0], %1;" :: "l"(&cnt[14]), "r"(x & 0xf) : "memory");
  asm volatile("red.shared.max.u32 [%0], %1;" :: "r"(uint32_t(__cvta_generic_to_shared(&s[6]))), "r"(x) : "memory");
  asm volatile("red.global.add.f32 [%0], %1;" :: "l"(&cnt[15]), "f"(0.5f) : "memory");
  atomicAdd(&cnt64[3], 3ull);
  asm volatile("red.global.or.b64 [%0], %1;" :: "l"(&cnt64[4]), "l"(y) : "memory");
  double* dsum = (double*)&cnt64[5];
  const double od = atomicAdd(dsum, double(x & 0xff) * 0.125);
  o[23] = uint32_t(__double_as_longlong(od) >> 20);
  uint32_t* generic = (x & 1) ? &s[7] : &cnt[0];  // a generic address: shared or global by lane
  atomicAdd(generic, 2u);
  __syncthreads();
  if (threadIdx.x < 8) shared_out[16 * blockIdx.x + threadIdx.x] = s[threadIdx.x];
  if (threadIdx.x < 2) {
    shared_out[16 * blockIdx.x + 8 + 2 * threadIdx.x] = uint32_t(s64[threadIdx.x]);
    shared_out[16 * blockIdx.x + 9 + 2 * threadIdx.x] = uint32_t(s64[threadIdx.x] >> 32);
  }
}

// A CAS loop (an atomic float max built from atomicCAS), as code without a native atomic writes it.
extern "C" __global__ void cas_loop(const float* v, float* out) {
  const float x = v[blockIdx.x * blockDim.x + threadIdx.x];
  unsigned int* addr = (unsigned int*)out;
  unsigned int old = *addr, assumed;
  do {
    assumed = old;
    if (__uint_as_float(assumed) >= x) break;
    old = atomicCAS(addr, assumed, __float_as_uint(x));
  } while (old != assumed);
}
