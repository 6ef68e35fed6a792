"""The SLURM profile against a running SLURM: a single-node cluster (tests/slurm/cluster.py: munged,
slurmctld and slurmd started by the test) runs the README's main target through `snakemake
--workflow-profile profiles/slurm` as sbatch jobs: captures and timings in partition gpu with a GPU
each, every other job in partition cpu, with the memory, runtime and GPU model edited in the
profile's one place, and the same rows as a local run. A job cancelled with scancel fails the
invocation and the next one runs it again; a capture on a node that shows it no GPU is its status
row, and the sweep finishes.

The cluster has no accounting database, so job states come from squeue (--slurm-status-command
squeue, as the README says for such clusters). The cpu backend at cpu_frame keeps it short, and so
does one recipe (isolate): each recipe is six more jobs, each a few seconds of Snakemake start-up,
on the two cores CI has. The runs are made once, together (the `runs` fixture); each test checks
one thing about them."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from dataclasses import dataclass

import pyarrow.parquet as pq
import pytest
import yaml
from conftest import PTXAS
from slurm.cluster import missing, single_node_cluster
from test_workflow import ROOT, _configure, _copy_workflow, _small_cpu_config

NO_SLURM = missing()
pytestmark = pytest.mark.skipif(NO_SLURM is not None, reason=str(NO_SLURM))

TARGET = "results/enc2_phase8.parquet"  # the README's main target
SAMPLE_TARGET = "results/sample_phase2.parquet"
RECIPES = ["isolate"]
# the rules the profile sends to partition gpu; the main target's cell is a frame of the network
# (capture_frame, then the splice's frame measured), the sample layer's a launch of its own
# (capture_reference, then measure); on cuda a frame's splice is measure_in_frame (its layer alone too)
GPU_RULES = {"capture_reference", "capture_frame", "measure", "measure_in_frame"}
MAIN_GPU_RULES = {"capture_frame", "measure"}  # the cpu backend times nothing: not the layer alone either
SAMPLE_GPU_RULES = {"capture_reference", "measure"}
# what this test's node can give (its memory is this machine's), edited into the profile
CPU_JOBS = {"mem_mb": 2000, "runtime": 20}
GPU_JOBS = {"mem_mb": 3000, "runtime": 25}
# how long ptxas took and when the row was written: different in any two runs
RUN_STAMPS = ("compile_ms", "created_at")
TIMEOUT_S = 900


@dataclass
class Invocation:
    out: str
    returncode: int
    jobs: list  # its SLURM jobs, as squeue --json gives them


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with single_node_cluster(tmp_path_factory.mktemp("slurm")) as running:
        yield running


def _checkout(dest, code=ROOT / "rr"):
    """A workdir that is a whole checkout: the workflow and, beside it, the rr code its jobs run
    (`python3 -m rr` in the workdir) and its fingerprints cover, fixed while the tree it was
    copied from changes."""
    _copy_workflow(dest)
    shutil.copytree(code, dest / "rr", ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def _fit_profile(workdir, cluster):
    """The profile's two marked blocks edited as a cluster user does: memory and runtimes this
    node can give, and its GPU type. The GPU block is one mapping (a YAML anchor) for all the
    GPU rules, so editing capture_reference's edits them all."""
    path = workdir / "profiles/slurm/config.yaml"
    profile = yaml.safe_load(path.read_text())
    profile["default-resources"].update(CPU_JOBS)
    profile["set-resources"]["capture_reference"].update(GPU_JOBS, gpu_model=cluster.gpu_model)
    path.write_text(yaml.safe_dump(profile, sort_keys=False))


