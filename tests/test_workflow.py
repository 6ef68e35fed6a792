"""The Snakefile validates its config and runs the pipeline on the synthetic engine: engine binary →
extract → linearise → describe → splice → compile → capture (cpu backend here) → compare → collect,
as the README's main command does; a rerun does nothing, an edited recipe reruns its own jobs only,
and bad configs and targets are refused with their reason."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from rr.synth.family import NAMES

ROOT = Path(__file__).resolve().parents[1]


def _copy_workflow(dest):
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("Snakefile", "workflow", "config", "profiles"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, dest / name)
    return dest


@pytest.fixture
def workdir(tmp_path):
    return _copy_workflow(tmp_path)


def _snakemake(workdir, *args, env=None):
    return subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", *args], cwd=workdir,
                          capture_output=True, text=True, env=env)


def _configure(workdir, **values):
    cfg = yaml.safe_load((workdir / "config/config.yaml").read_text())
    cfg.update(values)
    (workdir / "config/config.yaml").write_text(yaml.safe_dump(cfg))


def _job_resources(out):
    """{rule: resources line} of a dry run's job listing."""
    return _job_lines(out, "resources:")


def _job_lines(out, key):
    """{rule: its jobs' `key` line} of a dry run's job listing (Snakemake prints `threads:` only
    where a job's threads are not 1)."""
    jobs, rule = {}, None
    for line in out.splitlines():
        if line.startswith(("rule ", "localrule ", "checkpoint ")):
            rule = line.split()[1].rstrip(":")
        elif line.strip().startswith(key) and rule:
            jobs[rule] = line.strip()
    return jobs


def test_sample_layer_runs_end_to_end_and_a_rerun_does_nothing(workdir):
    r = _snakemake(workdir, "results/sample/statements.parquet")
    assert r.returncode == 0, r.stderr[-3000:]
    table = pq.read_table(workdir / "results/sample/statements.parquet")
    opcodes = table.column("opcode").to_pylist()
    # the bundled sample is a 64x32x96 phase: 4 x 4 x 3 = 48 mma
    assert sum(op.startswith("mma.sync") for op in opcodes) == 48
    index = pq.read_table(workdir / "resources/corpus/index.parquet").to_pylist()
    assert {r["compressed"] for r in index} == {"lz4", "none", "zstd"}  # text and two fatbins
    entries = {e for r in index for e in r["entries"]}  # the eleven layers and the sample
    assert entries == {f"cuda_dldn_engine_swin_{n}_kernel" for n in NAMES + ("sample",)}
    again = _snakemake(workdir, "results/sample/statements.parquet")
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr


def test_bad_config_is_rejected_with_the_schema_message(workdir):
    cfg = yaml.safe_load((workdir / "config/config.yaml").read_text())
    cfg["layers"] = ["Enc 2"]
    (workdir / "config/config.yaml").write_text(yaml.safe_dump(cfg))
    r = _snakemake(workdir, "-n")
    assert r.returncode != 0
    out = r.stdout + r.stderr
    assert "'Enc 2' does not match '^%?[A-Za-z0-9_$]+$'" in out and "layers" in out


def test_unknown_layer_fails_with_the_entry_named(workdir):
    r = _snakemake(workdir, "results/enc7/statements.parquet")
    assert r.returncode != 0
    log = (workdir / "logs/linearise/enc7.log").read_text()
    assert "no module in this corpus defines entry 'cuda_dldn_engine_swin_enc7_kernel'" in log
    assert not (workdir / "results/enc7/statements.parquet").exists()


