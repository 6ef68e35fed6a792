"""Operand sources between stages are values, not text: each phase's sources, base pointers and the
weight image are structured in the descriptor (docs/formats.md, Descriptions), the strings people
read are derived from them by one function and nothing in rr reads a source back from its text;
and `rr splice --descriptor` cuts the phase its cell was planned from, refusing a descriptor of
another entry, another module (or an older version of this one) or another numbering, as the
workflow's splice rule declares it. enc2's expected values are the reference document's
(rrswin_enc2_epilogues.md: §3's offsets, E6–E8's packs and transposes), not the code's."""

from __future__ import annotations

import ast
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from rr.describe.sources import source_text, sources_text
from rr.describe.spec import spec_json
from rr.ptx import parse, parse_file
from rr.synth.enc2 import build_enc2
from rr.synth.layout import ENTRY
from test_workflow import _copy_workflow, _snakemake

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "rr" / "data" / "sample_swin.ptx"
SAMPLE_ENTRY = "cuda_dldn_engine_swin_sample_kernel"
W = {"space": "param", "offset": 40}  # the weight image: `ld.param.u64 %rd2, [param_0+40]` (s8)


@pytest.fixture(scope="module")
def enc2() -> dict:
    return spec_json(parse(build_enc2(), "enc2.ptx").function(ENTRY))


def phase(spec: dict, p: int) -> dict:
    return spec["phases"][p - 1]


def tiles(first: int, count: int) -> list[int]:
    return [first + 512 * i for i in range(count)]


def test_enc2_weight_loads_are_values_naming_the_weight_image_and_their_offsets(enc2):
    assert enc2["weight_image"] == W and enc2["weight_extent"] == 212256
    for p, first in {2: 3264, 3: 1216, 4: 4288, 5: 2240, 6: 5312}.items():  # §3, E1–E5
        assert phase(enc2, p)["sources"]["B"] == [{"kind": "weight", "base": W}]
        b = phase(enc2, p)["operands"]["B"]
        assert (b["base"], b["offsets"]) == (W, tiles(first, 2))
    assert phase(enc2, 38)["sources"]["B"] == [{"kind": "weight", "base": W}]
    assert phase(enc2, 38)["operands"]["B"]["offsets"] == [210688, 211200, 211712]
    # E6(a): phase 7's C seeds are the score bias, loaded through W like weights
    assert phase(enc2, 7)["sources"]["C"] == [{"kind": "weight", "base": W}]
    assert phase(enc2, 7)["operands"]["C"]["offsets"] == tiles(6336, 24)


def test_enc2_table_seeds_are_values_with_the_tables_offsets(enc2):
    bias = [89664, 96064, 102272, 108480, 114688, 120896, 127104, 133312, 139520, 145728, 151936, 158144]
    for i, first in enumerate(bias):  # the band phases' per-column tables
        c = phase(enc2, 13 + 2 * i)
        assert c["sources"]["C"] == [{"kind": "table", "base": W}]
        assert (c["operands"]["C"]["base"], c["operands"]["C"]["offsets"]) == (W, [first + 16 * j for j in range(4)])
    assert phase(enc2, 37)["sources"]["C"] == [{"kind": "table", "base": W}]
    assert phase(enc2, 37)["operands"]["C"]["offsets"] == [210432, 210448, 210464, 210480]
    assert phase(enc2, 38)["operands"]["C"]["offsets"] == [212224, 212240]


