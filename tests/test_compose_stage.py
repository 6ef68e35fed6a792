"""The compose stage (issue 37, item 2): per layer the sweep's winners — byte-identical on the final
frame, faster than 1 − k·noise alone — composed into one module, the network's frame captured with
every composition in place, a composition that breaks identity bisected to the phase at fault, and
results/composed.parquet (one row per layer and one for the network). On the cpu backend."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from rr.compose.network import Layer, Network
from rr.compose.select import Choice, Plan, select
from rr.compose.table import COMPOSED_SCHEMA, composed_rows

ROOT = Path(__file__).resolve().parents[1]
ENC2 = "cuda_dldn_engine_swin_enc2_kernel"


def row(phase, recipe, identical=True, ratio=None, noise=0.005, splice="ok", timing=None):
    return {"layer": "enc2", "entry": ENC2, "phase": phase, "recipe": recipe, "splice_status": splice,
            "frame_identical": identical, "capture_status": "ok", "ratio": ratio, "noise": noise,
            "timing_status": timing or ("ok" if ratio is not None else "unsupported")}


def test_each_phase_takes_its_fastest_byte_identical_recipe_faster_than_its_noise():
    rows = [row(7, "isolate", ratio=0.95), row(7, "regen", ratio=0.90), row(7, "f32acc", identical=False, ratio=0.5),
            row(8, "isolate", ratio=0.995, noise=0.004),  # within 2 × noise of 1: not faster
            row(8, "regen", identical=False, ratio=0.8),
            row(9, "isolate", splice="not_applicable"), row(9, "regen", identical=False, ratio=0.7)]
    plan = select(rows, "enc2")
    assert plan.timed and plan.spec == {7: "regen"}
    assert plan.predicted_ratio == pytest.approx(0.90)
    assert "no byte-identical splice is faster than 1 − 2·noise (isolate 0.9950 ± 0.40%)" in plan.unspliced[8]
    assert plan.unspliced[9] == "no byte-identical splice (isolate: splice not_applicable; regen: frame differs)"
    # a looser rule takes phase 8 too; the prediction is the product of the parts' ratios
    looser = select(rows, "enc2", noise_multiple=1.0)
    assert looser.spec == {7: "regen", 8: "isolate"} and looser.predicted_ratio == pytest.approx(0.90 * 0.995)


def test_without_timings_every_byte_identical_phase_is_taken_in_the_recipes_order():
    rows = [row(7, "isolate"), row(7, "regen"), row(8, "regen"), row(8, "f32acc", identical=False)]
    plan = select(rows, "enc2", recipes=["regen", "isolate", "f32acc"])
    assert not plan.timed and plan.spec == {7: "regen", 8: "regen"} and plan.predicted_ratio is None


@pytest.fixture(scope="module")
def engine(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("engine")

    def ok(*args):
        r = subprocess.run([sys.executable, "-m", "rr", *map(str, args)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr

    ok("synth", "engine", "-o", d / "engine.bin")
    ok("extract", d / "engine.bin", "-o", d / "corpus")
    ok("launch", "frame", d / "corpus", "--frame", "128x128", "-o", d / "frame")
    ok("run", d / "frame", "--backend", "cpu", "-o", d / "reference")
    return d


def test_a_composition_that_breaks_identity_is_bisected_to_the_phase_at_fault(engine, tmp_path):
    """A plan edited by hand to take f32acc on phase 8 among identity splices: the composed frame
    differs first in enc2, and bisection names phase 8 alone."""
    from rr.cli.common import resolve_ptx
    from rr.splice.compose import compose

    source = resolve_ptx(str(engine / "corpus"), ENC2)
    plan = Plan("enc2", ENC2, False, 2.0, [Choice(7, "isolate", None, None), Choice(8, "f32acc", None, None),
                                           Choice(9, "regen", None, None)])
    compose(source, ENC2, plan.spec, tmp_path / "enc2.ptx")
    layer = Layer(plan, tmp_path / "enc2.ptx", tmp_path / "enc2.ptx.splice.json", source)
    (tmp_path / "work").mkdir()
    measured = Network(engine / "frame", engine / "reference", {"enc2": layer}, tmp_path / "work", "cpu",
                       say=lambda line: None).measure()
    assert measured.frame_identical is False and measured.first_differing_layer == "enc2"
    assert measured.culprits["enc2"] == ([8], "this phase alone", "identity")
    assert any("phases [7]: frame identical" in s for s in measured.steps)
    assert measured.timing_status == "unsupported"
    rows = composed_rows([plan], measured, "cpu", "128x128", "test")
    assert [r["layer"] for r in rows] == ["enc2", "network"]
    assert rows[0]["at_fault_phases"] == [8] and rows[0]["at_fault"] == "identity"
    assert rows[1]["identical"] is False and rows[1]["first_differing_layer"] == "enc2"


def _workflow(tmp_path: Path, **config) -> Path:
    """A copy of the workflow in tmp_path/w with config/config.yaml's keys updated by config."""
    work = tmp_path / "w"
    work.mkdir()
    for name in ("Snakefile", "workflow", "config", "profiles"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, work / name)
    cfg = yaml.safe_load((work / "config/config.yaml").read_text())
    cfg.update(config)
    (work / "config/config.yaml").write_text(yaml.safe_dump(cfg))
    return work


