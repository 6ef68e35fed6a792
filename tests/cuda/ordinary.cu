// Ordinary CUDA kernels, as a user writes them without thinking about PTX: a block reduction, a
// histogram with shared and global atomics, a tiled transpose through shared memory, a switch.
#include <cstdint>

// Block sum of a float array, a warp-shuffle tail, one atomicAdd per block.
extern "C" __global__ void reduce_sum(const float* __restrict__ in, float* out, int n) {
  __shared__ float partial[32];
  float s = 0.f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) s += in[i];
  for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) partial[warp] = s;
  __syncthreads();
  if (warp == 0) {
    s = lane < (blockDim.x >> 5) ? partial[lane] : 0.f;
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    if (lane == 0) atomicAdd(out, s);
  }
}

// 256-bin histogram of bytes: a per-block histogram in shared memory, merged with global atomics.
extern "C" __global__ void histogram(const uint8_t* __restrict__ data, unsigned int* bins, int n) {
  __shared__ unsigned int local[256];
  for (int i = threadIdx.x; i < 256; i += blockDim.x) local[i] = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    atomicAdd(&local[data[i]], 1u);
  __syncthreads();
  for (int i = threadIdx.x; i < 256; i += blockDim.x)
    if (local[i]) atomicAdd(&bins[i], local[i]);
}

// out = in^T for a rows x cols matrix, through a padded 32x33 shared tile (blocks of 32x8).
extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols) {
  __shared__ float tile[32][33];
  int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;
  for (int j = 0; j < 32; j += 8)
    if (x < cols && y + j < rows) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * cols + x];
  __syncthreads();
  x = blockIdx.y * 32 + threadIdx.x;
  y = blockIdx.x * 32 + threadIdx.y;
  for (int j = 0; j < 32; j += 8)
    if (x < rows && y + j < cols) out[(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}

// A dense switch on data (NVVM may build a jump table), each case a different integer formula.
extern "C" __global__ void switch_ops(const int* __restrict__ op, const int* __restrict__ v, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int x = v[i], r;
  switch (op[i]) {
    case 0: r = x + 7; break;
    case 1: r = x * 3; break;
    case 2: r = x >> 2; break;
    case 3: r = x ^ 0x5a5a; break;
    case 4: r = -x; break;
    case 5: r = x & 0xff; break;
    case 6: r = x | 0x100; break;
    case 7: r = x / 5; break;
    case 8: r = x % 7; break;
    case 9: r = __popc(x); break;
    default: r = 0x7fffffff;
  }
  out[i] = r;
}
