"""The PTX front end is lossless: emit(parse(text)) == text byte for byte, on nvcc's PTX and on
hand-written PTX that uses every construct ptxas accepts, and the model it builds is right."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import ALL_KERNELS, PTXAS, run_ptxas
from rr.ptx import emit, parse, parse_file
from rr.ptx.model import Addr, Imm, Instruction, Pair, Reg, Sym, Vec

DATA = Path(__file__).parent / "data"
KITCHEN_SINK = DATA / "kitchen_sink.ptx"


@pytest.mark.parametrize("name,flags", ALL_KERNELS, ids=lambda v: v if isinstance(v, str) else " ".join(v) or "default")
def test_nvcc_ptx_round_trips_exactly(nvcc_ptx, name, flags):
    path = nvcc_ptx(name, *flags)
    text = path.read_text()
    assert emit(parse(text, str(path))) == text


@pytest.mark.parametrize("name,flags", ALL_KERNELS, ids=lambda v: v if isinstance(v, str) else " ".join(v) or "default")
def test_parse_print_parse_print_is_stable_after_rebuilding_every_instruction(nvcc_ptx, name, flags):
    # Ocelot-style: rebuild each instruction from its parsed fields (no source text), print, parse
    # again and print again. The two prints must agree, so the operand model loses nothing.
    module = parse(nvcc_ptx(name, *flags).read_text())
    for f in module.functions:
        if f.has_body:
            for ins in f.instructions():
                ins._parsed = (ins.guard, ins.opcode, ins.operands)
                ins.text = None
    first = emit(module)
    second = emit(parse(first))
    assert first == second
    assert parse(first).functions[-1].name == module.functions[-1].name


def test_kitchen_sink_is_accepted_by_ptxas(tmp_path):
    if PTXAS is None:
        pytest.skip("ptxas is not on PATH")
    import shutil

    ptx = tmp_path / "k.ptx"
    shutil.copyfile(KITCHEN_SINK, ptx)
    r = run_ptxas(ptx)
    assert r.returncode == 0, r.stderr


def test_kitchen_sink_round_trips_exactly():
    text = KITCHEN_SINK.read_text()
    assert emit(parse(text)) == text


@pytest.mark.parametrize("variant", ["crlf", "no_final_newline", "leading_blank_lines", "tabs_to_spaces"])
def test_whitespace_variants_round_trip(variant):
    text = KITCHEN_SINK.read_text()
    text = {
        "crlf": lambda t: t.replace("\n", "\r\n"),
        "no_final_newline": lambda t: t.rstrip("\n"),
        "leading_blank_lines": lambda t: "\n\n\t\n" + t,
        "tabs_to_spaces": lambda t: t.replace("\t", "    "),
    }[variant](text)
    assert emit(parse(text)) == text


def test_module_header_and_declarations_are_recognised():
    m = parse_file(KITCHEN_SINK)
    assert (m.version, m.target) == ("8.7", "sm_90")
    kinds = [getattr(i, "kind", None) for i in m.items]
    assert kinds[:3] == ["version", "target", "address_size"]
    assert "section" in kinds and "file" in kinds
    assert [f.name for f in m.functions] == ["ext_helper", "cube", "abort_kernel",
                                             "cuda_dldn_engine_swin_enc9_kernel"]
    assert not m.functions[0].has_body and m.functions[0].body is None  # an .extern prototype
    assert [f.name for f in m.entries] == ["cuda_dldn_engine_swin_enc9_kernel"]


def test_entry_parameters_and_performance_directives():
    entry = parse_file(KITCHEN_SINK).function("cuda_dldn_engine_swin_enc9_kernel")
    block, ptr = entry.params
    assert (block.type, block.align, block.dims, block.size) == ("b8", 8, (136,), 136)
    assert (ptr.type, ptr.ptr, ptr.size) == ("u64", ("global", "align 16"), 8)
    assert entry.directives == {"maxntid": (32, 1, 4), "minnctapersm": (1,)}
    assert parse_file(KITCHEN_SINK).function("abort_kernel").directives == {"noreturn": ()}
    cube = parse_file(KITCHEN_SINK).function("cube")
    assert [p.name for p in cube.returns] == ["func_retval0"]


def _instructions(name="cuda_dldn_engine_swin_enc9_kernel"):
    return list(parse_file(KITCHEN_SINK).function(name).instructions())


def test_operands_are_typed():
    by_opcode = {}
    for ins in _instructions():
        by_opcode.setdefault(ins.opcode, ins)
    ld = by_opcode["ld.param.v2.u16"]
    assert ld.operands == (Vec((Reg("%rs1"), Reg("%rs2"))),
                           Addr(Sym("cuda_dldn_engine_swin_enc9_kernel_param_0"), 80))
    assert by_opcode["ld.param.u64"].operands[1] == Addr(Sym("cuda_dldn_engine_swin_enc9_kernel_param_0"), 40)
    weak = by_opcode["ld.weak.global.ca.v4.u32"]
    assert weak.operands[1] == Addr(Reg("%rd6"), 3264)
    assert by_opcode["setp.lt.u32"].operands[0] == Pair(Reg("%p1"), Reg("%p2"))
    assert by_opcode["shfl.sync.bfly.b32"].operands[0] == Pair(Reg("%r11"), Reg("%p3"))
    mma = by_opcode["mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16"]
    assert [len(op.items) for op in mma.operands] == [2, 4, 2, 2]
    assert by_opcode["bra"].guard == "!%p1"
    assert by_opcode["bra"].operands == (Sym("$L__BB1_2"),)
    assert by_opcode["st.global.v4.u32"].operands[1] == Vec(tuple(Reg(r) for r in ("%r12", "%r13", "%r14", "%r11")))


def test_negative_address_offset_and_immediates():
    ins = {i.opcode + str(n): i for n, i in enumerate(_instructions())}
    offsets = [op.offset for i in ins.values() for op in i.operands if isinstance(op, Addr)]
    assert -32 in offsets
    imms = {op.text: op.value for i in ins.values() for op in i.operands if isinstance(op, Imm)}
    assert imms["0f3C8CCB50"] == pytest.approx(0.017186790704727173)
    assert imms["0dBFE1CC0000000000"] == -0.55615234375
    assert imms["0x1F"] == 31
    assert imms["-1"] == -1


def test_texture_and_surface_addresses_carry_their_coordinates(nvcc_ptx):
    module = parse_file(nvcc_ptx("tex_surf"))
    ins = list(module.function("blur3").instructions())
    tex = [i for i in ins if i.opcode.startswith("tex.")]
    sust = [i for i in ins if i.opcode.startswith("sust.")]
    assert len(tex) == 9 and len(sust) == 1
    addr = tex[0].operands[1]
    assert isinstance(addr.base, Reg) and isinstance(addr.extra[0], Vec) and len(addr.extra[0].items) == 2
    assert isinstance(sust[0].operands[0], Addr) and len(sust[0].operands[1].items) == 4


def test_built_instructions_render_as_ptx_that_parses_back():
    ins = Instruction.build("mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16",
                            [Vec((Reg("%r1"), Reg("%r2"))), Vec(tuple(Reg(f"%r{i}") for i in range(3, 7))),
                             Vec((Reg("%r7"), Reg("%r8"))), Vec((Reg("%r9"), Reg("%r9")))])
    text = ins.render()
    again = Instruction(text)
    assert (again.guard, again.opcode, again.operands) == (None, ins.opcode, ins.operands)
    guarded = Instruction.build("st.global.u32", [Addr(Reg("%rd1"), -8), Reg("%r1")], guard="!%p2")
    assert guarded.render() == "@!%p2 st.global.u32\t[%rd1+-8], %r1;"
    assert Instruction(guarded.render()).operands == guarded.operands


def _materialised_emit(text: str) -> str:
    module = parse(text)
    for f in module.functions:
        f.body  # build the nodes: emit then prints them instead of copying the scanned text
        assert f.scan is None
    return emit(module)


@pytest.mark.parametrize("name,flags", ALL_KERNELS, ids=lambda v: v if isinstance(v, str) else " ".join(v) or "default")
def test_nodes_built_from_the_scan_emit_the_file_exactly(nvcc_ptx, name, flags):
    text = nvcc_ptx(name, *flags).read_text()
    module = parse(text)
    assert all(f.scan is not None for f in module.functions if f.has_body), "nvcc bodies take the fast scan"
    assert _materialised_emit(text) == text


def test_kitchen_sink_nodes_emit_exactly_and_both_paths_agree():
    from rr.ptx import linearise
    from rr.ptx.parser import _Parser

    text = KITCHEN_SINK.read_text()
    assert _materialised_emit(text) == text
    # the item-by-item parser (the fallback) builds the same statements as the scan
    for f in parse(text).functions:
        if not f.has_body:
            continue
        p = _Parser(text, "k")
        p.pos = text.index("{", text.index(f.name + "(") if f.name + "(" in text else text.index(f.name)) + 1
        items, tail = p.body(f.name)
        slow = type(f)(f.kind, f.name, f.header, f.params, f.returns, f.directives, lead=f.lead, line=f.line)
        slow.body, slow.tail = items, tail
        assert linearise(slow) == linearise(f)


def test_a_comment_inside_an_instruction_falls_back_to_the_item_parser():
    from rr.ptx import linearise

    text = KITCHEN_SINK.read_text().replace("\tbar.sync \t0;", "\tbar.sync /* ; not the end */ \t0;")
    module = parse(text)
    entry = module.function("cuda_dldn_engine_swin_enc9_kernel")
    assert entry.scan is None  # the scan could not vouch for it
    assert emit(module) == text
    bar = next(s for s in linearise(entry) if s.opcode == "bar.sync")
    assert "not the end" in bar.text


def test_reqntid_tex_surf_declarations_and_sink_operands():
    from rr.ptx import linearise
    from rr.ptx.model import Sink

    text = (
        ".version 8.7\n.target sm_90\n.address_size 64\n"
        ".tex .u64 old_tex;\n.surf .u64 old_surf;\n"
        ".visible .entry k(.param .u64 k_param_0)\n.reqntid 32, 1, 4\n{\n"
        "\t.reg .b32 \t%r<4>;\n\t.reg .pred \t%p<2>;\n"
        "\tmov.u32 \t%r1, %tid.x;\n"
        "\tsetp.lt.u32 \t%p1|_, %r1, 8;\n"
        "\tshfl.sync.bfly.b32 \t%r2|%p1, %r1, 1, 31, -1;\n"
        "\tret;\n}\n"
    )
    m = parse(text)
    assert emit(m) == text
    assert [i.kind for i in m.items][3:5] == ["tex", "surf"]
    k = m.function("k")
    assert k.directives == {"reqntid": (32, 1, 4)}
    setp = next(s for s in linearise(k) if s.opcode.startswith("setp"))
    assert setp.defs == ("%p1",) and setp.uses == ("%r1",)
    assert list(k.instructions())[1].operands[0] == Pair(Reg("%p1"), Sink())


@pytest.mark.parametrize("blocks", [0, 1, 2, 3, 6, 7, 8, 40])
def test_a_body_with_many_line_initial_scope_braces_is_scanned_whole_and_stops_at_its_own_end(blocks):
    """cuda_fp16's inline asm closes its scope blocks with a '}' at the start of a line, as the
    function itself closes; the scan reads such lines in growing batches, and wherever the
    function's '}' falls in a batch, the next function is left to the parser."""
    from rr.ptx import linearise

    def asm(i):  # a scope block as cuda_fp16 writes it: the closing brace starts its line
        return ("\t// begin inline asm\n\t{\n\t.reg .b16 %lo, %hi;\n"
                f"\tmov.b32 {{%lo, %hi}}, %r{i};\n\tmov.b32 %r{i + 1}, {{%hi, %lo}};\n}}\n\t// end inline asm\n")

    # and one block whose inner block closes at the start of a line while the outer one is open
    nested = "\t{\n\t{\n\tmov.u32 \t%r60, 1;\n}\n\tmov.u32 \t%r61, 2;\n}\n"
    body = "".join(asm(i) for i in range(blocks)) + nested
    first = (".visible .entry first(\n\t.param .u64 p\n)\n{\n\t.reg .b32 \t%r<64>;\n\n"
             "\tmov.u32 \t%r0, 7;\n" + body + "\tret;\n\n}\n")
    second = "\t// .globl\tsecond\n.visible .entry second()\n{\n\t.reg .b32 \t%r<4>;\n\n\tmov.u32 \t%r1, 2;\n\tret;\n\n}\n"
    text = ".version 8.7\n.target sm_90\n.address_size 64\n\n" + first + second
    module = parse(text)
    f, g = module.function("first"), module.function("second")
    assert f.scan is not None and g.scan is not None
    assert emit(module) == text
    rows = linearise(f)
    assert len(rows) == 4 + 2 * blocks and rows[-1].opcode == "ret"
    assert sum(r.scope > 0 for r in rows) == 2 + 2 * blocks
    assert [r.opcode for r in linearise(g)] == ["mov.u32", "ret"]
    assert _materialised_emit(text) == text


