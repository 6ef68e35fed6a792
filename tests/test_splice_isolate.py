"""The isolate template: a phase moved into a .func and called — outside statements unchanged,
accepted by ptxas, and on a GPU byte-identical in its output to the unspliced kernel."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import PTXAS
from rr.ptx import linearise, parse_file
from rr.corpus.sample import sample_launch

SAMPLE = Path(__file__).resolve().parents[1] / "rr" / "data" / "sample_swin.ptx"
ENTRY = "cuda_dldn_engine_swin_sample_kernel"
RECIPE = Path(__file__).resolve().parents[1] / "config" / "recipes" / "isolate.yaml"


def _rr(*args):
    return subprocess.run([sys.executable, "-m", "rr.cli", *args], capture_output=True, text=True)


@pytest.mark.parametrize("phase", [1, 2])
def test_isolating_a_phase_moves_it_into_a_function(tmp_path, phase):
    out = tmp_path / "s.ptx"
    r = _rr("splice", str(SAMPLE), "--entry", ENTRY, "--recipe", str(RECIPE), "--phase", str(phase), "-o", str(out))
    assert r.returncode == 0, r.stderr
    record = json.loads(Path(str(out) + ".splice.json").read_text())
    spliced = parse_file(out)
    function = spliced.function(f"rr_{ENTRY}_phase{phase}_isolated")
    moved = [s for s in linearise(function) if s.opcode.startswith("mma.")]
    assert len(moved) == record["cut"]["statements"] == (32 if phase == 1 else 16)
    calls = [s for s in linearise(spliced.function(ENTRY)) if s.opcode.startswith("call")]
    assert len(calls) == 1 and f"rr_{ENTRY}_phase{phase}_isolated" in calls[0].text
    assert record["outside_statements_checked"] == len(linearise(parse_file(SAMPLE).function(ENTRY))) - record["cut"]["statements"]
    if PTXAS:
        c = _rr("compile", str(out), "-o", str(tmp_path / "s.cubin"))
        assert c.returncode == 0, c.stderr


@pytest.mark.parametrize("phase", [1, 2])
def test_regen_reloads_every_operand_from_its_derived_address(tmp_path, phase):
    out = tmp_path / "g.ptx"
    r = _rr("splice", str(SAMPLE), "--entry", ENTRY, "--recipe", str(RECIPE.with_name("regen.yaml")), "--phase",
            str(phase), "-o", str(out))
    assert r.returncode == 0, r.stderr
    record = json.loads(Path(str(out) + ".splice.json").read_text())
    stmts = linearise(parse_file(out).function(ENTRY))
    cut = stmts[record["cut"]["first_stmt"] - 1:record["cut"]["first_stmt"] - 1 + record["inserted_statements"]]
    mma = [s for s in cut if s.opcode.startswith("mma.")]
    assert len(mma) == record["cut"]["statements"]
    loaded = {d for s in cut if s.opcode.startswith("ld.global") for d in s.defs}
    # every A and B register an mma reads was loaded inside the cut, none reused from outside
    for s in mma:
        a_b = [u for u in s.uses][:6]
        assert set(a_b) <= loaded, s.text
    # the chains end in the registers the rest of the kernel reads
    assert {d for s in mma for d in s.defs} >= set(record["live_out"])
    if PTXAS:
        assert _rr("compile", str(out), "-o", str(tmp_path / "g.cubin")).returncode == 0


def test_a_missing_phase_is_refused_with_the_phases_there_are(tmp_path):
    r = _rr("splice", str(SAMPLE), "--entry", ENTRY, "--recipe", str(RECIPE), "--phase", "7", "-o", str(tmp_path / "x.ptx"))
    assert r.returncode == 2 and "phase 7 does not exist: the entry has phases 1–2" in r.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.gpu
@pytest.mark.parametrize("recipe", ["isolate", "regen"])
def test_spliced_phases_give_byte_identical_output_on_the_gpu(tmp_path, recipe):
    from rr.run.cuda import NoDevice, device_info

    try:
        device_info()
    except NoDevice as e:
        pytest.skip(f"needs an NVIDIA GPU with cupy: {e}")
    sample_launch(tmp_path / "ref", SAMPLE)
    assert _rr("run", str(tmp_path / "ref"), "--backend", "cuda", "-o", str(tmp_path / "ref_out")).returncode == 0
    reference = np.load(tmp_path / "ref_out" / "out.npy")
    assert np.count_nonzero(reference) > reference.size // 2  # the kernel really computed something
    for phase in (1, 2):
        spliced = tmp_path / f"p{phase}.ptx"
        assert _rr("splice", str(SAMPLE), "--entry", ENTRY, "--recipe", str(RECIPE.with_name(f"{recipe}.yaml")),
                   "--phase", str(phase), "-o", str(spliced)).returncode == 0
        sample_launch(tmp_path / f"l{phase}", spliced)
        r = _rr("run", str(tmp_path / f"l{phase}"), "--backend", "cuda", "-o", str(tmp_path / f"o{phase}"))
        assert r.returncode == 0, r.stderr
        c = _rr("compare", str(tmp_path / "ref_out"), str(tmp_path / f"o{phase}"))
        assert c.returncode == 0, c.stdout
