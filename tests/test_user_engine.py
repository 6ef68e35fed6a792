"""A user's own engine, first try (issue 34): layer names are the user's kernel names, `layers: all`
on a fresh checkout extracts the corpus first, a module compiles for its own `.target` where the
GPU runs it (Triton's sm_90a), and a stage's failure on the user's input is a row, never the end
of the workflow. The kernels are nvcc's, made at test time."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from conftest import PTXAS
from rr.run.compile import compile_arch, module_target

ROOT = Path(__file__).resolve().parents[1]
# kernel names as real engines have them: underscores, digits, capitals
NAMES = ("gc_resid", "mm_128x64_K4")
# the buffers of a launch of tests/cuda/mma_chain.cu (rr launch-template): A, B, the C table, the output
LAUNCH_BUFFERS = ("--buffer", "param_0=64K:e4m3", "--buffer", "param_1=64K:e4m3", "--buffer", "param_2=64K:f16",
                  "--buffer", "param_3=64K:zeros")


def workflow(dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("Snakefile", "workflow", "config", "profiles"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, dest / name)
    return dest


def configure(work: Path, **values) -> None:
    cfg = yaml.safe_load((work / "config/config.yaml").read_text())
    for key, value in values.items():
        if key.startswith("corpus_"):
            cfg["corpus"][key[len("corpus_"):]] = value
        else:
            cfg[key] = value
    (work / "config/config.yaml").write_text(yaml.safe_dump(cfg))


def snakemake(work: Path, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", *map(str, args)], cwd=work,
                          capture_output=True, text=True, timeout=900)


def rr_cli(*args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rr", *map(str, args)], capture_output=True, text=True, cwd=cwd)


@pytest.fixture
def corpus(nvcc_ptx, tmp_path) -> Path:
    """A directory of two nvcc-built mma kernels named as a user's are."""
    d = tmp_path / "engine"
    d.mkdir()
    for name in NAMES:
        shutil.copy(nvcc_ptx("mma_chain", f"-DKERNEL_NAME={name}"), d / f"{name}.ptx")
    return d


def rows(work: Path) -> dict[str, list[dict]]:
    out = {}
    for f in sorted((work / "results").glob("*.parquet")):
        if f.name != "summary.parquet":
            for r in pq.read_table(f).to_pylist():
                out.setdefault(r["layer"], []).append(r)
    return out


