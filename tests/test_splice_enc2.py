"""Splicing the synthetic enc2: for sampled phases (a K projection, the P·V GEMM, the patch merge
inside its loop, the last phase) regen and isolate splices are
produced, round-trip, keep every statement outside the cut, and compile with ptxas for sm_90.
`benchmarks/enc2_splices.py` covers all 38 phases on a GPU (docs/benchmarks.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PTXAS, run_ptxas
from rr.ptx import emit, linearise, parse_file
from rr.synth.enc2 import build_enc2
from rr.synth.layout import ENTRY

RECIPES = Path(__file__).resolve().parents[1] / "config" / "recipes"


@pytest.fixture(scope="module")
def enc2(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("enc2") / "enc2.ptx"
    p.write_text(build_enc2())
    return p


@pytest.mark.parametrize("template,phase", [("regen", 1), ("isolate", 8), ("regen", 37), ("isolate", 38)])
def test_enc2_phase_splices_round_trip_keep_the_outside_and_compile(enc2, tmp_path, template, phase):
    out = tmp_path / f"{template}{phase}.ptx"
    r = subprocess.run([sys.executable, "-m", "rr.cli", "splice", str(enc2), "--entry", ENTRY, "--recipe",
                        str(RECIPES / f"{template}.yaml"), "--phase", str(phase), "-o", str(out)],
                       capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    record = json.loads(Path(f"{out}.splice.json").read_text())
    module = parse_file(out)
    assert emit(module) == out.read_text()
    before = linearise(parse_file(enc2).function(ENTRY))
    after = linearise(module.function(ENTRY))
    first, last = record["cut"]["first_stmt"], record["cut"]["last_stmt"]
    n = record["inserted_statements"]
    assert [s.text for s in after[:first - 1]] == [s.text for s in before[:first - 1]]
    assert [s.text for s in after[first - 1 + n:]] == [s.text for s in before[last:]]
    assert record["outside_statements_checked"] == len(before) - (last - first + 1)
    if PTXAS:
        c = run_ptxas(out)
        assert c.returncode == 0, c.stderr
