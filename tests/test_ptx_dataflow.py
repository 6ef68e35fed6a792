"""Dataflow over the control-flow graph (DESIGN §3): a read is resolved to every definition that
reaches it through branches, merges and loop back edges, never to the last one above it in the
text; loops are found as loops with their induction variables and trip counts; address arithmetic
in NVVM's whole integer vocabulary (or/bfi/prmt as additions where the bits are disjoint, and,
shr, bfe, joins of halves) evaluates to the same terms."""

from __future__ import annotations

import pytest

from conftest import PTXAS, run_ptxas
from rr.describe.dataflow import Dataflow
from rr.describe.memory import Base
from rr.describe.values import LANES, Value
from rr.ptx import linearise, parse
from rr.ptx.cfg import control_flow
from rr.ptx.model import Reg
from rr.ptx.reaching import UNDEFINED, ReachingDefinitions

HEADER = ".version 8.7\n.target sm_90\n.address_size 64\n\n"


def _kernel(body: str, params: str = ".param .u64 k_param_0, .param .u32 k_param_1", regs: str = "") -> str:
    return (HEADER + f".visible .entry k(\n\t{params}\n)\n{{\n\t.reg .pred \t%p<8>;\n\t.reg .b16 \t%rs<8>;\n"
            f"\t.reg .b32 \t%r<64>;\n\t.reg .b64 \t%rd<32>;\n{regs}" + body + "\n\tret;\n\n}\n")


def _flow(text: str) -> Dataflow:
    f = parse(text).function("k")
    return Dataflow(f)


def _stmt(flow: Dataflow, text: str) -> int:
    """The statement whose text starts with `text` (the only one)."""
    (s,) = [s.stmt for s in flow.statements if s.text.startswith(text)]
    return s


BRANCHES = """
	ld.param.u32 	%r1, [k_param_1];
	setp.eq.s32 	%p1, %r1, 0;
	mov.u32 	%r2, 7;
	@%p1 bra 	$L__BB0_2;
	mov.u32 	%r2, 9;
	bra.uni 	$L__BB0_3;
$L__BB0_2:
	mov.u32 	%r3, 1;
$L__BB0_3:
	add.s32 	%r4, %r2, 1;
	mov.u32 	%r5, 3;
	@%p1 mov.u32 	%r5, 4;
	add.s32 	%r6, %r5, %r3;
"""


def test_a_read_after_a_branch_is_reached_by_the_definitions_of_both_arms():
    flow = _flow(_kernel(BRANCHES))
    read = _stmt(flow, "add.s32 \t%r4")
    assert flow.reaching("%r2", read) == (_stmt(flow, "mov.u32 \t%r2, 7"), _stmt(flow, "mov.u32 \t%r2, 9"))
    # the last definition in the text alone would be `mov.u32 %r2, 9`
    assert flow.definition("%r2", read) is None


def test_a_guarded_definition_does_not_kill_the_one_before_it():
    flow = _flow(_kernel(BRANCHES))
    read = _stmt(flow, "add.s32 \t%r6")
    assert flow.reaching("%r5", read) == (_stmt(flow, "mov.u32 \t%r5, 3"), _stmt(flow, "@%p1 mov.u32"))


def test_a_register_written_on_one_arm_only_is_also_reached_by_its_value_on_entry():
    flow = _flow(_kernel(BRANCHES))
    assert flow.reaching("%r3", _stmt(flow, "add.s32 \t%r6")) == (UNDEFINED, _stmt(flow, "mov.u32 \t%r3, 1"))


def test_merged_values_that_differ_are_not_resolved_to_either():
    flow = _flow(_kernel(BRANCHES))
    v = flow.values.value(Reg("%r2"), _stmt(flow, "add.s32 \t%r4"))
    assert v.factors() and all(f[0] == "opaque" for f in v.factors())


# A rolled loop as NVVM writes it: the induction register advanced into a new register and moved
# back (enc2's E36–E37 loop), the pointer advanced in place, the exit test at the bottom.
LOOP = """
	ld.param.u64 	%rd1, [k_param_0];
	cvta.to.global.u64 	%rd2, %rd1;
	mov.u32 	%r1, %laneid;
	mul.wide.u32 	%rd3, %r1, 16;
	add.s64 	%rd4, %rd2, %rd3;
	mov.u32 	%r10, 0;
	mov.u32 	%r11, 0;
$L__BB0_1:
	ld.global.v4.u32 	{%r20, %r21, %r22, %r23}, [%rd4+64];
	add.s32 	%r11, %r11, %r20;
	add.s64 	%rd4, %rd4, 512;
	add.s32 	%r12, %r10, 1;
	setp.lt.u32 	%p1, %r12, 6;
	mov.u32 	%r10, %r12;
	@%p1 bra 	$L__BB0_1;
	st.global.u32 	[%rd2], %r11;
"""


def test_a_loop_is_found_with_its_statements_induction_variables_and_trips():
    flow = _flow(_kernel(LOOP))
    (loop,) = flow.cfg.loops
    load = _stmt(flow, "ld.global.v4.u32")
    assert flow.cfg.loops_of(load) == [loop]
    assert flow.statements[loop.first_stmt(flow.cfg) - 1].stmt == load
    assert flow.statements[loop.last_stmt(flow.cfg) - 1].text.startswith("@%p1 bra")
    from rr.describe.loops import describe_loop

    d = describe_loop(flow, loop)
    assert d["trips"] == 6 and d["trip_register"] == "%r12"
    assert {(iv["register"], iv["step"], iv["init"]) for iv in d["induction"]} == {("%r10", 1, 0), ("%rd4", 512, None)}


