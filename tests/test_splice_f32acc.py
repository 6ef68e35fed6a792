"""The f32acc template: a phase's chains accumulated in f32 and narrowed once — ptxas accepts it,
every register the kernel reads afterwards is still defined, and on a GPU the output is finite and
close to the f16-accumulated reference (judged by PSNR, not identity)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import PTXAS
from rr.corpus.sample import sample_launch
from rr.ptx import linearise, parse_file

SAMPLE = Path(__file__).resolve().parents[1] / "rr" / "data" / "sample_swin.ptx"
ENTRY = "cuda_dldn_engine_swin_sample_kernel"
RECIPES = Path(__file__).resolve().parents[1] / "config" / "recipes"


def _rr(*args):
    return subprocess.run([sys.executable, "-m", "rr.cli", *args], capture_output=True, text=True)


@pytest.mark.parametrize("phase", [1, 2])
def test_f32acc_defines_every_live_out_and_compiles(tmp_path, phase):
    out = tmp_path / "f.ptx"
    r = _rr("splice", str(SAMPLE), "--entry", ENTRY, "--recipe", str(RECIPES / "f32acc.yaml"), "--phase", str(phase), "-o", str(out))
    assert r.returncode == 0, r.stderr
    record = json.loads(Path(str(out) + ".splice.json").read_text())
    stmts = linearise(parse_file(out).function(ENTRY))
    cut = stmts[record["cut"]["first_stmt"] - 1:record["cut"]["first_stmt"] - 1 + record["inserted_statements"]]
    f32_mma = [s for s in cut if s.opcode == "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32"]
    assert len(f32_mma) == record["cut"]["statements"]
    narrowed = {d for s in cut if s.opcode == "cvt.rn.f16x2.f32" for d in s.defs}
    assert narrowed == set(record["live_out"])
    if PTXAS:
        assert _rr("compile", str(out), "-o", str(tmp_path / "f.cubin")).returncode == 0


def test_f32acc_keeps_cut_statements_that_do_not_touch_the_accumulators(tmp_path):
    # phase 1 widened over E1 (an address computation for phase 2's loads): kept verbatim, in place
    recipe = tmp_path / "wide.yaml"
    recipe.write_text("name: wide\ndescription: x\ncut: {phase: 1, with_epilogue_after: all}\ntemplate: {name: f32acc}\n")
    out = tmp_path / "w.ptx"
    r = _rr("splice", str(SAMPLE), "--entry", ENTRY, "--recipe", str(recipe), "-o", str(out))
    assert r.returncode == 0, r.stderr
    original = linearise(parse_file(SAMPLE).function(ENTRY))
    spliced = [s.text for s in linearise(parse_file(out).function(ENTRY))]
    assert original[81].opcode == "add.s64" and original[81].text in spliced


def test_f32acc_refuses_cuts_with_statements_that_read_an_accumulator(tmp_path):
    recipe = tmp_path / "wide.yaml"
    recipe.write_text("name: wide\ndescription: x\ncut: {phase: 2, with_epilogue_after: all}\ntemplate: {name: f32acc}\n")
    r = _rr("splice", str(SAMPLE), "--entry", ENTRY, "--recipe", str(recipe), "-o", str(tmp_path / "w.ptx"))
    assert r.returncode == 2 and "reads an accumulator" in r.stderr and "s99 (st.global.v2.u32)" in r.stderr
    assert not (tmp_path / "w.ptx").exists()


@pytest.mark.gpu
def test_f32acc_output_is_close_to_the_reference_on_the_gpu(tmp_path):
    from rr.run.cuda import NoDevice, device_info

    try:
        device_info()
    except NoDevice as e:
        pytest.skip(f"needs an NVIDIA GPU with cupy: {e}")
    sample_launch(tmp_path / "ref", SAMPLE)
    assert _rr("run", str(tmp_path / "ref"), "-o", str(tmp_path / "ref_out")).returncode == 0
    for phase in (1, 2):
        spliced = tmp_path / f"f{phase}.ptx"
        assert _rr("splice", str(SAMPLE), "--entry", ENTRY, "--recipe", str(RECIPES / "f32acc.yaml"), "--phase",
                   str(phase), "-o", str(spliced)).returncode == 0
        sample_launch(tmp_path / f"l{phase}", spliced)
        assert _rr("run", str(tmp_path / f"l{phase}"), "-o", str(tmp_path / f"o{phase}")).returncode == 0
        out = np.load(tmp_path / f"o{phase}" / "out.npy").view(np.float16)
        assert np.isfinite(out).all()
        rows = json.loads(_rr("compare", str(tmp_path / "ref_out"), str(tmp_path / f"o{phase}"), "--json").stdout)
        (row,) = [r for r in rows if r["buffer"] == "out"]
        psnr = float("inf") if row["psnr_db"] == "inf" else row["psnr_db"]
        print(f"phase {phase}: f32acc vs f16 accumulation: {row['differing_share']:.1%} of bytes differ, PSNR {psnr:.1f} dB")
        assert psnr > 30