def test_the_workflow_composes_the_configured_layers_and_writes_the_composed_table(tmp_path):
    work = _workflow(tmp_path, backend="cpu", cpu_frame="128x128", layers=["enc2"], phases=[7, 8],
                     recipes=["isolate", "f32acc"])
    r = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "results/composed.parquet"], cwd=work,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    table = pq.read_table(work / "results/composed.parquet")
    assert table.schema.equals(COMPOSED_SCHEMA, check_metadata=False)
    rows = {x["layer"]: x for x in table.to_pylist()}
    assert set(rows) == {"enc2", "network"}
    # untimed: every byte-identical phase, isolate before f32acc (which changes the frame)
    assert rows["enc2"]["phases"] == [7, 8] and rows["enc2"]["recipes"] == ["isolate", "isolate"]
    assert rows["network"]["identical"] is True and rows["enc2"]["identical"] is True
    assert rows["network"]["timing_status"] == "unsupported" and "GPU" in rows["network"]["timing_message"]
    spec = json.loads((work / "results/compose/enc2.spec.json").read_text())
    assert spec == {"7": "isolate", "8": "isolate"}
    page = (work / "results/compose/composed.html").read_text()
    assert "7 (isolate), 8 (isolate)" in page and "Final frame byte-identical" in page


@pytest.mark.gpu
def test_on_the_gpu_the_composed_frame_is_timed_with_its_noise_and_each_layer_alone(gpu, tmp_path):
    """The stage on cuda at 960×540, isolate on phases 7 and 24 of enc2 and dec5, timed (the 4K
    sweep found isolate on enc2's phase 24 at 0.90 of the layer's time): the composed frame is
    byte-identical, the network row has a ratio with its noise, each composed layer its ratio alone
    next to the product of its parts'."""
    work = _workflow(tmp_path, backend="cuda", frame="960x540", layers=["enc2", "dec5"], phases=[7, 24],
                     recipes=["isolate"])
    r = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "4", "results/composed.parquet"], cwd=work,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = {x["layer"]: x for x in pq.read_table(work / "results/composed.parquet").to_pylist()}
    print({k: (v["phases"], v["ratio"], v["noise"], v["predicted_ratio"], v["timing_status"]) for k, v in rows.items()})
    assert rows["network"]["identical"] is True and rows["network"]["timing_status"] == "ok", rows["network"]
    assert 0.5 < rows["network"]["ratio"] < 2 and rows["network"]["noise"] > 0
    composed = [layer for layer in ("enc2", "dec5") if rows[layer]["phases"]]
    assert composed, "no phase was faster than its noise at 960x540"
    for layer in composed:
        assert set(rows[layer]["phases"]) <= {7, 24} and rows[layer]["recipes"] == ["isolate"] * len(rows[layer]["phases"])
        assert rows[layer]["identical"] is True and 0.5 < rows[layer]["ratio"] < 2 and rows[layer]["noise"] > 0
        assert rows[layer]["predicted_ratio"] < 1
