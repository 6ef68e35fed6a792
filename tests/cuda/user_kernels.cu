// A user's own kernels, as plain C++ with pointer arguments (tests/test_user_launches.py makes
// their launch directories with `rr launch-template` and checks what the cpu backend computes).
// Every product is by a power of two, so the result has one rounding whichever way nvcc
// contracts it, and numpy computes it exactly.
#include <cstdint>

struct Offset { int add; float scale; };

// pointers, an int, a float, a struct of scalars and a counter updated only by an atomic
extern "C" __global__ void scale_add(const float *x, float *y, int n, float a, Offset o, unsigned *count) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    y[i] = x[i] * a * o.scale + (float)o.add;
    atomicAdd(count, 1u);
  }
}

// one struct parameter holding the pointers: launched as a block
struct Gather { const int *in; int *out; int n; int k; };

extern "C" __global__ void gather_scaled(Gather g) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < g.n) g.out[i] = g.in[g.n - 1 - i] * g.k;
}
