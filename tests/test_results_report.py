"""The summary concatenates cells in the fixed schema; the report's figures, tables and first page
are written whole: an identity grid of the check verdicts per recipe, time ratios with their
noise, compile deltas against the unspliced kernel, the phase tables and the summary as HTML
tables (and CSV), and the backend, frame size and GPU the captures ran on."""

from __future__ import annotations

import matplotlib.image
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rr.results.report import outcome, run_facts, summary_table, write_report
from rr.results.schema import RESULTS_SCHEMA

PASSED = [{"check": "roundtrip", "passed": True, "value": None, "threshold": None, "detail": "round-trips"},
          {"check": "identical_output", "passed": True, "value": 0.0, "threshold": 0.0, "detail": "identical"}]
PSNR_FAILED = [{"check": "psnr", "passed": False, "value": 35.5, "threshold": 40.0,
                "detail": "worst buffer out: 35.50 dB < 40 dB"}]
BUFFERS = [{"name": "arena", "dtype": "e4m3", "identical": True, "elements": 64, "differing_elements": 0,
            "max_abs_diff": 0.0, "psnr_db": float("inf")},
           {"name": "out", "dtype": "float16", "identical": False, "elements": 16, "differing_elements": 3,
            "max_abs_diff": 0.5, "psnr_db": 35.5}]


def _row(phase: int, recipe: str, ratio: float | None, **extra) -> dict:
    row = {"layer": "enc2", "phase": phase, "recipe": recipe, "M": 64, "N": 32, "K": 96, "splice_status": "ok",
           "compile_status": "ok", "capture_status": "ok", "capture_backend": "cpu" if ratio is None else "cuda",
           "capture_device": "rr PTX interpreter (numpy)" if ratio is None else "NVIDIA H200",
           "frame": "256x256" if ratio is None else "3840x2160", "frame_identical": True, "psnr_db": float("inf"),
           "checks": PASSED, "passed": True, "buffers": BUFFERS[:1], "ratio": ratio, "noise": 0.006,
           "gpu": None if ratio is None else "NVIDIA H200", "driver": None if ratio is None else "580.159.04",
           "registers": 255, "ref_registers": 253, "registers_delta": 2, "spill_stores": 180, "ref_spill_stores": 176,
           "spill_stores_delta": 4, "spill_loads": 176, "ref_spill_loads": 176, "spill_loads_delta": 0,
           "stack_bytes": 152, "ref_stack_bytes": 144, "stack_bytes_delta": 8, "ref_compile_status": "ok",
           "timing_status": "ok" if ratio else "unsupported",
           "timing_message": None if ratio else "the cpu backend gives no timing", "rr_version": "0.1.0",
           "code_fingerprint": "abc"}
    row.update(extra)
    return row


def cell(tmp_path, phase: int, ratio: float | None) -> str:
    rows = [_row(phase, "isolate", ratio),
            _row(phase, "f32acc", ratio, frame_identical=False, psnr_db=35.5, worst_buffer="out", checks=PSNR_FAILED,
                 passed=False, buffers=BUFFERS),
            _row(phase, "broken", ratio, capture_status="fault", capture_message="illegal address",
                 frame_identical=None, psnr_db=None, passed=None, buffers=None,
                 checks=[{"check": "identical_output", "passed": None, "value": None, "threshold": None,
                          "detail": "capture no_device"}])]
    path = tmp_path / f"enc2_phase{phase}.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=RESULTS_SCHEMA), path)
    return str(path)


SPEC = {"entry": "cuda_dldn_engine_swin_enc2_kernel",
        "phases": [{"phase": 1, "first_stmt": 10, "last_stmt": 33, "mma": 24, "M": 96, "N": 32, "K": 32,
                    "identity": True, "a_source": "shared(computed(epilogue 0))"}]}


@pytest.fixture
def report(tmp_path):
    summary = summary_table([cell(tmp_path, 7, 0.98), cell(tmp_path, 8, None)])
    return write_report(summary, {"enc2": SPEC}, tmp_path / "report"), tmp_path / "report"


def test_summary_concatenates_cells_and_refuses_foreign_tables(tmp_path):
    table = summary_table([cell(tmp_path, 7, 0.98), cell(tmp_path, 8, 1.02)])
    assert table.num_rows == 6 and table.schema.equals(RESULTS_SCHEMA, check_metadata=False)
    pq.write_table(pa.table({"x": [1]}), tmp_path / "other.parquet")
    with pytest.raises(ValueError, match="other.parquet: not a results table"):
        summary_table([str(tmp_path / "other.parquet")])


def test_report_writes_figures_tables_and_first_page(report, tmp_path):
    written, out = report
    assert sorted(str(p.relative_to(out)) for p in written) == [
        "compile.html", "compile.png", "identity.png", "phases/phases_enc2.csv", "phases/phases_enc2.html",
        "ratios.png", "run.rst", "summary.csv", "summary.html"]
    for p in written:
        assert p.stat().st_size > 100
    for name in ("identity.png", "ratios.png", "compile.png"):
        assert (out / name).read_bytes()[:4] == b"\x89PNG"
    phases = (out / "phases/phases_enc2.csv").read_text().splitlines()
    assert phases[0].startswith("phase,first_stmt,last_stmt,mma") and phases[1].startswith("1,10,33,24")
    assert not list(tmp_path.glob(".report*"))  # no temporary left beside it


