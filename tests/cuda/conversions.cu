// cvt between every integer and float type with every rounding mode, saturation, .ftz, .relu and
// .satfinite, and the intrinsics NVVM lowers to them. Each result is the destination register's raw
// bits, zero-extended into one 64-bit slot of `out` (8- and 16-bit types live in 16-bit registers).
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

template <int W> struct Reg;
template <> struct Reg<16> { typedef uint16_t T; };
template <> struct Reg<32> { typedef uint32_t T; };
template <> struct Reg<64> { typedef uint64_t T; };
#define C16 "h"
#define C32 "r"
#define C64 "l"
#define CVT(I, INSTR, DW, SW, SRC) do { Reg<DW>::T d_; \
  asm(INSTR " %0, %1;" : "=" C##DW(d_) : C##SW((Reg<SW>::T)(SRC))); o[I] = d_; } while (0)
// bf16 <-> 8-bit integers take registers of the 8-bit type itself: a scoped .s8/.u8 register, widened
#define CVT_TO8(I, INSTR, T, SRC) do { uint16_t d_; asm("{ .reg ." T " %%t8; " INSTR " %%t8, %1; cvt.s16." T " %0, %%t8; }" \
  : "=h"(d_) : "h"((uint16_t)(SRC))); o[I] = d_; } while (0)
#define CVT_FROM8(I, INSTR, T, SRC) do { uint16_t d_; asm("{ .reg ." T " %%t8; cvt." T ".s16 %%t8, %1; " INSTR " %0, %%t8; }" \
  : "=h"(d_) : "h"((uint16_t)(SRC))); o[I] = d_; } while (0)
#define CVT2(I, INSTR, A, B) do { uint32_t d_; \
  asm(INSTR " %0, %1, %2;" : "=r"(d_) : "f"(A), "f"(B)); o[I] = d_; } while (0)

#define ROW(K) const int t = blockIdx.x * blockDim.x + threadIdx.x; \
  const uint32_t x = f32in[t]; const uint64_t X = f64in[t]; const uint16_t h = f16in[t], bh = bf16in[t]; \
  uint64_t* o = out + (K) * t; (void)x; (void)X; (void)h; (void)bh;

// float -> integer: sources f32, f64, f16, bf16; destinations s8 u8 s16 u16 s32 u32 s64 u64;
// rounding rni rzi rmi rpi (column = 32 * source + 4 * destination + rounding)
#define F2I_RND(I, D, DW, S, SW, V) CVT((I) + 0, "cvt.rni." D "." S, DW, SW, V); \
  CVT((I) + 1, "cvt.rzi." D "." S, DW, SW, V); CVT((I) + 2, "cvt.rmi." D "." S, DW, SW, V); \
  CVT((I) + 3, "cvt.rpi." D "." S, DW, SW, V)
#define F2I_RND8(I, D, V) CVT_TO8((I) + 0, "cvt.rni." D ".bf16", D, V); \
  CVT_TO8((I) + 1, "cvt.rzi." D ".bf16", D, V); CVT_TO8((I) + 2, "cvt.rmi." D ".bf16", D, V); \
  CVT_TO8((I) + 3, "cvt.rpi." D ".bf16", D, V)
#define F2I_ALL(I, S, SW, V) F2I_RND((I) + 0, "s8", 16, S, SW, V); F2I_RND((I) + 4, "u8", 16, S, SW, V); \
  F2I_WIDE(I, S, SW, V)
#define F2I_WIDE(I, S, SW, V) F2I_RND((I) + 8, "s16", 16, S, SW, V); F2I_RND((I) + 12, "u16", 16, S, SW, V); \
  F2I_RND((I) + 16, "s32", 32, S, SW, V); F2I_RND((I) + 20, "u32", 32, S, SW, V); \
  F2I_RND((I) + 24, "s64", 64, S, SW, V); F2I_RND((I) + 28, "u64", 64, S, SW, V)