# --------------------------------------------------------------------------------------------------
# Line ends, prototypes without ';', symbol+offset operands, modules without functions, deep nesting
# --------------------------------------------------------------------------------------------------


def _rr(*args):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "rr.cli", *map(str, args)], capture_output=True, text=True)


def with_line_ends(text: str, end: str, every: int = 1) -> str:
    """`text` with every `every`-th line ended by `end` — but a `//` comment runs to the next LF
    for ptxas, CR or not, so lines with one keep their LF."""
    *lines, last = text.split("\n")
    return "".join(l + ("\n" if "//" in l or i % every else end) for i, l in enumerate(lines)) + last


@pytest.mark.parametrize("end", ["\r\n", "\r"], ids=["crlf", "lone-cr"])
def test_files_with_crlf_or_lone_cr_round_trip_byte_for_byte_through_parse_file_and_the_cli(tmp_path, end):
    path = tmp_path / "k.ptx"
    data = with_line_ends(KITCHEN_SINK.read_text(), end).encode()
    path.write_bytes(data)
    module = parse_file(path)
    assert emit(module).encode() == data  # no newline translation on the way in
    assert [f.name for f in module.entries] == ["cuda_dldn_engine_swin_enc9_kernel"]
    if PTXAS is not None:
        assert run_ptxas(path).returncode == 0
    r = _rr("roundtrip", path)
    assert r.returncode == 0 and "round trip exact" in r.stdout, r.stdout + r.stderr
    assert f"({len(data)} bytes," in r.stdout  # the file's bytes, not a newline-translated text