def test_layers_all_on_a_corpus_of_ones_own_runs_every_layer_from_a_fresh_checkout(tmp_path, corpus):
    """Only corpus.source and corpus.launches set: the layers are the corpus's entries, named as
    they are; a layer with a launch runs to identical rows, one without says where launches come from."""
    launches = tmp_path / "launches"
    made = rr_cli("launch-template", corpus / "gc_resid.ptx", "--entry", "gc_resid", "-o", launches / "gc_resid",
                  *LAUNCH_BUFFERS, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    work = workflow(tmp_path / "w")
    configure(work, corpus_source=str(corpus), corpus_launches=str(launches), backend="cpu", recipes=["isolate"])
    dry = snakemake(work, "-n")
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert "checkpoint extract" in dry.stdout
    r = snakemake(work)
    assert r.returncode == 0, r.stderr[-3000:]
    found = rows(work)
    assert sorted(found) == sorted(NAMES)
    for layer, layer_rows in found.items():
        spec = json.loads((work / f"results/{layer}/descriptor.json").read_text())
        assert [row["phase"] for row in layer_rows] == [p["phase"] for p in spec["phases"]] and layer_rows
        for row in layer_rows:
            assert row["splice_status"] == "ok" and row["compile_status"] in ("ok", "no_ptxas")
            if layer == "gc_resid":  # its launch given: the splice runs, byte-identical
                assert (row["capture_status"], row["frame_identical"]) == ("ok", True), row
            else:  # none given: the row says so, and where launches come from
                assert row["capture_status"] == "no_launch" and "rr capture" in row["capture_message"], row
    assert sorted(p.name for p in (work / "results/report/phases").glob("phases_*")) == sorted(
        f"phases_{n}.{ext}" for n in NAMES for ext in ("csv", "html"))


def test_a_layer_named_as_a_directory_the_workflow_keeps_is_refused_saying_why(tmp_path, corpus):
    work = workflow(tmp_path / "w")
    configure(work, corpus_source=str(corpus), corpus_entry_pattern="{layer}", layers=["frame"])
    r = snakemake(work, "-n")
    assert r.returncode != 0
    assert "'frame' cannot be a layer's name: results/frame/ holds the network's frame layout" in r.stdout + r.stderr


@pytest.mark.parametrize("target, arch, chosen", [
    ("sm_90a", "sm_90", "sm_90a"),  # Triton's: the arch-specific variant of the GPU's own SM
    ("sm_90", "sm_90", "sm_90"),
    ("sm_80", "sm_90", "sm_90"),  # older PTX compiles forward
    (None, "sm_90", "sm_90"),
    ("sm_90a", "sm_100", "sm_100"),
])
def test_a_module_is_compiled_for_its_own_target_where_the_gpu_runs_it(target, arch, chosen):
    assert compile_arch(target, arch) == chosen


def test_a_module_for_a_newer_gpu_is_refused_naming_its_target():
    with pytest.raises(ValueError, match=r"\.target sm_100a needs a newer GPU than sm_90"):
        compile_arch("sm_100a", "sm_90")


def test_the_target_is_read_from_the_module_text():
    assert module_target(b"//\n.version 8.4\n.target sm_90a\n.address_size 64\n") == "sm_90a"
    assert module_target(b".version 8.4\n  .target sm_80, debug\n") == "sm_80"
    assert module_target(b".version 8.4\n") is None


@pytest.mark.skipif(PTXAS is None, reason="needs ptxas on PATH")
def test_an_sm90a_module_compiles_and_its_record_names_the_arch(tmp_path, corpus):
    from rr.cli.main import main

    ptx = tmp_path / "k.ptx"
    ptx.write_text((corpus / "gc_resid.ptx").read_text().replace(".target sm_90", ".target sm_90a", 1))
    assert main(["compile", str(ptx), "--arch", "sm_90", "-o", str(tmp_path / "k.cubin")]) == 0
    assert json.loads((tmp_path / "k.cubin.json").read_text())["arch"] == "sm_90a"


@pytest.mark.skipif(PTXAS is None, reason="needs ptxas on PATH")
def test_a_compile_that_fails_on_a_users_module_is_rows_not_the_end_of_the_workflow(tmp_path, corpus):
    """On cuda every launch runs the layer's compiled cubin; a module ptxas refuses (here one that
    targets a newer GPU) used to stop the workflow in `rr launch` (an empty module file). Now the
    launch records why, the captures record it, and every cell has its rows."""
    for f in corpus.iterdir():
        f.write_text(f.read_text().replace(".target sm_90", ".target sm_100a", 1))
    work = workflow(tmp_path / "w")
    configure(work, corpus_source=str(corpus), corpus_entry_pattern="{layer}", backend="cuda", recipes=["isolate"],
              layers=["gc_resid"])
    r = snakemake(work)
    assert r.returncode == 0, r.stderr[-3000:]
    found = rows(work)["gc_resid"]
    assert found
    for row in found:
        assert row["compile_status"] == "compile_error" and "needs a newer GPU than sm_90" in row["compile_message"]
        assert row["capture_status"] in ("no_module", "no_launch"), row["capture_status"]


def test_snakemake_lint_finds_nothing(tmp_path):
    work = workflow(tmp_path / "w")
    r = snakemake(work, "--lint")
    assert r.returncode == 0 and "Congratulations, your workflow is in a good condition" in r.stdout + r.stderr, \
        (r.stdout + r.stderr)[-3000:]


def test_the_report_before_its_sweep_says_which_command_makes_it(tmp_path):
    work = workflow(tmp_path / "w")
    r = snakemake(work, "--report", "results/report.html")
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "marked for report but does not exist" not in out
    assert "run `snakemake --cores N` with the same --config first" in out
    assert "snakemake --cores 1 --config 'layers=[enc2]' 'phases=[8]'" in out


def test_the_rules_environment_pins_what_the_package_depends_on():
    """workflow/envs/rr.yaml is what a rule's conda env installs: every runtime dependency of
    pyproject.toml but Snakemake itself, with the same bounds."""
    import re
    import tomllib

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    env = yaml.safe_load((ROOT / "workflow/envs/rr.yaml").read_text())["dependencies"]
    pinned = {re.split(r"[<>=!]", d, maxsplit=1)[0].replace("_", "-"): d for d in env if isinstance(d, str)}
    for dep in declared:
        name = re.split(r"[<>=!\[]", dep, maxsplit=1)[0].replace("_", "-")
        if name == "snakemake":
            continue
        assert name in pinned, f"{name} ({dep}) is not in workflow/envs/rr.yaml"
        assert pinned[name].replace("_", "-").replace(" ", "") == dep.replace("_", "-").replace(" ", ""), \
            (pinned[name], dep)


def splice_without_phase(ptx: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rr", "splice", str(ptx), "--entry", "gc_resid", "--recipe",
                           "isolate", "-o", str(out)], capture_output=True, text=True, cwd=ROOT)


