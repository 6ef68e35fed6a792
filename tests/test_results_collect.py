"""Collecting a cell: one row per recipe in the fixed results schema, filled from the records the
stages wrote (rr splice, rr compile, rr run, rr compare --json, rr time -o); a stage without a
record is `not_run` with its reason — a failure is a row, never a missing one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from conftest import PTXAS
from rr.results import RESULTS_SCHEMA
from rr.run.compare import compare_buffer

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "rr" / "data" / "sample_swin.ptx"
ENTRY = "cuda_dldn_engine_swin_sample_kernel"


def _rr(*args):
    r = subprocess.run([sys.executable, "-m", "rr.cli", *args], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r


def test_collect_gives_one_row_per_recipe_with_reasons_for_what_did_not_run(tmp_path):
    cell = tmp_path / "phase1"
    _rr("describe", str(SAMPLE), "--entry", ENTRY, "-o", str(tmp_path))
    for recipe in ("isolate", "f32acc", "regen"):
        _rr("splice", str(SAMPLE), "--entry", ENTRY, "--recipe", str(ROOT / "config" / "recipes" / f"{recipe}.yaml"),
            "--phase", "1", "-o", str(cell / f"{recipe}.ptx"))
        if PTXAS:
            _rr("compile", str(cell / f"{recipe}.ptx"), "-o", str(cell / f"{recipe}.cubin"))
    # capture and timing records as rr compare --json and rr time -o write them
    a = np.arange(16, dtype=np.float16)
    b = a.copy()
    b[3] += 1
    (cell / "f32acc.compare.json").write_text(json.dumps([compare_buffer("out", a, b).as_dict()]))
    (cell / "isolate.compare.json").write_text(json.dumps([compare_buffer("out", a, a.copy()).as_dict()]))
    (cell / "isolate.timing.json").write_text(json.dumps({
        "status": "ok", "reference": {"median_ms": 6.59, "min_ms": 6.5, "max_ms": 6.7, "noise": 0.002, "samples": 60},
        "other": {"median_ms": 14.90, "min_ms": 14.8, "max_ms": 15.0, "noise": 0.003, "samples": 60},
        "ratio": 14.90 / 6.59, "ratio_noise": 0.0036, "device": {"name": "NVIDIA H200", "driver": 13000,
                                                              "driver_version": "580.159.04"}}))
    (cell / "f32acc.timing.json").write_text(json.dumps({"status": "unsupported", "message": "the cpu backend gives no timing"}))
    out = tmp_path / "sample_phase1.parquet"
    _rr("collect", str(cell), "--layer", "sample", "--phase", "1", "--recipes", "isolate,f32acc,probe,regen",
        "--descriptor", str(tmp_path / "descriptor.json"), "--module", str(SAMPLE), "-o", str(out))
    table = pq.read_table(out)
    assert table.schema.remove_metadata() == RESULTS_SCHEMA.remove_metadata()
    rows = {r["recipe"]: r for r in table.to_pylist()}
    iso, f32, probe = rows["isolate"], rows["f32acc"], rows["probe"]
    assert (iso["M"], iso["N"], iso["K"], iso["mma"]) == (64, 32, 64, 32)
    assert iso["splice_status"] == "ok" and iso["stmts_cut"] == 32 and iso["live_out"] == 32
    assert iso["frame_identical"] is True and iso["ratio"] == 14.90 / 6.59 and iso["driver"] == "580.159.04"
    assert f32["frame_identical"] is False and f32["differing_bytes"] > 0 and f32["psnr_db"] > 0
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


def test_a_refused_splice_is_a_row_with_its_reason(tmp_path):
    cell = tmp_path / "cell"
    cell.mkdir()
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\ndescription: a register name without its %\ncut: {phase: 1}\n"
                   "template: {name: probe, params: {registers: [r12]}}\n")
    _rr("splice", str(SAMPLE), "--entry", ENTRY, "--recipe", str(bad), "--record", "-o", str(cell / "bad.ptx"))
    descriptor = tmp_path / "descriptor.json"
    _rr("describe", str(SAMPLE), "--entry", ENTRY, "-o", str(tmp_path))
    _rr("collect", str(cell), "--layer", "sample", "--phase", "1", "--recipes", "bad", "--descriptor",
        str(descriptor), "--module", str(SAMPLE), "-o", str(tmp_path / "cell.parquet"))
    (row,) = pq.read_table(tmp_path / "cell.parquet").to_pylist()
    assert row["splice_status"] == "error" and "probe register 'r12'" in row["splice_message"]
    assert row["compile_status"] == row["capture_status"] == row["timing_status"] == "not_run"
    assert (cell / "bad.ptx").read_text() == ""
