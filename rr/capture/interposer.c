/* rr capture's interposer: preloaded (LD_PRELOAD) into a CUDA program, it sits on the CUDA driver
 * API and writes, for every selected kernel launch, what replaying it needs: the module as loaded,
 * the entry, grid, block, dynamic shared memory, the raw parameter bytes, and every device buffer,
 * texture and surface the parameter words refer to, copied before the launch and after it.
 *
 * It is built by rr/capture/build.py with the system C compiler (cc -shared -fPIC -O2 ... -ldl
 * -lpthread) and needs no CUDA headers: the few types and prototypes it uses are declared below,
 * checked against CUDA 13's cuda.h (the `_v2` names are what cuda.h #defines the plain names to).
 *
 * How calls reach it. A program linked against libcuda calls the exported symbols below (the
 * preload wins the symbol lookup; the real function is the next one, dlsym(RTLD_NEXT)). cudart
 * instead dlopen()s libcuda.so.1, looks up cuGetProcAddress_v2 with dlsym(handle, ...) — a lookup
 * that a preload does not interpose, so dlsym is wrapped too — and then resolves every driver
 * entry point through cuGetProcAddress: the wrapper returns its own functions for the hooked
 * names (remembering the real pointer the driver gave for that name, version and stream flags)
 * and the driver's otherwise.
 *
 * What it writes (the Python side, rr/capture/convert.py, turns it into launch directories), under
 * $RR_CAPTURE_DIR:
 *   modules/<fnv1a64>.{ptx,cubin,fatbin}   each module image once, named like the corpus's
 *   <pid>/names.txt                        every entry name launched, once, as first launched
 *   <pid>/counts.txt                       at exit: launches per entry name
 *   <pid>/status.txt                       "capturing", or why capturing stopped (a write failed:
 *                                          a full disk): SEQ, ENTRY (empty: a module), STRERROR,
 *                                          PATH: WHY, tab-separated (written when the process's
 *                                          directory is made, so that the reason has its room)
 *   <pid>/NNNNNN/                          launch NNNNNN of the process (0-based, all launches
 *       record.json, params.bin            counted), written as .NNNNNN.tmp and renamed when
 *       before/<b|a><k>.npy, after/...     complete: a crash leaves no partial launch directory
 *
 * Selection: $RR_CAPTURE_KERNELS, a POSIX extended regular expression searched in the entry name;
 * $RR_CAPTURE_LAUNCHES, "A-B,C-D" half-open ranges (B empty: open) of the index among the
 * launches that match the expression (0 is the first).
 *
 * Injection (rr inject, rr capture --inject; rr/capture/inject.py): $RR_INJECT_DIR is a private
 * directory rr made, holding manifest.tsv, one line each,
 *   replace TAB ENTRY TAB IMAGE TAB VARS TAB SHOWN   ENTRY's code is replaced by that of IMAGE (a
 *                                                    file of the directory: PTX with its NUL, or a
 *                                                    cubin); VARS its module variables, NAME:c
 *                                                    (.const) or NAME:g (.global), comma-separated,
 *                                                    or -; SHOWN the user's name of the file
 *   time TAB ENTRY                                   every launch of ENTRY is timed (CUDA events)
 * When the program gets ENTRY from a module or library of its own (cuModuleGetFunction,
 * cuLibraryGetKernel, or — for a handle got some other way — at its first launch), IMAGE is loaded
 * beside that module, once, as a module (a library for a library), its parameter list and
 * variables checked against the program's, and the program is handed IMAGE's function instead
 * (a binding); everything else of its module stays the program's. Each process writes
 * $RR_INJECT_DIR/<pid>.jsonl: a JSON object a line — each binding's decision when it is made, and
 * at exit the launch counts and the times. */

#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <regex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* ---- the driver API's types, as cuda.h (CUDA 13) declares them on 64-bit Linux ---- */
typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef void *CUfunction, *CUmodule, *CUlibrary, *CUkernel, *CUstream, *CUarray, *CUcontext, *CUmemoryPool, *CUevent;
typedef int CUdevice;
typedef unsigned long long CUtexObject, CUsurfObject, CUmemGenericAllocationHandle;

#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_NOT_READY 600
#define CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM 2
#define CU_MEMORYTYPE_HOST 1
#define CU_MEMORYTYPE_ARRAY 3
#define CU_RESOURCE_TYPE_ARRAY 0

typedef struct {
    unsigned int id;
    char pad[4];
    char value[64];
} CUlaunchAttribute;

typedef struct {
    unsigned int gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
    CUstream hStream;
    CUlaunchAttribute *attrs;
    unsigned int numAttrs;
} CUlaunchConfig;

typedef struct {
    int resType;
    union {
        struct { CUarray hArray; } array;
        struct { void *hMipmappedArray; } mipmap;
        struct { CUdeviceptr devPtr; int format; unsigned int numChannels; size_t sizeInBytes; } linear;
        struct { CUdeviceptr devPtr; int format; unsigned int numChannels; size_t width, height, pitchInBytes; } pitch2D;
        struct { int reserved[32]; } reserved;
    } res;
    unsigned int flags;
} CUDA_RESOURCE_DESC;

typedef struct {
    int addressMode[3];
    int filterMode;
    unsigned int flags;
    unsigned int maxAnisotropy;
    int mipmapFilterMode;
    float mipmapLevelBias, minMipmapLevelClamp, maxMipmapLevelClamp;
    float borderColor[4];
    int reserved[12];
} CUDA_TEXTURE_DESC;

typedef struct {
    size_t Width, Height, Depth;
    int Format;
    unsigned int NumChannels, Flags;
} CUDA_ARRAY3D_DESCRIPTOR;

typedef struct {
    size_t srcXInBytes, srcY;
    int srcMemoryType;
    const void *srcHost;
    CUdeviceptr srcDevice;
    CUarray srcArray;
    size_t srcPitch;
    size_t dstXInBytes, dstY;
    int dstMemoryType;
    void *dstHost;
    CUdeviceptr dstDevice;
    CUarray dstArray;
    size_t dstPitch;
    size_t WidthInBytes, Height;
} CUDA_MEMCPY2D;

typedef struct {
    size_t srcXInBytes, srcY, srcZ, srcLOD;
    int srcMemoryType;
    const void *srcHost;
    CUdeviceptr srcDevice;
    CUarray srcArray;
    void *reserved0;
    size_t srcPitch, srcHeight;
    size_t dstXInBytes, dstY, dstZ, dstLOD;
    int dstMemoryType;
    void *dstHost;
    CUdeviceptr dstDevice;
    CUarray dstArray;
    void *reserved1;
    size_t dstPitch, dstHeight;
    size_t WidthInBytes, Height, Depth;
} CUDA_MEMCPY3D;

/* ---- finding the real functions ---- */
static void *(*real_dlsym)(void *, const char *);

static void init_dlsym(void) {
    if (real_dlsym) return;
    static const char *versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17", NULL};
    for (int i = 0; versions[i] && !real_dlsym; i++)
        real_dlsym = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", versions[i]);
}

/* The driver's own definition of `name`: the next one after this library, else libcuda's (cudart
 * loads libcuda with dlopen, possibly into a local scope that RTLD_NEXT does not search). */
static void *find_real(const char *name) {
    init_dlsym();
    if (!real_dlsym) return NULL;
    void *p = real_dlsym(RTLD_NEXT, name);
    if (p) return p;
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (!h) h = dlopen("libcuda.so", RTLD_LAZY | RTLD_NOLOAD);
    return h ? real_dlsym(h, name) : NULL;
}

#define REAL(slot, name) ((slot) ? (slot) : ((slot) = (__typeof__(slot))find_real(name)))

/* the driver functions rr calls itself */
static CUresult (*p_ctx_sync)(void);
static CUresult (*p_dtoh)(void *, CUdeviceptr, size_t);
static CUresult (*p_range)(CUdeviceptr *, size_t *, CUdeviceptr);
static CUresult (*p_func_param)(CUfunction, size_t, size_t *, size_t *);
static CUresult (*p_kernel_param)(CUkernel, size_t, size_t *, size_t *);
static CUresult (*p_func_name)(const char **, CUfunction);
static CUresult (*p_kernel_name)(const char **, CUkernel);
static CUresult (*p_func_module)(CUmodule *, CUfunction);
static CUresult (*p_tex_res)(CUDA_RESOURCE_DESC *, CUtexObject);
static CUresult (*p_tex_desc)(CUDA_TEXTURE_DESC *, CUtexObject);
static CUresult (*p_surf_res)(CUDA_RESOURCE_DESC *, CUsurfObject);
static CUresult (*p_array3d_desc)(CUDA_ARRAY3D_DESCRIPTOR *, CUarray);
static CUresult (*p_memcpy2d)(const CUDA_MEMCPY2D *);
static CUresult (*p_memcpy3d)(const CUDA_MEMCPY3D *);

/* ---- state: one per process, behind one lock ---- */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pid_t state_pid;
static int enabled;  /* RR_CAPTURE_DIR set, and no write has failed */
static char root[PATH_MAX], procdir[PATH_MAX];
static regex_t kernels;
static int have_kernels;
static unsigned long long ranges[64][2];
static int nranges;
static unsigned long long launch_seq, match_seq, captured;

struct alloc { CUdeviceptr base; size_t size; };
struct binding;
/* a function or kernel (CUkernel): its name, its module or library; for an injected entry its
 * binding, and whether the handle is the replacement's (is_repl) or the program's own, launched
 * as the replacement (swap: a handle rr first saw at its launch) */
struct named { void *h; void *owner; char *name; int kernel; struct binding *b; int is_repl, swap; };
struct image { void *h; char file[48]; };                  /* a module or library: its module file */
struct object { unsigned long long h; int kind; };         /* a texture (1) or surface (2) object */
struct seen { char *name; unsigned long long launches; };

static struct alloc *allocs; static size_t nallocs, capallocs;
static struct named *named; static size_t nnamed, capnamed;
static struct image *images; static size_t nimages, capimages;
static struct object *objects; static size_t nobjects, capobjects;
static struct seen *seen; static size_t nseen, capseen;

#define GROW(arr, n, cap) do { if ((n) == (cap)) { size_t c_ = (cap) ? 2 * (cap) : 64; void *p_ = realloc((arr), c_ * sizeof *(arr)); if (!p_) abort(); (arr) = p_; (cap) = c_; } } while (0)

static void write_counts(void);
static void read_manifest(void);
static void reset_injection(void);
static void forget_host_copies(void);
static void release_host_copies(void);
static void set_host_limit(void);

static void setup(void) {  /* under the lock; again in a forked child */
    pid_t pid = getpid();
    if (state_pid == pid) return;
    int first = state_pid == 0;
    state_pid = pid;
    launch_seq = match_seq = captured = 0;
    nseen = 0;
    forget_host_copies();  /* a forked child's: the parent's pinned buffers are not its own */
    if (first) read_manifest();
    else reset_injection();
    const char *dir = getenv("RR_CAPTURE_DIR");
    enabled = dir && *dir && strlen(dir) < PATH_MAX - 64;
    if (!enabled) return;
    snprintf(root, sizeof root, "%s", dir);
    snprintf(procdir, sizeof procdir, "%s/%d", root, (int)pid);
    if (first) {
        const char *k = getenv("RR_CAPTURE_KERNELS");
        if (k && *k) {
            if (regcomp(&kernels, k, REG_EXTENDED | REG_NOSUB) != 0) {
                fprintf(stderr, "rr capture: RR_CAPTURE_KERNELS: not a POSIX extended regular expression; capture off\n");
                enabled = 0;
                return;
            }
            have_kernels = 1;
        }
        const char *r = getenv("RR_CAPTURE_LAUNCHES");
        while (r && *r && nranges < 64) {
            char *end;
            unsigned long long a = strtoull(r, &end, 10), b = ~0ULL;
            if (*end == '-') { r = end + 1; if (*r && *r != ',') b = strtoull(r, &end, 10); else end = (char *)r; }
            ranges[nranges][0] = a; ranges[nranges][1] = b; nranges++;
            r = *end == ',' ? end + 1 : NULL;
        }
        atexit(write_counts);
        set_host_limit();
    }
}

/* ---- files ---- */
struct out { char dir[PATH_MAX]; int failed; int err; char why[PATH_MAX + 128]; };

static void fail(struct out *o, const char *path, int err) {
    if (o->failed) return;
    o->failed = 1;
    o->err = err;
    snprintf(o->why, sizeof o->why, "%s: %s", path, strerror(err));
}

static void write_file(struct out *o, const char *path, const void *data, size_t n) {
    if (o->failed) return;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) { fail(o, path, errno); return; }
    const char *p = data;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) { if (errno == EINTR) continue; fail(o, path, errno); close(fd); return; }
        p += w; n -= (size_t)w;
    }
    if (close(fd) != 0) fail(o, path, errno);
}

static void make_dir(struct out *o, const char *path) {
    if (!o->failed && mkdir(path, 0755) != 0 && errno != EEXIST) fail(o, path, errno);
}

