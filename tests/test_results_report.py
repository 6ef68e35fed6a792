"""The summary concatenates cells in the fixed schema; the report's figures and tables are written
whole: an identity grid, time ratios with their noise, registers and spills, the phase tables."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rr.results.report import summary_table, write_report
from rr.results.schema import RESULTS_SCHEMA


def cell(tmp_path, phase: int, ratio: float | None) -> str:
    rows = [{"layer": "enc2", "phase": phase, "recipe": r, "splice_status": "ok", "compile_status": "ok",
             "capture_status": "ok" if r != "broken" else "fault", "frame_identical": r != "f32acc",
             "psnr_db": 44.0 if r == "f32acc" else float("inf"), "ratio": ratio, "noise": 0.006,
             "registers": 255, "spill_bytes": 352, "timing_message": None if ratio else "the cpu backend gives no timing"}
            for r in ("isolate", "f32acc", "broken")]
    path = tmp_path / f"enc2_phase{phase}.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=RESULTS_SCHEMA), path)
    return str(path)


def test_summary_concatenates_cells_and_refuses_foreign_tables(tmp_path):
    table = summary_table([cell(tmp_path, 7, 0.98), cell(tmp_path, 8, 1.02)])
    assert table.num_rows == 6 and table.schema.equals(RESULTS_SCHEMA, check_metadata=False)
    pq.write_table(pa.table({"x": [1]}), tmp_path / "other.parquet")
    with pytest.raises(ValueError, match="other.parquet: not a results table"):
        summary_table([str(tmp_path / "other.parquet")])


def test_report_writes_figures_and_tables(tmp_path):
    summary = summary_table([cell(tmp_path, 7, 0.98), cell(tmp_path, 8, None)])
    spec = {"phases": [{"phase": 1, "first_stmt": 10, "last_stmt": 33, "mma": 24, "M": 96, "N": 32, "K": 32,
                        "identity": True, "a_source": "shared(computed(epilogue 0))"}]}
    written = write_report(summary, {"enc2": spec}, tmp_path / "report")
    names = sorted(p.name for p in written)
    assert names == ["identity.png", "phases_enc2.csv", "ratios.png", "registers.png", "summary.csv"]
    for p in written:
        assert p.parent == tmp_path / "report" and p.stat().st_size > 100
    assert (tmp_path / "report" / "identity.png").read_bytes()[:4] == b"\x89PNG"
    phases = (tmp_path / "report" / "phases_enc2.csv").read_text().splitlines()
    assert phases[0].startswith("phase,first_stmt,last_stmt,mma") and phases[1].startswith("1,10,33,24")
    assert not list(tmp_path.glob(".report*"))  # no temporary left beside it
