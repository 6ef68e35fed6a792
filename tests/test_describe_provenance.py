"""Operand provenance: each phase's A, B and C traced to weight fragments, per-column tables,
chained D or zero, with the byte offsets, lane terms and %tid.z slab stride that the reference
document reports — on nvcc's kernels and on the reference's own addressing patterns."""

from __future__ import annotations

import pytest

from rr.describe import find_epilogues, find_phases
from rr.describe.dataflow import Dataflow
from rr.describe.kernel import param_offsets
from rr.describe.provenance import operand_sources
from rr.ptx import linearise, parse, parse_file
from rr.ptx.model import Reg
from rr.describe.values import Value


def _spec(function):
    statements = linearise(function)
    phases = find_phases(statements)
    flow = Dataflow(function, statements)
    return phases, operand_sources(flow, phases, find_epilogues(statements, phases)), flow


def test_nvcc_gemm_operands_come_from_their_parameters(nvcc_ptx):
    # mma_chain.cu: A fragments at param_0 + 16·(32·(m·K+k) + lane), B at param_1 + 8·(32·(n·K+k)
    # + lane), the C seed from bias[4n + (lane & 3)] at param_2, in 8-byte parameter slots.
    m, n, k = 4, 4, 3
    f = parse_file(nvcc_ptx("mma_chain", f"-DM_TILES={m}", f"-DN_TILES={n}", f"-DK_STEPS={k}")).function("gemm_phase")
    phases, sources, _ = _spec(f)
    first, last = sources
    assert first["a_source"] == last["a_source"] == "weight(param+0)"
    assert first["b_source"] == last["b_source"] == "weight(param+8)"
    assert first["c_source"] == "table(param+16)" and last["c_source"] == f"D(phase {phases[0].phase})"
    expected_b = {256 * (nn * k + kk) for nn in range(n) for kk in range(k)}
    assert set(first["b_offsets"]) | set(last["b_offsets"]) == expected_b
    assert set(last["b_offsets"]) == {256 * (nn * k + k - 1) for nn in range(n)}
    assert first["c_offsets"] == [16 * nn for nn in range(n)]
    assert set(first["lane_terms"]) == {"16·laneid", "8·laneid", "((laneid<<2)&12)"}
    assert first["slab_stride"] is None


ENGINE_STYLE = """.version 8.7
.target sm_90
.address_size 64

.visible .entry cuda_dldn_engine_swin_enc2_kernel(
	.param .align 8 .b8 cuda_dldn_engine_swin_enc2_kernel_param_0[136]
)
.maxntid 32, 1, 4
{
	.reg .b32 	%r<9000>;
	.reg .b64 	%rd<500>;

	mov.b64 	%rd8, cuda_dldn_engine_swin_enc2_kernel_param_0;
	add.s64 	%rd1, %rd8, 80;
	ld.param.u64 	%rd2, [cuda_dldn_engine_swin_enc2_kernel_param_0+40];
	ld.param.u64 	%rd383, [%rd1+-32];
	mov.u32 	%r10, %tid.z;
	mul.lo.s32 	%r16116, %r10, 10752;
	mul.wide.u32 	%rd266, %r16116, 2;
	add.s64 	%rd268, %rd2, %rd266;
	mov.u32 	%r3499, %laneid;
	mul.wide.u32 	%rd270, %r3499, 16;
	add.s64 	%rd271, %rd268, %rd270;
	add.s64 	%rd64, %rd271, 3264;
	ld.weak.global.ca.v4.u32 	{ %r3500,%r3501,%r3502,%r3503},[%rd64];
	add.s64 	%rd65, %rd271, 3776;
	ld.weak.global.ca.v4.u32 	{ %r3504,%r3505,%r3506,%r3507},[%rd65];
	ld.weak.global.ca.v4.u32 	{ %r1,%r2,%r3,%r4},[%rd271+192];
	mov.u32 	%r8606, 0;
	mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16
	{%r20, %r21},
	{%r1, %r2, %r3, %r4},
	{%r3500, %r3501}, {%r8606, %r8606};
	mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16
	{%r22, %r23},
	{%r1, %r2, %r3, %r4},
	{%r3502, %r3503}, {%r8606, %r8606};
	mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16
	{%r24, %r25},
	{%r1, %r2, %r3, %r4},
	{%r3504, %r3505}, {%r8606, %r8606};
	mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16
	{%r26, %r27},
	{%r1, %r2, %r3, %r4},
	{%r3506, %r3507}, {%r8606, %r8606};
	ret;

}
"""


def test_the_reference_documents_weight_slab_and_arena_addressing():
    # Reference §1.1: Wz = W + 2·(%tid.z·10752) + 16·laneid with W = param+40; E1's loads at
    # Wz + {3264, 3776} are phase 2's B; the arena pointer is [%rd1+-32] with %rd1 = param + 80.
    f = parse(ENGINE_STYLE).function("cuda_dldn_engine_swin_enc2_kernel")
    phases, (src,), flow = _spec(f)
    assert (phases[0].m, phases[0].n, phases[0].k, phases[0].mma) == (1, 4, 1, 4)
    assert src["b_source"] == "weight(param+40)" and src["b_offsets"] == [3264, 3776]
    assert src["slab_stride"] == 21504
    assert src["c_source"] == "zero" and src["a_source"] == "weight(param+40)"
    arena_load = next(s for s in linearise(f) if "%rd383" in s.defs)
    assert flow.values.value(Reg("%rd383"), arena_load.stmt + 1) == Value.factor(("param", 48))