extern "C" __global__ void float_to_int(const uint32_t* f32in, const uint64_t* f64in, const uint16_t* f16in,
                                        const uint16_t* bf16in, uint64_t* out) {
  ROW(160)
  F2I_ALL(0, "f32", 32, x);
  F2I_ALL(32, "f64", 64, X);
  F2I_ALL(64, "f16", 16, h);
  F2I_RND8(96, "s8", bh); F2I_RND8(100, "u8", bh); F2I_WIDE(96, "bf16", 16, bh);
  CVT(128, "cvt.rni.ftz.s32.f32", 32, 32, x);
  CVT(129, "cvt.rzi.ftz.u32.f32", 32, 32, x);
  CVT(130, "cvt.rmi.ftz.s64.f32", 64, 32, x);
  CVT(131, "cvt.rpi.ftz.s32.f32", 32, 32, x);
  CVT(132, "cvt.rzi.sat.s32.f32", 32, 32, x);
  CVT(133, "cvt.rzi.sat.u8.f64", 16, 64, X);
  const float f = __uint_as_float(x);
  const double g = __longlong_as_double((long long)X);
  o[134] = uint32_t(__float2int_rn(f)); o[135] = uint32_t(__float2int_rz(f));
  o[136] = uint32_t(__float2int_rd(f)); o[137] = uint32_t(__float2int_ru(f));
  o[138] = __float2uint_rn(f); o[139] = __float2uint_rz(f);
  o[140] = uint64_t(__float2ll_rd(f)); o[141] = __float2ull_ru(f);
  o[142] = uint32_t(__double2int_rn(g)); o[143] = __double2uint_rz(g);
  o[144] = uint64_t(__double2ll_rd(g)); o[145] = __double2ull_ru(g);
  o[146] = uint32_t(int(f)); o[147] = uint32_t((unsigned)f);  // C casts: truncation
  o[148] = uint64_t((long long)g); o[149] = uint64_t((unsigned long long)g);
  const __half hv = __ushort_as_half(h);
  const __nv_bfloat16 bv = __ushort_as_bfloat16(bh);
  o[150] = uint32_t(__half2int_rn(hv)); o[151] = uint32_t(__half2int_rz(hv));
  o[152] = uint16_t(__half2short_rd(hv)); o[153] = __half2ushort_ru(hv);
  o[154] = uint32_t(__bfloat162int_rn(bv)); o[155] = uint64_t(__bfloat162ll_rz(bv));
  o[156] = uint32_t(lrintf(f)); o[157] = uint64_t(llrint(g));
  o[158] = uint8_t((signed char)f); o[159] = uint32_t(__half2uint_rn(hv));
}

// integer -> float: sources s8 u8 s16 u16 s32 u32 s64 u64 (the low bits of one 64-bit value);
// destinations f16 bf16 f32 f64; rounding rn rz rm rp (column = 16 * source + 4 * destination + rounding)
#define I2F_RND(I, D, DW, S, SW, V) CVT((I) + 0, "cvt.rn." D "." S, DW, SW, V); \
  CVT((I) + 1, "cvt.rz." D "." S, DW, SW, V); CVT((I) + 2, "cvt.rm." D "." S, DW, SW, V); \
  CVT((I) + 3, "cvt.rp." D "." S, DW, SW, V)
#define I2F_ALL(I, S, SW) I2F_RND((I) + 0, "f16", 16, S, SW, v); I2F_RND((I) + 4, "bf16", 16, S, SW, v); \
  I2F_NARROW(I, S, SW)
#define I2F_NARROW(I, S, SW) I2F_RND((I) + 8, "f32", 32, S, SW, v); I2F_RND((I) + 12, "f64", 64, S, SW, v)
#define I2F_BF8(I, S) CVT_FROM8((I) + 0, "cvt.rn.bf16." S, S, v); CVT_FROM8((I) + 1, "cvt.rz.bf16." S, S, v); \
  CVT_FROM8((I) + 2, "cvt.rm.bf16." S, S, v); CVT_FROM8((I) + 3, "cvt.rp.bf16." S, S, v)
