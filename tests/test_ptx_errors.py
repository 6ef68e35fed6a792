"""Bad PTX gets a ParseError naming file:line:column and the offending text — never another
exception — and the CLI prints it without a traceback, exits 2 and writes nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rr.ptx import ParseError, emit, parse

DATA = Path(__file__).parent / "data"
SINK = (DATA / "kitchen_sink.ptx").read_text()


def _line_of(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


@pytest.mark.parametrize("bad,needle,message", [
    ("\tadd.s64 \t%rd1, %rd8, 80;", "\tadd.s64 \t%rd1, %rd8 80;", "expected ','"),
    ("\tmov.u32 \t%r9, 0x1F;", "\tmov.u32 \t%r9, 0x1F", "expected"),
    ("\tbar.sync \t0;", "\tbar.sync \t0; #", "unexpected"),
    ("\tmov.u32 \t%r10, -1;", "\tmov.u32 \t%r10, [%r1;", "expected"),
])
def test_operand_errors_name_file_line_and_column(bad, needle, message):
    text = SINK.replace(bad, needle)
    with pytest.raises(ParseError) as e:
        parse(text, source="k.ptx")
    err = e.value
    assert err.source == "k.ptx"
    assert message in err.message
    assert str(err).startswith(f"k.ptx:{err.line}:{err.column}: ")
    # the reported line is where the bad statement is (or, for a lost ';', where it runs on)
    assert err.line >= _line_of(text, needle)
    assert err.line_text in text.splitlines()


def test_unclosed_body_is_reported():
    text = SINK[: SINK.rindex("}\n\t.section")]
    with pytest.raises(ParseError, match="missing '}'"):
        parse(text, source="k.ptx")


def test_unterminated_comment_is_reported_at_its_start():
    text = SINK.replace("\tret;\n\n}\n\t.section", "\t/* never closed\n\tret;\n\n}\n\t.section")
    with pytest.raises(ParseError) as e:
        parse(text)
    assert "unterminated /* comment" in e.value.message
    assert e.value.line == _line_of(text, "/* never closed")
    assert e.value.column == 2


def test_garbage_at_module_level_is_rejected():
    with pytest.raises(ParseError, match="expected a directive at module level"):
        parse(".version 8.7\n.target sm_90\nhello world\n")


# --------------------------------------------------------------------------------------------------
# Mutation: any edit of valid PTX either parses (and then round-trips) or raises ParseError.
# --------------------------------------------------------------------------------------------------

_ALPHABET = st.sampled_from(list("{}[]();,.|!@%_$:+-*/<>\"' \t\n0123456789abcfrxpdLB") + ["//", "/*", "*/"])


@st.composite
def mutated(draw):
    text = SINK
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(text)))
        op = draw(st.sampled_from(["insert", "delete", "replace", "truncate", "duplicate"]))
        if op == "insert":
            text = text[:i] + draw(_ALPHABET) + text[i:]
        elif op == "delete":
            j = i + draw(st.integers(1, 12))
            text = text[:i] + text[j:]
        elif op == "replace":
            text = text[:i] + draw(_ALPHABET) + text[i + 1:]
        elif op == "truncate":
            text = text[:i]
        else:
            j = i + draw(st.integers(1, 80))
            text = text[:j] + text[i:j] + text[j:]
    return text


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_ptx_parses_or_raises_parse_error(text):
    try:
        module = parse(text, source="m.ptx")
    except ParseError as e:
        assert e.source == "m.ptx" and e.message
        return
    assert emit(module) == text


# --------------------------------------------------------------------------------------------------
# The CLI
# --------------------------------------------------------------------------------------------------


def _rr(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "rr.cli", *args], capture_output=True, text=True, cwd=cwd)


def test_cli_reports_parse_errors_without_traceback_and_writes_nothing(tmp_path):
    bad = tmp_path / "bad.ptx"
    bad.write_text(SINK.replace("\tadd.s64 \t%rd1, %rd8, 80;", "\tadd.s64 \t%rd1, %rd8 80;"))
    out = tmp_path / "out.parquet"
    r = _rr("linearise", str(bad), "--entry", "cuda_dldn_engine_swin_enc9_kernel", "-o", str(out))
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert f"{bad}:{_line_of(bad.read_text(), '%rd8 80')}:" in r.stderr
    assert not out.exists() and list(tmp_path.iterdir()) == [bad]


def test_cli_names_the_entries_when_the_entry_is_unknown(tmp_path):
    good = tmp_path / "k.ptx"
    good.write_text(SINK)
    r = _rr("linearise", str(good), "--entry", "nope", "-o", str(tmp_path / "o.parquet"))
    assert r.returncode == 2 and "cuda_dldn_engine_swin_enc9_kernel" in r.stderr
    assert not (tmp_path / "o.parquet").exists()


def test_cli_roundtrip_and_entries(tmp_path):
    good = tmp_path / "k.ptx"
    good.write_text(SINK)
    r = _rr("roundtrip", str(good))
    assert r.returncode == 0 and "round trip exact" in r.stdout
    r = _rr("entries", str(good))
    assert r.returncode == 0
    row = next(l for l in r.stdout.splitlines() if "cuda_dldn_engine_swin_enc9_kernel" in l).split()
    assert row[0] == "entry" and int(row[2]) == 30
    r = _rr("roundtrip", str(tmp_path / "missing.ptx"))
    assert r.returncode == 2 and "no such file" in r.stderr


# --------------------------------------------------------------------------------------------------
# Operand forms (rr.ptx.forms): an instruction of a family the analyses read must have its form,
# at parse time — exactly where ptxas refuses it too.
# --------------------------------------------------------------------------------------------------

_MMA = "\tmma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16\n\t{%r12, %r13},\n\t{%r5, %r6, %r7, %r8},\n\t{%r5, %r6}, {%r9, %r9};"


@pytest.mark.parametrize("good,bad,needle", [
    (_MMA, _MMA.replace(", {%r9, %r9};", ";"), "takes 4 operands"),
    (_MMA, _MMA.replace("{%r5, %r6}, {%r9, %r9};", "{%r5, %r6}, {%r9, %r9}, {%r9, %r9};"), "takes 4 operands"),
    ("\tld.global.nc.f32 \t%f3, [table+4];", "\tld.global.nc.f32 \t[table+4], %f3;", "not a register it can write"),
    ("\tld.global.nc.f32 \t%f3, [table+4];", "\tld.global.nc.f32 \t%f3, %f2;", "not an address"),
    ("\t@%p2 st.shared.u32 \t[staging+16], %r14;", "\t@%p2 st.shared.u32 \t%r14, [staging+16];", "not an address"),
    ("\t@%p2 st.shared.u32 \t[staging+16], %r14;", "\t@%p2 st.shared.u32 \t[staging+16];", "takes 2 to 3 operands"),
    ("\t@!%p1 bra \t$L__BB1_2;", "\t@!%p1 bra \t%r1;", "not a label"),
    ("\t@!%p1 bra \t$L__BB1_2;", "\t@!%p1 bra \t$L__BB1_2, $L__BB1_2;", "takes 1 operand"),
    ("\tmovmatrix.sync.aligned.m8n8.trans.b16 \t%r14, %r13;", "\tmovmatrix.sync.aligned.m8n8.trans.b16 \t%r14;", "takes 2"),
    ("\tshfl.sync.bfly.b32 \t%r11|%p3, %r5, 1, %r9, %r10;", "\tshfl.sync.bfly.b32 \t%r11|%p3, %r5, 1, %r9;", "takes 5"),
    ("\tsetp.lt.u32 \t%p1|%p2, %r3, 2;", "\tsetp.lt.u32 \t%p1|%p2, %r3;", "takes 3"),
    ("\tcvt.rn.f32.f64 \t%f2, %fd1;", "\tcvt.rn.f32.f64 \t%f2;", "takes 2 to 4"),
    ("\tadd.s64 \t%rd6, %rd4, %rd5;", "\tadd.s64 \t%rd6, %rd4;", "takes 3"),
    ("\tadd.s64 \t%rd6, %rd4, %rd5;", "\tadd.s64 \t7, %rd4, %rd5;", "not a register it can write"),
    ("\tmov.u32 \t%r9, 0x1F;", "\tmov.u32 \t%r9, 0x1F, 0x1F;", "takes 2"),
    ("\tmov.u32 \t%r9, 0x1F;", "\tmov.u32 \t%r9, [%rd6];", "not a value"),
])
def test_an_instruction_of_an_analysed_family_with_the_wrong_operands_is_a_parse_error_as_for_ptxas(
        tmp_path, good, bad, needle):
    from conftest import PTXAS, run_ptxas

    assert good in SINK
    text = SINK.replace(good, bad)
    with pytest.raises(ParseError) as e:
        parse(text, source="k.ptx")
    assert needle in e.value.message and e.value.line == _line_of(text, bad.strip().split("\n")[0])
    if PTXAS is not None:
        (tmp_path / "bad.ptx").write_text(text)
        assert run_ptxas(tmp_path / "bad.ptx").returncode != 0, "ptxas accepts it: the form is too strict"


def test_forms_accept_every_instruction_nvcc_writes_for_the_test_kernels(nvcc_ptx):
    # the typed check and the text check of the scan agree, and neither refuses what nvcc writes
    from conftest import ALL_KERNELS
    from rr.ptx.forms import check_operands, check_text
    from rr.ptx.parser import _operand_text

    seen = set()
    for name, flags in ALL_KERNELS:
        for f in parse(nvcc_ptx(name, *flags).read_text()).functions:
            for ins in f.instructions() if f.has_body else ():
                assert check_operands(ins.opcode, ins.operands) is None, ins.text
                assert check_text(*_operand_text(ins.text)) is None, ins.text
                seen.add(ins.code.family.name)
    assert {"mma", "ld", "st", "mov", "cvt", "add", "mad", "shl", "and", "setp", "bra", "shfl.sync",
            "movmatrix", "tex", "sust"} <= seen


@pytest.mark.parametrize("end", ["\r\n", "\r"], ids=["crlf", "lone-cr"])
def test_errors_in_crlf_and_lone_cr_files_name_the_line_ptxas_names_and_show_a_bounded_excerpt(end):
    from test_ptx_roundtrip import with_line_ends

    bad = with_line_ends(SINK.replace("\tadd.s64 \t%rd1, %rd8, 80;", "\tadd.s64 \t%rd1, %rd8 80;"), end)
    with pytest.raises(ParseError) as e:
        parse(bad, source="k.ptx")
    err = e.value
    # lines are counted at LF, as ptxas counts them: lines ended by a lone CR run together
    assert err.line == bad[: bad.index("%rd8 80")].count("\n") + 1
    assert "\r" not in str(err) and "%rd8 80" in err.line_text and len(err.line_text) <= 160
    assert err.line_text[err.caret - 1:].startswith("80")


def test_a_command_that_parses_no_ptx_loads_only_the_front_ends_errors(tmp_path):
    # every command's error handling names ParseError; importing it must not load the parser
    # (0.11 s of each `rr measure` or `rr collect` job of a sweep), while `from rr.ptx import …`
    # still finds every name of the front end
    code = ("import sys; from rr.cli.main import main; code = main(['compare', sys.argv[1], sys.argv[1]]); "
            "print(code, sorted(m for m in sys.modules if m.startswith('rr.ptx')))")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "none")], capture_output=True, text=True)
    assert r.stdout.split(maxsplit=1) == ["2", "['rr.ptx', 'rr.ptx.errors']\n"], r.stdout + r.stderr
    import rr.ptx

    for name in rr.ptx.__all__:
        assert getattr(rr.ptx, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'parser_of_nothing'"):
        rr.ptx.parser_of_nothing  # noqa: B018


def test_the_front_ends_names_are_its_functions_whatever_was_imported_first():
    # a name loaded on first use must not share its name with a submodule of rr.ptx: importing
    # that submodule first (`from rr.ptx.<sub> import …`, as the describe stage does) makes the
    # package's attribute the module, and `from rr.ptx import <name>` then gave the module — a
    # splice run after the describe stage's imports called a module (TypeError)
    import pkgutil

    import rr.ptx

    submodules = sorted(m.name for m in pkgutil.iter_modules(rr.ptx.__path__))
    code = ("import importlib, sys, types; names = sys.argv[1].split(',')\n"
            "for sub in sys.argv[2].split(','): importlib.import_module('rr.ptx.' + sub)\n"
            "import rr.ptx\n"
            "print(sorted(n for n in names if isinstance(getattr(rr.ptx, n), types.ModuleType)))")
    r = subprocess.run([sys.executable, "-c", code, ",".join(rr.ptx.__all__), ",".join(submodules)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "[]\n", f"names of rr.ptx that are modules once its submodules are imported: {r.stdout}"
