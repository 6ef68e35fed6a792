"""The long-lived worker (rr.run.worker, RR_WORKER=1): jobs give the records and bytes a fresh
child gives, one worker serves job after job, and fault isolation holds — a job past its time
limit kills the worker, a worker killed during a job leaves a fault record, a fault ends the
worker, an idle worker goes away. Exercised with the cpu backend, which needs no GPU; the GPU
tests (tests/test_run_gpu.py) run their faults, hangs and timings through it too."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from rr.private import live_pid
from rr.synth.inputs import write_enc2
from run_kernels import single_buffer_launch


@pytest.fixture
def workers(tmp_path, monkeypatch):
    d = tmp_path / "workers"
    monkeypatch.setenv("RR_WORKER_DIR", str(d))
    monkeypatch.setenv("RR_WORKER_IDLE_S", "30")
    yield d
    for record in d.glob("*.pid"):  # no worker outlives its test
        pid = live_pid(record.read_text())
        if pid is not None:
            os.killpg(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def enc2(tmp_path_factory):
    return write_enc2(tmp_path_factory.mktemp("enc2") / "e", (4, 3)) / "launch"


def _rr(*args, worker=True, **kw):
    env = {**os.environ, "RR_WORKER": "1" if worker else "0"}
    return subprocess.run([sys.executable, "-m", "rr.cli", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=300, **kw)


def _served(workers: Path) -> list[str]:
    return [line for log in workers.glob("*.log") for line in log.read_text().splitlines() if ": exit " in line]


def test_jobs_through_the_worker_give_a_fresh_childs_bytes_and_one_worker_serves_them(tmp_path, workers, enc2):
    assert _rr("run", enc2, "--backend", "cpu", "-o", tmp_path / "child", worker=False).returncode == 0
    for n, reference in ((1, ()), (2, ("--reference", tmp_path / "child"))):
        r = _rr("run", enc2, "--backend", "cpu", *reference, "-o", tmp_path / f"w{n}")
        assert r.returncode == 0, r.stderr
        assert _rr("compare", tmp_path / "child", tmp_path / f"w{n}").returncode == 0
    assert len(_served(workers)) == 2 and len(list(workers.glob("*.pid"))) == 1
    record = json.loads((tmp_path / "w2" / "run.json").read_text())
    assert record["status"] == "ok" and record["backend"] == "cpu"
    # the worker writes a run's outputs as a child does: those equal to the reference's as links to its files
    buffers = json.loads((enc2 / "launch.json").read_text())["buffers"]
    assert record["linked_to_reference"] == list(buffers)
    assert all((tmp_path / "w2" / b["file"]).stat().st_ino == (tmp_path / "child" / b["file"]).stat().st_ino
               for b in buffers.values())


def test_relative_paths_are_the_jobs_own_whatever_the_workers_directory(tmp_path, workers, enc2):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert _rr("run", enc2, "--backend", "cpu", "-o", "out", cwd=tmp_path / "a").returncode == 0
    assert _rr("run", enc2, "--backend", "cpu", "-o", "out", cwd=tmp_path / "b").returncode == 0
    assert (tmp_path / "a" / "out" / "run.json").is_file() and (tmp_path / "b" / "out" / "run.json").is_file()
    assert len(_served(workers)) == 2


def test_a_job_past_its_time_limit_kills_the_worker_and_the_next_job_gets_a_fresh_one(tmp_path, workers, enc2):
    r = _rr("run", enc2, "--backend", "cpu", "--timeout", "0.3", "-o", tmp_path / "slow")
    assert r.returncode == 1
    assert json.loads((tmp_path / "slow" / "run.json").read_text())["status"] == "timeout"
    assert not list(workers.glob("*.sock"))
    assert _rr("run", enc2, "--backend", "cpu", "-o", tmp_path / "next").returncode == 0


@pytest.fixture(scope="module")
def long_enc2(tmp_path_factory):
    """enc2 at 240×135 CTAs: seconds on the interpreter (3.5 s on a 2-core VM), where (4, 3) is done
    before a test could kill its worker mid-job."""
    return write_enc2(tmp_path_factory.mktemp("enc2_long") / "e", (240, 135)) / "launch"


def test_a_worker_killed_during_a_job_leaves_a_fault_record_naming_it(tmp_path, workers, long_enc2):
    job = subprocess.Popen([sys.executable, "-m", "rr.cli", "run", str(long_enc2), "--backend", "cpu", "-o",
                            str(tmp_path / "o")], env={**os.environ, "RR_WORKER": "1"},
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not list(workers.glob("*.sock")) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # the job is under way: this enc2 takes seconds on the interpreter
    os.killpg(live_pid(next(workers.glob("*.pid")).read_text()), signal.SIGKILL)
    job.wait(timeout=120)
    record = json.loads((tmp_path / "o" / "run.json").read_text())
    assert job.returncode == 1 and record["status"] == "fault"
    assert "died during the job" in record["message"] and not list((tmp_path / "o").glob("*.npy"))


def test_a_fault_is_a_record_and_the_worker_that_ran_it_ends(tmp_path, workers):
    single_buffer_launch(tmp_path / "fault", "fault.ptx", "rr_test_fault")
    r = _rr("run", tmp_path / "fault", "--backend", "cpu", "-o", tmp_path / "o")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert json.loads((tmp_path / "o" / "run.json").read_text())["status"] == "fault"
    deadline = time.monotonic() + 10
    while list(workers.glob("*.pid")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not list(workers.glob("*.pid")) and not list(workers.glob("*.sock"))


def test_an_idle_worker_goes_away(tmp_path, workers, enc2, monkeypatch):
    monkeypatch.setenv("RR_WORKER_IDLE_S", "1")
    assert _rr("run", enc2, "--backend", "cpu", "-o", tmp_path / "o").returncode == 0
    time.sleep(3)
    assert not list(workers.glob("*.sock")) and not list(workers.glob("*.pid"))
    assert np.load(tmp_path / "o" / "arena.npy").size > 0


def test_the_workers_resident_buffers_are_known_by_file_identity_not_by_path(tmp_path):
    # a relaunch's hard link is the file its source read (not read again), a rewritten file is
    # new (read again), and what is handed out cannot be written into by a job
    from rr.run.cuda import Resident
    from rr.run.launch import load_buffer, save_buffer

    resident, reads = Resident(), []

    def load(path):
        reads.append(path.name)
        return load_buffer(path)

    save_buffer(tmp_path / "x.npy", np.arange(6, dtype=np.float16))
    os.link(tmp_path / "x.npy", tmp_path / "linked.npy")
    first = resident.host(tmp_path / "x.npy", lambda: load(tmp_path / "x.npy"))
    assert resident.host(tmp_path / "linked.npy", lambda: load(tmp_path / "linked.npy")) is first
    save_buffer(tmp_path / "new.npy", np.zeros(6, dtype=np.float16))
    os.replace(tmp_path / "new.npy", tmp_path / "x.npy")  # as rr's outputs are written: a new file
    assert not resident.host(tmp_path / "x.npy", lambda: load(tmp_path / "x.npy")).any()
    assert reads == ["x.npy", "x.npy"] and resident.counts["read"] == 2
    with pytest.raises(ValueError):
        first[0] = 1
    assert resident.trim(None) == {"read": 2, "uploaded": 0, "reused": 0, "resident_bytes": 0, "instances_bytes": 0}
    assert resident.counts == {"read": 0, "uploaded": 0, "reused": 0}


def test_between_jobs_the_least_recently_used_buffers_go_first_until_the_rest_fit(tmp_path, monkeypatch):
    # the device copies stand in as numpy arrays (a cupy that is numpy): three 1 KiB files, the
    # first used again last; a 2 KiB budget drops the second, then the third
    import types

    from rr.run.cuda import Resident
    from rr.run.launch import load_buffer, save_buffer

    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(asarray=np.array))
    resident = Resident()
    paths = []
    for name in ("x", "y", "z"):
        save_buffer(tmp_path / f"{name}.npy", np.zeros(256, np.float32))
        paths.append(tmp_path / f"{name}.npy")
    for p in paths + paths[:1]:
        resident.host(p, lambda p=p: load_buffer(p))
        resident.device(p)
    assert resident.trim(None)["resident_bytes"] == 3 * 1024
    assert resident.trim(2048)["resident_bytes"] == 2048
    resident.device(paths[0])  # still there: found, not uploaded
    resident.device(paths[2])
    assert resident.counts == {"read": 0, "uploaded": 0, "reused": 2}
    with pytest.raises(KeyError):  # the second is gone from the host too: a job reads it afresh
        resident.device(paths[1])
    assert resident.trim(1024)["resident_bytes"] == 1024


def test_kept_timing_instances_go_least_recently_used_first_when_over_their_budget():
    # three sides' kept instances of 3, 2 and 1 GiB (stand-ins: what the timing appends), the
    # first asked for again last: a 4 GiB budget drops the second; a 1 GiB one all but the second,
    # asked for again and empty
    from rr.run.cuda import Resident

    resident = Resident()
    for key, gib in (("frame", 3), ("enc2", 2), ("dec0", 1)):
        kept = resident.kept(key)
        kept.instances.append(object())
        kept.nbytes += gib << 30
    assert resident.kept("frame").instances  # kept, and now the most recently used
    assert resident.trim(None, None)["instances_bytes"] == 6 << 30
    assert resident.trim(None, 4 << 30)["instances_bytes"] == 4 << 30
    assert not resident.kept("enc2").instances  # gone: the next timing of it makes them afresh
    assert resident.trim(None, 4 << 30)["instances_bytes"] == 4 << 30  # the fresh, empty enc2 is nothing
    assert resident.trim(None, 1 << 30)["instances_bytes"] == 0


def test_a_directory_is_read_and_checked_once_until_a_file_in_it_changes(tmp_path, monkeypatch):
    # the worker's jobs read the same reference frame or launch again and again: the Resident keeps
    # what the readers made of it, and reads again once a file in it is new or gone
    import rr.run.launch as launch_module
    from rr.run.cuda import Resident
    from rr.run.launch import LaunchError
    from run_kernels import single_buffer_launch

    single_buffer_launch(tmp_path / "l", "work.ptx", "rr_test_work", scalars=(10,))
    reads = []
    real = launch_module.read_launch
    monkeypatch.setattr("rr.run.cuda.read_launch", lambda d: reads.append(d) or real(d))
    resident = Resident()
    first = resident.described(tmp_path / "l")
    assert resident.described(tmp_path / "l") is first and len(reads) == 1
    (tmp_path / "l" / "notes.txt").write_text("a new file")
    assert resident.described(tmp_path / "l") == first and len(reads) == 2
    (tmp_path / "l" / "kernel.ptx").unlink()
    for _ in range(2):  # a directory that does not read is refused every time, never kept
        with pytest.raises(LaunchError, match="kernel.ptx"):
            resident.described(tmp_path / "l")
    assert len(reads) == 4
