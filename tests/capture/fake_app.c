/* A fake engine, linked against the (fake) driver API as a driver-API program is:
 *   fake_app SCENARIO KERNELS.ptx
 * Every scenario loads the PTX of tests/capture/kernels.cu and launches, in order,
 *   0 rr_cap_struct  one 136-byte block: pointers at 8 and 40 (40 points 64 bytes into its
 *                    allocation), a texture at 88 and a surface at 112, both RGBA16F 8x8
 *   1 rr_cap_list    (cuLaunchKernelEx) reads what launch 0 wrote, writes memory allocated where
 *                    the interposer does not see it (found through cuMemGetAddressRange)
 *   2 rr_cap_list    (cuLaunchKernel) reads what launch 1 wrote
 * then exits 0. SCENARIO `exit` exits with status 3 after launch 1; `crash` launches
 * rr_cap_crash after launch 0, whose fake launch aborts the program. */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"

typedef void *CUmodule, *CUfunction, *CUarray;

CUresult cuInit(unsigned);
CUresult cuModuleLoadData(CUmodule *, const void *);
CUresult cuModuleGetFunction(CUfunction *, CUmodule, const char *);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemcpyHtoD_v2(CUdeviceptr, const void *, size_t);
CUresult cuMemcpyDtoH_v2(void *, CUdeviceptr, size_t);
CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *,
                        void **, void **);
CUresult cuLaunchKernelEx(const CUlaunchConfig *, CUfunction, void **, void **);
CUresult cuArrayCreate_v2(CUarray *, const CUDA_ARRAY_DESCRIPTOR *);
CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *);
CUresult cuTexObjectCreate(CUtexObject *, const CUDA_RESOURCE_DESC *, const CUDA_TEXTURE_DESC *, const void *);
CUresult cuSurfObjectCreate(CUtexObject *, const CUDA_RESOURCE_DESC *);
CUdeviceptr fake_alloc_untracked(size_t);

#define N 64
#define W 8
#define H 8

static void check(CUresult r, const char *what) {
    if (r != 0) { fprintf(stderr, "fake_app: %s failed: %d\n", what, r); exit(10); }
}

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); exit(11); }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = calloc(1, (size_t)n + 1);
    if (fread(text, 1, (size_t)n, f) != (size_t)n) exit(11);
    fclose(f);
    return text;
}

static CUarray rgba16f_array(uint16_t first) {
    CUDA_ARRAY_DESCRIPTOR d = {W, H, 0x10, 4};  /* CU_AD_FORMAT_HALF, 4 channels */
    CUarray a;
    check(cuArrayCreate_v2(&a, &d), "cuArrayCreate");
    uint16_t texels[H][W][4];
    for (int i = 0; i < H * W * 4; i++) ((uint16_t *)texels)[i] = (uint16_t)(first + 3 * i);  /* finite halves */
    CUDA_MEMCPY2D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = 1; c.srcHost = texels; c.srcPitch = W * 8;
    c.dstMemoryType = 3; c.dstArray = a;
    c.WidthInBytes = W * 8; c.Height = H;
    check(cuMemcpy2D_v2(&c), "cuMemcpy2D");
    return a;
}

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: fake_app engine|exit|crash KERNELS.ptx\n"); return 64; }
    const char *scenario = argv[1];
    check(cuInit(0), "cuInit");
    CUmodule m;
    check(cuModuleLoadData(&m, read_file(argv[2])), "cuModuleLoadData");
    CUfunction fstruct, flist, fcrash;
    check(cuModuleGetFunction(&fstruct, m, "rr_cap_struct"), "cuModuleGetFunction");
    check(cuModuleGetFunction(&flist, m, "rr_cap_list"), "cuModuleGetFunction");
    check(cuModuleGetFunction(&fcrash, m, "rr_cap_crash"), "cuModuleGetFunction");

    uint32_t host[N];
    for (int i = 0; i < N; i++) host[i] = 7u * (uint32_t)i + 1u;
    CUdeviceptr in, outbuf, other = fake_alloc_untracked(N * 4);
    check(cuMemAlloc_v2(&in, N * 4), "cuMemAlloc");
    check(cuMemAlloc_v2(&outbuf, N * 4 + 64), "cuMemAlloc");
    check(cuMemcpyHtoD_v2(in, host, sizeof host), "cuMemcpyHtoD");
    CUdeviceptr out = outbuf + 64;

    CUDA_RESOURCE_DESC res;
    memset(&res, 0, sizeof res);
    res.res.array.hArray = rgba16f_array(0x3c00);
    CUDA_TEXTURE_DESC td;
    memset(&td, 0, sizeof td);
    td.addressMode[0] = td.addressMode[1] = td.addressMode[2] = 1;  /* clamp, point sampling, unnormalised */
    CUtexObject tex, surf;
    check(cuTexObjectCreate(&tex, &res, &td, NULL), "cuTexObjectCreate");
    res.res.array.hArray = rgba16f_array(0x2000);
    check(cuSurfObjectCreate(&surf, &res), "cuSurfObjectCreate");

    unsigned char block[136];
    memset(block, 0, sizeof block);
    uint32_t n = N, scale = 3, w = W, h = H;
    uint64_t cookie = 7;
    memcpy(block + 0, &n, 4); memcpy(block + 4, &scale, 4);
    memcpy(block + 8, &in, 8); memcpy(block + 16, &cookie, 8);
    memcpy(block + 40, &out, 8); memcpy(block + 88, &tex, 8); memcpy(block + 112, &surf, 8);
    memcpy(block + 128, &w, 4); memcpy(block + 132, &h, 4);
    void *p0[] = {block};
    check(cuLaunchKernel(fstruct, 1, 1, 1, N, 1, 1, 0, NULL, p0, NULL), "launch 0");

    if (strcmp(scenario, "crash") == 0) {
        void *pc[] = {&in};
        cuLaunchKernel(fcrash, 1, 1, 1, 32, 1, 1, 0, NULL, pc, NULL);
        return 0;  /* not reached: the fake launch aborts */
    }

    uint32_t add = 5;
    void *p1[] = {&out, &other, &n, &add};
    CUlaunchConfig config = {2, 1, 1, 32, 1, 1, 0, NULL, NULL, 0};
    check(cuLaunchKernelEx(&config, flist, p1, NULL), "launch 1");
    if (strcmp(scenario, "exit") == 0) exit(3);

    uint32_t add2 = 1000;
    void *p2[] = {&other, &in, &n, &add2};
    check(cuLaunchKernel(flist, 1, 1, 1, N, 1, 1, 0, NULL, p2, NULL), "launch 2");

    check(cuMemcpyDtoH_v2(host, in, sizeof host), "cuMemcpyDtoH");
    printf("fake_app: in[1] = %u\n", host[1]);
    return 0;
}
