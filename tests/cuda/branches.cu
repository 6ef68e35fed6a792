// Loops, divergent branches, a device function call and shared memory with a barrier.
__device__ __noinline__ float clamp_cubic(float x) {
  float y = fminf(fmaxf(x, -2.f), 2.f);
  return x * (0.5f + y * (0.412109375f - 0.0810546875f * fabsf(y)));
}

extern "C" __global__ void loops(const float* in, float* out, int n) {
  __shared__ float tile[128];
  int t = threadIdx.x;
  float acc = 0.f;
  for (int i = t; i < n; i += blockDim.x) {
    float v = in[i];
    if (v > 0.f) acc += clamp_cubic(v);
    else if (v < -1.f) acc -= v * v;
    else continue;
  }
  tile[t] = acc;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (t < s) tile[t] += tile[t + s];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = tile[0];
}