def test_a_read_inside_a_loop_is_reached_round_the_back_edge():
    flow = _flow(_kernel(LOOP))
    load = _stmt(flow, "ld.global.v4.u32")
    assert flow.reaching("%rd4", load) == (_stmt(flow, "add.s64 \t%rd4, %rd2"), _stmt(flow, "add.s64 \t%rd4, %rd4"))


def test_a_load_in_a_loop_advances_with_the_trip_index():
    flow = _flow(_kernel(LOOP))
    acc = flow.memory.access(_stmt(flow, "ld.global.v4.u32"))
    assert acc.base == Base("param", offset=0) and acc.offset == 64
    assert acc.lane_bytes == tuple(16 * lane for lane in range(LANES))
    assert acc.terms == (((("trip", 1),), 512),)


def test_an_accumulator_round_a_loop_is_not_an_induction_variable():
    flow = _flow(_kernel(LOOP))
    v = flow.values.value(Reg("%r11"), _stmt(flow, "st.global.u32"))
    assert all(f[0] == "opaque" for f in v.factors())


# NVVM's spellings of + once it knows the bits are disjoint, and of lane patterns.
BITS = """
	mov.u32 	%r1, %tid.x;
	and.b32 	%r2, %r1, 31;
	ld.param.u32 	%r3, [k_param_1];
	shl.b32 	%r4, %r3, 5;
	or.b32  	%r5, %r4, %r2;
	shr.u32 	%r6, %r2, 2;
	and.b32 	%r7, %r2, 3;
	bfi.b32 	%r8, %r6, %r7, 3, 3;
	prmt.b32 	%r9, %r7, %r6, 0x5410;
	mov.b32 	{%rs1, %rs2}, %r9;
	cvt.u32.u16 	%r10, %rs2;
	mov.u32 	%r11, %ctaid.x;
	mad.lo.s32 	%r12, %r11, %r3, %r2;
	bfe.u32 	%r13, %r1, 2, 3;
	xor.b32 	%r14, %r7, 64;
	mov.b32 	%r15, {%rs1, %rs2};
"""


@pytest.fixture(scope="module")
def bits() -> Dataflow:
    return _flow(_kernel(BITS))


def _at_end(flow: Dataflow, reg: str) -> Value:
    return flow.values.value(Reg(reg), len(flow.statements))


def test_tid_x_and_31_is_the_lane(bits):
    assert _at_end(bits, "%r2") == Value.const(tuple(range(LANES)))


def test_or_of_disjoint_bits_is_an_addition(bits):
    # (p << 5) | lane with lane < 32
    assert _at_end(bits, "%r5") == Value.factor(("param", 8)).scaled(32).plus(Value.const(tuple(range(LANES))))


def test_bfi_into_zero_bits_is_an_addition(bits):
    # (lane >> 2) inserted at bit 3 over (lane & 3): 8·(lane>>2) + (lane&3)
    assert _at_end(bits, "%r8") == Value.const(tuple(8 * (i >> 2) + (i & 3) for i in range(LANES)))


def test_prmt_join_of_halves_and_a_split_back(bits):
    assert _at_end(bits, "%r9") == Value.const(tuple((i & 3) | (i >> 2) << 16 for i in range(LANES)))
    assert _at_end(bits, "%r10") == Value.const(tuple(i >> 2 for i in range(LANES)))
    assert _at_end(bits, "%r15") == _at_end(bits, "%r9")


def test_block_and_parameter_terms_are_products_of_factors(bits):
    expected = Value.factor(("sreg", "ctaid.x")).times(Value.factor(("param", 8))).plus(Value.const(tuple(range(LANES))))
    assert _at_end(bits, "%r12") == expected


def test_bfe_and_xor_of_lane_values_are_computed_lane_by_lane(bits):
    # bits 2..4 of %tid.x = laneid + 32·warp: the warp's bits are above the field
    assert _at_end(bits, "%r13") == Value.const(tuple((i >> 2) & 7 for i in range(LANES)))
    assert _at_end(bits, "%r14") == Value.const(tuple((i & 3) ^ 64 for i in range(LANES)))


@pytest.mark.skipif(PTXAS is None, reason="ptxas is not on PATH")
@pytest.mark.parametrize("body", [BRANCHES, LOOP, BITS], ids=["branches", "loop", "bits"])
def test_the_dataflow_kernels_are_valid_ptx(tmp_path, body):
    src = tmp_path / "k.ptx"
    src.write_text(_kernel(body))
    r = run_ptxas(src)
    assert r.returncode == 0, r.stderr


def test_reaching_definitions_of_a_straight_line_kernel_are_its_single_writes(nvcc_ptx):
    from rr.ptx import parse_file

    f = parse_file(nvcc_ptx("mma_chain")).function("gemm_phase")
    statements = linearise(f)
    reach = ReachingDefinitions(control_flow(f, statements))
    for s in statements:
        for u in s.uses:
            (d,) = reach.of(u, s.stmt)
            assert d < s.stmt and u in statements[d - 1].defs


def test_shift_amounts_are_unsigned_and_clamp_at_the_width():
    # `shr.s32 %r, %r, -1` (a mutant enc2 once had it): -1 is 4294967295, past the width: all sign
    flow = _flow(_kernel("""
	mov.u32 	%r1, %laneid;
	shr.u32 	%r2, %r1, -1;
	shl.b32 	%r3, %r1, 40;
	sub.s32 	%r4, 0, %r1;
	shr.s32 	%r5, %r4, -1;
"""))
    assert _at_end(flow, "%r2") == Value.const(0) and _at_end(flow, "%r3") == Value.const(0)
    assert _at_end(flow, "%r5") == Value.const(tuple(-1 if i else 0 for i in range(LANES)))
