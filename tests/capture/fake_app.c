/* A fake engine, linked against the (fake) driver API as a driver-API program is:
 *   fake_app SCENARIO KERNELS.ptx
 * Every scenario loads the PTX of tests/capture/kernels.cu and launches, in order,
 *   0 rr_cap_struct  one 136-byte block: pointers at 8 and 40 (40 points 64 bytes into its
 *                    allocation), a texture at 88 and a surface at 112, both RGBA16F 8x8
 *   1 rr_cap_list    (cuLaunchKernelEx) reads what launch 0 wrote, writes memory allocated where
 *                    the interposer does not see it (found through cuMemGetAddressRange)
 *   2 rr_cap_list    (cuLaunchKernel) reads what launch 1 wrote
 * then exits 0. SCENARIO `exit` exits with status 3 after launch 1; `crash` launches
 * rr_cap_crash after launch 0, whose fake launch aborts the program. SCENARIO `const` sets the
 * module's rr_cap_coef (cuModuleGetGlobal, cuMemcpyHtoD) and launches rr_cap_const twice, then
 * prints what it wrote and the module's rr_cap_launches; `untracked` launches rr_cap_list once
 * through a handle got without a call the interposer hooks (fake_function_untracked).
 *   fake_app SCENARIO KERNELS.ptx FILL [keep]
 * also fills the file system of the file FILL after launch 0 (a disk that another writer fills
 * mid-capture) and removes FILL before it exits, unless `keep`.
 *
 *   fake_app bench KERNELS.ptx WIDTH HEIGHT ITERATIONS
 * is capture_app's shape for benchmarks/capture_overhead.py --fake: per iteration rr_cap_struct on
 * 16 bytes per pixel in and out and a WIDTHxHEIGHT texture and surface, then rr_cap_list on its
 * output, each iteration's milliseconds printed. */

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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
CUfunction fake_function_untracked(CUmodule, const char *);
CUresult cuModuleGetGlobal_v2(CUdeviceptr *, size_t *, CUmodule, const char *);

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

static CUarray rgba16f_array(uint16_t first, size_t w, size_t h) {
    CUDA_ARRAY_DESCRIPTOR d = {w, h, 0x10, 4};  /* CU_AD_FORMAT_HALF, 4 channels */
    CUarray a;
    check(cuArrayCreate_v2(&a, &d), "cuArrayCreate");
    uint16_t *texels = malloc(w * h * 8);
    if (!texels) exit(12);
    for (size_t i = 0; i < h * w * 4; i++) texels[i] = (uint16_t)(first + 3 * (i & 0xfff));  /* finite halves */
    CUDA_MEMCPY2D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = 1; c.srcHost = texels; c.srcPitch = w * 8;
    c.dstMemoryType = 3; c.dstArray = a;
    c.WidthInBytes = w * 8; c.Height = h;
    check(cuMemcpy2D_v2(&c), "cuMemcpy2D");
    free(texels);
    return a;
}

/* rr_cap_struct's 136-byte block: n and scale 3 at 0, in at 8, a cookie at 16, out at 40, a
 * texture (made here, texels from 0x3c00) at 88, a surface (from 0x2000) at 112, w and h at 128 */
static void engine_block(unsigned char *block, uint32_t n, CUdeviceptr in, CUdeviceptr out, uint32_t w, uint32_t h) {
    CUDA_RESOURCE_DESC res;
    memset(&res, 0, sizeof res);
    res.res.array.hArray = rgba16f_array(0x3c00, w, h);
    CUDA_TEXTURE_DESC td;
    memset(&td, 0, sizeof td);
    td.addressMode[0] = td.addressMode[1] = td.addressMode[2] = 1;  /* clamp, point sampling, unnormalised */
    CUtexObject tex, surf;
    check(cuTexObjectCreate(&tex, &res, &td, NULL), "cuTexObjectCreate");
    res.res.array.hArray = rgba16f_array(0x2000, w, h);
    check(cuSurfObjectCreate(&surf, &res), "cuSurfObjectCreate");
    uint32_t scale = 3;
    uint64_t cookie = 7;
    memset(block, 0, 136);
    memcpy(block + 0, &n, 4); memcpy(block + 4, &scale, 4);
    memcpy(block + 8, &in, 8); memcpy(block + 16, &cookie, 8);
    memcpy(block + 40, &out, 8); memcpy(block + 88, &tex, 8); memcpy(block + 112, &surf, 8);
    memcpy(block + 128, &w, 4); memcpy(block + 132, &h, 4);
}

static const char *on_exit_remove;
static void remove_fill(void) { if (on_exit_remove) unlink(on_exit_remove); }

/* writes to `path` until its file system is full (removed at exit when on_exit_remove names it) */
static void fill(const char *path) {
    atexit(remove_fill);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) { perror(path); exit(13); }
    static char zeros[4096];
    while (write(fd, zeros, sizeof zeros) > 0) {}
    if (errno != ENOSPC) { perror(path); exit(13); }
    close(fd);
}

static double ms_since(const struct timespec *t0) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) * 1e3 + (double)(t.tv_nsec - t0->tv_nsec) / 1e6;
}