def test_a_splice_without_phase_on_a_one_phase_kernel_cuts_that_phase(nvcc_ptx, tmp_path):
    ptx = nvcc_ptx("mma_chain", "-DKERNEL_NAME=gc_resid", "-DK_STEPS=1")  # one chain of length 1: one phase
    done = splice_without_phase(ptx, tmp_path / "out.ptx")
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "out.ptx.splice.json").read_text())["phase"] == 1
    assert "phase 1 by isolate" in done.stdout


def test_a_splice_without_phase_where_the_recipes_phase_is_missing_asks_for_one(nvcc_ptx, tmp_path):
    ptx = nvcc_ptx("mma_chain", "-DKERNEL_NAME=gc_resid")  # two phases; the recipe's default is phase 8
    done = splice_without_phase(ptx, tmp_path / "out.ptx")
    assert done.returncode == 2
    assert "default phase 8 does not exist: the entry has phases 1–2; give --phase" in done.stderr
    assert not (tmp_path / "out.ptx").exists()


def test_a_launch_from_the_users_launches_without_an_entry_pattern_uses_and_names_their_entry(nvcc_ptx, tmp_path):
    ptx = nvcc_ptx("mma_chain", "-DKERNEL_NAME=gc_resid")
    made = rr_cli("launch-template", ptx, "--entry", "gc_resid", "-o", tmp_path / "launches/gc_resid",
                  *LAUNCH_BUFFERS, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert rr_cli("extract", ptx, "-o", tmp_path / "corpus", cwd=tmp_path).returncode == 0
    done = rr_cli("launch", "gc_resid", tmp_path / "corpus", "--launches", tmp_path / "launches",
                  "-o", tmp_path / "L", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "launch of gc_resid (the entry of the launch in" in done.stdout
    assert json.loads((tmp_path / "L/launch.json").read_text())["entry"] == "gc_resid"


def test_a_missing_launch_passed_on_names_the_file_that_said_it_once(nvcc_ptx, tmp_path):
    ptx = nvcc_ptx("mma_chain", "-DKERNEL_NAME=gc_resid")
    assert rr_cli("extract", ptx, "-o", tmp_path / "corpus", cwd=tmp_path).returncode == 0
    steps = [("launch", "gc_resid", "corpus", "--entry-pattern", "{layer}", "-o", "layer"),  # no launch: a record
             ("relaunch", "layer", "--module", ptx, "-o", "splice"),  # the splice's launch passes it on
             ("run", "splice", "--backend", "cpu", "-o", "capture")]  # and its run records it
    for step in steps:
        done = rr_cli(*step, "--record", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    message = json.loads((tmp_path / "capture/run.json").read_text())["message"]
    assert message.startswith("layer/launch.error.json: no launch for layer 'gc_resid'")
    assert "splice" not in message and "corpus.launches" in message
