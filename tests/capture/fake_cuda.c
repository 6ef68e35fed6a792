/* A fake CUDA driver (built as libcuda.so.1 by tests/test_capture.py) for testing rr capture's
 * interposer without a GPU. "Device" memory, arrays, textures and surfaces are host memory; a
 * launch runs the host function that computes what that kernel of tests/capture/kernels.cu
 * computes — with what the module it came from says (its variables, a variant: see "modules"), so
 * that a kernel replaced by another module's (rr inject) shows. It implements the entry points
 * the interposer hooks and the ones it calls itself, cuGetProcAddress (v1 and v2) resolving its
 * own functions by name as the real driver does, events on a deterministic device clock, and a
 * few fake_* helpers the fake programs use to make things the interposer does not track. With
 * $FAKE_CUDA_LOG set it appends a line per launch (`PID launch ENTRY module=N variant=V`, N the
 * module's load order) and per cuEventSynchronize (`PID event_synchronize`). */

#define _GNU_SOURCE
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* ---- modules: what the driver knows of an image ----
 * A PTX image defines the entries it has a `.entry NAME(` for, with the parameter list written
 * there, and its module variables (`.const`/`.global` declarations outside functions, zeroed);
 * an ELF image (a cubin) the entries it has a `.text.NAME` section for, with kernels.cu's
 * parameters; a fatbin (or its wrapper) every entry of kernels.cu, with their parameters. Comments in a PTX image steer the fake: `rr-fake-variant: N` adds N to what its
 * kernels write (a replacement that computes something else), `rr-fake-ns: N` is how long each
 * of its launches takes on the fake device clock (default 1000 + 10 per thread). A PTX image for
 * a target above sm_90 does not load (CUDA_ERROR_INVALID_PTX: the fake device is an sm_90). */
#define INVALID_PTX 218
#define NOT_READY 600

struct kernel;
struct module;
struct func { struct kernel *k; struct module *m; int nparams; size_t offs[8], sizes[8]; };
struct var { char name[64]; size_t size; unsigned char *data; };
struct module {
    const unsigned char *image; size_t size; int elf, fatbin, index, loaded;
    int variant; unsigned long long ns;
    struct var vars[8]; int nvars;
    struct func funcs[8];
};
static struct module modules[64];
static int nmodules;

static uint32_t rd32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t rd64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }

static size_t type_bytes(const char *t) {  /* .u32 → 4, .b8 → 1, .f64 → 8 */
    while (*t && (*t < '0' || *t > '9')) t++;
    return (size_t)atoi(t) / 8;
}