def test_enc2_packs_transposes_and_chains_of_d_are_values_naming_their_phase(enc2):
    # E6: phase 7's A and B are packs of phase 5's D; E7: phase 8's B the transposed V (phase 6's D)
    assert phase(enc2, 7)["sources"]["A"] == phase(enc2, 7)["sources"]["B"] == [{"kind": "pack", "phase": 5}]
    assert phase(enc2, 8)["sources"]["B"] == [{"kind": "transpose", "phase": 6}]
    assert phase(enc2, 8)["sources"]["A"][0] == {"kind": "computed", "epilogue": 7}  # E7's softmax packs
    for p in range(9, 13):  # E8: phase 8's D packed, staged through shared, read as A
        assert phase(enc2, p)["sources"]["A"] == [{"kind": "shared", "stored": [{"kind": "pack", "phase": 8}]}]
    assert phase(enc2, 37)["sources"]["A"] == [{"kind": "shared", "stored": [{"kind": "pack", "phase": 36}]}]
    assert phase(enc2, 38)["sources"]["A"] == [{"kind": "pack", "phase": 36}]
    for p in range(10, 13):
        assert phase(enc2, p)["sources"]["C"] == [{"kind": "D", "phase": p - 1}]
    for p in (1, 2, 8):
        assert phase(enc2, p)["sources"]["C"] == [{"kind": "zero"}]


def test_the_strings_for_people_are_derived_from_the_values(enc2):
    for p in enc2["phases"]:
        for role in "ABC":
            assert p[f"{role.lower()}_source"] == sources_text(p["sources"][role])
    assert phase(enc2, 9)["a_source"] == "shared(pack(D of phase 8))"
    assert phase(enc2, 13)["c_source"] == "table(param+40)"
    assert source_text({"kind": "merge", "of": [{"kind": "table", "base": {"space": "param", "offset": 16}},
                                               {"kind": "zero"}]}) == "merge(table(param+16) | zero)"
    assert source_text({"kind": "weight", "base": {"space": "shared", "symbol": "sm_a"}}) == "weight(shared:sm_a)"
    assert source_text({"kind": "shared", "descriptor_of": ["sa", "sb"]}) == "shared(descriptor of sa, sb)"
    assert source_text({"kind": "computed", "epilogue": None}) == "computed(?)"


def test_a_merge_through_branches_is_a_value_of_its_alternatives(nvcc_ptx):
    # tests/cuda/nvvm/branches.cu: `acc = use_bias ? bias[lane & 3] : 0`
    spec = spec_json(parse_file(nvcc_ptx("nvvm/branches")).function("nvvm_branches"))
    assert spec["phases"][0]["sources"]["C"] == [
        {"kind": "merge", "of": [{"kind": "table", "base": {"space": "param", "offset": 16}}, {"kind": "zero"}]}]


# the display's own words: where one of these is spelt in code outside rr.describe.sources, a
# source or base pointer is being built or read as text
DISPLAY = ("param+", "D of phase", "descriptor of ")


def _code_strings(tree: ast.AST):
    """(line, text) of every string literal in code (f-strings' literal parts included), not docstrings."""
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node.lineno, node.value


def test_no_module_of_rr_builds_or_reads_a_source_as_text():
    sites = []
    for f in sorted((ROOT / "rr").rglob("*.py")):
        if f == ROOT / "rr" / "describe" / "sources.py":
            continue
        for line, text in _code_strings(ast.parse(f.read_text(), str(f))):
            sites += [f"{f.relative_to(ROOT)}:{line}: {text!r}" for word in DISPLAY if word in text]
    assert not sites, "source text spelt outside rr.describe.sources:\n" + "\n".join(sites)


def _rr(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "rr", *map(str, args)], capture_output=True, text=True, cwd=cwd)


def _describe(module: Path, out: Path, *flags) -> Path:
    r = _rr("describe", module, "--entry", SAMPLE_ENTRY, *flags, "-o", out)
    assert r.returncode == 0, r.stderr
    return out / "descriptor.json"


def _splice(module: Path, descriptor: Path, out: Path, *flags):
    return _rr("splice", module, "--entry", SAMPLE_ENTRY, "--recipe", "isolate", "--phase", "2",
               "--descriptor", descriptor, *flags, "-o", out)


