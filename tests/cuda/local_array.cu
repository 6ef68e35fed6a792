// A per-thread array indexed by data: NVVM keeps it in a .local depot (st.local.v4, ld.local).
extern "C" __global__ void local_array(const int* idx, float* out) {
  float a[8];
  for (int i = 0; i < 8; ++i) a[i] = i * 1.5f + threadIdx.x;
  out[threadIdx.x] = a[idx[threadIdx.x] & 7];
}
