/* A fake CUDA driver (built as libcuda.so.1 by tests/test_capture.py) for testing rr capture's
 * interposer without a GPU. "Device" memory, arrays, textures and surfaces are host memory; a
 * launch runs the host function that computes what that kernel of tests/capture/kernels.cu
 * computes. It implements the entry points the interposer hooks and the ones it calls itself,
 * cuGetProcAddress (v1 and v2) resolving its own functions by name as the real driver does, and
 * a few fake_* helpers the fake programs use to make things the interposer does not track. */

#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"

#define OK 0
#define INVALID_VALUE 1
#define NOT_FOUND 500

/* ---- memory: allocations the driver knows (cuMemGetAddressRange) ---- */
struct region { CUdeviceptr base; size_t size; };
static struct region regions[256];
static int nregions;

static CUdeviceptr fake_malloc(size_t n) {
    void *p = calloc(1, n ? n : 1);
    regions[nregions].base = (CUdeviceptr)(uintptr_t)p;
    regions[nregions].size = n;
    nregions++;
    return (CUdeviceptr)(uintptr_t)p;
}

/* memory the interposer cannot have seen allocated: found through cuMemGetAddressRange */
CUdeviceptr fake_alloc_untracked(size_t n) { return fake_malloc(n); }

CUresult cuInit(unsigned flags) { (void)flags; return OK; }
CUresult cuCtxSynchronize(void) { return OK; }
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) { *p = fake_malloc(n); return OK; }
CUresult cuMemFree_v2(CUdeviceptr p) { (void)p; return OK; }  /* kept: addresses stay unique */
CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *h, size_t n) { memcpy((void *)(uintptr_t)d, h, n); return OK; }
CUresult cuMemcpyDtoH_v2(void *h, CUdeviceptr d, size_t n) { memcpy(h, (void *)(uintptr_t)d, n); return OK; }

/* page-locked host memory: plain host memory here */
CUresult cuMemHostAlloc(void **p, size_t n, unsigned flags) {
    (void)flags;
    *p = malloc(n ? n : 1);
    return *p ? OK : 2;
}
CUresult cuMemFreeHost(void *p) { free(p); return OK; }

CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr p) {
    for (int i = 0; i < nregions; i++)
        if (p >= regions[i].base && p < regions[i].base + regions[i].size) {
            if (base) *base = regions[i].base;
            if (size) *size = regions[i].size;
            return OK;
        }
    return NOT_FOUND;
}

/* ---- arrays, textures, surfaces ---- */
typedef struct { size_t Width, Height, Depth; int Format; unsigned NumChannels, Flags; } ARRAY3D_DESC;
struct array { ARRAY3D_DESC d; unsigned char *data; size_t pitch; };

static size_t format_bytes(int f) { return f == 0x10 || f == 0x02 || f == 0x09 ? 2 : f == 0x01 || f == 0x08 ? 1 : 4; }

CUresult cuArrayCreate_v2(struct array **out, const CUDA_ARRAY_DESCRIPTOR *d) {
    struct array *a = calloc(1, sizeof *a);
    a->d.Width = d->Width; a->d.Height = d->Height; a->d.Format = d->Format; a->d.NumChannels = d->NumChannels;
    a->pitch = d->Width * d->NumChannels * format_bytes(d->Format);
    a->data = calloc(1, a->pitch * (d->Height ? d->Height : 1));
    *out = a;
    return OK;
}

CUresult cuArray3DGetDescriptor_v2(ARRAY3D_DESC *d, struct array *a) { *d = a->d; return OK; }

CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *c) {
    for (size_t y = 0; y < c->Height; y++) {
        struct array *sa = c->srcArray, *da = c->dstArray;
        const unsigned char *src = c->srcMemoryType == 3 ? sa->data + (c->srcY + y) * sa->pitch + c->srcXInBytes
                                                         : (const unsigned char *)c->srcHost + (c->srcY + y) * c->srcPitch + c->srcXInBytes;
        unsigned char *dst = c->dstMemoryType == 3 ? da->data + (c->dstY + y) * da->pitch + c->dstXInBytes
                                                   : (unsigned char *)c->dstHost + (c->dstY + y) * c->dstPitch + c->dstXInBytes;
        memcpy(dst, src, c->WidthInBytes);
    }
    return OK;
}

struct object { int kind; CUDA_RESOURCE_DESC res; CUDA_TEXTURE_DESC tex; };
static struct object objects[64];
static int nobjects;  /* handles are 1, 2, …: small integers, as the real driver's are */

CUresult cuTexObjectCreate(CUtexObject *t, const CUDA_RESOURCE_DESC *r, const CUDA_TEXTURE_DESC *d, const void *view) {
    (void)view;
    objects[nobjects] = (struct object){1, *r, *d};
    *t = (CUtexObject)++nobjects;
    return OK;
}