def test_param_offsets_follow_alignment():
    f = parse(".version 8.7\n.target sm_90\n.address_size 64\n.visible .entry k(.param .u32 a, .param .u64 b, "
              ".param .align 8 .b8 c[136], .param .u16 d)\n{\n\tret;\n\n}\n").function("k")
    assert param_offsets(f.params) == {"a": 0, "b": 8, "c": 16, "d": 152}


def _staging_kernel() -> str:
    """Reference E8–E9 in miniature, written with the PTX builder: phase 1's D packed to e4m3 and
    staged into shared at smem + 2048·%tid.z + 16·laneid + {0, 512, 1024, 1536}; phase 2 reads
    its A at smem + 512·%tid.z + 16·laneid, phase 3 at smem + 16·laneid + 2048."""
    from rr.synth import KernelBuilder, KernelParam

    k = KernelBuilder("stage", [KernelParam("stage_param_0", ".param .align 8 .b8 {name}[136]")])
    k.globals.append(".shared .align 16 .b8 smem[8192];")
    w = k.op("cvta.to.global.u64", "b64", k.op("ld.param.u64", "b64", "[stage_param_0+40]"))
    lane = k.op("mov.u32", "b32", "%laneid")
    wl = k.op("add.s64", "b64", w, k.op("mul.wide.u32", "b64", lane, "16"))

    def frag(offset):
        regs = k.regs(4)
        k.ins("ld.weak.global.ca.v4.u32", "{" + ", ".join(regs) + "}", f"[{wl}+{offset}]")
        return regs

    zero = k.op("mov.u32", "b32", "0")
    b = frag(8192)
    operands = [(frag(4096 + 512 * i), b) for i in range(4)]
    d = []
    for a, b in operands:  # phase 1: four m-tiles of one n-tile (m=4, n=1, k=1)
        d.append(k.regs(2))
        k.mma(d[-1], a, b[:2], [zero, zero])
    z = k.op("mov.u32", "b32", "%tid.z")
    smem = k.op("mov.u32", "b32", "smem")
    store_at = k.op("add.s32", "b32", k.op("add.s32", "b32", smem, k.op("shl.b32", "b32", z, "11")),
                    k.op("shl.b32", "b32", lane, "4"))
    for i, off in enumerate((0, 512, 1024, 1536)):
        words = []
        for j in range(4):
            lo = k.op("cvt.rn.satfinite.e4m3x2.f16x2", "b16", d[(i + j) % 4][0])
            hi = k.op("cvt.rn.satfinite.e4m3x2.f16x2", "b16", d[(i + j) % 4][1])
            words.append(k.op("mov.b32", "b32", "{" + lo + ", " + hi + "}"))
        k.ins("st.shared.v4.u32", f"[{store_at}+{off}]" if off else f"[{store_at}]", "{" + ", ".join(words) + "}")
    k.ins("bar.sync", "0")
    read2 = k.op("add.s32", "b32", k.op("add.s32", "b32", smem, k.op("shl.b32", "b32", z, "9")),
                 k.op("shl.b32", "b32", lane, "4"))
    read3 = k.op("add.s32", "b32", smem, k.op("shl.b32", "b32", lane, "4"))
    for at in (f"[{read2}]", f"[{read3}+2048]"):
        a = k.regs(4)
        k.ins("ld.shared.v4.u32", "{" + ", ".join(a) + "}", at)
        b = frag(20000)
        k.ins("bar.sync", "0")  # keeps the phases apart
        k.mma(k.regs(2), a, b[:2], [zero, zero])
    return k.module_text()


def test_shared_staging_is_matched_to_what_was_stored():
    f = parse(_staging_kernel()).function("stage")
    phases, sources, _ = _spec(f)
    assert [p.mma for p in phases] == [4, 1, 1] and all(p.identity for p in phases)
    assert (phases[0].m, phases[0].n, phases[0].k) == (4, 1, 1)
    assert sources[1]["a_source"] == sources[2]["a_source"] == "shared(pack(D of phase 1))"
    assert sources[0]["b_source"] == "weight(param+40)"


@pytest.mark.skipif(__import__("shutil").which("ptxas") is None, reason="ptxas is not on PATH")
def test_the_staging_kernel_is_valid_ptx(tmp_path):
    import shutil
    import subprocess

    src = tmp_path / "s.ptx"
    src.write_text(_staging_kernel())
    r = subprocess.run([shutil.which("ptxas"), "-arch=sm_90", str(src), "-o", str(tmp_path / "s.cubin")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_a_merge_names_each_definition_that_reaches_with_its_block(nvcc_ptx):
    # tests/cuda/nvvm/branches.cu: `acc = use_bias ? bias[lane & 3] : 0` through an if/else: the
    # C seed is reached by the zero before the branch and by the table load on its fall-through
    from rr.describe.spec import spec_json

    f = parse_file(nvcc_ptx("nvvm/branches")).function("nvvm_branches")
    c = spec_json(f)["phases"][0]["operands"]["C"]
    assert c["kind"] == "merge" and c["source"] == "merge(table(param+16) | zero)"
    by_kind = {a["kind"]: a["definitions"] for a in c["alternatives"]}
    (table,), (zero,) = by_kind["table"], by_kind["zero"]
    statements = linearise(f)
    assert statements[table["stmt"] - 1].opcode.startswith("ld.global") and statements[zero["stmt"] - 1].text.startswith("mov.u32")
    assert zero["block"] < table["block"] and table["loop"] is None and zero["loop"] is None