def test_describe_splice_and_compile_targets(workdir):
    from conftest import PTXAS

    targets = ["results/sample/descriptor.json", "results/sample/phase2/isolate.ptx",
               "results/sample/phase2/f32acc.cubin.json"]
    r = _snakemake(workdir, *targets)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    spec = json.loads((workdir / "results/sample/descriptor.json").read_text())
    assert [p["mma"] for p in spec["phases"]] == [32, 16]
    record = json.loads((workdir / "results/sample/phase2/isolate.ptx.splice.json").read_text())
    assert record["status"] == "ok" and record["phase"] == 2
    report = json.loads((workdir / "results/sample/phase2/f32acc.cubin.json").read_text())
    assert report["status"] == ("ok" if PTXAS else "no_ptxas")
    assert (workdir / "results/sample/phase2/f32acc.cubin").exists() == bool(PTXAS)
    # a refused splice is a record, so the sweep goes on and the cell's row says why
    bad = _snakemake(workdir, "results/sample/phase9/isolate.ptx")
    assert bad.returncode == 0, bad.stderr[-2000:]
    refused = json.loads((workdir / "results/sample/phase9/isolate.ptx.splice.json").read_text())
    assert refused["status"] == "error"
    assert "phase 9 does not exist: the entry has phases 1–2" in refused["message"]
    assert (workdir / "results/sample/phase9/isolate.ptx").read_text() == ""


def test_a_sample_cell_gives_one_row_per_shipped_recipe(workdir):
    _configure(workdir, backend="cpu", layers=["sample"], keep_captures=True)
    r = _snakemake(workdir, "results/sample_phase2.parquet")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    # keep_captures: every capture and launch stays; what a splice left as it was is the reference's file
    cell, reference = workdir / "results/sample/phase2", workdir / "results/sample/reference"
    for recipe in ("isolate", "regen", "f32acc", "probe"):
        assert (cell / f"{recipe}.launch/launch.json").is_file(), recipe
        record = json.loads((cell / f"{recipe}.capture/run.json").read_text())
        assert record["reference"] == "results/sample/reference"
        for buffer in json.loads((cell / f"{recipe}.capture/launch.json").read_text())["buffers"].values():
            out, held = cell / f"{recipe}.capture" / buffer["file"], reference / buffer["file"]
            linked = held.is_file() and out.stat().st_ino == held.stat().st_ino
            assert linked == (held.is_file() and out.read_bytes() == held.read_bytes()), (recipe, buffer)
        # the identity recipes write nothing of their own; f32acc's rounding changes the output
        assert record["linked_to_reference"] == ["a", "b", "bias"] + (["out"] if recipe != "f32acc" else []), recipe
    assert (cell / "f32acc.capture/out.npy").stat().st_nlink == 1
    rows = {row["recipe"]: row for row in pq.read_table(workdir / "results/sample_phase2.parquet").to_pylist()}
    assert sorted(rows) == ["f32acc", "isolate", "probe", "regen"]
    for row in rows.values():
        assert row["splice_status"] == "ok" and row["mma"] == 16 and row["stmts_cut"] == 16
        assert row["capture_status"] == "ok" and row["capture_backend"] == "cpu"
        assert row["timing_status"] == "unsupported" and row["timing_message"]
    assert rows["isolate"]["frame_identical"] and rows["regen"]["frame_identical"] and rows["probe"]["frame_identical"]
    # f32acc is a numerics variant: measured by PSNR (infinite where the exact-sum mma model makes
    # the intermediate f16 roundings immaterial, as on this kernel's inputs)
    assert rows["f32acc"]["psnr_db"] is not None and rows["f32acc"]["psnr_db"] > 40


def _small_cpu_config(workdir, recipes):
    _configure(workdir, backend="cpu", cpu_frame="128x128", recipes=recipes, phases=[8], layers=["enc2"])


