"""Linearisation follows DESIGN §3: statement numbering, physical lines and defs/uses per opcode family."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rr.ptx import linearise, parse_file
from rr.ptx.model import Reg

DATA = Path(__file__).parent / "data"
KITCHEN_SINK = DATA / "kitchen_sink.ptx"
ENTRY = "cuda_dldn_engine_swin_enc9_kernel"


@pytest.fixture(scope="module")
def sink():
    return {s.stmt: s for s in linearise(parse_file(KITCHEN_SINK).function(ENTRY))}


def test_only_instructions_are_statements_and_numbering_starts_at_one(sink):
    lines = KITCHEN_SINK.read_text().splitlines()
    assert min(sink) == 1 and sorted(sink) == list(range(1, len(sink) + 1))
    # s1 is the first instruction of the body: the .local/.reg declarations and .loc are skipped.
    assert lines[sink[1].line - 1].strip() == "mov.u64 \t%SP, __local_depot1;"
    # Exactly the lines that start an instruction: count them independently of the parser.
    body = lines[sink[1].line - 1: sink[len(sink)].line]
    starts = [l for l in body if re.match(r"\s*(@!?%p\d+\s+)?[a-z][\w.]*(\s|;|$)", l) and not l.strip().startswith(".")]
    assert len(starts) == len(sink)


def test_multi_line_instructions_count_once_with_first_and_last_line(sink):
    mma = next(s for s in sink.values() if s.opcode.startswith("mma."))
    assert mma.last_line - mma.line == 3
    st = next(s for s in sink.values() if s.opcode == "st.global.v4.u32")
    assert st.last_line == st.line + 1
    assert mma.text.count("\n") == 3


def test_scope_block_instructions_count_one_each_and_carry_their_scope(sink):
    inner = [s for s in sink.values() if s.scope != 0]
    assert [s.opcode for s in inner] == ["mov.b32"]
    assert inner[0].defs == ("%temp", "%rs3")


def test_defs_and_uses_per_opcode_family(sink):
    by = {s.opcode: s for s in sink.values()}
    # mma: D defined, A, B, C read
    mma = by["mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16"]
    assert mma.defs == ("%r12", "%r13") and mma.uses == ("%r5", "%r6", "%r7", "%r8", "%r9")
    # stores define nothing and read address and data; a guard is a use
    assert by["st.global.v4.u32"].defs == () and by["st.global.v4.u32"].uses == ("%rd6", "%r12", "%r13", "%r14", "%r11")
    assert by["st.shared.u32"].guard == "%p2" and by["st.shared.u32"].uses == ("%p2", "%r14")
    # vector loads define every element; the address base is a use
    assert by["ld.weak.global.ca.v4.u32"].defs == ("%r5", "%r6", "%r7", "%r8")
    assert by["ld.weak.global.ca.v4.u32"].uses == ("%rd6",)
    # setp with two predicates, shfl with its predicate output
    assert by["setp.lt.u32"].defs == ("%p1", "%p2")
    assert by["shfl.sync.bfly.b32"].defs == ("%r11", "%p3")
    assert by["shfl.sync.bfly.b32"].uses == ("%r5", "%r9", "%r10")
    # special registers are neither defined nor used
    assert by["mov.u32"].uses == ()
    # a negated guard is a use of the predicate
    assert by["bra"].uses == ("%p1",) and by["bra"].defs == ()
    assert by["movmatrix.sync.aligned.m8n8.trans.b16"].defs == ("%r14",)
    assert by["cvt.rn.satfinite.e4m3x2.f16x2"].defs == ("%rs4",)
    assert by["bar.sync"].defs == () and by["ret"].defs == ()


def test_texture_surface_shuffle_and_call_families(nvcc_ptx):
    tex_stmts = linearise(parse_file(nvcc_ptx("tex_surf")).function("blur3"))
    tex = next(s for s in tex_stmts if s.opcode.startswith("tex."))
    assert len(tex.defs) == 4 and len(tex.uses) == 3  # handle + two coordinates
    sust = next(s for s in tex_stmts if s.opcode.startswith("sust."))
    assert sust.defs == () and len(sust.uses) == 7  # handle, x, y and four data registers
    shfl = [s for s in linearise(parse_file(nvcc_ptx("shuffles")).function("reduce"))
            if s.opcode.startswith("shfl.sync")]
    kinds = {s.opcode.split(".")[2] for s in shfl}
    assert kinds == {"bfly", "down", "up", "idx"}
    # value and predicate where written `d|p`, the value alone in cuda_fp16's inline asm
    assert [len(s.defs) for s in shfl] == [2 if "|" in s.text else 1 for s in shfl]
    assert sum("|" in s.text for s in shfl) == 6
    calls = [s for s in linearise(parse_file(nvcc_ptx("branches")).function("loops")) if s.opcode.startswith("call")]
    assert calls and all(s.scope > 0 for s in calls)


def test_mma_count_matches_the_cuda_source_shape(nvcc_ptx):
    # 4 x 3 tiles x 2 k-steps = 24 mma statements, each spanning four lines.
    stmts = linearise(parse_file(nvcc_ptx("mma_chain", "-DM_TILES=4", "-DN_TILES=3", "-DK_STEPS=2")).function("gemm_phase"))
    mma = [s for s in stmts if s.opcode.startswith("mma.sync")]
    assert len(mma) == 24
    assert all(s.last_line == s.line + 3 for s in mma)


def test_every_use_is_defined_somewhere_in_nvcc_kernels(nvcc_ptx):
    # A register read but never written means a def rule is missing for some opcode.
    for name, entry in [("mma_chain", "gemm_phase"), ("tex_surf", "blur3"), ("shuffles", "reduce"),
                        ("movmatrix", "transpose_tiles"), ("branches", "loops")]:
        stmts = linearise(parse_file(nvcc_ptx(name)).function(entry))
        defined = {d for s in stmts for d in s.defs}
        undefined = {u for s in stmts for u in s.uses} - defined
        assert not undefined, (name, undefined)


def test_lines_point_at_the_instruction_in_the_file(nvcc_ptx):
    path = nvcc_ptx("branches", "-G")
    lines = path.read_text().splitlines()
    stmts = linearise(parse_file(path).function("loops"))
    for s in stmts:
        assert lines[s.line - 1].strip().startswith(s.text.splitlines()[0].strip())


def test_linearise_cli_writes_the_statement_table(tmp_path):
    out = tmp_path / "s.parquet"
    r = subprocess.run([sys.executable, "-m", "rr.cli", "linearise", str(KITCHEN_SINK), "--entry", ENTRY,
                        "-o", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    table = pq.read_table(out)
    assert table.column_names == ["stmt", "line", "last_line", "opcode", "text", "guard", "defs", "uses", "scope"]
    rows = table.to_pylist()
    assert [r["stmt"] for r in rows] == list(range(1, len(rows) + 1))
    mma = next(r for r in rows if r["opcode"].startswith("mma"))
    assert mma["defs"] == ["%r12", "%r13"]
    assert table.schema.metadata[b"rr.entry"] == ENTRY.encode()


def _typed_registers(statement) -> set:
    from rr.ptx.statements import operands
    from rr.ptx.model import registers_in

    regs = {r.name for op in operands(statement) for r in registers_in(op) if not r.special}
    if statement.guard:
        regs.add(statement.guard.lstrip("!"))
    return regs


@pytest.mark.parametrize("name,flags", [("mma_chain", ()), ("tex_surf", ()), ("shuffles", ()),
                                        ("movmatrix", ()), ("branches", ("-G",))])
def test_text_defs_uses_agree_with_the_typed_operands(nvcc_ptx, name, flags):
    # Linearisation reads registers off the text; the typed operand model must see the same ones,
    # named the same way (a block's re-declared %tmp is %tmp@N in both), and the destination of a
    # non-store must be exactly the defs.
    from rr.ptx.statements import operands
    from rr.ptx.model import Addr, registers_in

    module = parse_file(nvcc_ptx(name, *flags))
    for f in module.functions:
        if not f.has_body:
            continue
        statements = linearise(f)
        instructions = list(f.instructions())
        assert len(statements) == len(instructions)
        for s, ins in zip(statements, instructions):
            assert s.text == ins.text
            assert set(s.defs) | set(s.uses) == _typed_registers(s), s.text
            if s.defs:
                first = operands(s)[0]
                assert not isinstance(first, Addr)
                assert {r.name for r in registers_in(first)} == set(s.defs)


def test_fast_operand_path_equals_the_tokenising_parser(nvcc_ptx):
    # The fast split-and-classify path and the recursive-descent parser give identical operands.
    from rr.ptx.operands import _Operands, _fast_operands, _tokens, _HEAD

    checked = 0
    for name in ("mma_chain", "tex_surf", "shuffles", "movmatrix", "branches"):
        for f in parse_file(nvcc_ptx(name)).functions:
            for ins in f.instructions() if f.has_body else ():
                text = ins.text
                head = _HEAD.match(text)
                body = text[head.end():text.rindex(";")]
                fast = _fast_operands(body)
                toks = _tokens(body, head.end(), text)
                p = _Operands(toks, text)
                slow = p.items(None, p.operand) if toks else ()
                if fast is not None:
                    assert fast == slow, text
                    checked += 1
    assert checked > 200


# --------------------------------------------------------------------------------------------------
# Registers named by any identifier `.reg` declares, scope by scope (rr.ptx.scopes)
# --------------------------------------------------------------------------------------------------

_CUTLASS = """.version 8.0
.target sm_90
.address_size 64