def _pixels(path, colour: str) -> int:
    image = matplotlib.image.imread(path)[..., :3]
    rgb = np.array([int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)])
    return int(np.count_nonzero(np.abs(image - rgb).max(axis=-1) < 0.02))


def test_the_identity_grid_colours_each_cell_by_its_check_verdict(report, tmp_path):
    _, out = report
    green, red, grey = (_pixels(out / "identity.png", c) for c in ("#2e7d32", "#c62828", "#9e9e9e"))
    assert green > 0 and red > 0 and grey > 0
    # two cells of each kind: as many pixels of each colour, up to the labels written on them
    assert abs(green - red) < 0.2 * green and abs(green - grey) < 0.2 * green
    passing = summary_table([cell(tmp_path, 9, None)]).filter(pa.compute.field("passed") == True)  # noqa: E712
    write_report(passing, {}, tmp_path / "passing")
    assert _pixels(tmp_path / "passing/identity.png", "#c62828") == 0
    assert _pixels(tmp_path / "passing/identity.png", "#2e7d32") > 0


def test_a_cells_label_is_identity_the_worst_psnr_what_failed_or_that_it_does_not_apply():
    assert outcome(_row(8, "isolate", None)) == (True, "=")
    assert outcome(_row(8, "f32acc", None, frame_identical=False, psnr_db=35.5, passed=False)) == (False, "35.5")
    assert outcome(_row(8, "regen", None, splice_status="error", passed=False)) == (False, "splice\nerror")
    assert outcome(_row(8, "direct", None, splice_status="not_applicable", passed=None)) == (None, "n/a")
    assert outcome(_row(8, "regen", None, capture_status="fault", passed=False)) == (False, "capture\nfault")
    ptxas = [{"check": "ptxas", "passed": False, "value": None, "threshold": None, "detail": "compile_error"}]
    assert outcome(_row(8, "regen", None, checks=ptxas, passed=False, compile_status="not_run")) == (False, "ptxas")


def test_the_tables_are_html_pages_with_the_checks_buffers_and_deltas(report):
    _, out = report
    summary = (out / "summary.html").read_text()
    assert summary.startswith("<!DOCTYPE html>") and summary.count("<tr") == 1 + 6
    assert "✗ psnr 35.5 dB (threshold 40): worst buffer out: 35.50 dB &lt; 40 dB" in summary
    assert "out (float16): 3/16 differ, max |Δ| 0.5, PSNR 35.5 dB<br>1 identical: arena" in summary
    assert "capture: fault — illegal address" in summary
    compile_ = (out / "compile.html").read_text()
    assert "253 → 255 (+2)" in compile_ and "176 → 180 (+4)" in compile_ and "144 → 152 (+8)" in compile_
    phases = (out / "phases/phases_enc2.html").read_text()
    assert "shared(computed(epilogue 0))" in phases and phases.count("<tr") == 2


def test_the_first_page_says_backend_frame_and_gpu():
    cpu = run_facts([_row(8, "isolate", None)])
    assert ":Backend: cpu — the captures ran on rr's PTX interpreter" in cpu and "no timing" in cpu
    assert ":Frame: 256x256 pixels — the workflow's ``cpu_frame``" in cpu and ":GPU: none" in cpu
    cuda = run_facts([_row(8, "isolate", 1.01), _row(8, "f32acc", 1.02, passed=False)])
    assert ":Backend: cuda\n" in cuda and ":Frame: 3840x2160\n" in cuda
    assert ":GPU: NVIDIA H200 (driver 580.159.04)" in cuda
    assert "1 passed every check, 1 failed a check, 0 not fully measured" in cuda


def test_a_rows_buffer_cell_names_what_differs_and_counts_a_frames_identical_buffers():
    from rr.results.report import SAME_NAMED, _buffers_text

    def buffer(name, identical=True):
        return {"name": name, "dtype": "float16", "identical": identical, "differing_elements": 0 if identical else 2,
                "elements": 16, "max_abs_diff": 0.0 if identical else 0.25, "psnr_db": None if identical else 41.0}

    frame = [buffer(f"enc{i}.arena") for i in range(66)]
    assert _buffers_text(frame) == "all 66 identical"
    frame[3] = buffer("frame", identical=False)
    assert _buffers_text(frame) == "frame (float16): 2/16 differ, max |Δ| 0.25, PSNR 41.0 dB\nthe other 65 identical"
    few = [buffer("out", identical=False)] + [buffer(f"b{i}") for i in range(SAME_NAMED)]
    assert _buffers_text(few).endswith(f"{SAME_NAMED} identical: " + ", ".join(f"b{i}" for i in range(SAME_NAMED)))