def test_an_enc2_cell_on_the_cpu_backend_end_to_end(workdir):
    _small_cpu_config(workdir, ["isolate", "regen"])
    r = _snakemake(workdir, "results/enc2_phase8.parquet")
    assert r.returncode == 0, r.stderr[-3000:]
    # what the captures wait for goes before the splices and compiles (priority): on a sweep's
    # node the GPU is not left idle while hundreds of ptxas run first
    started = re.findall(r"^(?:local)?(?:rule|checkpoint) (\w+):$", r.stdout + r.stderr, flags=re.M)
    assert started.index("capture_frame") < started.index("splice"), started
    rows = {row["recipe"]: row for row in pq.read_table(workdir / "results/enc2_phase8.parquet").to_pylist()}
    assert set(rows) == {"isolate", "regen"}
    for row in rows.values():
        assert (row["M"], row["N"], row["K"]) == (64, 32, 96)  # reference §2.2 row 8
        assert row["splice_status"] == "ok" and row["capture_backend"] == "cpu" and row["frame"] == "128x128"
        # the capture is the whole network's frame with enc2 replaced; its final frame is the verdict
        assert row["frame_identical"] is True and row["final_buffer"] == "frame"
        assert row["first_differing_layer"] is None and row["capture_started_at"] == "enc2"
        assert row["capture_completed_after"] == "enc2"  # enc2's outputs matched: the rest is the reference's
        assert row["timing_status"] == "unsupported" and row["ratio"] is None and "no timing" in row["timing_message"]
    # keep_captures false (the default): the cells' capture and launch directories are gone once
    # compared, their records stay; the reference capture stays
    cell = workdir / "results/enc2/phase8"
    assert sorted(p.name for p in cell.iterdir() if p.is_dir()) == []
    for recipe in rows:
        record = json.loads((cell / f"{recipe}.run.json").read_text())
        assert record["status"] == "ok" and "frame" in record["linked_to_reference"]
        assert (cell / f"{recipe}.compare.json").is_file()
    assert (workdir / "results/frame/reference/frame.npy").stat().st_nlink == 1
    again = _snakemake(workdir, "results/enc2_phase8.parquet")
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr
    # the summary, the report's figures and the report itself
    r = _snakemake(workdir, "results/report/identity.png")
    assert r.returncode == 0, r.stderr[-3000:]
    assert pq.read_table(workdir / "results/summary.parquet").num_rows == 2
    r = _snakemake(workdir, "--report", "results/report.html")
    assert r.returncode == 0, r.stderr[-3000:]
    html = (workdir / "results/report.html").read_text()
    assert "identity.png" in html and "ratios.png" in html and "phases_enc2.csv" in html
    # an edited recipe reruns its own splice and what follows from it, nothing else
    recipe = workdir / "config/recipes/regen.yaml"
    recipe.write_text(recipe.read_text().replace("description:", "description: (edited)", 1))
    dry = _snakemake(workdir, "-n", "results/enc2_phase8.parquet")
    out = dry.stdout + dry.stderr
    assert dry.returncode == 0, out
    jobs = {line.split()[0]: int(line.split()[1]) for line in out.splitlines()
            if len(line.split()) == 2 and line.split()[1].isdigit()}
    assert jobs.get("splice") == 1 and "capture_reference" not in jobs and "describe" not in jobs, out


def test_a_phase_the_layer_lacks_is_refused_with_its_phases(workdir):
    _small_cpu_config(workdir, ["isolate"])
    r = _snakemake(workdir, "results/enc2_phase39.parquet")
    assert r.returncode != 0
    assert "layer enc2 has no phase 39: its phases are 1–38 (38)" in r.stdout + r.stderr
    assert not (workdir / "results/enc2_phase39.parquet").exists()
    # phases given on the command line arrive as strings; the same check applies to the config's list
    dry = _snakemake(workdir, "-n", "--config", "phases=[8,9]")
    assert dry.returncode == 0 and {"results/enc2_phase8.parquet", "results/enc2_phase9.parquet"} <= \
        set(re.findall(r"results/enc2_phase\d+\.parquet", dry.stdout)), dry.stdout[-3000:] + dry.stderr[-3000:]
    dry = _snakemake(workdir, "-n", "--config", "phases=[8,39]")
    assert dry.returncode != 0 and "layer enc2 has no phase 39" in dry.stdout + dry.stderr