/* a .npy file (format 1.0) of `n` bytes of `descr` elements in `shape` */
static void write_npy(struct out *o, const char *path, const char *descr, const size_t *shape, int ndim,
                      const void *data, size_t n) {
    char header[256], dims[160] = "";
    size_t used = 0;
    for (int i = 0; i < ndim; i++)
        used += (size_t)snprintf(dims + used, sizeof dims - used, "%zu%s", shape[i], ndim == 1 ? "," : (i + 1 < ndim ? ", " : ""));
    int len = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, dims);
    size_t total = 10 + (size_t)len + 1, pad = (64 - total % 64) % 64;
    size_t hlen = (size_t)len + pad + 1;
    char *buf = malloc(10 + hlen);
    if (!buf) { fail(o, path, ENOMEM); return; }
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (char)(hlen & 0xff); buf[9] = (char)(hlen >> 8);
    memcpy(buf + 10, header, (size_t)len);
    memset(buf + 10 + len, ' ', pad);
    buf[10 + hlen - 1] = '\n';
    if (o->failed) { free(buf); return; }
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) { fail(o, path, errno); free(buf); return; }
    const char *parts[2] = {buf, data};
    size_t sizes[2] = {10 + hlen, n};
    for (int k = 0; k < 2 && !o->failed; k++) {
        const char *p = parts[k]; size_t m = sizes[k];
        while (m) {
            ssize_t w = write(fd, p, m);
            if (w < 0) { if (errno == EINTR) continue; fail(o, path, errno); break; }
            p += w; m -= (size_t)w;
        }
    }
    if (close(fd) != 0) fail(o, path, errno);
    free(buf);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st; (void)flag; (void)ftw;
    remove(path);
    return 0;
}

static void remove_tree(const char *path) { nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

/* capturing stops for good after a failed write (`o`: of launch `seq` of entry `name`, or of a
 * module when name is NULL): the reason goes to stderr and over status.txt's "capturing", in the
 * room that takes, so that it is recorded on a full disk too */
static void stop(const struct out *o, unsigned long long seq, const char *name) {
    enabled = 0;
    release_host_copies();
    if (name)
        fprintf(stderr, "rr capture: launch %llu of process %d (%s) not written: %s; capturing stopped after %llu "
                        "launches, the program runs on\n", seq, (int)getpid(), name, o->why, captured);
    else
        fprintf(stderr, "rr capture: a module not written: %s; capturing stopped after %llu launches, the program "
                        "runs on\n", o->why, captured);
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/status.txt", procdir);
    FILE *f = fopen(path, "w");
    if (f) { fprintf(f, "%llu\t%s\t%s\t%s\n", seq, name ? name : "", strerror(o->err), o->why); fclose(f); }
}

static int ensure_procdir(void) {
    struct out o = {0};
    make_dir(&o, root);
    make_dir(&o, procdir);
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/status.txt", procdir);
    struct stat st;
    if (!o.failed && stat(path, &st) != 0) {  /* a block for the reason capturing may stop: one line */
        static char line[512];
        memset(line, ' ', sizeof line - 1);
        memcpy(line, "capturing", 9);
        line[sizeof line - 1] = '\n';
        write_file(&o, path, line, sizeof line);
    }
    if (o.failed) { stop(&o, launch_seq, NULL); return 0; }
    return 1;
}

static void append_line(const char *file, const char *line) {
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/%s", procdir, file);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return;
    size_t n = strlen(line);
    if (write(fd, line, n) != (ssize_t)n || write(fd, "\n", 1) != 1) { /* names are informational */ }
    close(fd);
}

static void write_counts(void) {
    if (!enabled || state_pid != getpid() || nseen == 0) return;
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/counts.txt", procdir);
    FILE *f = fopen(path, "w");
    if (!f) return;
    for (size_t i = 0; i < nseen; i++) fprintf(f, "%llu %s\n", seen[i].launches, seen[i].name);
    fclose(f);
}

/* ---- module images ---- */
static uint64_t fnv1a64(const unsigned char *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) { h ^= p[i]; h *= 0x100000001b3ULL; }
    return h;
}

static uint16_t u16(const unsigned char *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static uint32_t u32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t u64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }

/* The bytes of a module image as the driver takes it (a fatbin, a fatbin wrapper, an ELF cubin
 * or NUL-terminated PTX text), its size and kind. */
static const unsigned char *image_bytes(const void *image, size_t *size, const char **ext) {
    const unsigned char *b = image;
    if (!b) return NULL;
    if (u32(b) == 0x466243b1u) b = *(const unsigned char *const *)(b + 8);  /* __fatBinC_Wrapper_t */
    if (u32(b) == 0xBA55ED50u) { *size = u16(b + 6) + u64(b + 8); *ext = "fatbin"; return b; }
    if (b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F' && b[4] == 2) {
        uint64_t phoff = u64(b + 0x20), shoff = u64(b + 0x28);
        uint16_t phes = u16(b + 0x36), phn = u16(b + 0x38), shes = u16(b + 0x3a), shn = u16(b + 0x3c);
        uint64_t end = 64;
        if (phoff + (uint64_t)phes * phn > end) end = phoff + (uint64_t)phes * phn;
        if (shoff + (uint64_t)shes * shn > end) end = shoff + (uint64_t)shes * shn;
        for (uint16_t i = 0; i < shn; i++) {
            const unsigned char *s = b + shoff + (uint64_t)i * shes;
            if (u32(s + 4) == 8) continue;  /* SHT_NOBITS */
            if (u64(s + 0x18) + u64(s + 0x20) > end) end = u64(s + 0x18) + u64(s + 0x20);
        }
        *size = end; *ext = "cubin"; return b;
    }
    *size = strlen((const char *)b); *ext = "ptx";  /* PTX: the text without its NUL, as the corpus names it */
    return b;
}

static struct image *image_of(void *h) {
    for (size_t i = 0; i < nimages; i++) if (images[i].h == h) return &images[i];
    return NULL;
}

static void note_image(void *h, const char *file) {
    struct image *im = image_of(h);
    if (!im) { GROW(images, nimages, capimages); im = &images[nimages++]; im->h = h; }
    snprintf(im->file, sizeof im->file, "%s", file);
}

/* under the lock: write modules/<hash>.<ext> once; the handle now names that file */
static void loaded(void *handle, const void *image) {
    setup();
    if (!enabled || !handle) return;
    size_t n = 0;
    const char *ext = "ptx";
    const unsigned char *b = image_bytes(image, &n, &ext);
    if (!b) return;
    char file[48], dir[PATH_MAX + 16], path[PATH_MAX + 64], tmp[PATH_MAX + 96];
    snprintf(file, sizeof file, "%016llx.%s", (unsigned long long)fnv1a64(b, n), ext);
    note_image(handle, file);
    snprintf(dir, sizeof dir, "%s/modules", root);
    snprintf(path, sizeof path, "%s/%s", dir, file);
    if (access(path, F_OK) == 0) return;
    struct out o = {0};
    make_dir(&o, root);
    make_dir(&o, dir);
    snprintf(tmp, sizeof tmp, "%s/.%s.%d.tmp", dir, file, (int)getpid());
    write_file(&o, tmp, b, n);
    if (!o.failed && rename(tmp, path) != 0) fail(&o, path, errno);
    if (o.failed) { unlink(tmp); if (ensure_procdir()) stop(&o, launch_seq, NULL); }
}

/* the named handles by handle: open addressing, 1 + the index into `named` (0: empty), at most
 * half full — every launch looks its handle up (a program may have thousands of kernels) */
static size_t *named_index, named_slots;

static size_t slot_of(const void *h) {
    uint64_t x = (uint64_t)(uintptr_t)h;
    x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33;
    return (size_t)x & (named_slots - 1);
}

static struct named *named_of(void *h) {
    if (!named_slots) return NULL;
    for (size_t i = slot_of(h);; i = (i + 1) & (named_slots - 1)) {
        size_t k = named_index[i];
        if (!k) return NULL;
        if (named[k - 1].h == h) return &named[k - 1];
    }
}

static void index_named(size_t k) {
    if (2 * nnamed > named_slots) {
        size_t slots = named_slots ? 2 * named_slots : 1024;
        size_t *index = calloc(slots, sizeof *index);
        if (!index) abort();
        free(named_index);
        named_index = index;
        named_slots = slots;
        for (size_t i = 0; i + 1 < nnamed; i++) index_named(i);
    }
    size_t i = slot_of(named[k].h);
    while (named_index[i]) i = (i + 1) & (named_slots - 1);
    named_index[i] = k + 1;
}

/* `h` is `name` of `owner` (again: a handle may be reused after an unload, so whatever was known of
 * it is forgotten). Moves `named`: a pointer into it is stale after this. */
static void note_named(void *h, void *owner, const char *name, int kernel) {
    if (!h) return;
    struct named *n = named_of(h);
    if (!n) {
        GROW(named, nnamed, capnamed);
        n = &named[nnamed++];
        n->h = h; n->name = NULL;
        index_named(nnamed - 1);
    }
    n->kernel = kernel;
    n->owner = owner;
    n->b = NULL; n->is_repl = n->swap = 0;
    if (name && name != n->name) { free(n->name); n->name = strdup(name); }
}

/* ---- allocations and objects ---- */
static void note_alloc(CUdeviceptr base, size_t size) {
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nallocs; i++)
        if (allocs[i].base == base) { allocs[i].size = size; pthread_mutex_unlock(&lock); return; }
    GROW(allocs, nallocs, capallocs);
    allocs[nallocs].base = base; allocs[nallocs].size = size; nallocs++;
    pthread_mutex_unlock(&lock);
}

static void forget_alloc(CUdeviceptr base) {
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nallocs; i++)
        if (allocs[i].base == base) { allocs[i] = allocs[--nallocs]; break; }
    pthread_mutex_unlock(&lock);
}

static void note_object(unsigned long long h, int kind) {
    pthread_mutex_lock(&lock);
    GROW(objects, nobjects, capobjects);
    objects[nobjects].h = h; objects[nobjects].kind = kind; nobjects++;
    pthread_mutex_unlock(&lock);
}

static void forget_object(unsigned long long h) {
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nobjects; i++)
        if (objects[i].h == h) { objects[i] = objects[--nobjects]; break; }
    pthread_mutex_unlock(&lock);
}

/* ---- one launch ---- */
struct launch_args {
    int api;  /* 0 cuLaunchKernel, 1 its _ptsz, 2 cuLaunchKernelEx, 3 its _ptsz */
    CUfunction f;
    unsigned int grid[3], block[3], shared;
    CUstream stream;
    void **params, **extra;
    const CUlaunchConfig *config;
    struct binding *b;     /* the launch runs b's replacement */
    struct copies *v;      /* with the program's module variables copied to it and back */
    struct clock *t;       /* its CUDA events, when it is timed */
    int injected;          /* 0: not an injected entry; 1: the program's own code runs; 2: the replacement */
};

static CUresult (*r_launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void **, void **);
static CUresult (*r_launch_ptsz)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void **, void **);
static CUresult (*r_launch_ex)(const CUlaunchConfig *, CUfunction, void **, void **);
static CUresult (*r_launch_ex_ptsz)(const CUlaunchConfig *, CUfunction, void **, void **);

static CUresult real_launch(const struct launch_args *a) {
    switch (a->api) {
    case 0: if (!REAL(r_launch, "cuLaunchKernel")) return 999;
        return r_launch(a->f, a->grid[0], a->grid[1], a->grid[2], a->block[0], a->block[1], a->block[2], a->shared, a->stream, a->params, a->extra);
    case 1: if (!REAL(r_launch_ptsz, "cuLaunchKernel_ptsz")) return 999;
        return r_launch_ptsz(a->f, a->grid[0], a->grid[1], a->grid[2], a->block[0], a->block[1], a->block[2], a->shared, a->stream, a->params, a->extra);
    case 2: if (!REAL(r_launch_ex, "cuLaunchKernelEx")) return 999;
        return r_launch_ex(a->config, a->f, a->params, a->extra);
    default: if (!REAL(r_launch_ex_ptsz, "cuLaunchKernelEx_ptsz")) return 999;
        return r_launch_ex_ptsz(a->config, a->f, a->params, a->extra);
    }
}

static const char *API_NAMES[] = {"cuLaunchKernel", "cuLaunchKernel_ptsz", "cuLaunchKernelEx", "cuLaunchKernelEx_ptsz"};

struct host { unsigned char *p; size_t cap; int pinned; };  /* a host buffer (page-locked or not) */
/* before: the copy made before the launch; after: the one made after it, when it differs */
struct buf { CUdeviceptr base; size_t size; int how; struct host before, after; int changed; };
struct arr { CUarray h; CUDA_ARRAY3D_DESCRIPTOR d; size_t bytes, elem; struct host before, after; int changed; int ok; };
struct ref { size_t offset; unsigned long long value; int kind; int index; };  /* kind 0 buffer, 1 texture, 2 surface, 3 unresolved object */

