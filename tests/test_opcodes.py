"""One opcode table (rr/ptx/opcodes.py, issue 35): every instruction rr meets is in it, an opcode
it does not have is refused by the parser with its name and line, each opcode is parsed once into
a typed value that linearisation, the forms, the CPU interpreter and the analyses read, and no
module of rr parses an opcode's text for itself."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rr.ptx import ParseError, linearise, parse
from rr.ptx.opcodes import TABLE, Defs, Kind, by_family, parse_opcode

TESTS = Path(__file__).parent
RR = TESTS.parent / "rr"
KERNELS = sorted(p.relative_to(TESTS / "cuda").with_suffix("").as_posix()
                 for p in (TESTS / "cuda").rglob("*.cu"))
HEAD = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k(\n\t.param .u64 k_param_0\n)\n{\n"


def opcodes(text: str) -> set[str]:
    return {ins.opcode for f in parse(text).functions if f.has_body for ins in f.instructions()}


def unknown(found: set[str]) -> list[str]:
    return sorted(op for op in found if not parse_opcode(op).known)


def test_the_table_knows_every_opcode_of_the_synthetic_engine():
    from rr.corpus.sample import sample_ptx
    from rr.synth.family import NAMES
    from rr.synth.swin import build_layer

    found = set().union(*(opcodes(build_layer(name)) for name in NAMES), opcodes(sample_ptx()))
    assert len(found) > 50 and not unknown(found)
    assert {"mma", "movmatrix", "shfl.sync", "tex", "sust", "cvt", "ld", "st"} <= {parse_opcode(o).family.name
                                                                                for o in found}


def test_the_table_knows_every_opcode_of_the_kitchen_sink_and_the_test_ptx():
    for path in [TESTS / "data" / "kitchen_sink.ptx", *sorted((TESTS / "ptx").glob("*.ptx"))]:
        found = opcodes(path.read_text())
        assert found and not unknown(found), path.name


@pytest.mark.parametrize("kernel", KERNELS)
def test_the_table_knows_every_opcode_nvcc_writes_for_the_test_kernels(nvcc_ptx, kernel):
    arch = "sm_90a" if kernel in ("wgmma",) else "sm_90"  # wgmma is sm_90a's
    found = opcodes(nvcc_ptx(kernel, arch=arch).read_text())
    assert found and not unknown(found)


# -- the parser refuses what the table does not have ------------------------------------------------

@pytest.mark.parametrize("body,line", [
    # NVVM's layout: the body scan's fast path sees the instruction
    ("\t.reg .b32 \t%r<3>;\n\tmov.u32 \t%r1, 7;\n\tfrobnicate.u32 \t%r2, %r1;\n\tret;\n", 10),
    # a comment inside an instruction: the item-by-item parser reads the body
    ("\t.reg .b32 \t%r<3>;\n\tmov.u32 /* seven */ \t%r1, 7;\n\tfrobnicate.u32 \t%r2, %r1;\n\tret;\n", 10),
    # an operand only the typed parser reads (a constant expression)
    ("\t.reg .b32 \t%r<3>;\n\tmov.u32 \t%r1, 7;\n\n\tfrobnicate.u32 \t%r2, (1+2);\n\tret;\n", 11),
], ids=["scanned", "item-by-item", "typed-operands"])
def test_an_opcode_the_table_does_not_have_is_a_parse_error_naming_it_and_its_line(body, line):
    with pytest.raises(ParseError) as e:
        parse(HEAD + body + "}\n", source="k.ptx")
    assert e.value.line == line and e.value.source == "k.ptx"
    assert e.value.message == "unknown instruction 'frobnicate.u32': PTX has no instruction 'frobnicate'"


def test_a_sub_instruction_the_table_does_not_have_is_refused_by_its_family():
    text = HEAD + "\t.reg .b32 \t%r<3>;\n\twmma.frobnicate.sync \t%r1, %r2;\n\tret;\n}\n"
    with pytest.raises(ParseError, match="PTX has no instruction 'wmma.frobnicate'") as e:
        parse(text)
    assert e.value.line == 9


def test_rr_refuses_a_file_with_an_unknown_instruction_as_a_user_error(tmp_path, capsys):
    from rr.cli.main import main

    (tmp_path / "k.ptx").write_text(HEAD + "\t.reg .b32 \t%r<3>;\n\tfrobnicate.u32 \t%r2, %r1;\n\tret;\n}\n")
    out = tmp_path / "s.parquet"
    assert main(["linearise", str(tmp_path / "k.ptx"), "--entry", "k", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"rr: error: {tmp_path / 'k.ptx'}:9:2: unknown instruction 'frobnicate.u32'")
    assert "Traceback" not in err and not out.exists()


def test_without_validation_an_unknown_opcode_is_read_with_the_destination_first_rule():
    s = linearise(parse(HEAD + "\tfrobnicate.u32 \t%r2, %r1;\n\tret;\n}\n", validate=False).function("k"))[0]
    assert not s.code.known and (s.defs, s.uses) == (("%r2",), ("%r1",))


# -- one typed value per opcode -----------------------------------------------------------------------

def test_an_opcode_is_parsed_into_its_family_modifiers_and_typed_fields():
    mma = parse_opcode("mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e5m2.f16")
    assert (mma.family.name, mma.family.kind, mma.shape, mma.types) == (
        "mma", Kind.TENSOR_CORE, (16, 8, 32), ("f16", "e4m3", "e5m2", "f16"))
    assert mma.with_types("f32", "e4m3", "e5m2", "f32") == "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32"
    ld = parse_opcode("ld.global.nc.v4.u32")
    assert (ld.base, ld.mods, ld.space, ld.vector, ld.type, ld.bits, ld.family.kind) == (
        "ld", ("global", "nc", "v4", "u32"), "global", 4, "u32", 32, Kind.MEMORY)
    copy = parse_opcode("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes")
    assert (copy.spaces, copy.space, copy.family.kind) == (("shared", "global"), "shared", Kind.ASYNC_COPY)
    cvt = parse_opcode("cvt.rn.satfinite.e4m3x2.f16x2")
    assert (cvt.rounding, cvt.types, cvt.type) == ("rn", ("e4m3x2", "f16x2"), "f16x2")
    setp = parse_opcode("setp.ne.and.b32")
    assert (setp.family.name, setp.compare, setp.type) == ("setp.bool", "ne", "b32")
    assert parse_opcode("shfl.sync.bfly.b32").family.name == "shfl.sync"
    assert parse_opcode("mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.f32.e4m3.e4m3.f32").family.name \
        == "mma.sp"
    assert parse_opcode("ld.param.u64") is parse_opcode("ld.param.u64")  # parsed once


@pytest.mark.parametrize("line,defs,uses", [
    ("st.global.u32 \t[%rd1], %r1;", (), ("%rd1", "%r1")),
    ("red.global.add.u32 \t[%rd1], %r1;", (), ("%rd1", "%r1")),
    ("bar.sync \t0;", (), ()),
    ("setp.lt.u32 \t%p1|%p2, %r1, %r2;", ("%p1", "%p2"), ("%r1", "%r2")),
    ("bar.red.popc.u32 \t%r3, 0, %p1;", ("%r3",), ("%p1",)),  # the one barrier that writes a register
    ("mov.b64 \t{%r1, %r2}, %rd1;", ("%r1", "%r2"), ("%rd1",)),
    ("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 \t{%f1, %f2, %f3, %f4}, %rd1, %rd2, 1, 1, 1, 0, 0;",
     ("%f1", "%f2", "%f3", "%f4"), ("%f1", "%f2", "%f3", "%f4", "%rd1", "%rd2")),  # reads its accumulator
])
def test_linearisation_defines_and_uses_by_the_familys_rule(line, defs, uses):
    regs = "\t.reg .b32 \t%r<4>;\n\t.reg .b64 \t%rd<3>;\n\t.reg .pred \t%p<3>;\n\t.reg .f32 \t%f<5>;\n"
    s = linearise(parse(HEAD + regs + "\t" + line + "\n\tret;\n}\n").function("k"))[0]
    assert (s.defs, s.uses) == (defs, uses)


def test_every_statement_carries_its_opcode_parsed_once_per_opcode():
    from rr.synth.enc2 import build_enc2

    rows = linearise(parse(build_enc2()).entries[0])
    assert all(s.code is parse_opcode(s.opcode) for s in rows)
    assert len({id(s.code) for s in rows}) == len({s.opcode for s in rows}) < len(rows) // 50


def test_the_families_a_dispatch_names_are_checked_against_the_table():
    from rr.run.cpu.semantics import _HANDLERS

    assert set(_HANDLERS) <= TABLE.keys() and "mma" in _HANDLERS
    with pytest.raises(KeyError, match="not families of the opcode table: frobnicate"):
        by_family({"add": 1, "frobnicate": 2})


def test_the_table_says_which_families_write_no_register():
    silent = {name for name, f in TABLE.items() if f.defs is Defs.NONE}
    assert {"st", "red", "bar", "barrier", "bra", "ret", "exit", "membar", "fence", "sust", "cp"} <= silent
    assert not {"ld", "setp", "mov", "atom", "bar.red", "shfl.sync", "mma", "call"} & silent
    assert [name for name, f in TABLE.items() if f.defs is Defs.ACCUMULATES] == ["wgmma.mma_async"]


# -- nowhere else ------------------------------------------------------------------------------------

# an opcode's text taken apart (split, sliced, searched, tested for a prefix or a substring) anywhere
# but in the opcode table: `opcode.split(".")`, `s.opcode.startswith("mma.")`, `".hi" in op`, …
_PARSING = re.compile(
    r"opcode\s*\.\s*(?:split|rsplit|partition|rpartition|startswith|endswith|removeprefix|removesuffix|count"
    r"|find|rfind|index)\s*\("
    r"|opcode\s*\["
    r"|[\"'][^\"']*[\"']\s+(?:not\s+)?in\s+[\w.]*opcode\b"
    r"|\.(?:search|match|fullmatch|findall|sub)\(\s*[\w.]*opcode\b"
)


def test_no_module_but_the_opcode_table_parses_an_opcodes_text():
    sites = [f"{path.relative_to(RR.parent)}:{n}: {line.strip()}"
             for path in sorted(RR.rglob("*.py")) if path != RR / "ptx" / "opcodes.py"
             for n, line in enumerate(path.read_text().splitlines(), start=1) if _PARSING.search(line)]
    assert not sites, "opcodes parsed outside rr/ptx/opcodes.py:\n" + "\n".join(sites)


def test_the_opcode_grep_finds_the_ways_an_opcode_was_taken_apart():
    for line in ('parts = op.opcode.split(".")', 'base = s.opcode.split(".", 1)[0]',
                 'if s.opcode.startswith("mma."):', 'kind = opcode.rsplit(".", 1)[-1]',
                 'if ".shared" in s.opcode:', "m = _SETP.match(setp.opcode)", 'x = opcode.partition(".")[0]',
                 "tail = opcode[4:]"):
        assert _PARSING.search(line), line
    for line in ("if s.code.base == 'mma':", "m = _FOUR_VECTORS.fullmatch(text, len(opcode))",
                 'if opcode == "prmt.b32":', "text.startswith(opcode)"):
        assert not _PARSING.search(line), line