def test_the_workflow_limits_gpu_jobs_by_the_gpus_present_and_its_profile_runs_no_code(workdir):
    from rr.run.gpus import gpu_count

    # the profile is plain data (YTE would run code, importing rr from the working directory)
    profile = yaml.safe_load((workdir / "profiles/default/config.yaml").read_text())
    assert "__use_yte__" not in profile and "resources" not in profile
    # eight GPU jobs per device: one on it (its claim), the others' start-up and comparisons beside it
    slots = 8 * max(1, gpu_count())
    r = _snakemake(workdir, "results/sample/statements.parquet")
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout + r.stderr
    assert "Using workflow specific profile profiles/default" in out
    assert re.search(rf"Provided resources: .*gpu\D+{slots}\b", out), out[:3000]
    # a limit given on the command line wins over the profile's
    r = _snakemake(workdir, "-F", "results/sample/statements.parquet", "--resources", "gpu=3")
    assert re.search(r"Provided resources: .*gpu\D+3\b", r.stdout + r.stderr), r.stderr[-3000:]


def test_capture_and_timing_jobs_take_a_gpu_on_the_cuda_backend_only(workdir):
    _configure(workdir, layers=["sample"], backend="cuda")
    assert _snakemake(workdir, "results/sample/descriptor.json").returncode == 0
    dry = _snakemake(workdir, "-n", "results/sample_phase2.parquet")
    jobs = _job_resources(dry.stdout + dry.stderr)
    gpu_rules = {"capture_reference", "measure"}
    assert gpu_rules <= set(jobs), dry.stdout[-3000:]
    for rule, resources in jobs.items():
        assert ("gpu=1" in resources) == (rule in gpu_rules), (rule, resources)
    # on cuda they hold no core while they wait for the GPU: the cores are ptxas's
    assert _job_lines(dry.stdout + dry.stderr, "threads:") == dict.fromkeys(gpu_rules, "threads: 0")
    assert "--backend cuda" in _snakemake(workdir, "-n", "-p", "results/sample_phase2.parquet").stdout
    _configure(workdir, backend="cpu")
    dry = _snakemake(workdir, "-n", "-p", "results/sample_phase2.parquet")
    out = dry.stdout + dry.stderr
    jobs = _job_resources(out)
    # the cpu backend gives no timing (the rows say why): its measure jobs time nothing
    assert "compile_reference" in jobs and "--backend cpu" in out
    assert all("gpu=0" in jobs[rule] for rule in gpu_rules)
    assert _job_lines(out, "threads:") == {}  # the interpreter's runs take their core


def test_a_frame_cell_on_the_cuda_backend_captures_frames_and_times_frame_and_layer(workdir):
    # enc2 of the synthetic engine: the frame layout and its reference capture once, each splice
    # captured as the whole frame (not resumed on the GPU), timed as a frame and as enc2 alone
    _configure(workdir, backend="cuda", recipes=["regen"], phases=[8])
    assert _snakemake(workdir, "results/enc2/descriptor.json").returncode == 0
    dry = _snakemake(workdir, "-n", "-p", "results/enc2_phase8.parquet")
    out = dry.stdout + dry.stderr
    jobs = _job_resources(out)
    gpu_rules = {"capture_frame", "measure_in_frame"}
    assert gpu_rules | {"frame_layout", "layer_alone"} <= set(jobs), out[-3000:]
    assert "capture_reference" not in jobs and "launch" not in jobs and "measure" not in jobs  # no enc2 alone
    for rule, resources in jobs.items():
        assert ("gpu=1" in resources) == (rule in gpu_rules), (rule, resources)
    assert ("rr measure results/frame/layout --module results/enc2/phase8/regen.cubin --splice-record "
            "results/enc2/phase8/regen.ptx.splice.json --reference results/frame/reference --layer enc2") in out
    assert "--alone results/enc2/alone.launch" in out
    for record in ("run", "compare", "timing", "layer_timing"):
        assert f"results/enc2/phase8/regen.{record}.json" in out


