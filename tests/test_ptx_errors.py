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