static const char *entry_name(CUfunction f, void **owner) {
    struct named *n = named_of(f);
    *owner = n ? n->owner : NULL;
    if (n && n->name) return n->name;
    const char *name = NULL;
    if (REAL(p_func_name, "cuFuncGetName") && p_func_name(&name, f) == CUDA_SUCCESS && name) {
        CUmodule m = NULL;
        if (!*owner && REAL(p_func_module, "cuFuncGetModule") && p_func_module(&m, f) == CUDA_SUCCESS) *owner = m;
        note_named(f, *owner, name, 0);
        return named_of(f)->name;
    }
    if (REAL(p_kernel_name, "cuKernelGetName") && p_kernel_name(&name, (CUkernel)f) == CUDA_SUCCESS && name) {
        note_named(f, *owner, name, 0);
        return named_of(f)->name;
    }
    return NULL;
}

static int selected(unsigned long long index) {
    if (nranges == 0) return 1;
    for (int i = 0; i < nranges; i++) if (index >= ranges[i][0] && index < ranges[i][1]) return 1;
    return 0;
}

static void json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20 || c >= 0x7f) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static const char *format_descr(int format, size_t *bytes) {
    switch (format) {
    case 0x01: *bytes = 1; return "|u1";
    case 0x02: *bytes = 2; return "<u2";
    case 0x03: *bytes = 4; return "<u4";
    case 0x08: *bytes = 1; return "|i1";
    case 0x09: *bytes = 2; return "<i2";
    case 0x0a: *bytes = 4; return "<i4";
    case 0x10: *bytes = 2; return "<f2";
    case 0x20: *bytes = 4; return "<f4";
    default: *bytes = 0; return NULL;
    }
}

static CUresult copy_array(struct arr *a, unsigned char *dst) {
    size_t rows = a->d.Height ? a->d.Height : 1, width = a->d.Width * a->elem;
    if (a->d.Depth == 0) {
        CUDA_MEMCPY2D c;
        memset(&c, 0, sizeof c);
        c.srcMemoryType = CU_MEMORYTYPE_ARRAY; c.srcArray = a->h;
        c.dstMemoryType = CU_MEMORYTYPE_HOST; c.dstHost = dst; c.dstPitch = width;
        c.WidthInBytes = width; c.Height = rows;
        return REAL(p_memcpy2d, "cuMemcpy2D_v2") ? p_memcpy2d(&c) : 999;
    }
    CUDA_MEMCPY3D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_ARRAY; c.srcArray = a->h;
    c.dstMemoryType = CU_MEMORYTYPE_HOST; c.dstHost = dst; c.dstPitch = width; c.dstHeight = rows;
    c.WidthInBytes = width; c.Height = rows; c.Depth = a->d.Depth;
    return REAL(p_memcpy3d, "cuMemcpy3D_v2") ? p_memcpy3d(&c) : 999;
}

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}


/* ---- host copies ----
 * A launch's copies go into host buffers that are kept for the launches after it: page-locked
 * (cuMemHostAlloc) where the driver gives them, so that the device-to-host copies run at the bus's
 * speed and no copy pays for faulting in fresh pages. And each buffer's and array's last captured
 * state stays in host memory with the file that holds it, so a launch that finds a buffer as the
 * last captured launch left it (a layer reading what the one before wrote, weights, an input
 * frame) hard-links that file instead of writing the same bytes again — decided by comparing the
 * bytes, never by a hash. What is kept between launches is bounded by $RR_CAPTURE_HOST_BYTES
 * (default: a quarter of the physical memory, at most 8 GiB): beyond it the free buffers go first,
 * then the least recently used states. */
struct state { int array; unsigned long long key; size_t bytes; CUDA_ARRAY3D_DESCRIPTOR d; struct host h;
               char path[PATH_MAX + 64]; unsigned long long used; };
static struct host *pool; static size_t npool, cappool;  /* free buffers */
static struct state *states; static size_t nstates, capstates;
static size_t held, held_limit;  /* bytes of host buffers alive (free, states and in use); the bound */
static unsigned long long state_clock;
static CUresult (*p_host_alloc)(void **, size_t, unsigned);
static CUresult (*p_host_free)(void *);

static void set_host_limit(void) {
    const char *v = getenv("RR_CAPTURE_HOST_BYTES");
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    size_t quarter = pages > 0 && page > 0 ? (size_t)pages * (size_t)page / 4 : (size_t)1 << 30;
    held_limit = v && *v ? (size_t)strtoull(v, NULL, 10) : (quarter < ((size_t)8 << 30) ? quarter : (size_t)8 << 30);
}

static struct host host_get(size_t n) {
    size_t want = n ? n : 1, best = npool;
    for (size_t i = 0; i < npool; i++)  /* the smallest free buffer that fits and wastes at most half */
        if (pool[i].cap >= want && pool[i].cap / 2 <= want && (best == npool || pool[i].cap < pool[best].cap)) best = i;
    if (best < npool) { struct host h = pool[best]; pool[best] = pool[--npool]; return h; }
    struct host h = {NULL, want, 0};
    void *p = NULL;
    if (REAL(p_host_alloc, "cuMemHostAlloc") && p_host_alloc(&p, want, 0) == CUDA_SUCCESS && p) { h.p = p; h.pinned = 1; }
    else h.p = malloc(want);
    if (h.p) held += h.cap;
    return h;
}

static void host_put(struct host *h) {
    if (!h->p) return;
    GROW(pool, npool, cappool);
    pool[npool++] = *h;
    h->p = NULL;
}

static void host_release(struct host h) {
    if (!h.p) return;
    held -= h.cap;
    if (!h.pinned) free(h.p);
    else if (REAL(p_host_free, "cuMemFreeHost")) p_host_free(h.p);
}

static struct state *state_of(int array, unsigned long long key, size_t bytes, const CUDA_ARRAY3D_DESCRIPTOR *d) {
    for (size_t i = 0; i < nstates; i++)
        if (states[i].array == array && states[i].key == key && states[i].bytes == bytes
            && (!d || memcmp(&states[i].d, d, sizeof *d) == 0)) return &states[i];
    return NULL;
}

/* the last captured state of a buffer or array: `*h` (now the state's), in the file `path` */
static void state_set(int array, unsigned long long key, size_t bytes, const CUDA_ARRAY3D_DESCRIPTOR *d,
                      struct host *h, const char *path) {
    struct state *st = state_of(array, key, bytes, d);
    if (!st) {
        GROW(states, nstates, capstates);
        st = &states[nstates++];
        memset(st, 0, sizeof *st);
        st->array = array; st->key = key; st->bytes = bytes;
        if (d) st->d = *d;
    } else {
        host_put(&st->h);
    }
    st->h = *h;
    h->p = NULL;
    st->used = ++state_clock;
    snprintf(st->path, sizeof st->path, "%s", path);
}

/* a copy's file: a hard link to the last captured state's file when the bytes are the same */
static int link_same(const struct state *st, const unsigned char *bytes, size_t n, const char *path) {
    return st && st->h.p && memcmp(st->h.p, bytes, n) == 0 && link(st->path, path) == 0;
}

static void trim_host_copies(void) {
    while (held > held_limit && npool) {
        size_t big = 0;
        for (size_t i = 1; i < npool; i++) if (pool[i].cap > pool[big].cap) big = i;
        host_release(pool[big]);
        pool[big] = pool[--npool];
    }
    while (held > held_limit && nstates) {
        size_t old = 0;
        for (size_t i = 1; i < nstates; i++) if (states[i].used < states[old].used) old = i;
        host_release(states[old].h);
        states[old] = states[--nstates];
    }
}

static void release_host_copies(void) {
    for (size_t i = 0; i < npool; i++) host_release(pool[i]);
    for (size_t i = 0; i < nstates; i++) host_release(states[i].h);
    npool = nstates = 0;
}

static void forget_host_copies(void) { npool = nstates = 0; held = 0; }

#define MAX_REFS 4096

/* the hooked module and library entry points' real functions (rr loads replacements with them) */
static CUresult (*r_mod_load)(CUmodule *, const void *);
static CUresult (*r_mod_load_ex)(CUmodule *, const void *, unsigned, void *, void **);
static CUresult (*r_mod_load_fat)(CUmodule *, const void *);
static CUresult (*r_mod_load_file)(CUmodule *, const char *);
static CUresult (*r_lib_load)(CUlibrary *, const void *, void *, void **, unsigned, void *, void **, unsigned);
static CUresult (*r_mod_get_fn)(CUfunction *, CUmodule, const char *);
static CUresult (*r_lib_get_kernel)(CUkernel *, CUlibrary, const char *);
static CUresult (*r_kernel_get_fn)(CUfunction *, CUkernel);
static CUresult (*r_lib_get_mod)(CUmodule *, CUlibrary);

#define MAX_PARAMS 4096

/* The parameter list (offsets and sizes) of a function, or of a kernel (CUkernel: cudart's
 * handles) through cuKernelGetParamInfo: how many, or -1 when the driver cannot say (no
 * cuFuncGetParamInfo before CUDA 12.4, or another error than the index's being past the end). */
static int param_list(void *h, int kernel, size_t *offs, size_t *sizes, size_t max) {
    CUresult (*info)(void *, size_t, size_t *, size_t *) = NULL;
    if (kernel && REAL(p_kernel_param, "cuKernelGetParamInfo"))
        info = (CUresult (*)(void *, size_t, size_t *, size_t *))p_kernel_param;
    else if (REAL(p_func_param, "cuFuncGetParamInfo"))
        info = (CUresult (*)(void *, size_t, size_t *, size_t *))p_func_param;
    if (!info) return -1;
    size_t n = 0;
    CUresult r = CUDA_SUCCESS;
    while (n < max && (r = info(h, n, &offs[n], &sizes[n])) == CUDA_SUCCESS) n++;
    return n == max || r == CUDA_ERROR_INVALID_VALUE ? (int)n : -1;
}

/* ---- injection: an entry's code replaced by another module's ---- */
enum { S_REPLACED, S_LOAD_FAILED, S_NO_ENTRY, S_PARAM_MISMATCH, S_VARIABLE_MISMATCH };
/* the words of rr.capture.inject.Binding */
static const char *STATUS_WORDS[] = {"replaced", "load_failed", "no_entry", "param_mismatch", "variable_mismatch"};

struct var { char *name; int writable; };  /* a module variable of the replacement: .global (writable) or .const */
struct inj {                                /* an entry to replace (a manifest line) */
    char *entry, *image_path, *shown;
    struct var *vars; size_t nvars;
    unsigned char *image; int image_errno;  /* read at the first binding */
    unsigned long long replaced, original;  /* launches of the replacement, of the program's own code */
    int launch_failed;                      /* a launch of the replacement failed: said once */
};
struct copy { CUdeviceptr app, repl; size_t size; int writable; };
/* the program's variables the replacement gets before each launch, and gives back after it, in one
 * context (a library's variables are the context's); refused: one differs, the program's own code
 * runs there */
struct copies { CUcontext ctx; struct copy *c; size_t n; int refused; };
struct binding {                           /* the replacement for one module (or library) of the program */
    struct inj *j;
    void *owner;                            /* the program's module or library (the handle, when not known) */
    void *app;                              /* the program's own function (kernel) of the entry */
    int known_owner, library, app_kernel, dead;  /* dead: its module was unloaded, its context destroyed */
    CUcontext ctx;                          /* a module's context */
    void *repl_owner, *repl;                /* the replacement's module (library) and function (kernel) */
    int status;
    struct copies *sets; size_t nsets;
};
struct timed { char *entry; int replaced; double *ms; size_t n, cap; unsigned long long untimed; char why[320]; };
struct clock { CUevent start, end; size_t timed; int ok; };

static int injecting;  /* RR_INJECT_DIR's manifest was read */
static char inject_dir[PATH_MAX];
static struct inj *injs; static size_t ninjs, capinjs;
static char **timed_names; static size_t ntimed_names, captimed_names;
static struct binding **bindings; static size_t nbindings, capbindings;
static struct timed *timeds; static size_t ntimeds, captimeds;
static struct clock *pending; static size_t pending_head, npending, cappending;  /* recorded, not yet read */
static CUevent *spare; static size_t nspare, capspare;
static FILE *inject_log;

static CUresult (*p_err_name)(CUresult, const char **);
static CUresult (*p_err_string)(CUresult, const char **);
static CUresult (*p_ctx_current)(CUcontext *);
static CUresult (*p_mod_global)(CUdeviceptr *, size_t *, CUmodule, const char *);
static CUresult (*p_lib_global)(CUdeviceptr *, size_t *, CUlibrary, const char *);
static CUresult (*p_dtod_async)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
static CUresult (*p_dtod_async_ptsz)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
static CUresult (*p_event_create)(CUevent *, unsigned);
static CUresult (*p_event_record)(CUevent, CUstream);
static CUresult (*p_event_record_ptsz)(CUevent, CUstream);
static CUresult (*p_event_query)(CUevent);
static CUresult (*p_event_sync)(CUevent);
static CUresult (*p_event_elapsed)(float *, CUevent, CUevent);
static CUresult (*p_stream_capturing)(CUstream, int *);
static CUresult (*p_stream_capturing_ptsz)(CUstream, int *);
static CUresult (*p_mod_unload)(CUmodule);
static CUresult (*p_lib_unload)(CUlibrary);