static int ident(char c) { return c == '_' || c == '$' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

/* the PTX text's `.entry name(`, just after its name; NULL when it has none */
static const char *ptx_entry(const char *text, const char *name) {
    size_t n = strlen(name);
    for (const char *p = strstr(text, ".entry"); p; p = strstr(p + 6, ".entry")) {
        const char *q = p + 6;
        while (*q == ' ' || *q == '\t') q++;
        if (strncmp(q, name, n) == 0 && !ident(q[n])) return q + n;
    }
    return NULL;
}

/* a `.param [.align A] .TYPE name[[N]]` list, laid out as the ABI does */
static int ptx_params(const char *p, size_t *offs, size_t *sizes) {
    while (*p == ' ' || *p == '\t' || *p == '\n') p++;
    if (*p != '(') return 0;
    const char *end = strchr(p, ')');
    int n = 0;
    size_t at = 0;
    for (const char *d = strstr(p, ".param"); d && d < end && n < 8; d = strstr(d + 6, ".param")) {
        size_t align = 0, width = 0, count = 1;
        char tok[64];
        const char *q = d + 6;
        while (q < end && *q != ',' && *q != ')') {
            while (*q == ' ' || *q == '\t' || *q == '\n') q++;
            int len = 0;
            while (q < end && *q != ' ' && *q != '\t' && *q != '\n' && *q != ',' && len < 63) tok[len++] = *q++;
            tok[len] = 0;
            if (strcmp(tok, ".align") == 0) {
                while (*q == ' ') q++;
                align = (size_t)strtoul(q, (char **)&q, 10);
            } else if (tok[0] == '.') {
                width = type_bytes(tok);
            } else if (strchr(tok, '[')) {
                count = (size_t)strtoul(strchr(tok, '[') + 1, NULL, 10);
            }
        }
        if (!align) align = width ? width : 1;
        at = (at + align - 1) / align * align;
        offs[n] = at;
        sizes[n] = width * count;
        at += sizes[n++];
    }
    return n;
}

/* the module variables declared outside the functions */
static void ptx_variables(struct module *m, const char *text) {
    int depth = 0;
    for (const char *line = text; *line && m->nvars < 8; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : "") {
        const char *eol = strchr(line, '\n') ? strchr(line, '\n') : line + strlen(line);
        for (const char *c = line; c < eol; c++) depth += *c == '{' ? 1 : *c == '}' ? -1 : 0;
        if (depth) continue;
        const char *space = NULL;
        for (const char *c = line; c < eol && !space; c++)
            if ((strncmp(c, ".const ", 7) == 0 || strncmp(c, ".global ", 8) == 0)) space = c;
        if (!space || memchr(line, '(', (size_t)(eol - line))) continue;
        const char *bracket = memchr(space, '[', (size_t)(eol - space)), *stop = bracket ? bracket : memchr(space, ';', (size_t)(eol - space));
        if (!stop) continue;
        const char *name = stop;
        while (name > space && ident(name[-1])) name--;
        const char *type = name - 1;
        while (type > space && type[-1] != '.') type--;
        struct var *v = &m->vars[m->nvars++];
        snprintf(v->name, sizeof v->name, "%.*s", (int)(stop - name), name);
        v->size = type_bytes(type) * (bracket ? (size_t)strtoul(bracket + 1, NULL, 10) : 1);
        v->data = calloc(1, v->size ? v->size : 1);
    }
}

/* the JIT's error log, where the loader was given one (CU_JIT_ERROR_LOG_BUFFER, …_SIZE_BYTES) */
static void error_log(unsigned n, const int *options, void **values, const char *text) {
    char *log = NULL;
    size_t size = 0;
    for (unsigned i = 0; options && i < n; i++) {
        if (options[i] == 5) log = values[i];
        if (options[i] == 6) size = (size_t)(uintptr_t)values[i];
    }
    if (log && size) snprintf(log, size, "%s", text);
}

static CUresult load_with(struct module **out, const void *image, unsigned n, const int *options, void **values);
static CUresult load(struct module **out, const void *image) { return load_with(out, image, 0, NULL, NULL); }

static CUresult load_with(struct module **out, const void *image, unsigned nopts, const int *options, void **values) {
    if (!image || nmodules == 64) return INVALID_VALUE;
    struct module *m = &modules[nmodules];
    memset(m, 0, sizeof *m);
    m->image = image;
    m->index = nmodules;
    const unsigned char *b = image;
    if (rd32(b) == 0xBA55ED50u || rd32(b) == 0x466243b1u) {
        m->fatbin = 1;
    } else if (b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F') {
        m->elf = 1;
        m->size = rd64(b + 0x28) + (size_t)(b[0x3a] | b[0x3b] << 8) * (size_t)(b[0x3c] | b[0x3d] << 8);
    } else {
        const char *text = image, *target = strstr(text, ".target sm_"), *marker;
        if (target && atoi(target + 11) > 90) {
            error_log(nopts, options, values, "ptxas application ptx input, line 9; fatal   : the fake device is an sm_90\n"
                                              "ptx JIT compilation failed");
            return INVALID_PTX;
        }
        m->size = strlen(text);
        if ((marker = strstr(text, "rr-fake-variant: "))) m->variant = atoi(marker + 17);
        if ((marker = strstr(text, "rr-fake-ns: "))) m->ns = strtoull(marker + 12, NULL, 10);
        ptx_variables(m, text);
    }
    m->loaded = 1;
    *out = m;
    nmodules++;
    return OK;
}

static struct var *variable(struct module *m, const char *name) {
    for (int i = 0; i < m->nvars; i++) if (strcmp(m->vars[i].name, name) == 0) return &m->vars[i];
    return NULL;
}

/* ---- kernels: what each entry of kernels.cu does, on host memory ---- */
static void run_struct(const unsigned char *p, unsigned threads, struct func *f) {
    uint32_t n = rd32(p), scale = rd32(p + 4), w = rd32(p + 128), h = rd32(p + 132);
    const uint32_t *in = (const uint32_t *)(uintptr_t)rd64(p + 8);
    uint32_t *out = (uint32_t *)(uintptr_t)rd64(p + 40);
    uint32_t cookie = (uint32_t)rd64(p + 16) + (uint32_t)f->m->variant;
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

static void run_list(const unsigned char *p, unsigned threads, struct func *f) {
    const uint32_t *a = (const uint32_t *)(uintptr_t)rd64(p);
    uint32_t *b = (uint32_t *)(uintptr_t)rd64(p + 8);
    uint32_t n = rd32(p + 16), add = rd32(p + 20) + (uint32_t)f->m->variant;
    for (unsigned i = 0; i < threads && i < n; i++) b[i] = a[i] + add;
}

static void run_crash(const unsigned char *p, unsigned threads, struct func *f) {
    (void)p; (void)threads; (void)f;
    fflush(stdout);
    abort();  /* the program dies in the middle of a launch */
}

/* out[i] = rr_cap_coef[i % 4], and rr_cap_launches counts the launches: the module's own variables */
static void run_const(const unsigned char *p, unsigned threads, struct func *f) {
    static unsigned char none[16];
    uint32_t *out = (uint32_t *)(uintptr_t)rd64(p), n = rd32(p + 8);
    struct var *coef = variable(f->m, "rr_cap_coef"), *count = variable(f->m, "rr_cap_launches");
    const unsigned char *c = coef ? coef->data : none;
    for (unsigned i = 0; i < threads && i < n; i++) out[i] = rd32(c + 4 * (i % 4)) + (uint32_t)f->m->variant;
    if (count) { uint32_t k = rd32(count->data) + 1; memcpy(count->data, &k, 4); }
}

struct kernel { const char *name; int nparams; size_t offs[4], sizes[4]; void (*run)(const unsigned char *, unsigned, struct func *); };
static struct kernel kernels[] = {
    {"rr_cap_struct", 1, {0}, {136}, run_struct},
    {"rr_cap_list", 4, {0, 8, 16, 20}, {8, 8, 4, 4}, run_list},
    {"rr_cap_crash", 1, {0}, {8}, run_crash},
    {"rr_cap_const", 2, {0, 8}, {8, 4}, run_const},
};
#define NKERNELS (sizeof kernels / sizeof kernels[0])

CUresult cuModuleLoadData(struct module **m, const void *image) { return load(m, image); }
CUresult cuModuleLoadDataEx(struct module **m, const void *image, unsigned n, int *o, void **v) {
    return load_with(m, image, n, o, v);
}
CUresult cuModuleLoadFatBinary(struct module **m, const void *image) { return load(m, image); }
CUresult cuLibraryLoadData(struct module **lib, const void *code, int *jo, void **jv, unsigned nj, void *lo, void **lv,
                           unsigned nl) {
    (void)lo; (void)lv; (void)nl;
    return load_with(lib, code, nj, jo, jv);
}
CUresult cuModuleUnload(struct module *m) { m->loaded = 0; return OK; }
CUresult cuLibraryUnload(struct module *lib) { lib->loaded = 0; return OK; }

/* `name` of the module, if it defines it: a function of that module */
static CUresult find(struct func **f, struct module *m, const char *name) {
    if (!m || !m->loaded) return INVALID_VALUE;
    for (size_t i = 0; i < NKERNELS; i++) {
        if (strcmp(kernels[i].name, name) != 0) continue;
        struct func *fn = &m->funcs[i];
        fn->k = &kernels[i];
        fn->m = m;
        char section[80];
        int len = snprintf(section, sizeof section, ".text.%s", name);
        if (m->elf && !memmem(m->image, m->size, section, (size_t)len + 1)) return NOT_FOUND;
        if (m->elf || m->fatbin) {
            fn->nparams = kernels[i].nparams;
            memcpy(fn->offs, kernels[i].offs, sizeof kernels[i].offs);
            memcpy(fn->sizes, kernels[i].sizes, sizeof kernels[i].sizes);
        } else {
            const char *at = ptx_entry((const char *)m->image, name);
            if (!at) return NOT_FOUND;
            fn->nparams = ptx_params(at, fn->offs, fn->sizes);
        }
        *f = fn;
        return OK;
    }
    return NOT_FOUND;
}

/* CUfunction and CUkernel are the same fake object: as with the real driver, a CUkernel can be launched */
CUresult cuModuleGetFunction(struct func **f, struct module *m, const char *name) { return find(f, m, name); }
CUresult cuLibraryGetKernel(struct func **k, struct module *lib, const char *name) { return find(k, lib, name); }
CUresult cuKernelGetFunction(struct func **f, struct func *k) { *f = k; return OK; }
CUresult cuFuncGetName(const char **name, struct func *f) { *name = f->k->name; return OK; }
CUresult cuFuncGetModule(struct module **m, struct func *f) { *m = f->m; return OK; }

/* a function got without a call the interposer hooks (as a program might enumerate its kernels) */
struct func *fake_function_untracked(struct module *m, const char *name) {
    struct func *f = NULL;
    return find(&f, m, name) == OK ? f : NULL;
}

CUresult cuFuncGetParamInfo(struct func *f, size_t i, size_t *off, size_t *size) {
    if ((int)i >= f->nparams) return INVALID_VALUE;
    *off = f->offs[i];
    *size = f->sizes[i];
    return OK;
}
CUresult cuKernelGetParamInfo(struct func *k, size_t i, size_t *off, size_t *size) { return cuFuncGetParamInfo(k, i, off, size); }

static CUresult global(CUdeviceptr *p, size_t *size, struct module *m, const char *name) {
    struct var *v = variable(m, name);
    if (!v) return NOT_FOUND;
    if (p) *p = (CUdeviceptr)(uintptr_t)v->data;
    if (size) *size = v->size;
    return OK;
}
CUresult cuModuleGetGlobal_v2(CUdeviceptr *p, size_t *size, struct module *m, const char *name) { return global(p, size, m, name); }
CUresult cuLibraryGetGlobal(CUdeviceptr *p, size_t *size, struct module *lib, const char *name) { return global(p, size, lib, name); }
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, void *stream) {
    (void)stream;
    memcpy((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    return OK;
}

/* ---- the device clock, events, and a log of what ran ($FAKE_CUDA_LOG) ---- */
static unsigned long long device_ns, launches;
struct event { unsigned long long t, after; };

static void log_line(const char *format, ...) {
    const char *path = getenv("FAKE_CUDA_LOG");
    FILE *f = path && *path ? fopen(path, "a") : NULL;
    if (!f) return;
    va_list ap;
    va_start(ap, format);
    fprintf(f, "%d ", (int)getpid());
    vfprintf(f, format, ap);
    va_end(ap);
    fputc('\n', f);
    fclose(f);
}

CUresult cuEventCreate(struct event **e, unsigned flags) { (void)flags; *e = calloc(1, sizeof **e); return *e ? OK : 2; }
CUresult cuEventDestroy_v2(struct event *e) { free(e); return OK; }
CUresult cuEventRecord(struct event *e, void *stream) { (void)stream; e->t = device_ns; e->after = launches; return OK; }
CUresult cuEventRecord_ptsz(struct event *e, void *stream) { return cuEventRecord(e, stream); }
/* an event completes once a launch has run after it (the device runs behind the host) */
CUresult cuEventQuery(struct event *e) { return launches > e->after ? OK : NOT_READY; }
CUresult cuEventSynchronize(struct event *e) { (void)e; log_line("event_synchronize"); return OK; }
CUresult cuEventElapsedTime(float *ms, struct event *start, struct event *end) {
    *ms = (float)((double)(end->t - start->t) / 1e6);
    return OK;
}
CUresult cuStreamIsCapturing(void *stream, int *status) { (void)stream; *status = 0; return OK; }
CUresult cuCtxGetCurrent(void **ctx) { static int context; *ctx = &context; return OK; }
CUresult cuCtxDestroy_v2(void *ctx) { (void)ctx; return OK; }

CUresult cuGetErrorName(CUresult r, const char **name) {
    *name = r == OK ? "CUDA_SUCCESS" : r == INVALID_VALUE ? "CUDA_ERROR_INVALID_VALUE" : r == INVALID_PTX ? "CUDA_ERROR_INVALID_PTX"
          : r == NOT_FOUND ? "CUDA_ERROR_NOT_FOUND" : r == NOT_READY ? "CUDA_ERROR_NOT_READY" : "CUDA_ERROR_UNKNOWN";
    return OK;
}
CUresult cuGetErrorString(CUresult r, const char **text) {
    *text = r == OK ? "no error" : r == INVALID_VALUE ? "invalid argument" : r == INVALID_PTX ? "a PTX JIT compilation failed"
          : r == NOT_FOUND ? "named symbol not found" : r == NOT_READY ? "device not ready" : "unknown error";
    return OK;
}

static CUresult launch(struct func *f, unsigned threads, void **params, void **extra) {
    unsigned char block[256] = {0};
    if (!f->m->loaded) return INVALID_VALUE;
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
        for (int i = 0; i < f->k->nparams; i++) memcpy(block + f->k->offs[i], params[i], f->k->sizes[i]);
    }
    log_line("launch %s module=%d variant=%d", f->k->name, f->m->index, f->m->variant);
    f->k->run(block, threads, f);
    device_ns += f->m->ns ? f->m->ns : 1000 + 10ULL * threads;
    launches++;
    return OK;
}

CUresult cuLaunchKernel(struct func *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, void *stream, void **params, void **extra) {
    (void)shared; (void)stream;
    return launch(f, gx * gy * gz * bx * by * bz, params, extra);
}

CUresult cuLaunchKernelEx(const CUlaunchConfig *c, struct func *f, void **params, void **extra) {
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
    FN(cuModuleUnload), FN(cuLibraryUnload), FN(cuFuncGetModule), {"cuModuleGetGlobal", (void *)cuModuleGetGlobal_v2},
    FN(cuLibraryGetGlobal), {"cuMemcpyDtoDAsync", (void *)cuMemcpyDtoDAsync_v2}, FN(cuEventCreate),
    {"cuEventDestroy", (void *)cuEventDestroy_v2}, FN(cuEventRecord), FN(cuEventQuery), FN(cuEventSynchronize),
    FN(cuEventElapsedTime), FN(cuStreamIsCapturing), FN(cuCtxGetCurrent), {"cuCtxDestroy", (void *)cuCtxDestroy_v2},
    FN(cuGetErrorName), FN(cuGetErrorString),
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
