// Float instructions whose edge cases the ISA defines bit for bit: testp, copysign, min/max with
// NaN and signed zeros (.NaN, .xorsign.abs, f16/f16x2/bf16x2), relu forms. Per thread, `in` holds
// two f32 (a, b) and two f64; the f16 and bf16 operands are the f32 words' halves.
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#define ROW(K) const int t = blockIdx.x * blockDim.x + threadIdx.x; \
  const uint32_t a = in[6 * t], b = in[6 * t + 1]; \
  const uint64_t A = in[6 * t + 2] | (uint64_t(in[6 * t + 3]) << 32), B = in[6 * t + 4] | (uint64_t(in[6 * t + 5]) << 32); \
  const float fa = __uint_as_float(a), fb = __uint_as_float(b); \
  const double da = __longlong_as_double((long long)A), db = __longlong_as_double((long long)B); \
  uint32_t* o = out + (K) * t; uint32_t r; uint64_t R; (void)R; (void)da; (void)db;
#define PUT64(i, v) do { uint64_t v_ = (v); o[i] = uint32_t(v_); o[(i) + 1] = uint32_t(v_ >> 32); } while (0)
#define TESTP(i, OP) do { asm("{ .reg .pred %%vp; testp." OP ".f32 %%vp, %1; selp.u32 %0, 1, 0, %%vp; }" : "=r"(r) : "f"(fa)); \
  uint32_t s_; asm("{ .reg .pred %%vp; testp." OP ".f64 %%vp, %1; selp.u32 %0, 2, 0, %%vp; }" : "=r"(s_) : "d"(da)); \
  o[i] = r | s_; } while (0)
#define BIN32(i, INSTR) do { asm(INSTR " %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); o[i] = r; } while (0)

extern "C" __global__ void float_ops(const uint32_t* in, uint32_t* out) {
  ROW(47)
  TESTP(0, "finite"); TESTP(1, "infinite"); TESTP(2, "number"); TESTP(3, "notanumber");
  TESTP(4, "normal"); TESTP(5, "subnormal");
  asm("copysign.f32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); o[6] = r;
  asm("copysign.f64 %0, %1, %2;" : "=l"(R) : "l"(A), "l"(B)); PUT64(7, R);
  BIN32(9, "min.f32"); BIN32(10, "max.f32"); BIN32(11, "min.NaN.f32"); BIN32(12, "max.NaN.f32");
  BIN32(13, "min.xorsign.abs.f32"); BIN32(14, "max.xorsign.abs.f32"); BIN32(15, "min.ftz.f32");
  double g;  // f64 registers: ptxas mistranslates min/max.f64 on .b64 registers (seen on sm_90, CUDA 13.0)
  asm("min.f64 %0, %1, %2;" : "=d"(g) : "d"(da), "d"(db)); PUT64(16, uint64_t(__double_as_longlong(g)));
  asm("max.f64 %0, %1, %2;" : "=d"(g) : "d"(da), "d"(db)); PUT64(18, uint64_t(__double_as_longlong(g)));
  BIN32(20, "min.f16x2"); BIN32(21, "max.f16x2"); BIN32(22, "min.NaN.f16x2"); BIN32(23, "max.NaN.f16x2");
  BIN32(24, "min.bf16x2"); BIN32(25, "max.bf16x2");
  uint16_t h;
  asm("min.f16 %0, %1, %2;" : "=h"(h) : "h"(uint16_t(a)), "h"(uint16_t(b))); o[26] = h;
  asm("max.xorsign.abs.f16 %0, %1, %2;" : "=h"(h) : "h"(uint16_t(a)), "h"(uint16_t(b))); o[27] = h;
  asm("fma.rn.relu.f16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(a ^ 0x80008000u)); o[28] = r;
  asm("fma.rn.relu.bf16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(b)); o[29] = r;
  o[30] = __float_as_uint(fminf(fa, fb));
  o[31] = __float_as_uint(fmaxf(fa, fb));
  o[32] = __float_as_uint(copysignf(fa, fb));
  o[33] = uint32_t(isnan(fa)) | (uint32_t(isinf(fb)) << 1) | (uint32_t(isfinite(fa)) << 2) | (uint32_t(signbit(fb)) << 3);
  const __half2 ha = *reinterpret_cast<const __half2*>(&a), hb = *reinterpret_cast<const __half2*>(&b);
  const __half2 hm = __hmax2(ha, hb), hn = __hmin2_nan(ha, hb);
  o[34] = *reinterpret_cast<const uint32_t*>(&hm);
  o[35] = *reinterpret_cast<const uint32_t*>(&hn);
  const __half2 hr = __hfma2_relu(ha, hb, hb);
  o[36] = *reinterpret_cast<const uint32_t*>(&hr);
  PUT64(37, uint64_t(__double_as_longlong(fmin(da, db))));
  o[39] = __float_as_uint(fabsf(fa));
  asm("neg.f32 %0, %1;" : "=r"(r) : "r"(a)); o[40] = r;
  asm("abs.f16 %0, %1;" : "=h"(h) : "h"(uint16_t(a))); o[41] = h;
  asm("neg.f16x2 %0, %1;" : "=r"(r) : "r"(b)); o[42] = r;
  asm("abs.f64 %0, %1;" : "=d"(g) : "d"(da)); PUT64(43, uint64_t(__double_as_longlong(g)));
  asm("neg.f64 %0, %1;" : "=d"(g) : "d"(db)); PUT64(45, uint64_t(__double_as_longlong(g)));
}
