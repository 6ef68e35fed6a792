// mul/add pairs as NVVM leaves them (no rounding modifier) next to pairs ptxas must keep apart:
// ptxas fuses a mul whose only reader is an add/sub of the same type and modifiers, in the same
// basic block, into one fma (FFMA/HFMA2). The cpu backend must round where the GPU rounds.
// Each thread reads four floats (and two f16x2 words) and writes ten results.
#include <cstdint>

extern "C" __global__ void contraction(const float* in, float* out, const uint32_t* hin, uint32_t* hout) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float x = in[4 * i], y = in[4 * i + 1], z = in[4 * i + 2], w = in[4 * i + 3];
    float r[8];
    // fused: x*y + z
    asm("{ .reg .f32 p; mul.f32 p, %1, %2; add.f32 %0, p, %3; }" : "=f"(r[0]) : "f"(x), "f"(y), "f"(z));
    // fused: x*y - z, and z - x*y
    asm("{ .reg .f32 p; mul.f32 p, %1, %2; sub.f32 %0, p, %3; }" : "=f"(r[1]) : "f"(x), "f"(y), "f"(z));
    asm("{ .reg .f32 p; mul.f32 p, %1, %2; sub.f32 %0, %3, p; }" : "=f"(r[2]) : "f"(x), "f"(y), "f"(z));
    // both operands products: the first one fused, the second rounded
    asm("{ .reg .f32 p, q; mul.f32 p, %1, %2; mul.f32 q, %3, %4; add.f32 %0, p, q; }"
        : "=f"(r[3]) : "f"(x), "f"(y), "f"(z), "f"(w));
    // kept apart: a rounding modifier on either, or .ftz on one only
    asm("{ .reg .f32 p; mul.rn.f32 p, %1, %2; add.f32 %0, p, %3; }" : "=f"(r[4]) : "f"(x), "f"(y), "f"(z));
    asm("{ .reg .f32 p; mul.f32 p, %1, %2; add.rn.f32 %0, p, %3; }" : "=f"(r[5]) : "f"(x), "f"(y), "f"(z));
    asm("{ .reg .f32 p; mul.ftz.f32 p, %1, %2; add.f32 %0, p, %3; }" : "=f"(r[6]) : "f"(x), "f"(y), "f"(z));
    // kept apart: the product has a second reader
    asm("{ .reg .f32 p; mul.f32 p, %2, %3; add.f32 %0, p, %4; mov.f32 %1, p; }"
        : "=f"(r[7]), "=f"(out[10 * i + 9]) : "f"(x), "f"(y), "f"(z));
    for (int k = 0; k < 8; ++k) out[10 * i + k] = r[k];
    // f16x2: fused, and with .ftz-free halves kept apart by .rn
    uint32_t a = hin[2 * i], b = hin[2 * i + 1], f, g;
    asm("{ .reg .b32 p; mul.f16x2 p, %1, %2; add.f16x2 %0, p, %1; }" : "=r"(f) : "r"(a), "r"(b));
    asm("{ .reg .b32 p; mul.rn.f16x2 p, %1, %2; add.f16x2 %0, p, %1; }" : "=r"(g) : "r"(a), "r"(b));
    hout[2 * i] = f;
    hout[2 * i + 1] = g;
    out[10 * i + 8] = 0.0f;
}