CUresult cuSurfObjectCreate(CUtexObject *s, const CUDA_RESOURCE_DESC *r) {
    objects[nobjects] = (struct object){2, *r, {{0}}};
    *s = (CUtexObject)++nobjects;
    return OK;
}

static struct object *object(CUtexObject h, int kind) {
    return h >= 1 && h <= (CUtexObject)nobjects && objects[h - 1].kind == kind ? &objects[h - 1] : NULL;
}

CUresult cuTexObjectGetResourceDesc(CUDA_RESOURCE_DESC *r, CUtexObject t) {
    struct object *o = object(t, 1);
    if (!o) return INVALID_VALUE;
    *r = o->res;
    return OK;
}

CUresult cuTexObjectGetTextureDesc(CUDA_TEXTURE_DESC *d, CUtexObject t) {
    struct object *o = object(t, 1);
    if (!o) return INVALID_VALUE;
    *d = o->tex;
    return OK;
}

CUresult cuSurfObjectGetResourceDesc(CUDA_RESOURCE_DESC *r, CUtexObject s) {
    struct object *o = object(s, 2);
    if (!o) return INVALID_VALUE;
    *r = o->res;
    return OK;
}

CUresult cuTexObjectDestroy(CUtexObject t) { (void)t; return OK; }
CUresult cuSurfObjectDestroy(CUtexObject s) { (void)s; return OK; }

/* ---- kernels: what each entry of kernels.cu does, on host memory ---- */
static uint32_t rd32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t rd64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }

static void run_struct(const unsigned char *p, unsigned threads) {
    uint32_t n = rd32(p), scale = rd32(p + 4), w = rd32(p + 128), h = rd32(p + 132);
    const uint32_t *in = (const uint32_t *)(uintptr_t)rd64(p + 8);
    uint32_t *out = (uint32_t *)(uintptr_t)rd64(p + 40);
    uint32_t cookie = (uint32_t)rd64(p + 16);
    struct array *tex = object(rd64(p + 88), 1)->res.res.array.hArray;
    struct array *surf = object(rd64(p + 112), 2)->res.res.array.hArray;
    for (unsigned i = 0; i < threads; i++) {
        if (i < n) out[i] = in[i] * scale + i + cookie;
        if (i < w * h) {
            unsigned x = i % w, y = i / w;
            const uint16_t *t = (const uint16_t *)(tex->data + y * tex->pitch) + 4 * x;
            uint16_t *s = (uint16_t *)(surf->data + y * surf->pitch) + 4 * x;
            uint16_t v[4] = {t[3], t[2], t[1], t[0]};
            memcpy(s, v, sizeof v);
        }
    }
}

static void run_list(const unsigned char *p, unsigned threads) {
    const uint32_t *a = (const uint32_t *)(uintptr_t)rd64(p);
    uint32_t *b = (uint32_t *)(uintptr_t)rd64(p + 8);
    uint32_t n = rd32(p + 16), add = rd32(p + 20);
    for (unsigned i = 0; i < threads && i < n; i++) b[i] = a[i] + add;
}

static void run_crash(const unsigned char *p, unsigned threads) {
    (void)p; (void)threads;
    fflush(stdout);
    abort();  /* the program dies in the middle of a launch */
}

struct kernel { const char *name; int nparams; size_t offs[4], sizes[4]; void (*run)(const unsigned char *, unsigned); };
static struct kernel kernels[] = {
    {"rr_cap_struct", 1, {0}, {136}, run_struct},
    {"rr_cap_list", 4, {0, 8, 16, 20}, {8, 8, 4, 4}, run_list},
    {"rr_cap_crash", 1, {0}, {8}, run_crash},
};
#define NKERNELS (sizeof kernels / sizeof kernels[0])

/* a module or library: the image is only checked to be there */
struct module { const void *image; };
static struct module modules[16];
static int nmodules;

static CUresult load(struct module **m, const void *image) {
    if (!image) return INVALID_VALUE;
    modules[nmodules].image = image;
    *m = &modules[nmodules++];
    return OK;
}

CUresult cuModuleLoadData(struct module **m, const void *image) { return load(m, image); }
CUresult cuModuleLoadDataEx(struct module **m, const void *image, unsigned n, void *o, void **v) {
    (void)n; (void)o; (void)v;
    return load(m, image);
}
CUresult cuModuleLoadFatBinary(struct module **m, const void *image) { return load(m, image); }
CUresult cuLibraryLoadData(struct module **lib, const void *code, void *jo, void **jv, unsigned nj, void *lo, void **lv,
                           unsigned nl) {
    (void)jo; (void)jv; (void)nj; (void)lo; (void)lv; (void)nl;
    return load(lib, code);
}