def test_crlf_is_one_line_end_and_a_lone_cr_is_none_as_for_ptxas(tmp_path):
    from rr.ptx import linearise

    entry = "cuda_dldn_engine_swin_enc9_kernel"
    lf = KITCHEN_SINK.read_text()
    rows = linearise(parse(lf).function(entry))
    crlf = linearise(parse(lf.replace("\n", "\r\n")).function(entry))
    assert [(s.stmt, s.line, s.last_line) for s in crlf] == [(s.stmt, s.line, s.last_line) for s in rows]
    # A lone CR is blank space to ptxas (it numbers lines by LF), so here too: CRs put at the ends of
    # some lines leave every statement on the line it had, and ptxas accepts the file.
    mixed = with_line_ends(lf, "\r", every=3)
    lone = linearise(parse(mixed).function(entry))
    merged = mixed.split("\n")
    for s in lone:
        assert s.text.split("\r")[0].split("\n")[0].strip() in merged[s.line - 1]
    assert len(lone) == len(rows)
    if PTXAS is not None:
        (tmp_path / "m.ptx").write_bytes(mixed.encode())
        assert run_ptxas(tmp_path / "m.ptx").returncode == 0


def test_module_directives_ended_by_a_lone_cr_are_read_apart():
    text = ".version 8.7\r.target sm_90\r.address_size 64\r\r.visible .entry k()\r{\r\tret;\r}\r"
    m = parse(text)
    assert (m.version, m.target) == ("8.7", "sm_90")
    assert [f.name for f in m.entries] == ["k"] and emit(m) == text