def test_a_splice_cuts_the_phase_as_its_descriptor_describes_it(tmp_path):
    descriptor = _describe(SAMPLE, tmp_path / "d")
    assert json.loads(descriptor.read_text())["module_sha1"] == hashlib.sha1(SAMPLE.read_bytes()).hexdigest()
    given, again = tmp_path / "given.ptx", tmp_path / "again.ptx"
    assert _splice(SAMPLE, descriptor, given).returncode == 0
    r = _rr("splice", SAMPLE, "--entry", SAMPLE_ENTRY, "--recipe", "isolate", "--phase", "2", "-o", again)
    assert r.returncode == 0, r.stderr
    assert given.read_bytes() == again.read_bytes()
    # the cut is the descriptor's: one that says phase 2 ends 8 mma earlier gets that cut
    spec = json.loads(descriptor.read_text())
    last = spec["phases"][1]["last_stmt"]
    spec["phases"][1]["last_stmt"] = last - 8
    descriptor.write_text(json.dumps(spec))
    shorter = tmp_path / "shorter.ptx"
    assert _splice(SAMPLE, descriptor, shorter).returncode == 0
    cut = json.loads(Path(f"{shorter}.splice.json").read_text())["cut"]
    assert cut["last_stmt"] == last - 8 and cut["statements"] == 8


def _refused(r, descriptor: Path, out: Path, why: str) -> None:
    assert r.returncode == 2 and r.stderr.startswith(f"rr: error: {descriptor}: "), r.stderr
    assert why in r.stderr and "Traceback" not in r.stderr
    assert not out.exists() and not Path(f"{out}.splice.json").exists()


def test_a_descriptor_of_an_older_version_of_the_module_is_refused_naming_it(tmp_path):
    module = tmp_path / "sample.ptx"
    module.write_text(SAMPLE.read_text())
    descriptor = _describe(module, tmp_path / "d")
    module.write_text(SAMPLE.read_text() + "// edited since it was described\n")
    out = tmp_path / "s.ptx"
    _refused(_splice(module, descriptor, out, "--record"), descriptor, out,
             f"describes another module than {module}")


def test_a_descriptor_of_another_entry_or_numbering_or_without_a_module_hash_is_refused(tmp_path):
    other = tmp_path / "other.ptx"  # another kernel: the sample's entry under another name
    other.write_text(SAMPLE.read_text().replace(SAMPLE_ENTRY, "other_kernel"))
    r = _rr("describe", other, "--entry", "other_kernel", "-o", tmp_path / "o")
    assert r.returncode == 0, r.stderr
    foreign, out = tmp_path / "o" / "descriptor.json", tmp_path / "s.ptx"
    _refused(_splice(SAMPLE, foreign, out), foreign, out, f"describes entry 'other_kernel', not {SAMPLE_ENTRY!r}")
    gemm = _describe(SAMPLE, tmp_path / "g", "--grouping", "gemm")
    _refused(_splice(SAMPLE, gemm, out), gemm, out, "numbers the phases by grouping 'gemm', not 'run'")
    old = tmp_path / "old.json"  # as an rr that wrote no module hash wrote it
    old.write_text(json.dumps({k: v for k, v in json.loads(_describe(SAMPLE, tmp_path / "d").read_text()).items()
                               if k != "module_sha1"}))
    _refused(_splice(SAMPLE, old, out), old, out, "its module_sha1 is missing")


def test_the_workflows_splice_rule_declares_the_descriptor_and_splices_by_it(tmp_path):
    work = _copy_workflow(tmp_path / "w")
    r = _snakemake(work, "-n", "-p", "results/sample/phase2/isolate.ptx")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    job = r.stdout[r.stdout.index("rule splice:"):]
    job = job[:job.index("\n\n")]
    inputs = next(line for line in job.splitlines() if line.strip().startswith("input:"))
    assert "results/sample/descriptor.json" in inputs, job
    assert "--descriptor results/sample/descriptor.json" in r.stdout, r.stdout[-2000:]
