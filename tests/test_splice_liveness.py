"""Liveness of a cut: live-in is what the cut reads that was defined before it, live-out what it
defines that is read after it — including round a loop's back edge — and a guarded definition
does not hide the value it may leave unchanged."""

from __future__ import annotations

from pathlib import Path

from rr.describe import find_phases
from rr.ptx import linearise, parse, parse_file
from rr.splice.liveness import cut_liveness
from rr.synth import KernelBuilder, KernelParam

SAMPLE = Path(__file__).resolve().parents[1] / "rr" / "data" / "sample_swin.ptx"


def _loop_kernel():
    k = KernelBuilder("loop", [KernelParam("loop_param_0", ".param .u64 {name}")])
    out = k.op("cvta.to.global.u64", "b64", k.op("ld.param.u64", "b64", "[loop_param_0]"))  # s1, s2
    i = k.op("mov.u32", "b32", "0")                      # s3
    acc = k.op("mov.f32", "f32", "0f00000000")           # s4
    keep = k.op("mov.u32", "b32", "5")                   # s5
    top = k.new_label()
    k.place(top)
    t = k.op("add.f32", "f32", acc, "0f3F800000")        # s6   cut A starts
    k.ins("mul.f32", acc, t, "0f40000000")               # s7   cut A ends
    k.ins("add.s32", i, i, "1")                          # s8   cut B starts
    again = k.op("setp.lt.u32", "pred", i, "8")          # s9   cut B ends
    k.ins("mov.u32", keep, "7", guard=again)             # s10  guarded def
    k.bra(top, guard=again)                              # s11
    k.ins("st.global.f32", f"[{out}]", acc)              # s12
    k.ins("st.global.u32", f"[{out}+4]", keep)           # s13
    return parse(k.module_text()).function("loop"), (i, acc, keep, t, again)


def test_a_loop_carried_value_is_live_out_of_the_loop_body():
    f, (i, acc, keep, t, again) = _loop_kernel()
    stmts = linearise(f)
    assert [s.opcode for s in stmts][5:7] == ["add.f32", "mul.f32"]
    cut = cut_liveness(f, stmts, 6, 7)
    assert cut.live_in == [acc]
    assert cut.live_out == [acc]  # read at the loop's next iteration and after it; t is not
    cut = cut_liveness(f, stmts, 8, 9)
    assert cut.live_in == [i] and cut.live_out == [i, again] and cut.predicates_out == [again]


def test_a_guarded_definition_does_not_kill():
    f, (i, acc, keep, t, again) = _loop_kernel()
    stmts = linearise(f)
    cut = cut_liveness(f, stmts, 10, 10)
    # the guard is read, and so is keep: when the guard is false its old value must come out
    assert cut.live_in == [again, keep]
    assert cut.live_out == [keep]
    assert keep in cut_liveness(f, stmts, 6, 11).live_in
    assert keep not in cut_liveness(f, stmts, 5, 11).live_in  # defined (unguarded) inside


def test_phase_cuts_read_their_operands_and_define_their_chain_ends():
    # live-in = 4 registers per A quad + 2 per B pair + the distinct C registers seeding the
    # chains; live-out = the 2 D registers of every chain's last step.
    f = parse_file(SAMPLE).entries[0]
    stmts = linearise(f)
    first, second = find_phases(stmts)
    one, two = cut_liveness(f, stmts, first.first_stmt, first.last_stmt), cut_liveness(f, stmts, second.first_stmt, second.last_stmt)
    assert len(one.live_in) == 4 * first.a_quads + 2 * first.b_pairs + 4  # bias: one register per n-tile
    assert len(one.live_out) == 2 * first.chains
    assert len(two.live_in) == 4 * second.a_quads + 2 * second.b_pairs + 2 * second.chains
    assert set(one.live_out) <= set(two.live_in)  # phase 2's C is phase 1's D
    assert len(two.live_out) == 2 * second.chains


def test_nvcc_loop_body_cut_keeps_the_accumulator_and_drops_the_dead_index(nvcc_ptx):
    # branches.cu: `for (i = t; i < n; i += blockDim.x) { … acc += … }` then tile[t] = acc.
    from rr.ptx.cfg import successors

    f = parse_file(nvcc_ptx("branches")).function("loops")
    stmts = linearise(f)
    succ = successors(f, stmts)
    back = next(s for s in stmts if s.opcode == "bra" and s.guard and min(succ[s.stmt - 1]) < s.stmt)
    head = min(succ[back.stmt - 1])
    cut = cut_liveness(f, stmts, head, back.stmt)
    # the accumulator: written by an add/sub.f32 that reads it, stored to shared after the loop
    acc = next(s.defs[0] for s in stmts[head - 1:back.stmt] if s.opcode in ("add.f32", "sub.f32")
               and s.defs[0] in s.uses)
    index = next(s.defs[0] for s in stmts[head - 1:back.stmt] if s.opcode == "add.s32" and s.defs[0] in s.uses)
    assert acc in cut.live_in and acc in cut.live_out
    assert index in cut.live_in and index not in cut.live_out  # dead once the loop is left
    after = [s for s in stmts[back.stmt:] if acc in s.uses]
    assert after and after[0].opcode.startswith(("st.shared", "mov", "add"))