_PROTOTYPE_THEN_ENTRY = (
    ".version 8.0\n.target sm_90\n.address_size 64\n\n"
    ".extern .func (.param .b32 r) f (.param .b32 a)\n"
    ".visible .entry k(.param .u64 p)\n{\n\t.reg .b32 %r<3>;\n\tmov.u32 %r1, 1;\n\tret;\n}\n"
)


def test_a_prototype_without_semicolon_ends_where_the_next_entry_begins_as_ptxas_reads_it(tmp_path):
    m = parse(_PROTOTYPE_THEN_ENTRY)
    assert emit(m) == _PROTOTYPE_THEN_ENTRY
    f, k = m.functions
    assert (f.name, f.has_body, [p.name for p in f.params], [p.name for p in f.returns]) == ("f", False, ["a"], ["r"])
    assert (k.name, k.kind, [p.name for p in k.params]) == ("k", "entry", ["p"])
    assert [s.opcode for s in __import__("rr.ptx", fromlist=["linearise"]).linearise(k)] == ["mov.u32", "ret"]
    # a prototype without ';' before a declaration, and one without parameters before the entry
    text = _PROTOTYPE_THEN_ENTRY.replace(".visible", ".global .u32 g;\n.func h\n.visible")
    assert [(f.name, f.has_body) for f in parse(text).functions] == [("f", False), ("h", False), ("k", True)]
    assert emit(parse(text)) == text
    if PTXAS is not None:
        (tmp_path / "p.ptx").write_text(_PROTOTYPE_THEN_ENTRY)
        assert run_ptxas(tmp_path / "p.ptx").returncode == 0