#define I2F_8(I, S) I2F_RND((I) + 0, "f16", 16, S, 16, v); I2F_BF8((I) + 4, S); I2F_NARROW(I, S, 16)

extern "C" __global__ void int_to_float(const uint64_t* in, uint64_t* out) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  const uint64_t v = in[t];
  uint64_t* o = out + 148 * t;
  I2F_8(0, "s8"); I2F_8(16, "u8"); I2F_ALL(32, "s16", 16); I2F_ALL(48, "u16", 16);
  I2F_ALL(64, "s32", 32); I2F_ALL(80, "u32", 32); I2F_ALL(96, "s64", 64); I2F_ALL(112, "u64", 64);
  const int i = int(v);
  const unsigned u = unsigned(v);
  const long long l = (long long)v;
  o[128] = __float_as_uint(__int2float_rn(i)); o[129] = __float_as_uint(__int2float_rz(i));
  o[130] = __float_as_uint(__uint2float_rd(u)); o[131] = __float_as_uint(__uint2float_ru(u));
  o[132] = __float_as_uint(__ll2float_rn(l)); o[133] = __float_as_uint(__ull2float_rz(v));
  o[134] = uint64_t(__double_as_longlong(__ll2double_rd(l)));
  o[135] = uint64_t(__double_as_longlong(__ull2double_ru(v)));
  o[136] = uint64_t(__double_as_longlong(double(i)));
  o[137] = __float_as_uint(float(l));
  o[138] = __half_as_ushort(__int2half_rn(i)); o[139] = __half_as_ushort(__uint2half_rz(u));
  o[140] = __half_as_ushort(__short2half_rd(short(v))); o[141] = __half_as_ushort(__ll2half_ru(l));
  o[142] = __bfloat16_as_ushort(__int2bfloat16_rn(i)); o[143] = __bfloat16_as_ushort(__uint2bfloat16_rz(u));
  o[144] = __bfloat16_as_ushort(__ll2bfloat16_rd(l)); o[145] = __bfloat16_as_ushort(__ushort2bfloat16_ru(uint16_t(v)));
  o[146] = __float_as_uint(float(int8_t(v))) ^ __float_as_uint(float(uint8_t(v)));
  o[147] = __float_as_uint(float(int16_t(v)) + float(uint16_t(v >> 16)));
}

#define RND4(I, D, S, DW, SW, V) CVT((I) + 0, "cvt.rn." D "." S, DW, SW, V); \
  CVT((I) + 1, "cvt.rz." D "." S, DW, SW, V); CVT((I) + 2, "cvt.rm." D "." S, DW, SW, V); \
  CVT((I) + 3, "cvt.rp." D "." S, DW, SW, V)
#define IRND4(I, T, W, V) CVT((I) + 0, "cvt.rni." T "." T, W, W, V); \
  CVT((I) + 1, "cvt.rzi." T "." T, W, W, V); CVT((I) + 2, "cvt.rmi." T "." T, W, W, V); \
  CVT((I) + 3, "cvt.rpi." T "." T, W, W, V)