static void inject_exit(void);

/* "NAME (what it means), error N", the driver's words for a result */
static void error_text(CUresult r, char *out, size_t n) {
    const char *name = NULL, *text = NULL;
    if (REAL(p_err_name, "cuGetErrorName")) p_err_name(r, &name);
    if (REAL(p_err_string, "cuGetErrorString")) p_err_string(r, &text);
    snprintf(out, n, "%s (%s), error %d", name ? name : "CUDA error", text ? text : "no description", r);
}

static void append(char *out, size_t n, const char *format, ...) __attribute__((format(printf, 3, 4)));
static void append(char *out, size_t n, const char *format, ...) {
    size_t used = strlen(out);
    if (used + 1 >= n) return;
    va_list ap;
    va_start(ap, format);
    vsnprintf(out + used, n - used, format, ap);
    va_end(ap);
}

static char *copy_of(const char *s) { char *c = strdup(s); if (!c) abort(); return c; }

/* the manifest, once per program (a forked child keeps its parent's) */
static void read_manifest(void) {
    const char *dir = getenv("RR_INJECT_DIR");
    if (!dir || !*dir || strlen(dir) >= PATH_MAX - 64) return;
    snprintf(inject_dir, sizeof inject_dir, "%s", dir);
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/manifest.tsv", dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "rr inject: %s: %s; nothing is replaced or timed\n", path, strerror(errno));
        return;
    }
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
        line[strcspn(line, "\n")] = 0;
        char *field[5] = {0}, *rest = line;
        size_t n = 0;
        while (n < 5 && rest) { field[n++] = rest; rest = strchr(rest, '\t'); if (rest) *rest++ = 0; }
        if (n == 2 && strcmp(field[0], "time") == 0) {
            GROW(timed_names, ntimed_names, captimed_names);
            timed_names[ntimed_names++] = copy_of(field[1]);
        } else if (n == 5 && strcmp(field[0], "replace") == 0) {
            GROW(injs, ninjs, capinjs);
            struct inj *j = &injs[ninjs++];
            memset(j, 0, sizeof *j);
            j->entry = copy_of(field[1]);
            snprintf(path, sizeof path, "%s/%s", dir, field[2]);
            j->image_path = copy_of(path);
            j->shown = copy_of(field[4]);
            for (char *v = strcmp(field[3], "-") ? field[3] : NULL, *next; v && *v; v = next) {
                next = strchr(v, ',');
                if (next) *next++ = 0;
                char *colon = strrchr(v, ':');
                if (!colon) continue;
                *colon = 0;
                j->vars = realloc(j->vars, (j->nvars + 1) * sizeof *j->vars);
                if (!j->vars) abort();
                j->vars[j->nvars].name = copy_of(v);
                j->vars[j->nvars++].writable = colon[1] == 'g';
            }
        }
    }
    free(line);
    fclose(f);
    injecting = 1;
    atexit(inject_exit);
}

/* a forked child: the parent's bindings, counts and events are not its own (CUDA does not cross a fork) */
static void reset_injection(void) {
    for (size_t i = 0; i < nbindings; i++) bindings[i]->dead = 1;
    for (size_t i = 0; i < ninjs; i++) injs[i].replaced = injs[i].original = 0, injs[i].launch_failed = 0;
    for (size_t i = 0; i < ntimeds; i++) timeds[i].n = 0, timeds[i].untimed = 0;
    pending_head = npending = nspare = 0;
    inject_log = NULL;  /* the parent's stream: left to it */
}

static FILE *inject_record(void) {
    if (!inject_log && injecting) {
        char path[PATH_MAX + 32];
        snprintf(path, sizeof path, "%s/%d.jsonl", inject_dir, (int)getpid());
        inject_log = fopen(path, "a");
        if (inject_log) setvbuf(inject_log, NULL, _IOLBF, 0);  /* each line on disk as it is written */
    }
    return inject_log;
}

static struct inj *inj_of(const char *name) {
    for (size_t i = 0; name && i < ninjs; i++) if (strcmp(injs[i].entry, name) == 0) return &injs[i];
    return NULL;
}

static int inj_image(struct inj *j) {
    if (j->image) return 1;
    FILE *f = fopen(j->image_path, "rb");
    if (!f) { j->image_errno = errno; return 0; }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    j->image = n > 0 ? calloc(1, (size_t)n + 1) : NULL;  /* a NUL after it: PTX text ends there */
    if (!j->image || fread(j->image, 1, (size_t)n, f) != (size_t)n) { j->image_errno = errno ? errno : EIO; free(j->image); j->image = NULL; }
    fclose(f);
    return j->image != NULL;
}

/* a binding's decision: in the process's record, and on stderr unless the replacement is in place
 * without a warning */
static void decide(const struct inj *j, int status, const char *api, const char *message, int warn) {
    FILE *f = inject_record();
    if (f) {
        fprintf(f, "{\"event\": \"decision\", \"entry\": ");
        json_string(f, j->entry);
        fprintf(f, ", \"status\": \"%s\", \"api\": \"%s\", \"message\": ", STATUS_WORDS[status], api);
        json_string(f, message);
        fputs("}\n", f);
    }
    if (status != S_REPLACED)
        fprintf(stderr, "rr inject: %s: %s; the program's own %s runs instead\n", j->entry, message, j->entry);
    else if (warn)
        fprintf(stderr, "rr inject: %s: %s\n", j->entry, message);
}

static void list_params(char *out, size_t n, const size_t *offs, const size_t *sizes, int count) {
    if (count == 0) append(out, n, "none");
    for (int i = 0; i < count; i++) append(out, n, "%s%zu:%zu", i ? ", " : "", offs[i], sizes[i]);
}

/* the replacement's parameter list against the program's function (or kernel) `app` */
static void check_params(struct binding *b, void *app, int app_kernel, char *msg, size_t n, int *warn) {
    static size_t ao[MAX_PARAMS], as[MAX_PARAMS], ro[MAX_PARAMS], rs[MAX_PARAMS];
    int na = param_list(app, app_kernel, ao, as, MAX_PARAMS), nr = param_list(b->repl, b->library, ro, rs, MAX_PARAMS);
    if (na < 0 || nr < 0) {
        append(msg, n, "; its parameters are not checked against the program's (the driver cannot say them: "
                       "cuFuncGetParamInfo needs CUDA 12.4)");
        *warn = 1;
        return;
    }
    int same = na == nr;
    for (int i = 0; same && i < na; i++) same = ao[i] == ro[i] && as[i] == rs[i];
    if (same) { append(msg, n, "; its %d parameters are the program's", na); return; }
    b->status = S_PARAM_MISMATCH;
    msg[0] = 0;
    append(msg, n, "%s's parameters (offset:size) are ", b->j->shown);
    list_params(msg, n, ro, rs, nr);
    append(msg, n, ", the program's ");
    list_params(msg, n, ao, as, na);
}

static CUresult global_of(int library, void *owner, const char *name, CUdeviceptr *p, size_t *size) {
    if (library) return REAL(p_lib_global, "cuLibraryGetGlobal") ? p_lib_global(p, size, owner, name) : 999;
    return REAL(p_mod_global, "cuModuleGetGlobal_v2") ? p_mod_global(p, size, owner, name) : 999;
}

#define CUDA_ERROR_NOT_FOUND 500

/* under the lock: the program's module variables the replacement reads, in the context `ctx` —
 * the same name and size — as a copy set of the binding (refused, `msg` says why, when one
 * differs); the driver's error when it cannot say them in this context (none is current: cudart
 * may get a kernel before it makes one), to be asked again at the launch */
static CUresult resolve_copies(struct binding *b, CUcontext ctx, char *msg, size_t n) {
    struct inj *j = b->j;
    struct copies set = {ctx, NULL, 0, 0};
    for (size_t i = 0; i < j->nvars && !set.refused; i++) {
        const char *name = j->vars[i].name;
        CUdeviceptr rp = 0, ap = 0;
        size_t rsize = 0, asize = 0;
        CUresult r = global_of(b->library, b->repl_owner, name, &rp, &rsize);
        if (r == CUDA_ERROR_NOT_FOUND) continue;  /* not in the loaded code: the replacement does not use it */
        if (r == CUDA_SUCCESS && !b->known_owner) {
            set.refused = 1;
            msg[0] = 0;
            append(msg, n, "the replacement reads the module variable %s, and rr does not know the program's module of "
                           "this handle (it was got through a call rr does not hook) to give it the program's", name);
            break;
        }
        CUresult ra = r == CUDA_SUCCESS ? global_of(b->library, b->owner, name, &ap, &asize) : r;
        if (ra == CUDA_ERROR_NOT_FOUND) {
            append(msg, n, "; %s is the replacement's own (the program's module has none)", name);
        } else if (r != CUDA_SUCCESS || ra != CUDA_SUCCESS) {
            free(set.c);
            return r != CUDA_SUCCESS ? r : ra;
        } else if (asize != rsize) {
            set.refused = 1;
            msg[0] = 0;
            append(msg, n, "the module variable %s is %zu bytes in %s, %zu in the program's module", name, rsize,
                   j->shown, asize);
        } else {
            set.c = realloc(set.c, (set.n + 1) * sizeof *set.c);
            if (!set.c) abort();
            set.c[set.n++] = (struct copy){ap, rp, asize, j->vars[i].writable};
            append(msg, n, "; the program's %s is copied to it before each launch%s", name,
                   j->vars[i].writable ? " and back after it" : "");
        }
    }
    b->sets = realloc(b->sets, (b->nsets + 1) * sizeof *b->sets);
    if (!b->sets) abort();
    b->sets[b->nsets++] = set;
    return CUDA_SUCCESS;
}

static CUcontext current_context(void) {
    CUcontext ctx = NULL;
    if (REAL(p_ctx_current, "cuCtxGetCurrent")) p_ctx_current(&ctx);
    return ctx;
}

/* the replacement loaded as a module (library, for a library's binding), the driver's JIT asked
 * for its error log (`log`: where a PTX it refuses goes wrong) */
static CUresult load_replacement(struct binding *b, char *log, size_t n) {
    int options[2] = {5, 6};  /* CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES */
    void *values[2] = {log, (void *)(uintptr_t)n};
    if (b->library)
        return REAL(r_lib_load, "cuLibraryLoadData")
                   ? r_lib_load((CUlibrary *)&b->repl_owner, b->j->image, options, values, 2, NULL, NULL, 0) : 999;
    return REAL(r_mod_load_ex, "cuModuleLoadDataEx")
               ? r_mod_load_ex((CUmodule *)&b->repl_owner, b->j->image, 2, options, values) : 999;
}

/* under the lock: the binding of `j` for the program's module or library `owner` (NULL: not
 * known; the handle `app` stands for it), made now — the replacement loaded and checked — unless
 * there is one. `api` says how the program got its handle. */
static struct binding *bind(struct inj *j, void *owner, int library, void *app, int app_kernel, const char *api) {
    void *key = owner ? owner : app;
    for (size_t i = 0; i < nbindings; i++)
        if (!bindings[i]->dead && bindings[i]->j == j && bindings[i]->owner == key) return bindings[i];
    struct binding *b = calloc(1, sizeof *b);
    if (!b) abort();
    b->j = j; b->owner = key; b->app = app; b->known_owner = owner != NULL; b->library = library;
    b->app_kernel = app_kernel; b->status = S_REPLACED;
    if (!library) b->ctx = current_context();
    GROW(bindings, nbindings, capbindings);
    bindings[nbindings++] = b;
    char msg[2048] = "", err[256], log[1024] = "";
    int warn = 0;
    CUresult r = CUDA_SUCCESS;
    if (!inj_image(j)) {
        b->status = S_LOAD_FAILED;
        snprintf(msg, sizeof msg, "%s: cannot read rr's copy of it (%s)", j->shown, strerror(j->image_errno));
    } else if ((r = load_replacement(b, log, sizeof log)) != CUDA_SUCCESS) {
        b->status = S_LOAD_FAILED;
        error_text(r, err, sizeof err);
        log[strcspn(log, "\n")] = 0;  /* the JIT's first line says where */
        snprintf(msg, sizeof msg, "%s could not be loaded: %s%s%s", j->shown, err, *log ? ": " : "", log);
    } else if (library ? !REAL(r_lib_get_kernel, "cuLibraryGetKernel")
                             || (r = r_lib_get_kernel((CUkernel *)&b->repl, b->repl_owner, j->entry))
                       : !REAL(r_mod_get_fn, "cuModuleGetFunction") || (r = r_mod_get_fn((CUfunction *)&b->repl, b->repl_owner, j->entry))) {
        b->status = S_NO_ENTRY;
        error_text(r ? r : 999, err, sizeof err);
        snprintf(msg, sizeof msg, "%s loaded, but the driver finds no %s in it: %s", j->shown, j->entry, err);
    } else {
        snprintf(msg, sizeof msg, "replaced by %s", j->shown);
        check_params(b, app, app_kernel, msg, sizeof msg, &warn);
    }
    if (b->status == S_REPLACED && j->nvars) {
        if (resolve_copies(b, current_context(), msg, sizeof msg) != CUDA_SUCCESS)
            append(msg, sizeof msg, "; its module variables are matched with the program's at its first launch in a "
                                    "context");
        else if (b->sets[b->nsets - 1].refused)
            b->status = S_VARIABLE_MISMATCH;
    }
    if (b->status == S_REPLACED) {
        loaded(b->repl_owner, j->image);  /* a capture's module file: its launches ran this code */
        note_named(b->repl, b->repl_owner, j->entry, library);
        struct named *n = named_of(b->repl);
        n->b = b;
        n->is_repl = 1;
    }
    decide(j, b->status, api, msg, warn);
    return b;
}

