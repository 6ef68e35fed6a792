"""The CUDA backend on a real GPU: struct parameters, e4m3 mma, textures and surfaces against
numpy; faults and hangs isolated in the child process; timing that measures what it should —
each with a fresh child per job and with the GPU's long-lived worker (RR_WORKER=1)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from run_kernels import single_buffer_launch, struct_launch

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("gpu")]


@pytest.fixture(autouse=True, params=["child", "worker"])
def child_kind(request, monkeypatch, tmp_path_factory):
    if request.param == "worker":
        monkeypatch.setenv("RR_WORKER", "1")
        monkeypatch.setenv("RR_WORKER_DIR", str(tmp_path_factory.mktemp("workers")))
        monkeypatch.setenv("RR_WORKER_IDLE_S", "10")
    return request.param


def _rr(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "rr.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_struct_kernel_matches_numpy_bit_for_bit(tmp_path):
    expected = struct_launch(tmp_path / "l", height=8, scale=2.0)
    before = {p.name: p.read_bytes() for p in (tmp_path / "l").iterdir()}
    r = _rr("run", str(tmp_path / "l"), "--backend", "cuda", "-o", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    d = np.load(tmp_path / "out" / "d.npy").view(np.float16)
    surf = np.load(tmp_path / "out" / "surf.npy")
    assert np.array_equal(d.view(np.uint16), expected["d"].view(np.uint16))
    assert np.array_equal(surf.view(np.uint16), expected["surf"].view(np.uint16))
    record = json.loads((tmp_path / "out" / "run.json").read_text())
    assert record["status"] == "ok" and record["backend"] == "cuda"
    # inputs are never modified by a run
    assert {p.name: p.read_bytes() for p in (tmp_path / "l").iterdir()} == before
    # the output directory is itself a launch description whose inputs equal the originals
    assert _rr("compare", str(tmp_path / "l"), str(tmp_path / "out")).returncode == 1  # d, surf differ
    assert np.array_equal(np.load(tmp_path / "out" / "tex.npy"), np.load(tmp_path / "l" / "tex.npy"))


def test_a_cubin_module_runs_like_its_ptx(tmp_path):
    import shutil

    if shutil.which("ptxas") is None:
        pytest.skip("ptxas is not on PATH")
    expected = struct_launch(tmp_path / "l")
    assert _rr("compile", str(tmp_path / "l" / "kernel.ptx"), "-o", str(tmp_path / "l" / "kernel.cubin")).returncode == 0
    raw = json.loads((tmp_path / "l" / "launch.json").read_text())
    raw["module"] = "kernel.cubin"
    (tmp_path / "l" / "launch.json").write_text(json.dumps(raw))
    r = _rr("run", str(tmp_path / "l"), "--backend", "cuda", "-o", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    assert np.array_equal(np.load(tmp_path / "out" / "surf.npy").view(np.uint16), expected["surf"].view(np.uint16))
    assert (tmp_path / "out" / "kernel.cubin").read_bytes()[:4] == b"\x7fELF"


def test_a_faulting_kernel_is_a_result_and_the_next_run_works(tmp_path):
    single_buffer_launch(tmp_path / "fault", "fault.ptx", "rr_test_fault")
    r = _rr("run", str(tmp_path / "fault"), "--backend", "cuda", "-o", str(tmp_path / "o1"))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    record = json.loads((tmp_path / "o1" / "run.json").read_text())
    assert record["status"] == "fault" and "illegal" in record["message"].lower()
    expected = struct_launch(tmp_path / "ok")
    r = _rr("run", str(tmp_path / "ok"), "--backend", "cuda", "-o", str(tmp_path / "o2"))
    assert r.returncode == 0, r.stderr
    assert np.array_equal(np.load(tmp_path / "o2" / "surf.npy"), expected["surf"])


def test_a_hanging_kernel_times_out_and_the_next_run_works(tmp_path):
    single_buffer_launch(tmp_path / "hang", "hang.ptx", "rr_test_hang")
    r = _rr("run", str(tmp_path / "hang"), "--backend", "cuda", "--timeout", "15", "-o", str(tmp_path / "o1"))
    assert r.returncode == 1
    assert json.loads((tmp_path / "o1" / "run.json").read_text())["status"] == "timeout"
    struct_launch(tmp_path / "ok")
    assert _rr("run", str(tmp_path / "ok"), "--backend", "cuda", "-o", str(tmp_path / "o2")).returncode == 0


def _time(a, b, tmp_path):
    out = tmp_path / "timing.json"
    r = _rr("time", str(a), "--vs", str(b), "--time-limit", "20", "-o", str(out))
    assert r.returncode == 0, r.stderr
    return json.loads(out.read_text())


def test_a_kernel_timed_against_itself_gives_a_ratio_within_the_noise(tmp_path):
    single_buffer_launch(tmp_path / "w", "work.ptx", "rr_test_work", grid=(264, 1, 1), block=(256, 1, 1),
                         size=264 * 256 * 4, scalars=(20000,))
    t = _time(tmp_path / "w", tmp_path / "w", tmp_path)
    assert t["reference"]["samples"] >= 20 and t["other"]["samples"] >= 20
    assert abs(t["ratio"] - 1) <= max(2 * t["ratio_noise"], 0.01), t


def test_twice_the_work_measures_close_to_twice_the_time(tmp_path):
    for name, n in (("w1", 20000), ("w2", 40000)):
        single_buffer_launch(tmp_path / name, "work.ptx", "rr_test_work", grid=(264, 1, 1),
                             block=(256, 1, 1), size=264 * 256 * 4, scalars=(n,))
    t = _time(tmp_path / "w1", tmp_path / "w2", tmp_path)
    assert 1.8 < t["ratio"] < 2.2, t


def test_a_second_run_finds_its_buffers_resident_in_the_worker_and_compares_on_the_device(tmp_path, child_kind):
    # the struct kernel's launch run twice, the second against the first as its reference: in the
    # worker its buffers are not read or uploaded again, and every output is a link to the
    # reference's file, found equal on the device (the global buffers a, b, d, and the images tex
    # and surf copied out of their CUDA arrays there): nothing is copied back
    struct_launch(tmp_path / "l", height=8, scale=2.0)
    assert _rr("run", str(tmp_path / "l"), "--backend", "cuda", "-o", str(tmp_path / "ref")).returncode == 0
    r = _rr("run", str(tmp_path / "l"), "--backend", "cuda", "--reference", str(tmp_path / "ref"),
            "-o", str(tmp_path / "again"))
    assert r.returncode == 0, r.stderr
    first, again = (json.loads((tmp_path / d / "run.json").read_text()) for d in ("ref", "again"))
    assert first["resident"] == {"read": 5, "uploaded": 5, "reused": 0}
    if child_kind == "worker":
        # the launch's five files are where the first job left them; the reference's five are
        # read and uploaded once, to compare with on the device
        assert again["resident"] == {"read": 5, "uploaded": 5, "reused": 5}
    else:
        assert again["resident"] == {"read": 10, "uploaded": 10, "reused": 0}
    assert sorted(again["linked_to_reference"]) == ["a", "b", "d", "surf", "tex"]
    for name in ("a", "b", "d", "surf", "tex"):
        assert (tmp_path / "again" / f"{name}.npy").stat().st_ino == (tmp_path / "ref" / f"{name}.npy").stat().st_ino


def test_a_surface_written_otherwise_is_told_apart_on_the_device_and_copied_back(tmp_path, child_kind):
    # the struct kernel at scale 3 against a capture at scale 2: the surface (3 · texture) differs
    # and is saved from the device; the texture, a file of its own with the same bytes, and the
    # global buffers are found equal and linked
    struct_launch(tmp_path / "two", height=8, scale=2.0)
    expected = struct_launch(tmp_path / "three", height=8, scale=3.0)
    assert _rr("run", str(tmp_path / "two"), "--backend", "cuda", "-o", str(tmp_path / "ref")).returncode == 0
    r = _rr("run", str(tmp_path / "three"), "--backend", "cuda", "--reference", str(tmp_path / "ref"),
            "-o", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    record = json.loads((tmp_path / "out" / "run.json").read_text())
    assert sorted(record["linked_to_reference"]) == ["a", "b", "d", "tex"]
    surf = tmp_path / "out" / "surf.npy"
    assert surf.stat().st_ino != (tmp_path / "ref" / "surf.npy").stat().st_ino
    np.testing.assert_array_equal(np.load(surf), expected["surf"])
