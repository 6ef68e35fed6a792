/* A fake runtime-API program: it reaches the driver the way cudart does — dlopen("libcuda.so.1")
 * into a local scope, dlsym(handle, "cuGetProcAddress_v2"), then every entry point through
 * cuGetProcAddress (asked first for cuGetProcAddress itself, at version 12000) — and loads its
 * module as a library (cuLibraryLoadData), launching the CUkernel handle:
 *   fake_runtime KERNELS.ptx
 *   0 rr_cap_list  parameters passed as one `extra` buffer (CU_LAUNCH_PARAM_BUFFER_POINTER)
 *   1 rr_cap_list  kernelParams, through cuLaunchKernelEx */

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"

typedef CUresult (*gpa_t)(const char *, void **, int, unsigned long long, int *);

static gpa_t gpa;

static void *entry(const char *name) {
    void *p = NULL;
    int status = 1;
    if (gpa(name, &p, 13000, 0, &status) != 0 || !p) { fprintf(stderr, "fake_runtime: no %s\n", name); exit(12); }
    return p;
}

static void check(CUresult r, const char *what) {
    if (r != 0) { fprintf(stderr, "fake_runtime: %s failed: %d\n", what, r); exit(10); }
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: fake_runtime KERNELS.ptx\n"); return 64; }
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) { fprintf(stderr, "fake_runtime: %s\n", dlerror()); return 13; }
    gpa_t first = (gpa_t)dlsym(h, "cuGetProcAddress_v2");
    if (!first) return 13;
    void *p = NULL;
    check(first("cuGetProcAddress", &p, 12000, 0, NULL), "cuGetProcAddress");
    gpa = (gpa_t)p;

    FILE *f = fopen(argv[1], "rb");
    if (!f) { perror(argv[1]); return 11; }
    static char text[1 << 20];
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = 0;

    check(((CUresult (*)(unsigned))entry("cuInit"))(0), "cuInit");
    void *lib, *kernel;
    check(((CUresult (*)(void **, const void *, void *, void **, unsigned, void *, void **, unsigned))entry("cuLibraryLoadData"))(
              &lib, text, NULL, NULL, 0, NULL, NULL, 0), "cuLibraryLoadData");
    check(((CUresult (*)(void **, void *, const char *))entry("cuLibraryGetKernel"))(&kernel, lib, "rr_cap_list"),
          "cuLibraryGetKernel");
    CUresult (*alloc)(CUdeviceptr *, size_t) = (CUresult (*)(CUdeviceptr *, size_t))entry("cuMemAlloc");
    CUresult (*htod)(CUdeviceptr, const void *, size_t) = (CUresult (*)(CUdeviceptr, const void *, size_t))entry("cuMemcpyHtoD");
    CUresult (*launch)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **, void **) =
        (CUresult (*)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **, void **))entry("cuLaunchKernel");
    CUresult (*launch_ex)(const CUlaunchConfig *, void *, void **, void **) =
        (CUresult (*)(const CUlaunchConfig *, void *, void **, void **))entry("cuLaunchKernelEx");

    uint32_t host[32];
    for (int i = 0; i < 32; i++) host[i] = (uint32_t)(i * i);
    CUdeviceptr a, b;
    check(alloc(&a, sizeof host), "cuMemAlloc");
    check(alloc(&b, sizeof host), "cuMemAlloc");
    check(htod(a, host, sizeof host), "cuMemcpyHtoD");

    struct { CUdeviceptr a, b; uint32_t n, add; } params = {a, b, 32, 11};
    size_t size = sizeof params;
    void *extra[] = {(void *)1, &params, (void *)2, &size, (void *)0};
    check(launch(kernel, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, extra), "launch 0");

    uint32_t n = 32, add = 100;
    void *kp[] = {&b, &a, &n, &add};
    CUlaunchConfig c = {1, 1, 1, 32, 1, 1, 0, NULL, NULL, 0};
    check(launch_ex(&c, kernel, kp, NULL), "launch 1");
    printf("fake_runtime: done\n");
    return 0;
}
