// Integer and bit instructions, each result in its own column of `out`: inline asm for every mode
// and edge an intrinsic cannot reach, and the intrinsics and ordinary expressions NVVM lowers to the
// same instructions. Per thread, `in` holds four words a, b, c, d; 64-bit operands are (b:a), (d:c).
#include <cstdint>
#include <utility>

#define ROW(K) const int t = blockIdx.x * blockDim.x + threadIdx.x; \
  const uint32_t a = in[4 * t], b = in[4 * t + 1], c = in[4 * t + 2], d = in[4 * t + 3]; \
  const uint64_t A = (uint64_t(b) << 32) | a, C = (uint64_t(d) << 32) | c; \
  uint32_t* o = out + (K) * t; uint32_t r; uint64_t R; (void)A; (void)C; (void)r; (void)R;
#define PUT64(i, v) do { uint64_t v_ = (v); o[i] = uint32_t(v_); o[(i) + 1] = uint32_t(v_ >> 32); } while (0)
#define OP1(i, INSTR) do { asm(INSTR " %0, %1;" : "=r"(r) : "r"(a)); o[i] = r; } while (0)
#define OP1W(i, INSTR) do { asm(INSTR " %0, %1;" : "=r"(r) : "l"(A)); o[i] = r; } while (0)  // of (b:a)
#define OP2(i, INSTR) do { asm(INSTR " %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); o[i] = r; } while (0)
#define OP2W(i, INSTR) do { asm(INSTR " %0, %1, %2;" : "=l"(R) : "l"(A), "l"(C)); PUT64(i, R); } while (0)
#define OP3(i, INSTR) do { asm(INSTR " %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); o[i] = r; } while (0)

// bfe / bfi: position b, length c as registers (the instruction reads their low 8 bits)
extern "C" __global__ void bitfield(const uint32_t* in, uint32_t* out) {
  ROW(16)
  OP3(0, "bfe.u32");
  OP3(1, "bfe.s32");
  asm("bfe.u64 %0, %1, %2, %3;" : "=l"(R) : "l"(C), "r"(b), "r"(a)); PUT64(2, R);
  asm("bfe.s64 %0, %1, %2, %3;" : "=l"(R) : "l"(C), "r"(b), "r"(a)); PUT64(4, R);
  asm("bfi.b32 %0, %1, %2, %3, %4;" : "=r"(r) : "r"(d), "r"(a), "r"(b), "r"(c)); o[6] = r;
  asm("bfi.b64 %0, %1, %2, %3, %4;" : "=l"(R) : "l"(C), "l"(A), "r"(b), "r"(c)); PUT64(7, R);
  asm("bfe.s32 %0, %1, 4, 12;" : "=r"(r) : "r"(a)); o[9] = r;  // immediate position and length
  asm("bfi.b32 %0, %1, %2, 28, 8;" : "=r"(r) : "r"(d), "r"(a)); o[10] = r;
  o[11] = (a >> 8) & 0xffu;                          // NVVM: bfe.u32 ..., 8, 8
  o[12] = uint32_t(int32_t(a << 4) >> 20);           // a signed field
  o[13] = (a & ~0xff0u) | ((d << 4) & 0xff0u);       // NVVM: bfi.b32 ..., 4, 8
  o[14] = (a & 0xffffu) | (d << 16);                 // a join of halves
  asm("bfe.u32 %0, %1, 0, 0;" : "=r"(r) : "r"(a)); o[15] = r;
}

// prmt in every mode; the selector is c (the modes read its two low bits)
extern "C" __global__ void permute(const uint32_t* in, uint32_t* out) {
  ROW(10)
  OP3(0, "prmt.b32");
  OP3(1, "prmt.b32.f4e");
  OP3(2, "prmt.b32.b4e");
  OP3(3, "prmt.b32.rc8");
  OP3(4, "prmt.b32.ecl");
  OP3(5, "prmt.b32.ecr");
  OP3(6, "prmt.b32.rc16");
  o[7] = __byte_perm(a, b, c);
  o[8] = __byte_perm(a, 0, 0x3210 ^ 0x8880);         // selector msbs set: __byte_perm drops them
  o[9] = (a << 24) | ((a >> 8) & 0xff00u) | (b >> 24); // NVVM spells byte shuffles as prmt
}

template <int L>
__device__ __forceinline__ uint32_t lop3(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t r;
  asm("lop3.b32 %0, %1, %2, %3, %4;" : "=r"(r) : "r"(a), "r"(b), "r"(c), "n"(L));
  return r;
}

