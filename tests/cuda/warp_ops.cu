// Warp-wide votes, matches, reductions and the active mask, with the whole warp and with part of it
// (a data-dependent branch and an early exit leave lanes out). Per thread, `in` holds one word v.
#include <cstdint>

extern "C" __global__ void warp_ops(const uint32_t* in, uint32_t* out, uint64_t* out64) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  const uint32_t v = in[t];
  const int lane = threadIdx.x & 31;
  uint32_t* o = out + 32 * t;
  if (v == 0xdeadu) return;  // lanes that exit take no part in what follows
  const uint32_t full = __activemask();
  o[0] = full;
  o[1] = __ballot_sync(full, v & 1);
  o[2] = __all_sync(full, v != 7);
  o[3] = __any_sync(full, v == 7);
  o[4] = __uni_sync(full, v & 4);
  o[5] = __match_any_sync(full, v & 3);
  int pred;
  o[6] = __match_all_sync(full, v >> 30, &pred);
  o[7] = pred;
  o[8] = __reduce_add_sync(full, v);
  o[9] = __reduce_min_sync(full, v);
  o[10] = __reduce_max_sync(full, v);
  o[11] = uint32_t(__reduce_min_sync(full, int(v)));
  o[12] = uint32_t(__reduce_max_sync(full, int(v)));
  o[13] = __reduce_and_sync(full, v);
  o[14] = __reduce_or_sync(full, v);
  o[15] = __reduce_xor_sync(full, v);
  out64[2 * t] = __match_any_sync(full, (unsigned long long)(v & 1) << 40);
  out64[2 * t + 1] = __match_all_sync(full, (unsigned long long)v | (1ull << 33), &pred);
  o[16] = pred;
  if (v & 2) {  // divergent: only these lanes vote
    const uint32_t part = __activemask();
    o[17] = part;
    o[18] = __ballot_sync(part, v & 1);
    o[19] = __reduce_add_sync(part, v);
    o[20] = __match_any_sync(part, v & 8);
    o[21] = __all_sync(part, v & 1);
    o[22] = __uni_sync(part, v & 1);
    uint32_t r;
    asm("{ .reg .pred %%vp, %%vq; setp.ne.u32 %%vp, %1, 0; vote.sync.any.pred %%vq, !%%vp, %2; selp.u32 %0, 1, 0, %%vq; }"
        : "=r"(r) : "r"(v & 16), "r"(part));
    o[23] = r;
    asm("{ .reg .pred %%vp; setp.ne.u32 %%vp, %1, 0; vote.sync.ballot.b32 %0, !%%vp, %2; }" : "=r"(r) : "r"(v & 16), "r"(part));
    o[24] = r;
  } else {
    const uint32_t rest = __activemask();
    o[17] = rest;
    o[18] = __ballot_sync(rest, v & 1);
  }
  // a member mask narrower than the active lanes: only the even lanes take part
  if ((lane & 1) == 0) {
    const uint32_t even = full & 0x55555555u;
    o[25] = __reduce_or_sync(even, 1u << lane);
    o[26] = __ballot_sync(even, 1);
  }
  uint32_t r;
  asm("{ .reg .pred %%vp; setp.gt.u32 %%vp, %1, 100; @%%vp activemask.b32 %0; @!%%vp mov.u32 %0, 0; }" : "=r"(r) : "r"(v));
  o[27] = r;  // activemask under a guard: only lanes whose guard holds are active
  asm("redux.sync.add.s32 %0, %1, %2;" : "=r"(r) : "r"(v), "r"(full));
  o[28] = r;
  asm("{ .reg .pred %%vp; elect.sync %0|%%vp, %1; }" : "=r"(r) : "r"(full));
  o[29] = r;
  asm("{ .reg .pred %%vp; elect.sync _|%%vp, %1; selp.u32 %0, 1, 0, %%vp; }" : "=r"(r) : "r"(full));
  o[30] = r;
  o[31] = __popc(__ballot_sync(full, v > 1000)) + lane;
}
