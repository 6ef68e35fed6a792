// every (a, b, c) of a set of f64 patterns (quiet and signalling NaNs of both signs and payloads, zeros,
// infinities, a normal, a subnormal) through fma, add, mul and sub: which operand's NaN comes out
extern "C" __global__ void nan64(const unsigned long long* p, unsigned long long* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n * n * n) return;
  double a = __longlong_as_double(p[i / (n * n)]), b = __longlong_as_double(p[i / n % n]), c = __longlong_as_double(p[i % n]);
  double r;
  asm("fma.rn.f64 %0, %1, %2, %3;" : "=d"(r) : "d"(a), "d"(b), "d"(c)); out[4 * i] = __double_as_longlong(r);
  asm("add.rn.f64 %0, %1, %2;" : "=d"(r) : "d"(a), "d"(b)); out[4 * i + 1] = __double_as_longlong(r);
  asm("mul.rn.f64 %0, %1, %2;" : "=d"(r) : "d"(a), "d"(b)); out[4 * i + 2] = __double_as_longlong(r);
  asm("sub.rn.f64 %0, %1, %2;" : "=d"(r) : "d"(a), "d"(b)); out[4 * i + 3] = __double_as_longlong(r);
}