static CUresult find(struct kernel **k, const char *name) {
    for (size_t i = 0; i < NKERNELS; i++)
        if (strcmp(kernels[i].name, name) == 0) { *k = &kernels[i]; return OK; }
    return NOT_FOUND;
}

/* CUfunction and CUkernel are the same fake object: as with the real driver, a CUkernel can be launched */
CUresult cuModuleGetFunction(struct kernel **f, struct module *m, const char *name) { (void)m; return find(f, name); }
CUresult cuLibraryGetKernel(struct kernel **k, struct module *lib, const char *name) { (void)lib; return find(k, name); }
CUresult cuKernelGetFunction(struct kernel **f, struct kernel *k) { *f = k; return OK; }
CUresult cuFuncGetName(const char **name, struct kernel *f) { *name = f->name; return OK; }

CUresult cuFuncGetParamInfo(struct kernel *f, size_t i, size_t *off, size_t *size) {
    if ((int)i >= f->nparams) return INVALID_VALUE;
    *off = f->offs[i];
    *size = f->sizes[i];
    return OK;
}
CUresult cuKernelGetParamInfo(struct kernel *k, size_t i, size_t *off, size_t *size) { return cuFuncGetParamInfo(k, i, off, size); }

static CUresult launch(struct kernel *f, unsigned threads, void **params, void **extra) {
    unsigned char block[256] = {0};
    if (extra) {  /* CU_LAUNCH_PARAM_BUFFER_POINTER, CU_LAUNCH_PARAM_BUFFER_SIZE, CU_LAUNCH_PARAM_END */
        const void *buffer = NULL;
        size_t size = 0;
        for (void **e = extra; *e; e += 2) {
            if (*e == (void *)1) buffer = e[1];
            if (*e == (void *)2) size = *(size_t *)e[1];
        }
        if (!buffer || size > sizeof block) return INVALID_VALUE;
        memcpy(block, buffer, size);
    } else {
        for (int i = 0; i < f->nparams; i++) memcpy(block + f->offs[i], params[i], f->sizes[i]);
    }
    f->run(block, threads);
    return OK;
}

CUresult cuLaunchKernel(struct kernel *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, void *stream, void **params, void **extra) {
    (void)shared; (void)stream;
    return launch(f, gx * gy * gz * bx * by * bz, params, extra);
}

CUresult cuLaunchKernelEx(const CUlaunchConfig *c, struct kernel *f, void **params, void **extra) {
    return launch(f, c->gx * c->gy * c->gz * c->bx * c->by * c->bz, params, extra);
}

/* ---- cuGetProcAddress: the driver's functions by name, as cudart looks them up ---- */
#define FN(name) {#name, (void *)name}
static const struct { const char *name; void *fn; } table[] = {
    FN(cuInit), FN(cuCtxSynchronize), FN(cuModuleLoadData), FN(cuModuleLoadDataEx), FN(cuModuleLoadFatBinary),
    FN(cuLibraryLoadData), FN(cuModuleGetFunction), FN(cuLibraryGetKernel), FN(cuKernelGetFunction),
    FN(cuFuncGetName), FN(cuFuncGetParamInfo), FN(cuKernelGetParamInfo), FN(cuLaunchKernel), FN(cuLaunchKernelEx),
    FN(cuTexObjectCreate), FN(cuSurfObjectCreate), FN(cuTexObjectGetResourceDesc), FN(cuTexObjectGetTextureDesc),
    FN(cuSurfObjectGetResourceDesc), FN(cuTexObjectDestroy), FN(cuSurfObjectDestroy),
    FN(cuMemHostAlloc), FN(cuMemFreeHost), {"cuMemAlloc", (void *)cuMemAlloc_v2}, {"cuMemFree", (void *)cuMemFree_v2},
    {"cuMemcpyHtoD", (void *)cuMemcpyHtoD_v2}, {"cuMemcpyDtoH", (void *)cuMemcpyDtoH_v2},
    {"cuMemGetAddressRange", (void *)cuMemGetAddressRange_v2}, {"cuArrayCreate", (void *)cuArrayCreate_v2},
    {"cuArray3DGetDescriptor", (void *)cuArray3DGetDescriptor_v2}, {"cuMemcpy2D", (void *)cuMemcpy2D_v2},
};

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags, int *status);

CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, unsigned long long flags) {
    (void)version; (void)flags;
    if (strcmp(symbol, "cuGetProcAddress") == 0) {
        *pfn = version >= 12000 ? (void *)cuGetProcAddress_v2 : (void *)cuGetProcAddress;
        return OK;
    }
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(table[i].name, symbol) == 0) { *pfn = table[i].fn; return OK; }
    *pfn = NULL;
    return NOT_FOUND;
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags, int *status) {
    CUresult r = cuGetProcAddress(symbol, pfn, version, flags);
    if (status) *status = r == OK ? 0 : 1;
    return r;
}
