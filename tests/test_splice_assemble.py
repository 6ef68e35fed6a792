"""Assembling a splice keeps every byte outside the cut, declares the new registers, round-trips,
and ptxas accepts the result; a cut that would split a scope block is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import PTXAS, run_ptxas
from rr.describe import find_phases
from rr.ptx import linearise, parse
from rr.splice.assemble import SpliceError, assemble

SAMPLE = (Path(__file__).resolve().parents[1] / "rr" / "data" / "sample_swin.ptx").read_text()
ENTRY = "cuda_dldn_engine_swin_sample_kernel"


def _phase(n):
    return find_phases(linearise(parse(SAMPLE).function(ENTRY)))[n - 1]


def test_replacing_a_phase_changes_only_the_cut(tmp_path):
    p = _phase(2)
    stmts = linearise(parse(SAMPLE).function(ENTRY))
    cut = stmts[p.first_stmt - 1:p.last_stmt]
    # the same computation through fresh registers: copy each D out of a new register
    replacement, declared = [], [f".reg .b32 \t%rr<{2 * len(cut)}>;"]
    moves = []
    for i, s in enumerate(cut):
        d0, d1 = s.defs
        replacement.append(s.text.replace("{" + f"{d0}, {d1}" + "}", f"{{%rr{2 * i}, %rr{2 * i + 1}}}", 1))
        moves += [f"mov.b32 \t{d0}, %rr{2 * i};", f"mov.b32 \t{d1}, %rr{2 * i + 1};"]
    out = assemble(SAMPLE, ENTRY, p.first_stmt, p.last_stmt, replacement + moves, declared)
    assert out.outside_checked == len(stmts) - p.mma
    assert out.declared == declared
    original_lines, new_lines = SAMPLE.splitlines(), out.text.splitlines()
    cut_first_line, cut_last_line = cut[0].line, cut[-1].last_line
    # before the cut: identical except the one added declaration line
    assert new_lines[:cut_first_line] == (original_lines[:cut_first_line][:_decl_line(original_lines)]
                                          + ["\t" + declared[0]] + original_lines[_decl_line(original_lines):cut_first_line - 1])
    # after the cut: identical
    tail = len(original_lines) - cut_last_line
    assert new_lines[-tail:] == original_lines[-tail:]
    if PTXAS:
        src = tmp_path / "s.ptx"
        src.write_text(out.text)
        r = run_ptxas(src)
        assert r.returncode == 0, r.stderr


def _decl_line(lines):
    return max(i for i, l in enumerate(lines) if l.strip().startswith(".reg")) + 1


def test_a_statement_count_that_does_not_add_up_is_caught():
    # the 17 statements after phase 2 removed: more than its 16-statement cut can account for
    from rr.splice.assemble import check_outside

    p = _phase(2)
    with pytest.raises(SpliceError, match="fewer than the"):
        check_outside(SAMPLE, _drop_statement(SAMPLE), ENTRY, p.first_stmt, p.last_stmt)


def _drop_statement(text):
    stmts = linearise(parse(text).function(ENTRY))
    for s in stmts[-17:]:
        text = text.replace("\t" + s.text + "\n", "", 1)
    return text


def test_outside_text_changes_are_reported_with_the_statement():
    p = _phase(1)
    stmts = linearise(parse(SAMPLE).function(ENTRY))
    changed = SAMPLE.replace(stmts[-2].text, stmts[-2].text.replace("+", "+8+", 1) if "+" in stmts[-2].text else stmts[-2].text + " ", 1)
    from rr.splice.assemble import check_outside

    with pytest.raises(SpliceError, match=rf"statement s{stmts[-2].stmt} .*changed outside the cut"):
        check_outside(SAMPLE, changed, ENTRY, p.first_stmt, p.last_stmt)


def test_a_cut_that_would_split_a_scope_block_is_refused():
    text = (".version 8.7\n.target sm_90\n.address_size 64\n\n.visible .entry k()\n{\n\t.reg .b32 \t%r<4>;\n\n"
            "\tmov.u32 \t%r1, 1;\n\t{\n\tmov.u32 \t%r2, %r1;\n\t}\n\tmov.u32 \t%r3, %r2;\n\tret;\n\n}\n")
    with pytest.raises(SpliceError, match=r"would split a \{ … \} scope block"):
        assemble(text, "k", 1, 2, ["mov.u32 \t%r2, 1;"])
    with pytest.raises(SpliceError, match="outside its 4 statements"):
        assemble(text, "k", 3, 9, ["ret;"])


@pytest.mark.parametrize("recipe", ["regen", "isolate"])
def test_a_crlf_module_keeps_its_line_ends_outside_the_cut(tmp_path, recipe):
    # rr reads PTX without newline translation: a CR LF file splices into a CR LF file — every
    # byte before and after the cut as it was, and the template's own lines end in CR LF too
    import json
    import subprocess
    import sys

    src = tmp_path / "crlf.ptx"
    src.write_bytes(SAMPLE.replace("\n", "\r\n").encode())
    out = tmp_path / "spliced.ptx"
    recipes = Path(__file__).resolve().parents[1] / "config" / "recipes"
    r = subprocess.run([sys.executable, "-m", "rr.cli", "splice", str(src), "--entry", ENTRY, "--recipe",
                        str(recipes / f"{recipe}.yaml"), "--phase", "2", "-o", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    record = json.loads(Path(f"{out}.splice.json").read_text())
    before, after = src.read_bytes(), out.read_bytes()
    stmts = linearise(parse(before.decode()).function(ENTRY))
    first = stmts[record["cut"]["first_stmt"] - 1]
    head = before[:before.index(first.text.encode())]
    tail = before[before.index(stmts[record["cut"]["last_stmt"] - 1].text.encode()):]
    tail = tail[tail.index(b";") + 1:]
    assert after.endswith(tail) and b"\r\n" in tail
    assert after.count(b"\n") == after.count(b"\r\n")
    # before the cut, every CR LF line is kept, in order, with only the template's declarations
    # (or, for isolate, its function) added between them
    kept = iter(after[:len(after) - len(tail)].split(b"\r\n"))
    assert all(any(line == other for other in kept) for line in head.split(b"\r\n")[:-1])
    if PTXAS:
        assert run_ptxas(out).returncode == 0
