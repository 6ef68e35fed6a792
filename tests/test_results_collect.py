"""Collecting a cell: one row per recipe in the fixed results schema, filled from the records the
stages wrote (rr splice, rr compile, rr run, rr compare --json, rr time -o) and the unspliced
module's compile record; a stage without a record is `not_run` with its reason — a failure is a
row, never a missing one. Rows carry per-buffer verdicts with the worst buffer named, the
reference's ptxas figures beside the splice's with the deltas, and the recipe's checks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from conftest import PTXAS
from rr.results import RESULTS_SCHEMA
from rr.run.compare import compare_buffer

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "rr" / "data" / "sample_swin.ptx"
ENTRY = "cuda_dldn_engine_swin_sample_kernel"


def _rr(*args, cwd=None):
    r = subprocess.run([sys.executable, "-m", "rr.cli", *args], capture_output=True, text=True, cwd=cwd)
    assert r.returncode == 0, r.stderr
    return r


def _compare(cell: Path, recipe: str, *pairs) -> None:
    """R.compare.json as rr compare --json writes it, from (name, reference, splice, dtype) tuples."""
    (cell / f"{recipe}.compare.json").write_text(json.dumps([compare_buffer(n, a, b, t).as_dict()
                                                             for n, a, b, t in pairs]))


@pytest.fixture(scope="module")
def sample_cell(tmp_path_factory):
    """A sample phase-1 cell: splices by name from a directory without config/recipes, compiles of
    them and of the unspliced module, comparisons and timings as the stages write them."""
    tmp = tmp_path_factory.mktemp("collect")
    cell = tmp / "phase1"
    _rr("describe", str(SAMPLE), "--entry", ENTRY, "-o", str(tmp))
    lax = tmp / "f32lax.yaml"  # f32acc with a PSNR threshold of its own
    lax.write_text((ROOT / "rr/data/recipes/f32acc.yaml").read_text().replace("name: f32acc\n", "name: f32lax\n", 1)
                   .replace("{psnr: {min_db: 40}}", "{psnr: {min_db: 30}}"))
    for recipe in ("isolate", "f32acc", "regen", str(lax)):
        name = Path(recipe).stem
        _rr("splice", str(SAMPLE), "--entry", ENTRY, "--recipe", recipe, "--phase", "1", "-o",
            str(cell / f"{name}.ptx"), cwd=tmp)
        if PTXAS:
            _rr("compile", str(cell / f"{name}.ptx"), "-o", str(cell / f"{name}.cubin"))
    if PTXAS:
        _rr("compile", str(SAMPLE), "-o", str(tmp / "reference.cubin"))
    # f32acc's rounding shows in the f16 output; the e4m3 staging buffer is identical
    a = np.arange(16, dtype=np.float16)
    b = a.copy()
    b[3] += 1
    staging = np.arange(64, dtype=np.uint8)
    for recipe in ("f32acc", "f32lax"):
        _compare(cell, recipe, ("staging", staging, staging.copy(), "e4m3"), ("out", a, b, "float16"))
    _compare(cell, "isolate", ("staging", staging, staging.copy(), "e4m3"), ("out", a, a.copy(), "float16"))
    (cell / "isolate.timing.json").write_text(json.dumps({
        "status": "ok", "reference": {"median_ms": 6.59, "min_ms": 6.5, "max_ms": 6.7, "noise": 0.002, "samples": 60},
        "other": {"median_ms": 14.90, "min_ms": 14.8, "max_ms": 15.0, "noise": 0.003, "samples": 60},
        "ratio": 14.90 / 6.59, "ratio_noise": 0.0036, "device": {"name": "NVIDIA H200", "driver": 13000,
                                                              "driver_version": "580.159.04"}}))
    (cell / "f32acc.timing.json").write_text(json.dumps({"status": "unsupported", "message": "the cpu backend gives no timing"}))
    out = tmp / "sample_phase1.parquet"
    _rr("collect", str(cell), "--layer", "sample", "--phase", "1", "--recipes", f"isolate,f32acc,probe,regen,{lax}",
        "--descriptor", str(tmp / "descriptor.json"), "--module", str(SAMPLE), "--reference-compile",
        str(tmp / "reference.cubin.json"), "-o", str(out), cwd=tmp)
    table = pq.read_table(out)
    return tmp, cell, table, {r["recipe"]: r for r in table.to_pylist()}


def test_collect_gives_one_row_per_recipe_with_reasons_for_what_did_not_run(sample_cell):
    tmp, cell, table, rows = sample_cell
    assert table.schema.remove_metadata() == RESULTS_SCHEMA.remove_metadata()
    iso, f32, probe = rows["isolate"], rows["f32acc"], rows["probe"]
    assert (iso["M"], iso["N"], iso["K"], iso["mma"]) == (64, 32, 64, 32)
    assert iso["splice_status"] == "ok" and iso["stmts_cut"] == 32 and iso["live_out"] == 32
    assert iso["frame_identical"] is True and iso["ratio"] == 14.90 / 6.59 and iso["driver"] == "580.159.04"
    assert f32["frame_identical"] is False and f32["psnr_db"] > 0
    assert f32["timing_status"] == "unsupported" and "no timing" in f32["timing_message"]
    if PTXAS:
        assert iso["compile_status"] == "ok" and iso["registers"] > 0 and iso["arch"] == "sm_90"
    assert probe["splice_status"] == "not_run" and "no splice record" in probe["splice_message"]
    assert probe["compile_status"] == probe["capture_status"] == probe["timing_status"] == "not_run"
    assert len({r["code_fingerprint"] for r in rows.values()}) == 1
    # regen's row says how much of the description its splice rebuilt: phase 1's 32 mma read
    # 8 A and 8 B fragments and seed 16 chains from the bias table, all from memory
    record = json.loads((cell / "regen.ptx.splice.json").read_text())["regen"]
    regen = rows["regen"]
    assert (regen["operands_rebuilt"], regen["operands_live_in"], regen["operands_chained"]) == \
        (record["operands_rebuilt"], record["operands_live_in"], record["operands_chained"]) == (80, 0, 16)
    assert iso["operands_rebuilt"] is None and f32["operands_rebuilt"] is None


def test_each_buffer_has_its_verdict_and_the_worst_is_named(sample_cell):
    _, _, _, rows = sample_cell
    f32 = rows["f32acc"]
    staging, out = f32["buffers"]
    assert (staging["name"], staging["dtype"], staging["identical"], staging["differing_elements"]) == \
        ("staging", "e4m3", True, 0)
    assert (out["name"], out["dtype"], out["identical"], out["elements"], out["differing_elements"]) == \
        ("out", "float16", False, 16, 1)
    assert out["max_abs_diff"] == 1.0 and out["psnr_db"] == pytest.approx(10 * np.log10(15.0 ** 2 / (1 / 16)))
    # the row's PSNR and max |Δ| are the worst buffer's, not a mix over buffers of different types
    assert f32["worst_buffer"] == "out" and f32["psnr_db"] == out["psnr_db"] and f32["max_abs_diff"] == 1.0
    iso = rows["isolate"]
    assert iso["worst_buffer"] is None and iso["psnr_db"] == float("inf")
    assert [b["identical"] for b in iso["buffers"]] == [True, True]


@pytest.mark.skipif(not PTXAS, reason="needs ptxas on PATH")
def test_the_reference_compile_stands_beside_the_splice_with_the_deltas(sample_cell):
    tmp, cell, _, rows = sample_cell
    ref = json.loads((tmp / "reference.cubin.json").read_text())["functions"][ENTRY]
    for recipe in ("isolate", "regen", "f32acc"):
        row = rows[recipe]
        fn = json.loads((cell / f"{recipe}.cubin.json").read_text())["functions"][ENTRY]
        assert row["ref_compile_status"] == "ok"
        assert (row["ref_registers"], row["ref_spill_stores"], row["ref_spill_loads"], row["ref_stack_bytes"],
                row["ref_shared_bytes"]) == (ref["registers"], ref["spill_stores"], ref["spill_loads"],
                                             ref["stack_frame"], ref["shared_bytes"])
        # stores and loads apart, as ptxas reports them
        assert (row["spill_stores"], row["spill_loads"], row["stack_bytes"]) == \
            (fn["spill_stores"], fn["spill_loads"], fn["stack_frame"])
        for figure in ("registers", "spill_stores", "spill_loads", "stack_bytes", "shared_bytes", "constant_bytes"):
            assert row[f"{figure}_delta"] == row[figure] - row[f"ref_{figure}"], (recipe, figure)
    # the sample's splices change its register count (isolate calls a .func), so the delta is seen
    assert any(rows[r]["registers_delta"] != 0 for r in ("isolate", "regen", "f32acc"))


def test_without_a_reference_record_the_reference_columns_say_why(tmp_path):
    _rr("describe", str(SAMPLE), "--entry", ENTRY, "-o", str(tmp_path))
    (tmp_path / "cell").mkdir()
    _rr("collect", str(tmp_path / "cell"), "--layer", "sample", "--phase", "1", "--recipes", "regen", "--descriptor",
        str(tmp_path / "descriptor.json"), "--module", str(SAMPLE), "--reference-compile",
        str(tmp_path / "missing.cubin.json"), "-o", str(tmp_path / "cell.parquet"))
    (row,) = pq.read_table(tmp_path / "cell.parquet").to_pylist()
    assert row["ref_compile_status"] == "not_run" and "missing.cubin.json" in row["ref_compile_message"]
    assert row["ref_registers"] is None and row["registers_delta"] is None


def _checks(row) -> dict:
    return {c["check"]: c for c in row["checks"]}


def test_the_recipes_checks_are_evaluated_with_value_and_threshold(sample_cell):
    _, _, _, rows = sample_cell
    iso, f32, lax = rows["isolate"], rows["f32acc"], rows["f32lax"]
    assert [c["check"] for c in iso["checks"]] == ["roundtrip", "outside_unchanged", "ptxas", "identical_output"]
    checks = _checks(iso)
    assert checks["roundtrip"]["passed"] and checks["outside_unchanged"]["passed"]
    assert checks["outside_unchanged"]["value"] == json.loads(
        (sample_cell[1] / "isolate.ptx.splice.json").read_text())["outside_statements_checked"] > 0
    assert checks["identical_output"] == {"check": "identical_output", "passed": True, "value": 0.0,
                                          "threshold": 0.0, "detail": checks["identical_output"]["detail"]}
    assert checks["ptxas"]["passed"] is (True if PTXAS else None)
    assert iso["passed"] is (True if PTXAS else None)
    # f32acc holds the worst buffer to 40 dB: 35.6 dB fails; f32lax sets 30 dB, and passes
    psnr = _checks(f32)["psnr"]
    assert psnr["passed"] is False and psnr["threshold"] == 40 and psnr["value"] == pytest.approx(f32["psnr_db"])
    assert "worst buffer out" in psnr["detail"] and f32["passed"] is False
    assert _checks(lax)["psnr"]["passed"] is True and _checks(lax)["psnr"]["threshold"] == 30
    assert lax["passed"] is (True if PTXAS else None)


def test_a_check_whose_stage_did_not_run_is_neither_passed_nor_failed(sample_cell):
    _, _, _, rows = sample_cell
    regen = rows["regen"]  # spliced and compiled, never captured
    checks = _checks(regen)
    assert checks["identical_output"]["passed"] is None and "capture not_run" in checks["identical_output"]["detail"]
    assert regen["passed"] is None
    probe = rows["probe"]  # no splice record at all
    assert all(c["passed"] is None for c in probe["checks"]) and probe["passed"] is None


def test_a_refused_splice_is_a_row_with_its_reason_and_fails_its_checks(tmp_path):
    cell = tmp_path / "cell"
    cell.mkdir()
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\ndescription: a register name without its %\ncut: {phase: 1}\n"
                   "template: {name: probe, params: {registers: [r12]}}\n")
    _rr("splice", str(SAMPLE), "--entry", ENTRY, "--recipe", str(bad), "--record", "-o", str(cell / "bad.ptx"))
    descriptor = tmp_path / "descriptor.json"
    _rr("describe", str(SAMPLE), "--entry", ENTRY, "-o", str(tmp_path))
    _rr("collect", str(cell), "--layer", "sample", "--phase", "1", "--recipes", str(bad), "--descriptor",
        str(descriptor), "--module", str(SAMPLE), "-o", str(tmp_path / "cell.parquet"))
    (row,) = pq.read_table(tmp_path / "cell.parquet").to_pylist()
    assert row["recipe"] == "bad"
    assert row["splice_status"] == "error" and "probe register 'r12'" in row["splice_message"]
    assert row["compile_status"] == row["capture_status"] == row["timing_status"] == "not_run"
    assert (cell / "bad.ptx").read_text() == ""
    checks = _checks(row)
    assert checks["roundtrip"]["passed"] is False and "probe register 'r12'" in checks["roundtrip"]["detail"]
    assert row["passed"] is False


def test_a_recipe_that_does_not_apply_to_the_phase_is_a_row_saying_so_and_fails_nothing(tmp_path):
    # the sample kernel's phase 1 reads its operands from memory: no pack or transpose of an
    # accumulator for direct to build, which is not a failure of the splice
    cell = tmp_path / "cell"
    _rr("describe", str(SAMPLE), "--entry", ENTRY, "-o", str(tmp_path))
    _rr("splice", str(SAMPLE), "--entry", ENTRY, "--recipe", "direct", "--phase", "1", "--record",
        "-o", str(cell / "direct.ptx"))
    _rr("collect", str(cell), "--layer", "sample", "--phase", "1", "--recipes", "direct", "--descriptor",
        str(tmp_path / "descriptor.json"), "--module", str(SAMPLE), "-o", str(tmp_path / "cell.parquet"))
    (row,) = pq.read_table(tmp_path / "cell.parquet").to_pylist()
    assert row["splice_status"] == "not_applicable" and "neither operand is a pack or transpose" in row["splice_message"]
    assert row["compile_status"] == row["capture_status"] == row["timing_status"] == "not_run"
    assert "does not apply" in row["compile_message"]
    assert all(c["passed"] is None for c in _checks(row).values()) and row["passed"] is None


def test_on_the_cpu_backend_the_row_says_why_there_is_no_timing(tmp_path):
    _rr("describe", str(SAMPLE), "--entry", ENTRY, "-o", str(tmp_path))
    _rr("splice", str(SAMPLE), "--entry", ENTRY, "--recipe", "regen", "--phase", "1", "-o",
        str(tmp_path / "cell" / "regen.ptx"))
    _rr("collect", str(tmp_path / "cell"), "--layer", "sample", "--phase", "1", "--recipes", "regen", "--descriptor",
        str(tmp_path / "descriptor.json"), "--module", str(SAMPLE), "--backend", "cpu",
        "-o", str(tmp_path / "cell.parquet"))
    (row,) = pq.read_table(tmp_path / "cell.parquet").to_pylist()
    assert row["timing_status"] == "unsupported" and "cpu backend" in row["timing_message"]
    assert "no timing" in row["timing_message"] and row["ratio"] is None


def test_psnr_is_taken_against_the_larger_peak_of_the_two_buffers():
    # a fresh launch's output buffer is zeros: against its own peak the PSNR would be -600 dB
    fresh, run = np.zeros(16, dtype=np.float16), np.arange(16, dtype=np.float16)
    mse = float(np.mean(run.astype(np.float64) ** 2))
    for a, b in ((fresh, run), (run, fresh)):
        r = compare_buffer("out", a, b)
        assert r.psnr_db == pytest.approx(10 * np.log10(15.0 ** 2 / mse))
        assert (r.elements, r.differing_elements) == (16, 15)
    # NaN padding both sides agree on does not hide the PSNR of the rest
    a, b = run.copy(), run.copy()
    a[0] = b[0] = np.nan
    b[5] += 1
    assert compare_buffer("out", a, b).psnr_db == pytest.approx(10 * np.log10(15.0 ** 2 / (1 / 15)))
    b[0] = 1.0  # a NaN against a number: no PSNR
    assert compare_buffer("out", a, b).psnr_db is None