/* under the lock: the program got `*h`, `name` of its module or library `owner`; an injected
 * entry's handle becomes the replacement's */
static void injected_handle(void **h, void *owner, int library, const char *name, int kernel, const char *api) {
    struct inj *j = inj_of(name);
    struct named *n = named_of(*h);
    if (!j || !n || n->is_repl) return;
    struct binding *b = bind(j, owner, library, *h, kernel, api);
    named_of(*h)->b = b;  /* looked up again: bind() may have moved the table */
    if (b->status == S_REPLACED) *h = b->repl;
}

/* under the lock: the copy set of a replaced launch's context, made at its first launch there; NULL
 * when the program's own code must run there instead (a variable that differs: said once) */
static struct copies *launch_copies(struct binding *b) {
    CUcontext ctx = current_context();
    for (size_t i = 0; i < b->nsets; i++) if (b->sets[i].ctx == ctx) return b->sets[i].refused ? NULL : &b->sets[i];
    char msg[2048] = "", err[256];
    snprintf(msg, sizeof msg, "in context %p", ctx);
    CUresult r = resolve_copies(b, ctx, msg, sizeof msg);
    if (r != CUDA_SUCCESS) {
        error_text(r, err, sizeof err);
        struct copies none = {ctx, NULL, 0, 1};
        b->sets = realloc(b->sets, (b->nsets + 1) * sizeof *b->sets);
        if (!b->sets) abort();
        b->sets[b->nsets++] = none;
        snprintf(msg, sizeof msg, "the module variables of the program's module cannot be looked up at the launch: %s", err);
    }
    struct copies *set = &b->sets[b->nsets - 1];
    decide(b->j, set->refused ? S_VARIABLE_MISMATCH : S_REPLACED, "launch", msg, 0);
    return set->refused ? NULL : set;
}

/* under the lock: the launch's injection — the program's own handle swapped for the replacement's
 * where rr first sees it now, the program's variables given to it — and the count; whether the
 * replacement runs */
static int inject_launch(struct launch_args *a, const char *name, void *owner) {
    struct named *n = named_of(a->f);
    struct binding *b = n && n->b && !n->b->dead ? n->b : NULL;
    if (!b && !(n && n->is_repl)) {
        struct inj *j = inj_of(name);
        if (!j || !n) return 0;
        /* a handle got without a hooked call: its module if the driver says it, else loaded as a library */
        b = bind(j, owner, owner == NULL, a->f, n->kernel, "launch");
        n = named_of(a->f);
        n->b = b;
        n->swap = 1;
    }
    if (!b) return 0;
    int replaced = b->status == S_REPLACED;
    if (replaced && b->j->nvars && !(a->v = launch_copies(b))) {
        replaced = 0;  /* this context's variables differ: the program's own code, as a refused binding runs it */
        if (n->is_repl && b->app) a->f = b->app;
    }
    if (replaced && n->swap) a->f = b->repl;
    if (replaced) { b->j->replaced++; a->b = b; }
    else b->j->original++;
    a->injected = 1 + replaced;
    return replaced;
}

/* under the lock: a launch of the replacement the driver refused (too many registers for the
 * block, say), said once per entry: the program sees the error, rr says whose code it was */
static void launch_failed(const struct launch_args *a, CUresult r) {
    struct inj *j = a->b->j;
    if (j->launch_failed) return;
    j->launch_failed = 1;
    char err[256];
    error_text(r, err, sizeof err);
    fprintf(stderr, "rr inject: %s: a launch of the replacement (%s) failed: %s; the program gets this error\n",
            j->entry, j->shown, err);
    FILE *f = inject_record();
    if (f) {
        fprintf(f, "{\"event\": \"launch_failed\", \"entry\": ");
        json_string(f, j->entry);
        fprintf(f, ", \"message\": ");
        json_string(f, err);
        fputs("}\n", f);
    }
}

/* the replacement's module variables: the program's copied in before the launch, on its stream,
 * and a .global's copied back after it */
static CUresult copy_variables(const struct launch_args *a, int back) {
    int ptsz = a->api == 1 || a->api == 3;
    CUresult (*dtod)(CUdeviceptr, CUdeviceptr, size_t, CUstream) =
        ptsz ? REAL(p_dtod_async_ptsz, "cuMemcpyDtoDAsync_v2_ptsz") : REAL(p_dtod_async, "cuMemcpyDtoDAsync_v2");
    CUstream s = a->config ? a->config->hStream : a->stream;
    for (size_t i = 0; i < a->v->n; i++) {
        const struct copy *c = &a->v->c[i];
        if (back && !c->writable) continue;
        CUresult r = dtod ? (back ? dtod(c->app, c->repl, c->size, s) : dtod(c->repl, c->app, c->size, s)) : 999;
        if (r != CUDA_SUCCESS) return r;
    }
    return CUDA_SUCCESS;
}

/* ---- timing: CUDA events on the launch's own stream, read later ---- */
static size_t timed_index(const char *name, int replaced) {
    size_t i;
    for (i = 0; i < ntimed_names && strcmp(timed_names[i], name) != 0; i++) {}
    if (i == ntimed_names) return (size_t)-1;
    for (i = 0; i < ntimeds; i++) if (timeds[i].replaced == replaced && strcmp(timeds[i].entry, name) == 0) return i;
    GROW(timeds, ntimeds, captimeds);
    memset(&timeds[ntimeds], 0, sizeof timeds[ntimeds]);
    timeds[ntimeds].entry = copy_of(name);
    timeds[ntimeds].replaced = replaced;
    return ntimeds++;
}

static void untimed(struct timed *t, const char *why) {
    t->untimed++;
    snprintf(t->why, sizeof t->why, "%s", why);
}

static CUevent event_get(void) {
    if (nspare) return spare[--nspare];
    CUevent e = NULL;
    return REAL(p_event_create, "cuEventCreate") && p_event_create(&e, 0) == CUDA_SUCCESS ? e : NULL;
}

static void event_put(CUevent e) {
    if (!e) return;
    GROW(spare, nspare, capspare);
    spare[nspare++] = e;
}

/* the pending events read, in the order recorded: those that have completed (`wait`: all, waiting) */
static void harvest(int wait) {
    while (pending_head < npending) {
        struct clock *c = &pending[pending_head];
        CUresult r = wait ? (REAL(p_event_sync, "cuEventSynchronize") ? p_event_sync(c->end) : 999)
                          : (REAL(p_event_query, "cuEventQuery") ? p_event_query(c->end) : 999);
        if (!wait && r == CUDA_ERROR_NOT_READY) break;
        float ms = 0;
        struct timed *t = &timeds[c->timed];
        if (r == CUDA_SUCCESS && REAL(p_event_elapsed, "cuEventElapsedTime")) r = p_event_elapsed(&ms, c->start, c->end);
        if (r == CUDA_SUCCESS) {
            GROW(t->ms, t->n, t->cap);
            t->ms[t->n++] = ms;
        } else {
            char err[256], why[320];
            error_text(r, err, sizeof err);
            snprintf(why, sizeof why, "its events could not be read: %s", err);
            untimed(t, why);
        }
        event_put(c->start);
        event_put(c->end);
        pending_head++;
    }
    if (pending_head == npending) pending_head = npending = 0;
}

/* under the lock: a timed launch's events, or 0 (counted untimed, with why) */
static int timing_begin(const struct launch_args *a, size_t index, struct clock *c) {
    harvest(0);
    struct timed *t = &timeds[index];
    int ptsz = a->api == 1 || a->api == 3, capturing = 0;
    CUstream s = a->config ? a->config->hStream : a->stream;
    CUresult (*is_capturing)(CUstream, int *) =
        ptsz ? REAL(p_stream_capturing_ptsz, "cuStreamIsCapturing_ptsz") : REAL(p_stream_capturing, "cuStreamIsCapturing");
    if (is_capturing && is_capturing(s, &capturing) == CUDA_SUCCESS && capturing) {
        untimed(t, "its stream was capturing a CUDA graph (the launch is a graph node, run later)");
        return 0;
    }
    c->start = event_get();
    c->end = event_get();
    c->timed = index;
    c->ok = 1;
    if (!c->start || !c->end) {
        event_put(c->start);
        event_put(c->end);
        untimed(t, "cuEventCreate failed");
        return 0;
    }
    return 1;
}

static void record_event(struct clock *c, CUevent e, const struct launch_args *a) {
    int ptsz = a->api == 1 || a->api == 3;
    CUresult (*record)(CUevent, CUstream) =
        ptsz ? REAL(p_event_record_ptsz, "cuEventRecord_ptsz") : REAL(p_event_record, "cuEventRecord");
    if (!record || record(e, a->config ? a->config->hStream : a->stream) != CUDA_SUCCESS) c->ok = 0;
}

/* under the lock: the launch's events go to be read later (a failed launch's are given back) */
static void timing_end(struct clock *c, CUresult r) {
    if (r != CUDA_SUCCESS || !c->ok) {
        if (r == CUDA_SUCCESS) untimed(&timeds[c->timed], "cuEventRecord failed");
        event_put(c->start);
        event_put(c->end);
        return;
    }
    if (npending == cappending && pending_head) {
        memmove(pending, pending + pending_head, (npending - pending_head) * sizeof *pending);
        npending -= pending_head;
        pending_head = 0;
    }
    GROW(pending, npending, cappending);
    pending[npending++] = *c;
}

/* at exit: every event read, and the counts and times written. Another thread may hold the lock
 * (mid-capture) as the program exits: after two seconds the records are written without it rather
 * than the exit hang. */
static void inject_exit(void) {
    int locked = 0;
    for (int i = 0; i < 2000 && !(locked = pthread_mutex_trylock(&lock) == 0); i++) usleep(1000);
    if (state_pid == getpid()) {
        harvest(1);
        FILE *f = inject_record();
        for (size_t i = 0; f && i < ninjs; i++) {
            fprintf(f, "{\"event\": \"launches\", \"entry\": ");
            json_string(f, injs[i].entry);
            fprintf(f, ", \"replaced\": %llu, \"original\": %llu}\n", injs[i].replaced, injs[i].original);
        }
        for (size_t i = 0; f && i < ntimeds; i++) {
            struct timed *t = &timeds[i];
            fprintf(f, "{\"event\": \"times\", \"entry\": ");
            json_string(f, t->entry);
            fprintf(f, ", \"replaced\": %s, \"untimed\": %llu, \"why\": ", t->replaced ? "true" : "false", t->untimed);
            json_string(f, t->why);
            fprintf(f, ", \"ms\": [");
            for (size_t k = 0; k < t->n; k++) fprintf(f, "%s%.9g", k ? ", " : "", t->ms[k]);
            fputs("]}\n", f);
        }
        if (f) fflush(f);
    }
    if (locked) pthread_mutex_unlock(&lock);
}

/* under the lock: the program unloads a module or library (`owner`), destroys a context (`ctx`)
 * or resets them all (`all`): the bindings that lived in it are dropped — their replacements
 * unloaded with the program's module —, and a library's copy sets of the contexts that go */
static void forget_bindings(void *owner, CUcontext ctx, int all) {
    for (size_t i = 0; i < nbindings; i++) {
        struct binding *b = bindings[i];
        if (b->dead) continue;
        if (!owner && b->library) {
            size_t k = 0;
            for (size_t s = 0; s < b->nsets; s++)
                if (all || b->sets[s].ctx != ctx) b->sets[k++] = b->sets[s];
                else free(b->sets[s].c);
            b->nsets = k;
            continue;
        }
        if (owner ? b->owner != owner : !(all || b->ctx == ctx)) continue;
        b->dead = 1;
        if (owner && b->status == S_REPLACED) {
            if (b->library && REAL(p_lib_unload, "cuLibraryUnload")) p_lib_unload(b->repl_owner);
            else if (!b->library && REAL(p_mod_unload, "cuModuleUnload")) p_mod_unload(b->repl_owner);
        }
    }
}