_OFFSETS = (
    ".version 8.0\n.target sm_90\n.address_size 64\n\n"
    ".global .align 4 .b8 arr[64];\n.global .u64 ptrs[2] = {arr, arr+16};\n.global .u64 gp = generic(arr)+8;\n\n"
    ".visible .entry k(.param .u64 p)\n{\n\t.reg .b32 %r<4>;\n\t.reg .b64 %rd<5>;\n\t.reg .b64 temp;\n"
    "\tmov.u64 %rd1, arr+16;\n\tcvta.global.u64 %rd2, arr+4;\n\tmov.u64 %rd3, arr + -4;\n"
    "\tmov.u64 %rd4, arr+(2*8);\n\tld.global.u64 temp, [%rd1];\n\tst.global.u64 [%rd2], temp+1;\n\tret;\n}\n"
)


def test_symbol_and_register_plus_constant_operands_outside_brackets(tmp_path):
    from rr.ptx import linearise
    from rr.ptx.statements import operands
    from rr.ptx.model import Offset

    m = parse(_OFFSETS)
    assert emit(m) == _OFFSETS
    rows = {s.text.split()[0] + str(s.stmt): s for s in linearise(m.function("k"))}
    ops = {key: operands(s) for key, s in rows.items()}
    assert ops["mov.u641"][1] == Offset(Sym("arr"), 16)
    assert ops["cvta.global.u642"][1] == Offset(Sym("arr"), 4)
    assert ops["mov.u643"][1] == Offset(Sym("arr"), -4)
    assert ops["mov.u644"][1] == Offset(Sym("arr"), 16)
    assert ops["st.global.u646"][1] == Offset(Reg("temp"), 1)  # a register plus a constant (ptxas: its value + 1)
    assert rows["st.global.u646"].uses == ("%rd2", "temp")
    assert "arr+16" in m.items[4].text  # the initialiser is kept as written
    if PTXAS is not None:
        (tmp_path / "o.ptx").write_text(_OFFSETS)
        assert run_ptxas(tmp_path / "o.ptx").returncode == 0


def test_a_module_without_functions_lists_no_entries_and_exits_0(tmp_path):
    path = tmp_path / "decls.ptx"
    path.write_text(".version 8.0\n.target sm_90\n.address_size 64\n\n.global .u32 counter;\n"
                    ".extern .func (.param .b32 r) helper (.param .b32 a);\n")
    r = _rr("entries", path)
    assert r.returncode == 0 and "no entries" in r.stdout and not r.stderr
    assert _rr("roundtrip", path).returncode == 0


def _nested(depth: int) -> str:
    body = "\t{\n" * depth + "\t// mov.u32 %r1, 1;\n\tmov.u32 %r1, 2;\n" + "\t}\n" * depth
    return (".version 8.0\n.target sm_90\n.address_size 64\n\n.visible .entry k()\n{\n\t.reg .b32 %r<2>;\n"
            + body + "\tret;\n}\n")


def test_five_thousand_nested_blocks_parse_emit_and_linearise_without_recursion(tmp_path):
    from rr.ptx import linearise

    text = _nested(5000)
    m = parse(text)
    assert emit(m) == text
    assert _materialised_emit(text) == text  # the node tree, as splicing emits it
    rows = linearise(parse(text).function("k"))
    assert [(s.opcode, s.scope) for s in rows] == [("mov.u32", 5000), ("ret", 0)]
    path = tmp_path / "deep.ptx"
    path.write_text(text)
    r = _rr("roundtrip", path)
    assert r.returncode == 0 and "round trip exact" in r.stdout, r.stderr[-500:]


def test_operands_nested_deeper_than_ptx_allows_are_parse_errors_and_deep_expressions_evaluate():
    from rr.ptx import ParseError
    from rr.ptx.operands import eval_constant, parse_instruction

    for deep in ("{" * 5000 + "%r1" + "}" * 5000, "[" * 5000 + "%rd1" + "]" * 5000):
        with pytest.raises(ParseError):
            parse_instruction(f"mov.b32 %r1, {deep};")
    assert eval_constant("(" * 5000 + "7" + ")" * 5000) == 7
    assert eval_constant("+".join(["1"] * 5000)) == 5000
    assert eval_constant("-" * 5001 + "3") == -3
    assert eval_constant("2+3*4<<1|1") == 29 and eval_constant("-7/2") == -3 and eval_constant("-7%2") == -1
    assert parse_instruction("add.u32 %r1, %r2, " + "(" * 3000 + "4*4" + ")" * 3000 + ";")[2][2].value == 16
