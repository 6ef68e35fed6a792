/* The driver API's structures as the fake driver (fake_cuda.c) and the fake programs use them:
 * the layouts of CUDA 13's cuda.h on 64-bit Linux. */
#ifndef RR_FAKE_CUDA_H
#define RR_FAKE_CUDA_H
#include <stddef.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUtexObject;

typedef struct { size_t Width, Height; int Format; unsigned NumChannels; } CUDA_ARRAY_DESCRIPTOR;
typedef struct {
    size_t srcXInBytes, srcY; int srcMemoryType; const void *srcHost; CUdeviceptr srcDevice; void *srcArray;
    size_t srcPitch;
    size_t dstXInBytes, dstY; int dstMemoryType; void *dstHost; CUdeviceptr dstDevice; void *dstArray;
    size_t dstPitch;
    size_t WidthInBytes, Height;
} CUDA_MEMCPY2D;
typedef struct {
    int resType;
    union { struct { void *hArray; } array; struct { int reserved[32]; } reserved; } res;
    unsigned flags;
} CUDA_RESOURCE_DESC;
typedef struct {
    int addressMode[3]; int filterMode; unsigned flags; unsigned maxAnisotropy; int mipmapFilterMode;
    float bias, minClamp, maxClamp; float border[4]; int reserved[12];
} CUDA_TEXTURE_DESC;
typedef struct { unsigned gx, gy, gz, bx, by, bz, shared; void *stream; void *attrs; unsigned nattrs; } CUlaunchConfig;

#endif