def test_the_slurm_profile_asks_slurm_for_one_gpu_per_gpu_job(workdir):
    from types import SimpleNamespace

    from snakemake_executor_plugin_slurm.utils import set_gres_string

    _configure(workdir, layers=["sample"], backend="cuda")
    assert _snakemake(workdir, "results/sample/descriptor.json").returncode == 0
    dry = _snakemake(workdir, "--workflow-profile", "profiles/slurm", "-n", "results/sample_phase2.parquet")
    out = dry.stdout + dry.stderr
    assert dry.returncode == 0 and "Using workflow specific profile profiles/slurm" in out, out[-3000:]
    for rule, line in _job_resources(out).items():
        resources = dict(kv.split("=", 1) for kv in line.removeprefix("resources:").replace(" ", "").split(","))
        gpu_job = rule in {"capture_reference", "capture_frame", "measure", "measure_in_frame"}
        assert resources["slurm_partition"] == ("gpu" if gpu_job else "cpu"), (rule, line)
        # the executor plugin's own translation of the job's resources into sbatch arguments
        gres = set_gres_string(SimpleNamespace(resources={k: int(v) if v.isdigit() else v
                                                          for k, v in resources.items()}))
        assert gres.strip() == ("--gpus=1" if gpu_job else ""), (rule, gres)


def test_compile_and_the_reference_capture_are_served_from_the_output_cache(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    env = {**os.environ, "SNAKEMAKE_OUTPUT_CACHE": str(cache)}
    targets = ["results/sample/phase2/isolate.cubin.json", "results/sample/reference"]
    runs = []
    for name in ("first", "second"):
        wd = _copy_workflow(tmp_path / name)
        _configure(wd, layers=["sample"], backend="cpu")
        r = _snakemake(wd, *targets, "--cache", env=env)
        assert r.returncode == 0, r.stderr[-3000:]
        runs.append((wd, r.stdout + r.stderr))
    (first, _), (second, out) = runs
    for path in ("results/sample/phase2/isolate.cubin", "results/sample/phase2/isolate.cubin.json",
                 "results/sample/reference/out.npy", "results/sample/reference/run.json"):
        assert f"Symlinking output file {path} from cache" in out, out[-3000:]
    # the second workflow ran neither ptxas nor the kernel: its logs of those jobs are empty
    assert (second / "logs/compile/sample_phase2_isolate.log").read_text() == ""
    assert (second / "logs/capture/sample_reference.log").read_text() == ""
    assert (first / "logs/capture/sample_reference.log").read_text() != ""
    assert json.loads((second / "results/sample/phase2/isolate.cubin.json").read_text()) == \
        json.loads((first / "results/sample/phase2/isolate.cubin.json").read_text())


@pytest.mark.gpu
def test_an_enc2_cell_on_the_cuda_backend_is_captured_on_a_claimed_gpu_and_timed(workdir, gpu):
    from rr.run.gpus import visible_gpus

    _configure(workdir, backend="cuda", frame="256x256", recipes=["isolate", "regen"], phases=[8],
               timing={"noise": 0.01, "time_limit_s": 1})
    r = _snakemake(workdir, "results/enc2_phase8.parquet")
    assert r.returncode == 0, r.stderr[-3000:]
    rows = {row["recipe"]: row for row in pq.read_table(workdir / "results/enc2_phase8.parquet").to_pylist()}
    for row in rows.values():
        assert row["capture_backend"] == "cuda" and row["frame"] == "256x256"
        assert row["frame_identical"] is True
        assert row["timing_status"] == "ok" and 0.5 < row["ratio"] < 2 and row["gpu"] == gpu["name"]
    for recipe in rows:
        record = json.loads((workdir / f"results/enc2/phase8/{recipe}.run.json").read_text())
        timing = json.loads((workdir / f"results/enc2/phase8/{recipe}.timing.json").read_text())
        assert record["gpu"] in visible_gpus() and timing["gpu"] in visible_gpus()
        assert record["device"]["uuid"] == record["gpu"]  # the child saw only the claimed device


def test_a_dry_run_of_a_cell_on_a_fresh_clone_lists_its_jobs(workdir):
    dry = _snakemake(workdir, "-n", "results/enc2_phase8.parquet")
    out = dry.stdout + dry.stderr
    assert dry.returncode == 0, out[-3000:]
    assert "checkpoint describe" in out and "checkpoint extract" in out


def test_layers_without_mma_or_without_a_launch_are_status_rows(workdir, tmp_path):
    """A corpus whose enc9 has phases but no synthetic launch, and whose enc8 has no mma at all:
    the sweep finishes, and the summary says so row by row."""
    corpus = tmp_path / "ptx"
    corpus.mkdir()
    sample = (ROOT / "rr/data/sample_swin.ptx").read_text()
    (corpus / "enc9.ptx").write_text(sample.replace("cuda_dldn_engine_swin_sample_kernel",
                                                    "cuda_dldn_engine_swin_enc9_kernel"))
    (corpus / "enc8.ptx").write_text((ROOT / "tests/ptx/work.ptx").read_text().replace(
        "rr_test_work", "cuda_dldn_engine_swin_enc8_kernel"))
    _configure(workdir, corpus={"source": str(corpus), "entry_pattern": "cuda_dldn_engine_swin_{layer}_kernel"},
               layers=["enc9", "enc8"], recipes=["regen"], backend="cpu")
    r = _snakemake(workdir)  # rule all: the cells, the summary and the report
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert (workdir / "results/report/identity.png").is_file()
    rows = pq.read_table(workdir / "results/summary.parquet").to_pylist()
    enc9 = sorted((row for row in rows if row["layer"] == "enc9"), key=lambda row: row["phase"])
    assert [row["phase"] for row in enc9] == [1, 2]
    for row in enc9:
        assert row["splice_status"] == "ok" and row["capture_status"] == row["timing_status"] == "no_launch"
        assert "no launch for layer 'enc9'" in row["capture_message"]
    (enc8,) = [row for row in rows if row["layer"] == "enc8"]
    assert enc8["phase"] is None and enc8["splice_status"] == "no_phases" and "no mma" in enc8["splice_message"]


BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
    for p, n in zip("abcdefgh", "bcdefghi"))


