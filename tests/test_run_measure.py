"""`rr measure`: a splice measured whole — launched, captured with the reference's unchanged buffers
linked, compared — writes the records the separate commands write (run, compare; on cuda the
timings), leaves no directory of its own behind unless kept, and records a splice that does not
launch as such instead of failing. Exercised on the cpu backend with enc2 of the synthetic engine;
the workflow's cells (tests/test_workflow.py) run it on frames."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from rr.synth.inputs import write_enc2


@pytest.fixture(scope="module")
def enc2(tmp_path_factory):
    launch = write_enc2(tmp_path_factory.mktemp("enc2") / "e", (4, 3)) / "launch"
    reference = launch.parent / "reference"
    assert _rr("run", launch, "--backend", "cpu", "-o", reference).returncode == 0
    return launch, reference


def _rr(*args):
    env = {**os.environ, "RR_WORKER": "0"}
    return subprocess.run([sys.executable, "-m", "rr.cli", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=300)


def _measure(enc2, module, cell, *more):
    launch, reference = enc2
    return _rr("measure", launch, "--module", module, "--reference", reference, "--recipe", "same",
               "--backend", "cpu", "-o", cell, *more)


def test_the_unspliced_module_measures_identical_with_every_buffer_linked_and_nothing_left(enc2, tmp_path):
    launch, reference = enc2
    cell = tmp_path / "cell"
    r = _measure(enc2, launch / "kernel.ptx", cell)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in cell.iterdir()) == ["same.compare.json", "same.run.json"]  # no timing on cpu
    run = json.loads((cell / "same.run.json").read_text())
    assert run["status"] == "ok" and run["backend"] == "cpu" and run["reference"] == str(reference)
    buffers = json.loads((launch / "launch.json").read_text())["buffers"]
    assert sorted(run["linked_to_reference"]) == sorted(buffers)
    rows = json.loads((cell / "same.compare.json").read_text())
    assert {row["buffer"] for row in rows} == set(buffers) and all(row["identical"] for row in rows)
    # the same comparison rr compare writes of the same two runs
    kept = tmp_path / "kept"
    assert _measure(enc2, launch / "kernel.ptx", kept, "--keep").returncode == 0
    assert sorted(p.name for p in kept.iterdir() if p.is_dir()) == ["same.capture", "same.launch"]
    assert _rr("compare", reference, kept / "same.capture", "-o", tmp_path / "c.json").returncode == 0
    assert json.loads((tmp_path / "c.json").read_text()) == rows


@pytest.mark.parametrize("content, status, says", [
    ("", "no_module", "rr compile --record for a failed compile"),
    ("this is not a module\n", "bad_launch", "expected a directive at module level"),
], ids=["empty (a failed compile)", "not PTX"])
def test_a_module_that_does_not_launch_is_its_records_not_a_failure(enc2, tmp_path, content, status, says):
    bad = tmp_path / "bad.ptx"
    bad.write_text(content)
    cell = tmp_path / "cell"
    r = _measure(enc2, bad, cell, "--record")
    assert r.returncode == 0, r.stderr
    run = json.loads((cell / "same.run.json").read_text())
    assert run["status"] == status and says in run["message"], run
    assert json.loads((cell / "same.compare.json").read_text()) == []
    assert sorted(p.name for p in cell.iterdir()) == ["same.compare.json", "same.run.json"]
    # without --record the failure is the exit status, the records written all the same
    again = _measure(enc2, bad, tmp_path / "again")
    assert again.returncode == 1 and f"rr: same: run {status}: " in again.stderr
    assert (tmp_path / "again" / "same.run.json").is_file()


def test_a_missing_reference_is_refused_naming_it(enc2, tmp_path):
    launch, _ = enc2
    r = _rr("measure", launch, "--module", launch / "kernel.ptx", "--reference", tmp_path / "nowhere",
            "--recipe", "x", "--backend", "cpu", "-o", tmp_path / "cell")
    assert r.returncode == 2 and f"{tmp_path / 'nowhere'}: no such directory (--reference)" in r.stderr
    assert not (tmp_path / "cell").exists()