// float -> float: narrowing with each rounding, widening, integral rounding in place, .ftz, .sat,
// .relu, .satfinite, the packed pairs, tf32
extern "C" __global__ void float_to_float(const uint32_t* f32in, const uint64_t* f64in, const uint16_t* f16in,
                                          const uint16_t* bf16in, uint64_t* out) {
  ROW(96)
  RND4(0, "f32", "f64", 32, 64, X);
  RND4(4, "f16", "f64", 16, 64, X);
  RND4(8, "bf16", "f64", 16, 64, X);
  RND4(12, "f16", "f32", 16, 32, x);
  RND4(16, "bf16", "f32", 16, 32, x);
  RND4(20, "bf16", "f16", 16, 16, h);
  RND4(24, "f16", "bf16", 16, 16, bh);
  IRND4(28, "f32", 32, x);
  IRND4(32, "f64", 64, X);
  IRND4(36, "f16", 16, h);
  IRND4(40, "bf16", 16, bh);
  CVT(44, "cvt.f64.f32", 64, 32, x);
  CVT(45, "cvt.f32.f16", 32, 16, h);
  CVT(46, "cvt.f64.f16", 64, 16, h);
  CVT(47, "cvt.f32.bf16", 32, 16, bh);
  CVT(48, "cvt.f64.bf16", 64, 16, bh);
  CVT(49, "cvt.ftz.f64.f32", 64, 32, x);
  CVT(50, "cvt.rn.ftz.f32.f64", 32, 64, X);
  CVT(51, "cvt.ftz.f32.f32", 32, 32, x);
  CVT(52, "cvt.sat.f32.f32", 32, 32, x);
  CVT(53, "cvt.rzi.sat.f32.f32", 32, 32, x);
  CVT(54, "cvt.rni.ftz.f32.f32", 32, 32, x);
  CVT(55, "cvt.rn.sat.f16.f32", 16, 32, x);
  CVT(56, "cvt.rn.relu.f16.f32", 16, 32, x);
  CVT(57, "cvt.rz.satfinite.f16.f32", 16, 32, x);
  CVT(58, "cvt.rn.relu.satfinite.bf16.f32", 16, 32, x);
  CVT(59, "cvt.rz.relu.bf16.f32", 16, 32, x);
  CVT(60, "cvt.rna.tf32.f32", 32, 32, x);
  CVT(61, "cvt.rna.satfinite.tf32.f32", 32, 32, x);
  CVT(62, "cvt.sat.f64.f64", 64, 64, X);
  CVT(63, "cvt.ftz.f32.f16", 32, 16, h);
  const float f = __uint_as_float(x), f2 = __uint_as_float(x ^ 0x80000001u);
  const double g = __longlong_as_double((long long)X);
  CVT2(64, "cvt.rn.f16x2.f32", f, f2);
  CVT2(65, "cvt.rz.relu.f16x2.f32", f, f2);
  CVT2(66, "cvt.rn.satfinite.f16x2.f32", f, f2);
  CVT2(67, "cvt.rn.bf16x2.f32", f, f2);
  CVT2(68, "cvt.rz.relu.satfinite.bf16x2.f32", f, f2);
  o[69] = __float_as_uint(__double2float_rn(g)); o[70] = __float_as_uint(__double2float_rz(g));
  o[71] = __float_as_uint(__double2float_rd(g)); o[72] = __float_as_uint(__double2float_ru(g));
  o[73] = __half_as_ushort(__float2half_rn(f)); o[74] = __half_as_ushort(__float2half_rz(f));
  o[75] = __half_as_ushort(__float2half_rd(f)); o[76] = __half_as_ushort(__float2half_ru(f));
  o[77] = __float_as_uint(__half2float(__ushort_as_half(h)));
  o[78] = __bfloat16_as_ushort(__float2bfloat16(f)); o[79] = __bfloat16_as_ushort(__float2bfloat16_rz(f));
  o[80] = __float_as_uint(__bfloat162float(__ushort_as_bfloat16(bh)));
  const __half2 hh = __floats2half2_rn(f, f2);
  o[81] = *reinterpret_cast<const uint32_t*>(&hh);
  const __nv_bfloat162 bb = __floats2bfloat162_rn(f, f2);
  o[82] = *reinterpret_cast<const uint32_t*>(&bb);
  o[83] = __half_as_ushort(__double2half(g)); o[84] = __bfloat16_as_ushort(__double2bfloat16(g));
  o[85] = __float_as_uint(truncf(f)); o[86] = __float_as_uint(rintf(f));
  o[87] = __float_as_uint(floorf(f)); o[88] = __float_as_uint(ceilf(f));
  o[89] = __float_as_uint(__saturatef(f));
  o[90] = uint64_t(__double_as_longlong(trunc(g))) ^ uint64_t(__double_as_longlong(floor(g)));
  o[91] = uint64_t(__double_as_longlong(double(f)));
  o[92] = __float_as_uint(float(g));
  o[93] = __half_as_ushort(htrunc(__ushort_as_half(h))) | (uint32_t(__half_as_ushort(hrint(__ushort_as_half(h)))) << 16);
  o[94] = __bfloat16_as_ushort(__float2bfloat16_rd(f)) | (uint32_t(__bfloat16_as_ushort(__float2bfloat16_ru(f))) << 16);
  o[95] = __half_as_ushort(__float2half(float(g)));
}