@pytest.fixture(scope="module")
def snakemake():
    """start(workdir, env, *args): a snakemake process; one still running when the module's tests
    are done (after a failure in a fixture) is killed, before the cluster stops."""
    started = []

    def start(workdir, env, *args) -> subprocess.Popen:
        started.append(subprocess.Popen([sys.executable, "-m", "snakemake", *args], cwd=workdir, env=env,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        return started[-1]

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
            process.communicate()


def _on_slurm(start, workdir, cluster, *args, env=None) -> subprocess.Popen:
    return start(workdir, env or cluster.env, "--workflow-profile", "profiles/slurm", "--slurm-status-command",
                 "squeue", "--slurm-init-seconds-before-status-checks", "4", *args)


def _finish(process: subprocess.Popen) -> str:
    try:
        return process.communicate(timeout=TIMEOUT_S)[0]
    except subprocess.TimeoutExpired:
        process.kill()
        return process.communicate()[0] + f"\n(killed after {TIMEOUT_S} s)"


def _finish_on_slurm(process: subprocess.Popen, cluster) -> Invocation:
    out = _finish(process)
    # the executor plugin's run ID: the SLURM job name of every job of that invocation
    run_id = re.search(r"SLURM run ID: (\S+)", out)
    jobs = [job for job in cluster.jobs() if run_id and job["name"] == run_id.group(1)]
    return Invocation(out, process.returncode, jobs)


def _rule(job: dict) -> str:
    """The rule of a job, from the comment the plugin gives it: rule_<rule>[_wildcards_<values>]."""
    return job["comment"].removeprefix("rule_").split("_wildcards_")[0]


def _rows(workdir, target=TARGET) -> dict:
    rows = pq.read_table(workdir / target).to_pylist()
    return {row["recipe"]: {k: v for k, v in row.items() if k not in RUN_STAMPS} for row in rows}


def _states(jobs) -> list:
    return [(j["comment"], j["job_state"]) for j in jobs]


@dataclass
class Runs:
    local: object  # the workdir of the main target's local run
    local_out: str
    on_slurm: object  # the workdir of its SLURM runs
    cancelled: dict  # the job scancel cancelled, as squeue showed it running
    first: Invocation  # the invocation whose job was cancelled
    again: Invocation  # the next one
    no_gpu: object  # the workdir of the cuda backend's run on a node without a GPU
    no_gpu_run: Invocation


@pytest.fixture(scope="module")
def runs(cluster, snakemake, tmp_path_factory):
    """All at once, as most of a SLURM run's time is waiting for the next status check: the main
    target on the cpu backend locally and through the SLURM profile, where the first invocation
    has its reference capture cancelled while it runs and the next one finishes the target; and
    the sample layer's cell with the profile's cuda backend on a node that shows no GPU (none
    here; hidden where the machine has one)."""
    root = tmp_path_factory.mktemp("runs")
    local = _checkout(root / "local")
    on_slurm, no_gpu = (_checkout(root / name, code=local / "rr") for name in ("slurm", "no_gpu"))
    for workdir in (local, on_slurm):
        _small_cpu_config(workdir, RECIPES)
    _configure(no_gpu, layers=["sample"], recipes=RECIPES, frame="128x128")
    for workdir in (on_slurm, no_gpu):
        _fit_profile(workdir, cluster)
    local_run = snakemake(local, None, "--cores", "1", TARGET)
    no_gpu_run = _on_slurm(snakemake, no_gpu, cluster, SAMPLE_TARGET, env={**cluster.env, "CUDA_VISIBLE_DEVICES": ""})
    # the profile pins backend=cuda; --config replaces that, as the README says
    first = _on_slurm(snakemake, on_slurm, cluster, TARGET, "--config", "backend=cpu")

    def running_reference():
        return [j for j in cluster.jobs() if j["comment"] == "rule_capture_frame" and j["job_state"] == "RUNNING"]

    cluster.wait_for(lambda: running_reference() or first.poll() is not None, "a running reference frame capture",
                     TIMEOUT_S)
    assert first.poll() is None, _finish(first)[-3000:]
    (cancelled,) = running_reference()
    cluster.run("scancel", str(cancelled["job_id"]))
    first = _finish_on_slurm(first, cluster)
    again = _finish_on_slurm(_on_slurm(snakemake, on_slurm, cluster, TARGET, "--config", "backend=cpu"), cluster)
    local_out = _finish(local_run)
    assert local_run.returncode == 0, local_out[-3000:]
    return Runs(local, local_out, on_slurm, cancelled, first, again, no_gpu, _finish_on_slurm(no_gpu_run, cluster))


def _assert_placed_by_the_profile(cluster, jobs):
    assert jobs
    for job in jobs:
        gpu_job = _rule(job) in GPU_RULES
        resources = GPU_JOBS if gpu_job else CPU_JOBS
        assert job["partition"] == ("gpu" if gpu_job else "cpu"), job["comment"]
        assert job["tres_per_job"] == (f"gres:gpu:{cluster.gpu_model}:1" if gpu_job else ""), job["comment"]
        assert (job["memory_per_node"], job["time_limit"]) == (resources["mem_mb"], resources["runtime"]), \
            job["comment"]


def test_every_job_is_a_slurm_job_placed_by_the_profile(runs, cluster):
    """Captures and timings in partition gpu with one GPU of the profile's model, every other job
    in partition cpu; memory and runtime from the profile's two blocks; and no job ran on the
    login node: the SLURM jobs' rules are the rules the local run ran."""
    main_jobs = runs.first.jobs + runs.again.jobs
    _assert_placed_by_the_profile(cluster, main_jobs + runs.no_gpu_run.jobs)
    local_rules = set(re.findall(r"^local(?:rule|checkpoint) (\w+):$", runs.local_out, re.M))
    assert {_rule(j) for j in main_jobs} == local_rules
    assert MAIN_GPU_RULES <= local_rules
    assert "localrule" not in runs.first.out + runs.again.out + runs.no_gpu_run.out


def test_the_main_targets_rows_on_slurm_are_a_local_runs(runs):
    rows = _rows(runs.on_slurm)
    assert sorted(rows) == RECIPES
    assert all(row["capture_backend"] == "cpu" and row["frame_identical"] for row in rows.values()), rows
    assert rows == _rows(runs.local)


def test_a_cancelled_job_fails_the_invocation_and_the_next_one_runs_it_again(runs):
    first, again, cancelled = runs.first, runs.again, runs.cancelled
    assert first.returncode != 0
    assert f"SLURM-job '{cancelled['job_id']}' failed, SLURM status is: 'CANCELLED'" in first.out, first.out[-3000:]
    assert [(j["job_id"], j["job_state"]) for j in first.jobs if j["job_state"] != "COMPLETED"] == \
        [(cancelled["job_id"], "CANCELLED")]
    assert again.returncode == 0, again.out[-3000:]
    assert all(j["job_state"] == "COMPLETED" for j in again.jobs), _states(again.jobs)
    again_rules = {_rule(j) for j in again.jobs}
    # the cancelled capture again, and what waited on it; not what had finished before it ran
    assert {"capture_frame", "measure", "collect"} <= again_rules, again_rules
    # (what ran beside it, as the splice and its compile, may or may not have finished before it)
    assert not {"synth_engine", "extract", "frame_layout"} & again_rules, again_rules


def test_a_capture_on_a_node_that_shows_no_gpu_is_its_status_row(runs):
    """The captures and timings record no_device, their SLURM jobs complete, the row says why."""
    run = runs.no_gpu_run
    assert run.returncode == 0, run.out[-3000:]
    assert all(j["job_state"] == "COMPLETED" for j in run.jobs), _states(run.jobs)
    assert SAMPLE_GPU_RULES <= {_rule(j) for j in run.jobs}
    (row,) = _rows(runs.no_gpu, SAMPLE_TARGET).values()
    assert row["splice_status"] == "ok" and row["compile_status"] == ("ok" if PTXAS else "no_ptxas")
    assert (row["capture_status"], row["capture_backend"], row["frame"]) == ("no_device", "cuda", "128x128"), row
    assert row["timing_status"] == "no_device" and row["ratio"] is None, row
    assert row["capture_message"] and row["timing_message"]