.visible .entry k(.param .u64 k_param_0)
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<8>;
	.reg .b64 	%rd<4>;
	.reg .b32 	lo;

	ld.param.u64 	%rd1, [k_param_0];
	mov.u32 	%r1, %tid.x;
	mov.u32 	lo, %r1;
	{
	.reg .pred p;
	setp.ne.b32 p, %r1, 0;
	selp.b32 %r2, 1, 0, p;
	@p mov.u32 %r3, 7;
	@!p bra DONE;
	}
	{
	.reg .pred p;
	.reg .b32 lo, hi;
	setp.eq.b32 p, %r2, 0;
	mov.b64 {lo, hi}, %rd1;
	@ !p add.u32 %r4, lo, hi;
	}
	{
	.reg .b32 once;
	add.u32 once, lo, 1;
	mov.b64 %rd2, {once, %r4};
	}
DONE:
	st.global.u32 	[%rd1], lo;
	ret;
}
"""


@pytest.fixture(scope="module")
def cutlass(tmp_path_factory):
    from rr.ptx import parse

    path = tmp_path_factory.mktemp("ptx") / "cutlass.ptx"
    path.write_text(_CUTLASS)
    return path, {s.stmt: s for s in linearise(parse(_CUTLASS).function("k"))}


def test_ptxas_accepts_the_scoped_register_example(cutlass):
    from conftest import PTXAS, run_ptxas

    if PTXAS is None:
        pytest.skip("ptxas is not on PATH")
    r = run_ptxas(cutlass[0])
    assert r.returncode == 0, r.stderr


def test_names_declared_by_reg_are_registers_in_guards_operands_vectors_defs_and_uses(cutlass):
    setp, selp, guarded, branch = (cutlass[1][n] for n in (4, 5, 6, 7))
    assert setp.defs == ("p@1",) and setp.uses == ("%r1",)
    assert selp.defs == ("%r2",) and selp.uses == ("p@1",)
    assert (guarded.guard, guarded.defs, guarded.uses) == ("p@1", ("%r3",), ("p@1",))
    assert (branch.guard, branch.uses) == ("!p@1", ("p@1",))
    split = cutlass[1][9]  # mov.b64 {lo, hi}, %rd1 in the second block: its own lo (hi is only its)
    assert split.defs == ("lo@2", "hi") and split.uses == ("%rd1",)
    add = cutlass[1][10]  # @ !p add.u32 %r4, lo, hi
    assert (add.guard, add.defs, add.uses) == ("!p@2", ("%r4",), ("p@2", "lo@2", "hi"))
    assert cutlass[1][3].defs == ("lo",)  # the function's lo, which the second block shadows


def test_a_name_declared_in_one_block_only_keeps_its_name_and_the_function_level_names_are_unchanged(cutlass):
    rows = cutlass[1]
    assert rows[11].defs == ("once",) and rows[11].uses == ("lo",)  # the function's lo again
    assert rows[12].uses == ("once", "%r4")
    assert rows[13].uses == ("%rd1", "lo") and rows[1].defs == ("%rd1",)
    assert all("@" not in r for s in rows.values() if s.scope == 0 for r in s.defs + s.uses)


def test_typed_operands_name_registers_as_defs_and_uses_do(cutlass):
    from rr.ptx import parse
    from rr.ptx.statements import operands
    from rr.ptx.model import Vec

    rows = cutlass[1]
    assert operands(rows[9])[0] == Vec((Reg("lo@2"), Reg("hi")))
    assert operands(rows[5])[3] == Reg("p@1")
    # the nodes of the body print back as written: their registers keep the written names
    nodes = list(parse(_CUTLASS).function("k").instructions())
    assert nodes[8].operands[0] == Vec((Reg("lo"), Reg("hi"))) and nodes[4].operands[3] == Reg("p")
    assert nodes[5].guard == "p" and nodes[9].guard == "!p"


def test_the_item_parser_and_the_scan_give_the_same_scoped_rows():
    from rr.ptx import parse

    fast = linearise(parse(_CUTLASS).function("k"))
    slow_text = _CUTLASS.replace("ret;", "ret /* the scan does not vouch for this */;")
    f = parse(slow_text).function("k")
    assert f.scan is None
    slow = linearise(f)
    assert [s[:4] + s[5:] for s in slow[:-1]] == [s[:4] + s[5:] for s in fast[:-1]]


def test_nvvm_kernels_keep_their_percent_names(nvcc_ptx):
    # nothing in nvcc's -O3 kernels is re-declared in a block: every register is its written %-name
    for name, entry in [("mma_chain", "gemm_phase"), ("tex_surf", "blur3"), ("shuffles", "reduce"),
                        ("movmatrix", "transpose_tiles"), ("branches", "loops")]:
        stmts = linearise(parse_file(nvcc_ptx(name)).function(entry))
        regs = {r for s in stmts for r in s.defs + s.uses}
        assert regs and all(r.startswith("%") and "@" not in r for r in regs), name