/* the launch as the program asked it, or the replacement's: its module variables around it, its
 * events right before and after it */
static CUresult launch(struct launch_args *a) {
    CUresult r = a->v ? copy_variables(a, 0) : CUDA_SUCCESS;
    if (r != CUDA_SUCCESS) return r;
    if (a->t) record_event(a->t, a->t->start, a);
    r = real_launch(a);
    if (a->t) record_event(a->t, a->t->end, a);
    if (r == CUDA_SUCCESS && a->v) r = copy_variables(a, 1);
    return r;
}

/* under the lock: the launch, with its state copied before and after and written out */
static CUresult capture(struct launch_args *a, const char *name, void *owner, unsigned long long seq,
                        unsigned long long match) {
    static size_t offs[MAX_PARAMS], sizes[MAX_PARAMS];
    static struct ref refs[MAX_REFS];
    struct buf *bufs = NULL; size_t nbufs = 0, capbufs = 0;
    struct arr *arrs = NULL; size_t narrs = 0, caparrs = 0;
    size_t nrefs = 0, nparams = 0, size = 0;
    unsigned char *block = NULL;
    const char *param_source = "param_info", *problem = NULL;
    struct image *im = owner ? image_of(owner) : NULL;
    struct named *kernel = named_of(a->f);
    double t0 = now_ns(), t1, t2, t3;

    /* the parameter layout, and the bytes */
    int got = param_list(a->f, kernel && kernel->kernel, offs, sizes, MAX_PARAMS), info = got >= 0;
    nparams = info ? (size_t)got : 0;
    for (size_t i = 0; i < nparams; i++) if (offs[i] + sizes[i] > size) size = offs[i] + sizes[i];
    const unsigned char *extra_buf = NULL;
    size_t extra_size = 0;
    for (void **e = a->extra; e && *e; e += 2) {
        if (*e == (void *)1) extra_buf = e[1];
        else if (*e == (void *)2) extra_size = *(size_t *)e[1];
        else if (*e != (void *)0) break;
    }
    if (extra_buf) {
        param_source = "extra";
        size = extra_size;
        block = calloc(1, size + 8);
        if (block) memcpy(block, extra_buf, size);
    } else {
        if (!info) problem = "the driver has no cuFuncGetParamInfo: the parameter sizes are unknown";
        block = calloc(1, size + 8);
        for (size_t i = 0; block && a->params && i < nparams; i++) memcpy(block + offs[i], a->params[i], sizes[i]);
    }
    if (!block) return launch(a);

    /* the words that point into allocations or name texture and surface objects */
    for (size_t o = 0; o + 8 <= size && nrefs < MAX_REFS; o += 8) {
        unsigned long long w = u64(block + o);
        if (!w) continue;
        int found = -1;
        for (size_t i = 0; i < nbufs && found < 0; i++) if (w >= bufs[i].base && w < bufs[i].base + bufs[i].size) found = (int)i;
        if (found < 0) {
            int how = -1; CUdeviceptr base = 0; size_t bsize = 0;
            for (size_t i = 0; i < nallocs; i++)
                if (w >= allocs[i].base && w < allocs[i].base + allocs[i].size) { base = allocs[i].base; bsize = allocs[i].size; how = 0; break; }
            if (how < 0 && REAL(p_range, "cuMemGetAddressRange_v2") && p_range(&base, &bsize, w) == CUDA_SUCCESS && bsize) how = 1;
            if (how >= 0) {
                GROW(bufs, nbufs, capbufs);
                memset(&bufs[nbufs], 0, sizeof bufs[nbufs]);
                bufs[nbufs].base = base; bufs[nbufs].size = bsize; bufs[nbufs].how = how;
                found = (int)nbufs++;
            }
        }
        if (found >= 0) { refs[nrefs++] = (struct ref){o, w, 0, found}; continue; }
        int kind = 0;
        for (size_t i = 0; i < nobjects; i++) if (objects[i].h == w) { kind = objects[i].kind; break; }
        if (!kind) continue;
        CUDA_RESOURCE_DESC res;
        memset(&res, 0, sizeof res);
        CUresult r = kind == 1 ? (REAL(p_tex_res, "cuTexObjectGetResourceDesc") ? p_tex_res(&res, w) : 999)
                               : (REAL(p_surf_res, "cuSurfObjectGetResourceDesc") ? p_surf_res(&res, w) : 999);
        if (r != CUDA_SUCCESS || res.resType != CU_RESOURCE_TYPE_ARRAY) {
            refs[nrefs++] = (struct ref){o, w, 3, r != CUDA_SUCCESS ? -1 : -2 - res.resType};
            continue;
        }
        int ai = -1;
        for (size_t i = 0; i < narrs; i++) if (arrs[i].h == res.res.array.hArray) ai = (int)i;
        if (ai < 0) {
            GROW(arrs, narrs, caparrs);
            struct arr *x = &arrs[narrs];
            memset(x, 0, sizeof *x);
            x->h = res.res.array.hArray;
            size_t fb = 0;
            if (REAL(p_array3d_desc, "cuArray3DGetDescriptor_v2") && p_array3d_desc(&x->d, x->h) == CUDA_SUCCESS
                && format_descr(x->d.Format, &fb)) {
                x->elem = fb * x->d.NumChannels;
                x->bytes = x->elem * x->d.Width * (x->d.Height ? x->d.Height : 1) * (x->d.Depth ? x->d.Depth : 1);
                x->ok = 1;
            }
            ai = (int)narrs++;
        }
        refs[nrefs++] = (struct ref){o, w, kind, ai};
    }

    /* before */
    struct out out = {0};
    char final[PATH_MAX + 32], path[PATH_MAX + 128];
    snprintf(out.dir, sizeof out.dir, "%s/.%06llu.tmp", procdir, seq);
    snprintf(final, sizeof final, "%s/%06llu", procdir, seq);
    make_dir(&out, out.dir);
    snprintf(path, sizeof path, "%s/before", out.dir); make_dir(&out, path);
    snprintf(path, sizeof path, "%s/after", out.dir); make_dir(&out, path);
    CUresult sync = REAL(p_ctx_sync, "cuCtxSynchronize") ? p_ctx_sync() : 999;
    size_t copied = 0, written = 0;
    double copy_ns = 0, write_ns = 0, tc;
    for (size_t i = 0; i < nbufs && !out.failed; i++) {
        bufs[i].before = host_get(bufs[i].size);
        if (!bufs[i].before.p) { fail(&out, "host memory for a buffer copy", ENOMEM); break; }
        tc = now_ns();
        if (!REAL(p_dtoh, "cuMemcpyDtoH_v2") || p_dtoh(bufs[i].before.p, bufs[i].base, bufs[i].size) != CUDA_SUCCESS)
            { problem = "a buffer could not be copied (cuMemcpyDtoH failed)"; }
        copy_ns += now_ns() - tc;
        copied += bufs[i].size;
        size_t shape[1] = {bufs[i].size};
        snprintf(path, sizeof path, "%s/before/b%zu.npy", out.dir, i);
        tc = now_ns();
        if (!link_same(state_of(0, bufs[i].base, bufs[i].size, NULL), bufs[i].before.p, bufs[i].size, path)) {
            write_npy(&out, path, "|u1", shape, 1, bufs[i].before.p, bufs[i].size);
            written += bufs[i].size;
        }
        write_ns += now_ns() - tc;
    }
    for (size_t i = 0; i < narrs && !out.failed; i++) {
        struct arr *x = &arrs[i];
        if (!x->ok) continue;
        x->before = host_get(x->bytes);
        if (!x->before.p) { fail(&out, "host memory for an array copy", ENOMEM); break; }
        tc = now_ns();
        if (copy_array(x, x->before.p) != CUDA_SUCCESS) { problem = "an array could not be copied (cuMemcpy2D/3D failed)"; }
        copy_ns += now_ns() - tc;
        copied += x->bytes;
    }
    t1 = now_ns();
    CUresult result = launch(a);
    CUresult after_sync = result == CUDA_SUCCESS && p_ctx_sync ? p_ctx_sync() : result;
    t2 = now_ns();
    if (result != CUDA_SUCCESS || after_sync != CUDA_SUCCESS) {
        /* a launch that failed or faulted: nothing is written for it, its error is the program's */
        remove_tree(out.dir);
        goto done;
    }
    for (size_t i = 0; i < nbufs && !out.failed; i++) {
        struct buf *b = &bufs[i];
        b->after = host_get(b->size);
        if (!b->after.p) { fail(&out, "host memory for a buffer copy", ENOMEM); break; }
        tc = now_ns();
        if (!p_dtoh || p_dtoh(b->after.p, b->base, b->size) != CUDA_SUCCESS) problem = "a buffer could not be copied after the launch";
        copy_ns += now_ns() - tc;
        b->changed = memcmp(b->after.p, b->before.p, b->size) != 0;
        if (!b->changed) host_put(&b->after);
        char src[PATH_MAX + 128];
        snprintf(src, sizeof src, "%s/before/b%zu.npy", out.dir, i);
        snprintf(path, sizeof path, "%s/after/b%zu.npy", out.dir, i);
        size_t shape[1] = {b->size};
        tc = now_ns();
        if (b->changed || link(src, path) != 0) {
            write_npy(&out, path, "|u1", shape, 1, b->changed ? b->after.p : b->before.p, b->size);
            written += b->size;
        }
        write_ns += now_ns() - tc;
    }
    for (size_t i = 0; i < narrs && !out.failed; i++) {
        struct arr *x = &arrs[i];
        if (!x->ok) continue;
        x->after = host_get(x->bytes);
        if (!x->after.p) { fail(&out, "host memory for an array copy", ENOMEM); break; }
        tc = now_ns();
        if (copy_array(x, x->after.p) != CUDA_SUCCESS) problem = "an array could not be copied after the launch";
        copy_ns += now_ns() - tc;
        x->changed = memcmp(x->after.p, x->before.p, x->bytes) != 0;
        if (!x->changed) host_put(&x->after);
        size_t fb, shape[4], nd = 0;
        const char *descr = format_descr(x->d.Format, &fb);
        if (x->d.Depth) shape[nd++] = x->d.Depth;
        if (x->d.Height) shape[nd++] = x->d.Height;
        shape[nd++] = x->d.Width;
        shape[nd++] = x->d.NumChannels;
        char src[PATH_MAX + 128];
        snprintf(src, sizeof src, "%s/before/a%zu.npy", out.dir, i);
        tc = now_ns();
        if (!link_same(state_of(1, (unsigned long long)(uintptr_t)x->h, x->bytes, &x->d), x->before.p, x->bytes, src)) {
            write_npy(&out, src, descr, shape, (int)nd, x->before.p, x->bytes);
            written += x->bytes;
        }
        snprintf(path, sizeof path, "%s/after/a%zu.npy", out.dir, i);
        if (x->changed || link(src, path) != 0) {
            write_npy(&out, path, descr, shape, (int)nd, x->changed ? x->after.p : x->before.p, x->bytes);
            written += x->bytes;
        }
        write_ns += now_ns() - tc;
    }
    t3 = now_ns();
    snprintf(path, sizeof path, "%s/params.bin", out.dir);
    write_file(&out, path, block, size);
    snprintf(path, sizeof path, "%s/record.json", out.dir);
    FILE *f = out.failed ? NULL : fopen(path, "w");
    if (!out.failed && !f) fail(&out, path, errno);
    if (f) {
        fprintf(f, "{\"pid\": %d, \"seq\": %llu, \"match\": %llu, \"api\": \"%s\", \"entry\": ", (int)getpid(), seq, match, API_NAMES[a->api]);
        json_string(f, name);
        fprintf(f, ", \"replaced\": %s", a->injected ? (a->injected == 2 ? "true" : "false") : "null");
        fprintf(f, ", \"module\": ");
        if (im) json_string(f, im->file); else fputs("null", f);
        fprintf(f, ", \"grid\": [%u, %u, %u], \"block\": [%u, %u, %u], \"shared_bytes\": %u, \"stream\": %llu",
                a->grid[0], a->grid[1], a->grid[2], a->block[0], a->block[1], a->block[2], a->shared,
                (unsigned long long)(uintptr_t)a->stream);
        fprintf(f, ", \"launch_attributes\": [");
        for (unsigned i = 0; a->config && i < a->config->numAttrs; i++) fprintf(f, "%s%u", i ? ", " : "", a->config->attrs[i].id);
        fprintf(f, "], \"params_source\": \"%s\", \"params_size\": %zu, \"params\": [", param_source, size);
        for (size_t i = 0; i < nparams; i++) fprintf(f, "%s[%zu, %zu]", i ? ", " : "", offs[i], sizes[i]);
        fprintf(f, "], \"problem\": ");
        if (problem) json_string(f, problem); else fputs("null", f);
        fprintf(f, ", \"sync_before\": %d, \"refs\": [", sync);
        static const char *kinds[] = {"buffer", "texture", "surface", "object"};
        for (size_t i = 0; i < nrefs; i++)
            fprintf(f, "%s{\"offset\": %zu, \"value\": %llu, \"kind\": \"%s\", \"index\": %d}", i ? ", " : "",
                    refs[i].offset, refs[i].value, kinds[refs[i].kind], refs[i].index);
        fprintf(f, "], \"buffers\": [");
        for (size_t i = 0; i < nbufs; i++)
            fprintf(f, "%s{\"file\": \"b%zu.npy\", \"base\": %llu, \"size\": %zu, \"found_by\": \"%s\", \"changed\": %s}",
                    i ? ", " : "", i, bufs[i].base, bufs[i].size, bufs[i].how ? "address_range" : "allocation",
                    bufs[i].changed ? "true" : "false");
        fprintf(f, "], \"arrays\": [");
        for (size_t i = 0; i < narrs; i++) {
            fprintf(f, "%s{\"file\": ", i ? ", " : "");
            if (arrs[i].ok) fprintf(f, "\"a%zu.npy\"", i); else fputs("null", f);
            fprintf(f, ", \"handle\": %llu, \"width\": %zu, \"height\": %zu, \"depth\": %zu, \"format\": %d, "
                       "\"channels\": %u, \"flags\": %u, \"changed\": %s}",
                    (unsigned long long)(uintptr_t)arrs[i].h, arrs[i].d.Width, arrs[i].d.Height, arrs[i].d.Depth,
                    arrs[i].d.Format, arrs[i].d.NumChannels, arrs[i].d.Flags, arrs[i].changed ? "true" : "false");
        }
        fprintf(f, "], \"samplers\": [");
        int first = 1;
        for (size_t i = 0; i < nrefs; i++) {
            if (refs[i].kind != 1) continue;
            CUDA_TEXTURE_DESC td;
            memset(&td, 0, sizeof td);
            if (!REAL(p_tex_desc, "cuTexObjectGetTextureDesc") || p_tex_desc(&td, refs[i].value) != CUDA_SUCCESS) continue;
            fprintf(f, "%s{\"offset\": %zu, \"address_mode\": [%d, %d, %d], \"filter_mode\": %d, \"flags\": %u}",
                    first ? "" : ", ", refs[i].offset, td.addressMode[0], td.addressMode[1], td.addressMode[2],
                    td.filterMode, td.flags);
            first = 0;
        }
        fprintf(f, "], \"bytes_copied\": %zu, \"bytes_written\": %zu, \"times_ns\": {\"before\": %.0f, \"launch\": %.0f, "
                   "\"after\": %.0f, \"copies\": %.0f, \"writes\": %.0f}}\n",
                2 * copied, written, t1 - t0, t2 - t1, t3 - t2, copy_ns, write_ns);
        if (ferror(f)) fail(&out, path, errno ? errno : EIO);
        if (fclose(f) != 0) fail(&out, path, errno);
    }
    if (!out.failed && rename(out.dir, final) != 0) fail(&out, final, errno);
    if (out.failed) {
        remove_tree(out.dir);
    } else {
        captured++;
        /* what each buffer and array now holds, and the file that holds it, for the next launches */
        for (size_t i = 0; i < nbufs; i++) {
            snprintf(path, sizeof path, "%s/after/b%zu.npy", final, i);
            state_set(0, bufs[i].base, bufs[i].size, NULL, bufs[i].changed ? &bufs[i].after : &bufs[i].before, path);
        }
        for (size_t i = 0; i < narrs; i++) {
            if (!arrs[i].ok) continue;
            snprintf(path, sizeof path, "%s/after/a%zu.npy", final, i);
            state_set(1, (unsigned long long)(uintptr_t)arrs[i].h, arrs[i].bytes, &arrs[i].d,
                      arrs[i].changed ? &arrs[i].after : &arrs[i].before, path);
        }
    }
done:
    for (size_t i = 0; i < nbufs; i++) { host_put(&bufs[i].before); host_put(&bufs[i].after); }
    for (size_t i = 0; i < narrs; i++) { host_put(&arrs[i].before); host_put(&arrs[i].after); }
    free(bufs); free(arrs); free(block);
    if (out.failed) stop(&out, seq, name);
    else trim_host_copies();
    return result;
}