def test_a_config_alias_bomb_is_refused_before_validation(workdir):
    config = workdir / "config/config.yaml"
    text = config.read_text()
    assert "\nlayers: all\n" in text
    config.write_text(text.replace("\nlayers: all\n", "\n" + BOMB + "layers: *i\n"))
    dry = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "-n"], cwd=workdir,
                         capture_output=True, text=True, timeout=120)
    out = dry.stdout + dry.stderr
    assert dry.returncode != 0 and "config/config.yaml: the document expands to more than" in out, out[-3000:]
    assert len(out) < 20_000


def test_a_config_that_enables_yte_templating_is_refused_unevaluated(workdir):
    config = workdir / "config/config.yaml"
    marker = workdir / "evaluated"
    config.write_text("__use_yte__: true\n" + config.read_text().replace(
        "input_seed: 7", f"input_seed: ?__import__('pathlib').Path({str(marker)!r}).touch() or 7"))
    dry = _snakemake(workdir, "-n")
    out = dry.stdout + dry.stderr
    assert dry.returncode != 0 and "__use_yte__" in out and "YTE templating" in out, out[-3000:]
    assert not marker.exists()


def test_the_grouping_key_numbers_the_phases_of_describe_and_splice(workdir):
    # enc2 under `gemm` grouping: the K/V projections (phases 1–6, B loads between them) and the
    # four heads' output projection (9–12, shared loads between) are one GEMM each: 30 phases
    _configure(workdir, grouping="gemm")
    r = _snakemake(workdir, "results/enc2/descriptor.json")
    assert r.returncode == 0, r.stderr[-3000:]
    spec = json.loads((workdir / "results/enc2/descriptor.json").read_text())
    assert spec["grouping"] == "gemm" and len(spec["phases"]) == 30
    assert (spec["phases"][0]["mma"], spec["phases"][0]["K"], len(spec["phases"][0]["runs"])) == (144, 96, 6)
    dry = _snakemake(workdir, "-n", "-p", "results/enc2/phase1/regen.ptx")
    assert dry.returncode == 0 and "--grouping gemm" in dry.stdout, dry.stdout[-2000:]
