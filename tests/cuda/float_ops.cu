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
  uint32_t* o = out + (K) * t; uint32_t r; uint64_t R; (void)r; (void)R; (void)da; (void)db;
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

// f32 and f64 arithmetic with each rounding, .ftz and .sat, through the intrinsics that name them;
// the addend of the fmas cancels the product in half the rows
#define F32(i, v) o[i] = __float_as_uint(v)
#define F64(i, v) PUT64(i, uint64_t(__double_as_longlong(v)))
#define ASMF(i, INSTR, ...) do { float f_; asm(INSTR : "=f"(f_) : __VA_ARGS__); F32(i, f_); } while (0)
extern "C" __global__ void float_arith(const uint32_t* in, uint32_t* out) {
  ROW(64)
  const float fc = (t & 1) ? -__fmul_rn(fa, fb) : __uint_as_float(a ^ b);
  const double dc = (t & 1) ? -__dmul_rn(da, db) : __longlong_as_double((long long)(A ^ B));
  F32(0, __fadd_rn(fa, fb)); F32(1, __fadd_rz(fa, fb)); F32(2, __fadd_rd(fa, fb)); F32(3, __fadd_ru(fa, fb));
  F32(4, __fsub_rn(fa, fb)); F32(5, __fsub_rz(fa, fb)); F32(6, __fsub_rd(fa, fb)); F32(7, __fsub_ru(fa, fb));
  F32(8, __fmul_rn(fa, fb)); F32(9, __fmul_rz(fa, fb)); F32(10, __fmul_rd(fa, fb)); F32(11, __fmul_ru(fa, fb));
  F32(12, __fmaf_rn(fa, fb, fc)); F32(13, __fmaf_rz(fa, fb, fc)); F32(14, __fmaf_rd(fa, fb, fc));
  F32(15, __fmaf_ru(fa, fb, fc));
  F64(16, __dadd_rn(da, db)); F64(18, __dadd_rz(da, db)); F64(20, __dadd_rd(da, db)); F64(22, __dadd_ru(da, db));
  F64(24, __dsub_rd(da, db)); F64(26, __dmul_rn(da, db));
  F64(28, __fma_rn(da, db, dc)); F64(30, __fma_rz(da, db, dc)); F64(32, __fma_rd(da, db, dc));
  F64(34, __fma_ru(da, db, dc));
  F32(36, __fdiv_rn(fa, fb)); F32(37, __fsqrt_rn(fa)); F32(38, __frcp_rn(fa));
  F64(39, __ddiv_rn(da, db)); F64(41, __dsqrt_rn(da)); F64(43, __drcp_rn(da));
  ASMF(45, "mul.sat.f32 %0, %1, %2;", "f"(fa), "f"(fb));
  ASMF(46, "add.rn.sat.f32 %0, %1, %2;", "f"(fa), "f"(fb));
  ASMF(47, "fma.rn.sat.f32 %0, %1, %2, %3;", "f"(fa), "f"(fb), "f"(fc));
  ASMF(48, "add.ftz.f32 %0, %1, %2;", "f"(fa), "f"(fb));
  ASMF(49, "mul.rz.ftz.f32 %0, %1, %2;", "f"(fa), "f"(fb));
  ASMF(50, "fma.rn.ftz.f32 %0, %1, %2, %3;", "f"(fa), "f"(fb), "f"(fc));
  F32(51, fa * fb + fc);                               // contracted into fma.rn.f32
  F64(52, __dadd_rn(__dmul_rn(da, db), dc));          // two roundings (explicit modes: never fused)
  F64(54, fma(da, db, dc));
  F32(56, fmaf(fa, fb, fc));
  F64(57, da + db);
  F64(59, da * db);
  F32(61, fa - fb);
  F32(62, __fadd_rd(fa, -fa));                         // an exact zero, rounded toward -inf: -0
  F32(63, __fdiv_rn(fa, fc));
}