static int bench(CUfunction fstruct, CUfunction flist, uint32_t w, uint32_t h, int iterations) {
    uint32_t n = w * h * 4, add = 5;
    CUdeviceptr in, out, other;
    check(cuMemAlloc_v2(&in, (size_t)n * 4), "cuMemAlloc");
    check(cuMemAlloc_v2(&out, (size_t)n * 4), "cuMemAlloc");
    check(cuMemAlloc_v2(&other, (size_t)n * 4), "cuMemAlloc");
    uint32_t *host = malloc((size_t)n * 4);
    if (!host) exit(12);
    for (uint32_t i = 0; i < n; i++) host[i] = 7u * i + 1u;
    check(cuMemcpyHtoD_v2(in, host, (size_t)n * 4), "cuMemcpyHtoD");
    unsigned char block[136];
    engine_block(block, n, in, out, w, h);
    void *p0[] = {block}, *p1[] = {&out, &other, &n, &add};
    unsigned blocks = n < 256 ? 1 : n / 256;
    for (int it = 0; it < iterations; it++) {
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        check(cuLaunchKernel(fstruct, blocks, 1, 1, 256, 1, 1, 0, NULL, p0, NULL), "launch struct");
        check(cuLaunchKernel(flist, blocks, 1, 1, 256, 1, 1, 0, NULL, p1, NULL), "launch list");
        printf("fake_app: iteration %d: %.3f ms\n", it, ms_since(&t0));
    }
    return 0;
}

static int const_scenario(CUmodule m) {
    CUfunction f;
    check(cuModuleGetFunction(&f, m, "rr_cap_const"), "cuModuleGetFunction");
    CUdeviceptr coef, count, out;
    size_t size;
    uint32_t values[4] = {10, 20, 30, 40}, host[8], launched;
    check(cuModuleGetGlobal_v2(&coef, &size, m, "rr_cap_coef"), "cuModuleGetGlobal");
    check(cuMemcpyHtoD_v2(coef, values, sizeof values), "cuMemcpyHtoD");
    check(cuMemAlloc_v2(&out, sizeof host), "cuMemAlloc");
    uint32_t n = 8;
    void *p[] = {&out, &n};
    for (int i = 0; i < 2; i++) check(cuLaunchKernel(f, 1, 1, 1, 8, 1, 1, 0, NULL, p, NULL), "launch const");
    check(cuMemcpyDtoH_v2(host, out, sizeof host), "cuMemcpyDtoH");
    check(cuModuleGetGlobal_v2(&count, &size, m, "rr_cap_launches"), "cuModuleGetGlobal");
    check(cuMemcpyDtoH_v2(&launched, count, 4), "cuMemcpyDtoH");
    printf("fake_app: const %u %u %u %u, launches %u\n", host[0], host[1], host[2], host[3], launched);
    return 0;
}

static int untracked_scenario(CUmodule m) {
    CUfunction f = fake_function_untracked(m, "rr_cap_list");
    uint32_t host[N], n = N, add = 5;
    for (int i = 0; i < N; i++) host[i] = (uint32_t)i;
    CUdeviceptr a, b;
    check(cuMemAlloc_v2(&a, sizeof host), "cuMemAlloc");
    check(cuMemAlloc_v2(&b, sizeof host), "cuMemAlloc");
    check(cuMemcpyHtoD_v2(a, host, sizeof host), "cuMemcpyHtoD");
    void *p[] = {&a, &b, &n, &add};
    check(cuLaunchKernel(f, 1, 1, 1, N, 1, 1, 0, NULL, p, NULL), "launch untracked");
    check(cuMemcpyDtoH_v2(host, b, sizeof host), "cuMemcpyDtoH");
    printf("fake_app: untracked b[1] = %u\n", host[1]);
    return 0;
}

int main(int argc, char **argv) {
    const char *scenario = argc > 1 ? argv[1] : "";
    int bench_run = strcmp(scenario, "bench") == 0;
    if (bench_run ? argc != 6 : (argc < 3 || argc > 5 || (argc == 5 && strcmp(argv[4], "keep") != 0))) {
        fprintf(stderr, "usage: fake_app engine|exit|crash|const|untracked KERNELS.ptx [FILL [keep]]"
                        " | bench KERNELS.ptx WIDTH HEIGHT ITERATIONS\n");
        return 64;
    }
    const char *filled = !bench_run && argc >= 4 ? argv[3] : NULL;
    if (filled && argc == 4) on_exit_remove = filled;
    check(cuInit(0), "cuInit");
    CUmodule m;
    check(cuModuleLoadData(&m, read_file(argv[2])), "cuModuleLoadData");
    if (strcmp(scenario, "const") == 0) return const_scenario(m);
    if (strcmp(scenario, "untracked") == 0) return untracked_scenario(m);
    CUfunction fstruct, flist, fcrash;
    check(cuModuleGetFunction(&fstruct, m, "rr_cap_struct"), "cuModuleGetFunction");
    check(cuModuleGetFunction(&flist, m, "rr_cap_list"), "cuModuleGetFunction");
    check(cuModuleGetFunction(&fcrash, m, "rr_cap_crash"), "cuModuleGetFunction");
    if (bench_run)
        return bench(fstruct, flist, (uint32_t)atoi(argv[3]), (uint32_t)atoi(argv[4]), atoi(argv[5]));

    uint32_t host[N];
    for (int i = 0; i < N; i++) host[i] = 7u * (uint32_t)i + 1u;
    CUdeviceptr in, outbuf, other = fake_alloc_untracked(N * 4);
    check(cuMemAlloc_v2(&in, N * 4), "cuMemAlloc");
    check(cuMemAlloc_v2(&outbuf, N * 4 + 64), "cuMemAlloc");
    check(cuMemcpyHtoD_v2(in, host, sizeof host), "cuMemcpyHtoD");
    CUdeviceptr out = outbuf + 64;

    unsigned char block[136];
    uint32_t n = N;
    engine_block(block, n, in, out, W, H);
    void *p0[] = {block};
    check(cuLaunchKernel(fstruct, 1, 1, 1, N, 1, 1, 0, NULL, p0, NULL), "launch 0");
    if (filled) fill(filled);

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
