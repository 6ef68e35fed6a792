"""The Snakefile validates its config and runs the foundation stages on the bundled sample engine:
engine binary → extract → linearise, as the README's main command does."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def workdir(tmp_path):
    for name in ("Snakefile", "workflow", "config"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, tmp_path / name)
    return tmp_path


def _snakemake(workdir, *args):
    return subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", *args], cwd=workdir,
                          capture_output=True, text=True)


def test_sample_layer_runs_end_to_end_and_a_rerun_does_nothing(workdir):
    r = _snakemake(workdir, "results/sample/statements.parquet")
    assert r.returncode == 0, r.stderr[-3000:]
    table = pq.read_table(workdir / "results/sample/statements.parquet")
    opcodes = table.column("opcode").to_pylist()
    # the bundled sample is a 64x32x96 phase: 4 x 4 x 3 = 48 mma
    assert sum(op.startswith("mma.sync") for op in opcodes) == 48
    index = pq.read_table(workdir / "resources/corpus/index.parquet").to_pylist()
    assert sorted(r["compressed"] for r in index) == ["lz4", "none", "zstd"]
    assert len({r["hash"] for r in index}) == 1
    again = _snakemake(workdir, "results/sample/statements.parquet")
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr


def test_bad_config_is_rejected_with_the_schema_message(workdir):
    cfg = yaml.safe_load((workdir / "config/config.yaml").read_text())
    cfg["layers"] = ["Enc 2"]
    (workdir / "config/config.yaml").write_text(yaml.safe_dump(cfg))
    r = _snakemake(workdir, "-n")
    assert r.returncode != 0
    out = r.stdout + r.stderr
    assert "'Enc 2' does not match '^[a-z][a-z0-9]*$'" in out and "layers" in out


def test_unknown_layer_fails_with_the_entry_named(workdir):
    r = _snakemake(workdir, "results/enc7/statements.parquet")
    assert r.returncode != 0
    log = (workdir / "logs/linearise/enc7.log").read_text()
    assert "no module in this corpus defines entry 'cuda_dldn_engine_swin_enc7_kernel'" in log
    assert not (workdir / "results/enc7/statements.parquet").exists()


def test_describe_splice_and_compile_targets(workdir):
    from conftest import PTXAS

    targets = ["results/sample/descriptor.json", "results/sample/phase2/isolate.ptx"]
    if PTXAS:
        targets.append("results/sample/phase2/f32acc.cubin")
    r = _snakemake(workdir, *targets)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    import json

    spec = json.loads((workdir / "results/sample/descriptor.json").read_text())
    assert [p["mma"] for p in spec["phases"]] == [32, 16]
    record = json.loads((workdir / "results/sample/phase2/isolate.ptx.splice.json").read_text())
    assert record["status"] == "ok" and record["phase"] == 2
    if PTXAS:
        report = json.loads((workdir / "results/sample/phase2/f32acc.cubin.json").read_text())
        assert report["status"] == "ok"
    bad = _snakemake(workdir, "results/sample/phase9/isolate.ptx")
    assert bad.returncode != 0
    assert "phase 9 does not exist: the entry has phases 1–2" in (workdir / "logs/splice/sample_phase9_isolate.log").read_text()
    assert not (workdir / "results/sample/phase9/isolate.ptx").exists()


def test_a_cell_gives_one_row_per_recipe_even_when_nothing_can_run(workdir):
    # No GPU and no cpu backend yet: capture and timing are rows with their reasons, not a crash.
    r = _snakemake(workdir, "results/sample_phase2.parquet")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    rows = {row["recipe"]: row for row in pq.read_table(workdir / "results/sample_phase2.parquet").to_pylist()}
    assert sorted(rows) == ["f32acc", "isolate", "regen"]
    for row in rows.values():
        assert row["splice_status"] == "ok" and row["mma"] == 16 and row["stmts_cut"] == 16
        assert row["capture_status"] in ("unsupported", "ok", "no_device")
        if row["capture_status"] == "unsupported":
            assert "cpu backend" in row["capture_message"]
            assert row["timing_status"] in ("no_device", "unsupported") and row["timing_message"]