static CUresult on_launch(const struct launch_args *given) {
    struct launch_args launched = *given, *a = &launched;
    pthread_mutex_lock(&lock);
    setup();
    if (!enabled && !injecting) { pthread_mutex_unlock(&lock); return real_launch(a); }
    void *owner = NULL;
    const char *name = entry_name(a->f, &owner);
    CUresult r;
    if (injecting && (inject_launch(a, name, owner), a->f != given->f)) name = entry_name(a->f, &owner);  /* its module */
    if (!enabled) {  /* injecting, not capturing: the launch outside the lock, timed where asked */
        struct clock c;
        size_t timed = name ? timed_index(name, a->injected == 2) : (size_t)-1;
        a->t = timed != (size_t)-1 && timing_begin(a, timed, &c) ? &c : NULL;
        pthread_mutex_unlock(&lock);
        r = launch(a);
        pthread_mutex_lock(&lock);
        if (a->t) timing_end(a->t, r);
        if (r != CUDA_SUCCESS && a->b) launch_failed(a, r);
        pthread_mutex_unlock(&lock);
        return r;
    }
    unsigned long long seq = launch_seq++;
    const char *shown = name ? name : "?";
    size_t s;
    for (s = 0; s < nseen && strcmp(seen[s].name, shown) != 0; s++) {}
    if (s == nseen) {
        if (nseen == 0 && !ensure_procdir()) { pthread_mutex_unlock(&lock); return launch(a); }
        GROW(seen, nseen, capseen);
        seen[nseen].name = strdup(shown); seen[nseen].launches = 0; nseen++;
        append_line("names.txt", shown);
    }
    seen[s].launches++;
    if (have_kernels && (!name || regexec(&kernels, name, 0, NULL, 0) != 0)) {
        r = launch(a);
    } else {
        unsigned long long match = match_seq++;
        r = selected(match) ? capture(a, shown, owner, seq, match) : launch(a);
    }
    if (r != CUDA_SUCCESS && a->b) launch_failed(a, r);
    pthread_mutex_unlock(&lock);
    return r;
}

/* ---- the hooked entry points ---- */
#define EXPORT __attribute__((visibility("default")))

static CUresult (*r_alloc)(CUdeviceptr *, size_t);
static CUresult (*r_alloc_pitch)(CUdeviceptr *, size_t *, size_t, size_t, unsigned);
static CUresult (*r_alloc_async)(CUdeviceptr *, size_t, CUstream);
static CUresult (*r_alloc_async_ptsz)(CUdeviceptr *, size_t, CUstream);
static CUresult (*r_alloc_pool)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
static CUresult (*r_alloc_pool_ptsz)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
static CUresult (*r_alloc_managed)(CUdeviceptr *, size_t, unsigned);
static CUresult (*r_free)(CUdeviceptr);
static CUresult (*r_free_async)(CUdeviceptr, CUstream);
static CUresult (*r_free_async_ptsz)(CUdeviceptr, CUstream);
static CUresult (*r_mem_map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
static CUresult (*r_mem_unmap)(CUdeviceptr, size_t);
static CUresult (*r_tex_create)(CUtexObject *, const CUDA_RESOURCE_DESC *, const CUDA_TEXTURE_DESC *, const void *);
static CUresult (*r_tex_destroy)(CUtexObject);
static CUresult (*r_surf_create)(CUsurfObject *, const CUDA_RESOURCE_DESC *);
static CUresult (*r_surf_destroy)(CUsurfObject);
static CUresult (*r_mod_unload)(CUmodule);
static CUresult (*r_lib_unload)(CUlibrary);
static CUresult (*r_ctx_destroy)(CUcontext);
static CUresult (*r_primary_reset)(CUdevice);
static CUresult (*r_primary_release)(CUdevice);
static CUresult (*r_gpa2)(const char *, void **, int, unsigned long long, int *);
static CUresult (*r_gpa1)(const char *, void **, int, unsigned long long);

#define MODULE_LOADED(handle, image) do { pthread_mutex_lock(&lock); loaded((handle), (image)); pthread_mutex_unlock(&lock); } while (0)

EXPORT CUresult cuModuleLoadData(CUmodule *m, const void *image) {
    if (!REAL(r_mod_load, "cuModuleLoadData")) return 999;
    CUresult r = r_mod_load(m, image);
    if (r == CUDA_SUCCESS) MODULE_LOADED(*m, image);
    return r;
}

EXPORT CUresult cuModuleLoadDataEx(CUmodule *m, const void *image, unsigned n, void *options, void **values) {
    if (!REAL(r_mod_load_ex, "cuModuleLoadDataEx")) return 999;
    CUresult r = r_mod_load_ex(m, image, n, options, values);
    if (r == CUDA_SUCCESS) MODULE_LOADED(*m, image);
    return r;
}

EXPORT CUresult cuModuleLoadFatBinary(CUmodule *m, const void *image) {
    if (!REAL(r_mod_load_fat, "cuModuleLoadFatBinary")) return 999;
    CUresult r = r_mod_load_fat(m, image);
    if (r == CUDA_SUCCESS) MODULE_LOADED(*m, image);
    return r;
}

EXPORT CUresult cuModuleLoad(CUmodule *m, const char *fname) {
    if (!REAL(r_mod_load_file, "cuModuleLoad")) return 999;
    CUresult r = r_mod_load_file(m, fname);
    if (r != CUDA_SUCCESS) return r;
    FILE *f = fopen(fname, "rb");  /* the image is the file's bytes, NUL-terminated for PTX */
    if (!f) return r;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *data = n >= 0 ? calloc(1, (size_t)n + 1) : NULL;
    if (data && fread(data, 1, (size_t)n, f) == (size_t)n) MODULE_LOADED(*m, data);
    free(data);
    fclose(f);
    return r;
}

EXPORT CUresult cuLibraryLoadData(CUlibrary *lib, const void *code, void *jo, void **jv, unsigned nj, void *lo,
                                  void **lv, unsigned nl) {
    if (!REAL(r_lib_load, "cuLibraryLoadData")) return 999;
    CUresult r = r_lib_load(lib, code, jo, jv, nj, lo, lv, nl);
    if (r == CUDA_SUCCESS) MODULE_LOADED(*lib, code);
    return r;
}

/* a function or kernel the program gets: named; an injected entry's is the replacement's */
#define GOT_HANDLE(h, owner, name, kernel, api) do {                                          \
        pthread_mutex_lock(&lock);                                                          \
        setup();                                                                            \
        note_named(*(h), (owner), (name), (kernel));                                        \
        if (injecting) injected_handle((void **)(h), (owner), (kernel), (name), (kernel), (api)); \
        pthread_mutex_unlock(&lock);                                                        \
    } while (0)

EXPORT CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name) {
    if (!REAL(r_mod_get_fn, "cuModuleGetFunction")) return 999;
    CUresult r = r_mod_get_fn(f, m, name);
    if (r == CUDA_SUCCESS) GOT_HANDLE(f, m, name, 0, "cuModuleGetFunction");
    return r;
}

EXPORT CUresult cuLibraryGetKernel(CUkernel *k, CUlibrary lib, const char *name) {
    if (!REAL(r_lib_get_kernel, "cuLibraryGetKernel")) return 999;
    CUresult r = r_lib_get_kernel(k, lib, name);
    if (r == CUDA_SUCCESS) GOT_HANDLE(k, lib, name, 1, "cuLibraryGetKernel");
    return r;
}

EXPORT CUresult cuKernelGetFunction(CUfunction *f, CUkernel k) {
    if (!REAL(r_kernel_get_fn, "cuKernelGetFunction")) return 999;
    CUresult r = r_kernel_get_fn(f, k);
    if (r == CUDA_SUCCESS) {
        pthread_mutex_lock(&lock);
        struct named *n = named_of(k);
        if (n) {  /* the kernel's function is what the kernel is: the replacement's, or the program's own */
            void *owner = n->owner;
            struct binding *b = n->b;
            int is_repl = n->is_repl;
            note_named(*f, owner, n->name, 0);
            n = named_of(*f);
            n->b = b;
            n->is_repl = is_repl;
        }
        pthread_mutex_unlock(&lock);
    }
    return r;
}

/* the program's module, library or context goes: so do the bindings in it (forget_bindings); a
 * context's pending events are read first (they die with it) */