template <int... L>
__device__ __forceinline__ void all_luts(uint32_t* o, uint32_t a, uint32_t b, uint32_t c,
                                         std::integer_sequence<int, L...>) {
  ((o[L] = lop3<L>(a, b, c)), ...);
}

// lop3 with every immLut, then ordinary three-input logic that NVVM folds into lop3
extern "C" __global__ void logic3(const uint32_t* in, uint32_t* out) {
  ROW(259)
  all_luts(o, a, b, c, std::make_integer_sequence<int, 256>{});
  o[256] = (a & b) ^ (~a & c);
  o[257] = (a | ~b) ^ c;
  o[258] = ~(a ^ b ^ c);
}

// funnel shifts (wrap, clamp) and shifts by counts past the width
extern "C" __global__ void shifts(const uint32_t* in, uint32_t* out) {
  ROW(16)
  OP3(0, "shf.l.wrap.b32");
  OP3(1, "shf.r.wrap.b32");
  OP3(2, "shf.l.clamp.b32");
  OP3(3, "shf.r.clamp.b32");
  o[4] = __funnelshift_l(a, b, c);
  o[5] = __funnelshift_r(a, b, c);
  o[6] = __funnelshift_lc(a, b, c);
  o[7] = __funnelshift_rc(a, b, c);
  asm("shl.b32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(c)); o[8] = r;
  asm("shr.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(c)); o[9] = r;
  asm("shr.s32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(c)); o[10] = r;
  asm("shr.s64 %0, %1, %2;" : "=l"(R) : "l"(A), "r"(c)); PUT64(11, R);
  asm("shl.b64 %0, %1, %2;" : "=l"(R) : "l"(A), "r"(c)); PUT64(13, R);
  o[15] = (a << 7) | (a >> 25);                        // a rotate: NVVM emits shf.l.wrap
}

// bit counts and searches
extern "C" __global__ void bitcount(const uint32_t* in, uint32_t* out) {
  ROW(20)
  OP1(0, "brev.b32");
  asm("brev.b64 %0, %1;" : "=l"(R) : "l"(A)); PUT64(1, R);
  OP1(3, "clz.b32");
  OP1W(4, "clz.b64");
  OP1(5, "popc.b32");
  OP1W(6, "popc.b64");
  OP1(7, "bfind.u32");
  OP1(8, "bfind.s32");
  OP1W(9, "bfind.u64");
  OP1W(10, "bfind.s64");
  OP1(11, "bfind.shiftamt.u32");
  OP1(12, "bfind.shiftamt.s32");
  OP1W(13, "bfind.shiftamt.u64");
  OP1W(14, "bfind.shiftamt.s64");
  o[15] = __ffs(int(a));
  o[16] = __ffsll((long long)A);
  o[17] = __clzll((long long)A);
  o[18] = __popcll(A) + __popc(b);
  o[19] = __brev(a) ^ uint32_t(__brevll(A) >> 13);
}

// multiplications: hi/lo/wide, 24-bit, with an addend, sad
extern "C" __global__ void multiply(const uint32_t* in, uint32_t* out) {
  ROW(40)
  const int32_t sa = int32_t(a), sb = int32_t(b), sc = int32_t(c);
  OP2(0, "mul.hi.u32");
  OP2(1, "mul.hi.s32");
  asm("mul.wide.u32 %0, %1, %2;" : "=l"(R) : "r"(a), "r"(b)); PUT64(2, R);
  asm("mul.wide.s32 %0, %1, %2;" : "=l"(R) : "r"(a), "r"(b)); PUT64(4, R);
  OP2W(6, "mul.hi.u64");
  OP2W(8, "mul.hi.s64");
  OP2W(10, "mul.lo.u64");
  OP3(12, "mad.hi.u32");
  OP3(13, "mad.hi.s32");
  OP3(14, "mad.hi.sat.s32");
  OP3(15, "mad.lo.s32");
  asm("mad.wide.u32 %0, %1, %2, %3;" : "=l"(R) : "r"(a), "r"(b), "l"(C)); PUT64(16, R);
  asm("mad.wide.s32 %0, %1, %2, %3;" : "=l"(R) : "r"(a), "r"(b), "l"(C)); PUT64(18, R);
  asm("mad.hi.u64 %0, %1, %2, %3;" : "=l"(R) : "l"(A), "l"(C), "l"(A)); PUT64(20, R);
  OP2(22, "mul24.lo.u32");
  OP2(23, "mul24.lo.s32");
  OP2(24, "mul24.hi.u32");
  OP2(25, "mul24.hi.s32");
  OP3(26, "mad24.lo.u32");
  OP3(27, "mad24.hi.s32");
  OP3(28, "mad24.hi.sat.s32");
  OP3(29, "sad.u32");
  OP3(30, "sad.s32");
  o[31] = __umulhi(a, b);
  o[32] = uint32_t(__mulhi(sa, sb));
  PUT64(33, __umul64hi(A, C));
  PUT64(35, uint64_t(__mul64hi((long long)A, (long long)C)));
  o[37] = uint32_t(__mul24(sa, sb)) + __umul24(a, c);
  o[38] = __sad(sa, sb, c) ^ __usad(a, c, b);
  o[39] = uint32_t(int64_t(sa) * sc >> 32) + uint32_t((uint64_t(a) * c) >> 32);  // NVVM: mul.hi
}

// byte and half-word dot products in every signedness mix
extern "C" __global__ void dots(const uint32_t* in, uint32_t* out) {
  ROW(15)
  OP3(0, "dp4a.u32.u32");
  OP3(1, "dp4a.s32.s32");
  OP3(2, "dp4a.u32.s32");
  OP3(3, "dp4a.s32.u32");
  OP3(4, "dp2a.lo.u32.u32");
  OP3(5, "dp2a.lo.s32.s32");
  OP3(6, "dp2a.lo.u32.s32");
  OP3(7, "dp2a.lo.s32.u32");
  OP3(8, "dp2a.hi.u32.u32");
  OP3(9, "dp2a.hi.s32.s32");
  OP3(10, "dp2a.hi.u32.s32");
  OP3(11, "dp2a.hi.s32.u32");
  o[12] = uint32_t(__dp4a(int(a), int(b), int(c)));
  o[13] = __dp2a_lo(a, b, c);
  o[14] = uint32_t(__dp2a_hi(int(a), int(b), int(c)));
}

// min/max (with .relu and packed halves), abs, neg, not, cnot, saturating add, selections
extern "C" __global__ void minmax(const uint32_t* in, uint32_t* out) {
  ROW(36)
  const int32_t sa = int32_t(a), sb = int32_t(b);
  const uint16_t ha = uint16_t(a), hb = uint16_t(b);
  uint16_t h;
  o[0] = uint32_t(min(sa, sb)); o[1] = max(a, b);
  OP2(2, "min.relu.s32");
  OP2(3, "max.relu.s32");
  OP2(4, "min.u16x2");
  OP2(5, "max.s16x2");
  OP2(6, "min.relu.s16x2");
  OP2(7, "max.relu.s16x2");
  asm("min.s16 %0, %1, %2;" : "=h"(h) : "h"(ha), "h"(hb)); o[8] = h;
  asm("max.u16 %0, %1, %2;" : "=h"(h) : "h"(ha), "h"(hb)); o[9] = h;
  PUT64(10, uint64_t(min((long long)A, (long long)C)));
  PUT64(12, max(A, C));
  OP1(14, "abs.s32");
  asm("abs.s16 %0, %1;" : "=h"(h) : "h"(ha)); o[15] = h;
  asm("abs.s64 %0, %1;" : "=l"(R) : "l"(A)); PUT64(16, R);
  OP1(18, "neg.s32");
  asm("neg.s64 %0, %1;" : "=l"(R) : "l"(A)); PUT64(19, R);
  OP1(21, "not.b32");
  OP1(22, "cnot.b32");
  asm("cnot.b16 %0, %1;" : "=h"(h) : "h"(ha)); o[23] = h;
  OP2(24, "add.sat.s32");
  OP2(25, "sub.sat.s32");
  OP3(26, "slct.u32.s32");
  asm("slct.b32.f32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "f"(__uint_as_float(c))); o[27] = r;
  asm("slct.ftz.s32.f32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "f"(__uint_as_float(c))); o[28] = r;
  o[29] = sa < sb ? c : d;                            // selp
  o[30] = uint32_t(abs(sa)) + uint32_t(sb < 0 ? -sb : sb);
  o[31] = __vmaxs2(a, b);
  o[32] = __vminu2(a, b);
  o[33] = __vabsdiffu4(a, b);
  o[34] = __vadd2(a, b);
  o[35] = __vsetgtu4(a, b);
}

// integer division and remainder, truncating; a zero divisor's result is the machine's
extern "C" __global__ void divide(const uint32_t* in, uint32_t* out) {
  ROW(12)
  OP2(0, "div.u32");
  OP2(1, "rem.u32");
  OP2(2, "div.s32");
  OP2(3, "rem.s32");
  OP2W(4, "div.u64");
  OP2W(6, "rem.u64");
  OP2W(8, "div.s64");
  OP2W(10, "rem.s64");
}