// integer -> integer: every pair (column = 8 * source + destination over s8 u8 s16 u16 s32 u32 s64
// u64, the pair of a type with itself included), then .sat where the ISA allows it
#define I2I_ROW(I, S, SW) CVT((I) + 0, "cvt.s8." S, 16, SW, v); CVT((I) + 1, "cvt.u8." S, 16, SW, v); \
  CVT((I) + 2, "cvt.s16." S, 16, SW, v); CVT((I) + 3, "cvt.u16." S, 16, SW, v); \
  CVT((I) + 4, "cvt.s32." S, 32, SW, v); CVT((I) + 5, "cvt.u32." S, 32, SW, v); \
  CVT((I) + 6, "cvt.s64." S, 64, SW, v); CVT((I) + 7, "cvt.u64." S, 64, SW, v)

extern "C" __global__ void int_to_int(const uint64_t* in, uint64_t* out) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  const uint64_t v = in[t];
  uint64_t* o = out + 88 * t;
  I2I_ROW(0, "s8", 16); I2I_ROW(8, "u8", 16); I2I_ROW(16, "s16", 16); I2I_ROW(24, "u16", 16);
  I2I_ROW(32, "s32", 32); I2I_ROW(40, "u32", 32); I2I_ROW(48, "s64", 64); I2I_ROW(56, "u64", 64);
  CVT(64, "cvt.sat.s8.s32", 16, 32, v);
  CVT(65, "cvt.sat.u8.s32", 16, 32, v);
  CVT(66, "cvt.sat.s8.u8", 16, 16, v);
  CVT(67, "cvt.sat.u8.s8", 16, 16, v);
  CVT(68, "cvt.sat.s16.u16", 16, 16, v);
  CVT(69, "cvt.sat.u16.s64", 16, 64, v);
  CVT(70, "cvt.sat.s32.s64", 32, 64, v);
  CVT(71, "cvt.sat.u32.s64", 32, 64, v);
  CVT(72, "cvt.sat.s32.u32", 32, 32, v);
  CVT(73, "cvt.sat.u32.s32", 32, 32, v);
  CVT(74, "cvt.sat.s64.u64", 64, 64, v);
  CVT(75, "cvt.sat.u64.s64", 64, 64, v);
  CVT(76, "cvt.sat.u64.s8", 64, 16, v);
  CVT(77, "cvt.sat.s8.u64", 16, 64, v);
  CVT(78, "cvt.sat.u16.s16", 16, 16, v);
  CVT(79, "cvt.sat.s16.s32", 16, 32, v);
  o[80] = uint32_t(int(int8_t(v)));      // sign extension as NVVM writes it
  o[81] = uint32_t(uint8_t(v));
  o[82] = uint64_t((long long)int(v));
  o[83] = uint64_t(uint32_t(v));
  o[84] = uint16_t(int16_t(int8_t(v >> 8)));
  o[85] = uint32_t(int(int16_t(v)) * 3);
  o[86] = uint64_t(int64_t(int8_t(v)) << 40);
  o[87] = uint32_t(uint16_t(v) + uint8_t(v >> 32));
}