#define GONE_HOOK(name, slot, type, forget)                         \
    EXPORT CUresult name(type h) {                                  \
        if (!REAL(slot, #name)) return 999;                         \
        pthread_mutex_lock(&lock);                                  \
        if (injecting) { forget; }                                  \
        pthread_mutex_unlock(&lock);                                \
        return slot(h);                                             \
    }

GONE_HOOK(cuModuleUnload, r_mod_unload, CUmodule, forget_bindings(h, NULL, 0))
GONE_HOOK(cuLibraryUnload, r_lib_unload, CUlibrary, forget_bindings(h, NULL, 0))
GONE_HOOK(cuCtxDestroy_v2, r_ctx_destroy, CUcontext, harvest(1); forget_bindings(NULL, h, 0))
GONE_HOOK(cuDevicePrimaryCtxReset_v2, r_primary_reset, CUdevice, harvest(1); forget_bindings(NULL, NULL, 1))
GONE_HOOK(cuDevicePrimaryCtxRelease_v2, r_primary_release, CUdevice, harvest(1))  /* the last release destroys it */

EXPORT CUresult cuLibraryGetModule(CUmodule *m, CUlibrary lib) {
    if (!REAL(r_lib_get_mod, "cuLibraryGetModule")) return 999;
    CUresult r = r_lib_get_mod(m, lib);
    if (r == CUDA_SUCCESS) {
        pthread_mutex_lock(&lock);
        struct image *im = image_of(lib);
        if (im) { char file[48]; memcpy(file, im->file, sizeof file); note_image(*m, file); }
        pthread_mutex_unlock(&lock);
    }
    return r;
}

/* an allocation hook: the real call, then [*p, *p + SIZE) tracked; a free hook: untracked, then freed */
#define ALLOC_HOOK(name, slot, SIZE, params, args)                  \
    EXPORT CUresult name params {                                  \
        if (!REAL(slot, #name)) return 999;                        \
        CUresult r = slot args;                                    \
        if (r == CUDA_SUCCESS) note_alloc(*p, SIZE);               \
        return r;                                                  \
    }
#define FREE_HOOK(name, slot, params, args)                         \
    EXPORT CUresult name params {                                  \
        if (!REAL(slot, #name)) return 999;                        \
        forget_alloc(p);                                           \
        return slot args;                                          \
    }

ALLOC_HOOK(cuMemAlloc_v2, r_alloc, n, (CUdeviceptr *p, size_t n), (p, n))
ALLOC_HOOK(cuMemAllocPitch_v2, r_alloc_pitch, *pitch * h, (CUdeviceptr *p, size_t *pitch, size_t w, size_t h, unsigned e),
           (p, pitch, w, h, e))
ALLOC_HOOK(cuMemAllocAsync, r_alloc_async, n, (CUdeviceptr *p, size_t n, CUstream s), (p, n, s))
ALLOC_HOOK(cuMemAllocAsync_ptsz, r_alloc_async_ptsz, n, (CUdeviceptr *p, size_t n, CUstream s), (p, n, s))
ALLOC_HOOK(cuMemAllocFromPoolAsync, r_alloc_pool, n, (CUdeviceptr *p, size_t n, CUmemoryPool pool, CUstream s),
           (p, n, pool, s))
ALLOC_HOOK(cuMemAllocFromPoolAsync_ptsz, r_alloc_pool_ptsz, n, (CUdeviceptr *p, size_t n, CUmemoryPool pool, CUstream s),
           (p, n, pool, s))
ALLOC_HOOK(cuMemAllocManaged, r_alloc_managed, n, (CUdeviceptr *p, size_t n, unsigned flags), (p, n, flags))
FREE_HOOK(cuMemFree_v2, r_free, (CUdeviceptr p), (p))
FREE_HOOK(cuMemFreeAsync, r_free_async, (CUdeviceptr p, CUstream s), (p, s))
FREE_HOOK(cuMemFreeAsync_ptsz, r_free_async_ptsz, (CUdeviceptr p, CUstream s), (p, s))

EXPORT CUresult cuMemMap(CUdeviceptr p, size_t n, size_t offset, CUmemGenericAllocationHandle h, unsigned long long flags) {
    if (!REAL(r_mem_map, "cuMemMap")) return 999;
    CUresult r = r_mem_map(p, n, offset, h, flags);
    if (r == CUDA_SUCCESS) note_alloc(p, n);
    return r;
}

EXPORT CUresult cuMemUnmap(CUdeviceptr p, size_t n) {
    if (!REAL(r_mem_unmap, "cuMemUnmap")) return 999;
    forget_alloc(p);
    return r_mem_unmap(p, n);
}

EXPORT CUresult cuTexObjectCreate(CUtexObject *t, const CUDA_RESOURCE_DESC *res, const CUDA_TEXTURE_DESC *tex, const void *view) {
    if (!REAL(r_tex_create, "cuTexObjectCreate")) return 999;
    CUresult r = r_tex_create(t, res, tex, view);
    if (r == CUDA_SUCCESS) note_object(*t, 1);
    return r;
}

EXPORT CUresult cuTexObjectDestroy(CUtexObject t) {
    if (!REAL(r_tex_destroy, "cuTexObjectDestroy")) return 999;
    forget_object(t);
    return r_tex_destroy(t);
}

EXPORT CUresult cuSurfObjectCreate(CUsurfObject *s, const CUDA_RESOURCE_DESC *res) {
    if (!REAL(r_surf_create, "cuSurfObjectCreate")) return 999;
    CUresult r = r_surf_create(s, res);
    if (r == CUDA_SUCCESS) note_object(*s, 2);
    return r;
}

EXPORT CUresult cuSurfObjectDestroy(CUsurfObject s) {
    if (!REAL(r_surf_destroy, "cuSurfObjectDestroy")) return 999;
    forget_object(s);
    return r_surf_destroy(s);
}

EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                               unsigned shared, CUstream s, void **params, void **extra) {
    struct launch_args a = {0, f, {gx, gy, gz}, {bx, by, bz}, shared, s, params, extra, NULL};
    return on_launch(&a);
}

EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                    unsigned bz, unsigned shared, CUstream s, void **params, void **extra) {
    struct launch_args a = {1, f, {gx, gy, gz}, {bx, by, bz}, shared, s, params, extra, NULL};
    return on_launch(&a);
}

static CUresult launch_ex(int api, const CUlaunchConfig *c, CUfunction f, void **params, void **extra) {
    struct launch_args a = {api, f, {c->gridDimX, c->gridDimY, c->gridDimZ}, {c->blockDimX, c->blockDimY, c->blockDimZ},
                            c->sharedMemBytes, c->hStream, params, extra, c};
    return on_launch(&a);
}

EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **params, void **extra) {
    return launch_ex(2, c, f, params, extra);
}

EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *c, CUfunction f, void **params, void **extra) {
    return launch_ex(3, c, f, params, extra);
}

EXPORT CUresult cuGetProcAddress_v2(const char *, void **, int, unsigned long long, int *);
EXPORT CUresult cuGetProcAddress(const char *, void **, int, unsigned long long);

/* The hooked names: the exported symbol, the name cuGetProcAddress is asked for (with the
 * lowest CUDA version the hook's prototype is right for, and whether it is the per-thread
 * default-stream variant), the real function's slot and the hook. */
struct hook { const char *symbol, *base; int min_version, ptds; void **slot; void *fn; };
#define HOOK(sym, base, ver, ptds, slot) {#sym, base, ver, ptds, (void **)&slot, (void *)sym}
static const struct hook hooks[] = {
    HOOK(cuGetProcAddress_v2, "cuGetProcAddress", 12000, 0, r_gpa2),
    HOOK(cuGetProcAddress, "cuGetProcAddress", 0, 0, r_gpa1),
    HOOK(cuModuleLoadData, "cuModuleLoadData", 0, 0, r_mod_load),
    HOOK(cuModuleLoadDataEx, "cuModuleLoadDataEx", 0, 0, r_mod_load_ex),
    HOOK(cuModuleLoadFatBinary, "cuModuleLoadFatBinary", 0, 0, r_mod_load_fat),
    HOOK(cuModuleLoad, "cuModuleLoad", 0, 0, r_mod_load_file),
    HOOK(cuLibraryLoadData, "cuLibraryLoadData", 0, 0, r_lib_load),
    HOOK(cuModuleGetFunction, "cuModuleGetFunction", 0, 0, r_mod_get_fn),
    HOOK(cuLibraryGetKernel, "cuLibraryGetKernel", 0, 0, r_lib_get_kernel),
    HOOK(cuKernelGetFunction, "cuKernelGetFunction", 0, 0, r_kernel_get_fn),
    HOOK(cuLibraryGetModule, "cuLibraryGetModule", 0, 0, r_lib_get_mod),
    HOOK(cuModuleUnload, "cuModuleUnload", 0, 0, r_mod_unload),
    HOOK(cuLibraryUnload, "cuLibraryUnload", 0, 0, r_lib_unload),
    HOOK(cuCtxDestroy_v2, "cuCtxDestroy", 4000, 0, r_ctx_destroy),
    HOOK(cuDevicePrimaryCtxReset_v2, "cuDevicePrimaryCtxReset", 11000, 0, r_primary_reset),
    HOOK(cuDevicePrimaryCtxRelease_v2, "cuDevicePrimaryCtxRelease", 11000, 0, r_primary_release),
    HOOK(cuMemAlloc_v2, "cuMemAlloc", 3020, 0, r_alloc),
    HOOK(cuMemAllocPitch_v2, "cuMemAllocPitch", 3020, 0, r_alloc_pitch),
    HOOK(cuMemAllocAsync, "cuMemAllocAsync", 0, 0, r_alloc_async),
    HOOK(cuMemAllocAsync_ptsz, "cuMemAllocAsync", 0, 1, r_alloc_async_ptsz),
    HOOK(cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", 0, 0, r_alloc_pool),
    HOOK(cuMemAllocFromPoolAsync_ptsz, "cuMemAllocFromPoolAsync", 0, 1, r_alloc_pool_ptsz),
    HOOK(cuMemAllocManaged, "cuMemAllocManaged", 0, 0, r_alloc_managed),
    HOOK(cuMemFree_v2, "cuMemFree", 3020, 0, r_free),
    HOOK(cuMemFreeAsync, "cuMemFreeAsync", 0, 0, r_free_async),
    HOOK(cuMemFreeAsync_ptsz, "cuMemFreeAsync", 0, 1, r_free_async_ptsz),
    HOOK(cuMemMap, "cuMemMap", 0, 0, r_mem_map),
    HOOK(cuMemUnmap, "cuMemUnmap", 0, 0, r_mem_unmap),
    HOOK(cuTexObjectCreate, "cuTexObjectCreate", 0, 0, r_tex_create),
    HOOK(cuTexObjectDestroy, "cuTexObjectDestroy", 0, 0, r_tex_destroy),
    HOOK(cuSurfObjectCreate, "cuSurfObjectCreate", 0, 0, r_surf_create),
    HOOK(cuSurfObjectDestroy, "cuSurfObjectDestroy", 0, 0, r_surf_destroy),
    HOOK(cuLaunchKernel, "cuLaunchKernel", 0, 0, r_launch),
    HOOK(cuLaunchKernel_ptsz, "cuLaunchKernel", 0, 1, r_launch_ptsz),
    HOOK(cuLaunchKernelEx, "cuLaunchKernelEx", 0, 0, r_launch_ex),
    HOOK(cuLaunchKernelEx_ptsz, "cuLaunchKernelEx", 0, 1, r_launch_ex_ptsz),
    {NULL, NULL, 0, 0, NULL, NULL},
};

/* what the driver returned for (symbol, version, flags), replaced by the hook for a hooked name */
static void substitute(const char *symbol, int version, unsigned long long flags, void **pfn) {
    int ptds = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    const struct hook *best = NULL;
    for (const struct hook *h = hooks; h->symbol; h++) {
        if (strcmp(h->base, symbol) != 0 || version < h->min_version) continue;
        if (h->ptds && !ptds) continue;
        if (!best || h->min_version > best->min_version || (h->ptds && !best->ptds)) best = h;
    }
    if (!best || *pfn == best->fn) return;
    *best->slot = *pfn;
    *pfn = best->fn;
}

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags, int *status) {
    if (!REAL(r_gpa2, "cuGetProcAddress_v2")) return 999;
    CUresult r = r_gpa2(symbol, pfn, version, flags, status);
    if (r == CUDA_SUCCESS && pfn && *pfn && symbol) substitute(symbol, version, flags, pfn);
    return r;
}

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, unsigned long long flags) {
    if (!REAL(r_gpa1, "cuGetProcAddress")) return 999;
    CUresult r = r_gpa1(symbol, pfn, version, flags);
    if (r == CUDA_SUCCESS && pfn && *pfn && symbol) substitute(symbol, version, flags, pfn);
    return r;
}

/* dlsym(handle, name) of a hooked driver symbol (cudart's way to reach cuGetProcAddress): the
 * hook, the real one remembered. Every other lookup is the real dlsym's. A lookup with RTLD_NEXT
 * is answered for this library's position, not the caller's (docs/capture.md). */
EXPORT void *dlsym(void *handle, const char *name) {
    init_dlsym();
    if (!real_dlsym) return NULL;
    void *p = real_dlsym(handle, name);
    if (!p || name[0] != 'c' || name[1] != 'u') return p;
    for (const struct hook *h = hooks; h->symbol; h++)
        if (strcmp(h->symbol, name) == 0) {
            if (p == h->fn) return p;
            *h->slot = p;
            return h->fn;
        }
    return p;
}
