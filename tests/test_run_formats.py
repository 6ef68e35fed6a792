"""Launch descriptions, parameter blocks, run comparison and ptxas reports — everything about runs
that needs no GPU."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

from conftest import PTXAS
from rr.run.compare import compare_buffer
from rr.run.launch import LaunchError, load_buffers, param_images, read_launch
from run_kernels import PTX, single_buffer_launch, struct_launch


def test_launch_description_round_trips_through_disk(tmp_path):
    struct_launch(tmp_path / "l")
    launch = read_launch(tmp_path / "l")
    assert launch.entry == "rr_test_struct" and launch.params_size == 48 and launch.block == (32, 1, 1)
    assert [f.kind for f in launch.fields] == ["buffer", "buffer", "buffer", "texture", "surface", "scalar"]
    arrays = load_buffers(tmp_path / "l", launch)
    assert arrays["tex"].shape == (4, 32, 4) and arrays["tex"].dtype == np.float16
    assert (tmp_path / "l" / "kernel.ptx").read_text() == (PTX / "struct_mma_tex_surf.ptx").read_text()


def test_parameter_block_puts_each_field_at_its_offset(tmp_path):
    struct_launch(tmp_path / "l", scale=2.5)
    launch = read_launch(tmp_path / "l")
    handles = {"a": 0x1111, "b": 0x2222, "d": 0x3333, "tex": 0x44, "surf": 0x55}
    (block,) = param_images(launch, handles)
    assert len(block) == 48
    words = np.frombuffer(block[:40], dtype="<u8")
    assert list(words) == [0x1111, 0x2222, 0x3333, 0x44, 0x55]
    assert np.frombuffer(block[40:44], dtype="<f4")[0] == 2.5 and block[44:] == bytes(4)


def test_list_layout_gives_one_image_per_parameter(tmp_path):
    single_buffer_launch(tmp_path / "l", "work.ptx", "rr_test_work", scalars=(1000,))
    images = param_images(read_launch(tmp_path / "l"), {"buf": 0xABCDEF})
    assert [len(i) for i in images] == [8, 4]
    assert int.from_bytes(images[0], "little") == 0xABCDEF and int.from_bytes(images[1], "little") == 1000


@pytest.mark.parametrize("edit,message", [
    (lambda j: j["fields"][0].update(buffer="nope"), "fields[0].buffer: 'nope' is not in buffers"),
    (lambda j: j["fields"][5].update(offset=46), "fields[5] (4 bytes at offset 46) is misaligned or outside"),
    (lambda j: j.update(grid=[0, 1, 1]), "grid[0]: 0 is less than the minimum of 1"),
    (lambda j: j["buffers"]["d"].update(role="write"), "buffers.d.role: 'write' is not one of ['in', 'out', 'inout']"),
    (lambda j: j.pop("entry"), "(top level): 'entry' is a required property"),
])
def test_bad_launch_descriptions_name_the_key(tmp_path, edit, message):
    struct_launch(tmp_path / "l")
    path = tmp_path / "l" / "launch.json"
    raw = json.loads(path.read_text())
    edit(raw)
    path.write_text(json.dumps(raw))
    with pytest.raises(LaunchError) as e:
        read_launch(tmp_path / "l")
    assert message in str(e.value) and str(path) in str(e.value)


def test_comparison_of_identical_and_differing_buffers():
    a = np.arange(64, dtype=np.float16).reshape(8, 8)
    same = compare_buffer("x", a, a.copy())
    assert same.identical and same.differing_bytes == 0 and same.psnr_db == math.inf and same.first_index is None
    b = a.copy()
    b[2, 3] += 1
    b[5, 0] = -7
    r = compare_buffer("x", a, b)
    assert not r.identical
    assert r.differing_bytes == int(np.count_nonzero(a.view(np.uint8) != b.view(np.uint8)))
    assert r.first_index == (2, 3) and r.first_values == (19.0, 20.0)
    assert r.max_abs_diff == 47.0  # 40 -> -7
    mse = (1 + 47 ** 2) / 64
    assert r.psnr_db == pytest.approx(10 * math.log10(63.0 ** 2 / mse))


def test_comparison_reads_bytes_in_the_named_number_type():
    codes = np.array([0x38, 0x30, 0x40, 0x00], dtype=np.uint8)  # e4m3: 1.0, 0.5, 2.0, 0
    other = codes.copy()
    other[2] = 0x41  # 2.25
    r = compare_buffer("frag", codes, other, "e4m3")
    assert r.dtype == "e4m3" and r.first_index == (2,) and r.first_values == (2.0, 2.25)
    assert r.max_abs_diff == 0.25
    assert np.array([2.25], dtype=ml_dtypes.float8_e4m3fn).view(np.uint8)[0] == 0x41


def _rr(*args):
    return subprocess.run([sys.executable, "-m", "rr.cli", *args], capture_output=True, text=True)


def test_compare_cli_exit_status_and_table(tmp_path):
    struct_launch(tmp_path / "a")
    struct_launch(tmp_path / "b")
    assert _rr("compare", str(tmp_path / "a"), str(tmp_path / "b")).returncode == 0
    surf = np.load(tmp_path / "b" / "surf.npy")
    surf[1, 2, 3] = 1.5
    np.save(tmp_path / "b" / "surf.npy", surf)
    r = _rr("compare", str(tmp_path / "a"), str(tmp_path / "b"))
    assert r.returncode == 1
    row = next(l for l in r.stdout.splitlines() if l.startswith("surf"))
    assert "False" in row and "[1, 2, 3]: 0 vs 1.5" in row
    data = json.loads(_rr("compare", str(tmp_path / "a"), str(tmp_path / "b"), "--json").stdout)
    assert [d["identical"] for d in data if d["buffer"] == "surf"] == [False]


@pytest.mark.skipif(PTXAS is None, reason="ptxas is not on PATH")
def test_compile_reports_registers_and_a_rejected_ptx_is_a_status(tmp_path):
    r = _rr("compile", str(PTX / "struct_mma_tex_surf.ptx"), "--arch", "sm_90", "-o", str(tmp_path / "k.cubin"))
    assert r.returncode == 0, r.stderr
    report = json.loads((tmp_path / "k.cubin.json").read_text())
    fn = report["functions"]["rr_test_struct"]
    assert report["status"] == "ok" and fn["registers"] > 0 and fn["spill_stores"] == 0
    assert (tmp_path / "k.cubin").read_bytes()[:4] == b"\x7fELF"
    bad = tmp_path / "bad.ptx"
    bad.write_text((PTX / "work.ptx").read_text().replace("fma.rn.f32 \t%f2, %f2,", "fma.rn.f32 \t%f2, %f99,"))
    r = _rr("compile", str(bad), "-o", str(tmp_path / "bad.cubin"))
    assert r.returncode == 2 and "compile_error" in r.stderr and "Traceback" not in r.stderr
    assert json.loads((tmp_path / "bad.cubin.json").read_text())["status"] == "compile_error"
    assert not (tmp_path / "bad.cubin").exists()


def _has_gpu() -> bool:
    from rr.run.cuda import NoDevice, device_info

    try:
        device_info()
        return True
    except NoDevice:
        return False


@pytest.mark.skipif(_has_gpu(), reason="checks the message given when no GPU is present")
def test_run_without_a_gpu_says_no_cuda_device(tmp_path):
    struct_launch(tmp_path / "l")
    r = _rr("run", str(tmp_path / "l"), "--backend", "cuda", "-o", str(tmp_path / "out"))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "no CUDA device" in r.stderr
    record = json.loads((tmp_path / "out" / "run.json").read_text())
    assert record["status"] == "no_device"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [".rr", "run.json"]  # the record and rr's marker
    r = _rr("run", str(tmp_path / "l"), "--backend", "auto", "-o", str(tmp_path / "out2"))
    assert r.returncode == 0 and json.loads((tmp_path / "out2" / "run.json").read_text())["backend"] == "cpu"
    r = _rr("time", str(tmp_path / "l"), "--vs", str(tmp_path / "l"), "--backend", "cpu")
    assert r.returncode == 1 and "gives no timing" in r.stderr


def test_ptxas_is_found_in_the_nvidia_cuda_nvcc_wheel_layout(tmp_path, monkeypatch):
    # The nvidia-cuda-nvcc wheel installs ptxas as nvidia/cu13/bin/ptxas in site-packages.
    import importlib

    from rr.run.compile import find_ptxas

    fake = tmp_path / "nvidia" / "cu13" / "bin" / "ptxas"
    fake.parent.mkdir(parents=True)
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    assert find_ptxas() == str(fake)


def test_relaunch_swaps_the_module_and_shares_the_buffers(tmp_path):
    struct_launch(tmp_path / "l")
    other = tmp_path / "other.ptx"
    other.write_text((PTX / "struct_mma_tex_surf.ptx").read_text().replace("mul.f32", "add.f32"))
    r = _rr("relaunch", str(tmp_path / "l"), "--module", str(other), "-o", str(tmp_path / "r"))
    assert r.returncode == 0, r.stderr
    launch = read_launch(tmp_path / "r")
    assert launch.module == "kernel.ptx" and (tmp_path / "r" / "kernel.ptx").read_text() == other.read_text()
    assert _rr("compare", str(tmp_path / "l"), str(tmp_path / "r")).returncode == 0  # same buffers
    assert (tmp_path / "r" / "tex.npy").stat().st_ino == (tmp_path / "l" / "tex.npy").stat().st_ino
    r = _rr("relaunch", str(tmp_path / "l"), "--module", str(tmp_path / "missing.ptx"), "-o", str(tmp_path / "x"))
    assert r.returncode == 2 and "no such module" in r.stderr and not (tmp_path / "x").exists()


def _links(path, reference) -> bool:
    """Whether the file is the reference's file itself, shared by those two directories alone."""
    return path.stat().st_ino == reference.stat().st_ino and path.stat().st_nlink == 2


def test_a_run_with_its_reference_links_the_buffers_it_left_as_they_were(tmp_path):
    # struct with mul.f32 turned into add.f32: the surface it writes differs, every other buffer
    # (its inputs, and d, which the mma writes) holds the reference run's bytes
    struct_launch(tmp_path / "l")
    other = tmp_path / "other.ptx"
    other.write_text((PTX / "struct_mma_tex_surf.ptx").read_text().replace("mul.f32", "add.f32"))
    assert _rr("run", str(tmp_path / "l"), "--backend", "cpu", "-o", str(tmp_path / "ref")).returncode == 0
    assert _rr("relaunch", str(tmp_path / "l"), "--module", str(other), "-o", str(tmp_path / "r")).returncode == 0
    r = _rr("run", str(tmp_path / "r"), "--backend", "cpu", "--reference", str(tmp_path / "ref"),
            "-o", str(tmp_path / "out"))
    assert r.returncode == 0 and "4 buffers the same as" in r.stdout, r.stderr
    record = json.loads((tmp_path / "out" / "run.json").read_text())
    assert record["linked_to_reference"] == ["a", "b", "d", "tex"] and "copied_from_reference" not in record
    for name in ("a", "b", "d", "tex"):
        assert _links(tmp_path / "out" / f"{name}.npy", tmp_path / "ref" / f"{name}.npy"), name
    surf = tmp_path / "out" / "surf.npy"
    assert surf.stat().st_nlink == 1 and surf.stat().st_ino != (tmp_path / "ref" / "surf.npy").stat().st_ino
    assert not np.array_equal(np.load(surf), np.load(tmp_path / "ref" / "surf.npy"))
    # the same run without a reference writes the same bytes, each buffer a file of its own
    assert _rr("run", str(tmp_path / "r"), "--backend", "cpu", "-o", str(tmp_path / "plain")).returncode == 0
    for name in ("a", "b", "d", "tex", "surf"):
        assert (tmp_path / "plain" / f"{name}.npy").read_bytes() == (tmp_path / "out" / f"{name}.npy").read_bytes()
        assert (tmp_path / "plain" / f"{name}.npy").stat().st_nlink == 1
    assert "linked_to_reference" not in json.loads((tmp_path / "plain" / "run.json").read_text())
    # a reference that is not there is refused, not taken for one with no buffers
    r = _rr("run", str(tmp_path / "r"), "--backend", "cpu", "--reference", str(tmp_path / "none"),
            "-o", str(tmp_path / "x"))
    assert r.returncode == 2 and "no such capture directory" in r.stderr and not (tmp_path / "x").exists()


def test_a_reference_buffer_of_another_shape_or_dtype_is_not_linked_even_with_the_same_bytes(tmp_path):
    from rr.run.launch import save_buffer, save_outputs

    (tmp_path / "ref").mkdir()
    (tmp_path / "out").mkdir()
    a = np.arange(16, dtype=np.float16)
    save_buffer(tmp_path / "ref" / "same.npy", a)
    save_buffer(tmp_path / "ref" / "shape.npy", a.reshape(4, 4))
    save_buffer(tmp_path / "ref" / "dtype.npy", a.view(np.uint16))
    save_buffer(tmp_path / "ref" / "value.npy", a + 1)
    arrays = {n: a for n in ("same", "shape", "dtype", "value", "new")}
    written = save_outputs(tmp_path / "out", {n: f"{n}.npy" for n in arrays}, arrays, tmp_path / "ref")
    assert written == {"reference": str(tmp_path / "ref"), "linked_to_reference": ["same"]}
    for name in arrays:
        path = tmp_path / "out" / f"{name}.npy"
        assert np.array_equal(np.load(path), a) and np.load(path).dtype == a.dtype and np.load(path).shape == a.shape
        assert path.stat().st_nlink == (2 if name == "same" else 1), name


def test_a_buffer_that_cannot_be_linked_is_copied_and_the_record_says_why(tmp_path, monkeypatch):
    import errno
    import os

    from rr.run.launch import save_buffer, save_outputs

    (tmp_path / "ref").mkdir()
    (tmp_path / "out").mkdir()
    a = np.arange(8, dtype=np.float32)
    save_buffer(tmp_path / "ref" / "x.npy", a)

    def no_link(src, dst):  # another file system
        raise OSError(errno.EXDEV, os.strerror(errno.EXDEV), str(src), str(dst))

    monkeypatch.setattr(os, "link", no_link)
    written = save_outputs(tmp_path / "out", {"x": "x.npy"}, {"x": a}, tmp_path / "ref")
    assert written["linked_to_reference"] == [] and written["copied_from_reference"] == ["x"]
    assert os.strerror(errno.EXDEV) in written["reference_link_error"]
    assert (tmp_path / "out" / "x.npy").read_bytes() == (tmp_path / "ref" / "x.npy").read_bytes()


@pytest.mark.parametrize("array, dtype", [
    (np.arange(64, dtype=np.float16).reshape(8, 8), None),
    (np.full(5000, np.nan, np.float32), None),  # no finite element: max |a-b| is None
    (np.concatenate([np.full(5000, np.inf, np.float16), [np.float16(1)]]), None),  # the first finite one late
    (np.array([0x7F, 0xFF, 0x38], np.uint8), "e4m3"),  # two e4m3 NaNs, then 1.0
    (np.array([0x7F, 0xFF], np.uint8), "e4m3"),
    (np.arange(10, dtype=np.uint32), None),
    (np.zeros(0, np.float16), None),
    (np.array(3.5, np.float32), None),  # 0-d
])
def test_a_buffer_known_identical_compares_as_its_byte_comparison_does(tmp_path, array, dtype):
    from rr.run.compare import compare_values, identical_buffer
    from rr.run.launch import load_buffer, save_buffer

    save_buffer(tmp_path / "b.npy", array)
    mapped = load_buffer(tmp_path / "b.npy", mmap=True)
    # compare_buffer takes equal bytes this way too: both are what the element-wise comparison gives
    assert identical_buffer("b", mapped, dtype) == compare_values("b", array, array.copy(), dtype)
    assert compare_buffer("b", array, array.copy(), dtype) == compare_values("b", array, array.copy(), dtype)


def test_compare_takes_a_buffer_that_is_one_file_in_both_runs_as_identical_without_reading_it(tmp_path,
                                                                                             monkeypatch, capsys):
    import shutil

    import rr.run.launch
    from rr.cli.main import main

    struct_launch(tmp_path / "l")
    other = tmp_path / "other.ptx"
    other.write_text((PTX / "struct_mma_tex_surf.ptx").read_text().replace("mul.f32", "add.f32"))
    assert _rr("run", str(tmp_path / "l"), "--backend", "cpu", "-o", str(tmp_path / "ref")).returncode == 0
    assert _rr("relaunch", str(tmp_path / "l"), "--module", str(other), "-o", str(tmp_path / "r")).returncode == 0
    assert _rr("run", str(tmp_path / "r"), "--backend", "cpu", "--reference", str(tmp_path / "ref"),
               "-o", str(tmp_path / "linked")).returncode == 0
    shutil.copytree(tmp_path / "linked", tmp_path / "copied")  # the same bytes, files of their own
    read = []
    load = rr.run.launch.load_buffer

    def counted(path, mmap=False):
        if not mmap:
            read.append(path.name)
        return load(path, mmap)

    monkeypatch.setattr(rr.run.launch, "load_buffer", counted)
    records = {}
    for run in ("copied", "linked"):
        read.clear()
        assert main(["compare", str(tmp_path / "ref"), str(tmp_path / run), "--record",
                     "-o", str(tmp_path / f"{run}.json")]) == 0
        records[run] = ((tmp_path / f"{run}.json").read_text(), sorted(read), capsys.readouterr().err)
    # the record is the byte comparison's; only the surface, which differs, was read (from both runs)
    assert records["linked"][0] == records["copied"][0]
    assert [row["identical"] for row in json.loads(records["linked"][0])] == [True, True, True, True, False]
    assert records["copied"][1] == sorted(f"{n}.npy" for n in ("a", "b", "d", "tex", "surf") for _ in "ab")
    assert records["linked"][1] == ["surf.npy", "surf.npy"]
    assert "4 of the 5 buffers are one file in both runs" in records["linked"][2]
    assert "one file" not in records["copied"][2]


def test_equal_bytes_are_compared_without_the_element_wise_pass(monkeypatch):
    import rr.run.compare as compare

    def element_wise(*args):
        raise AssertionError("the element-wise comparison ran on equal bytes")

    a = np.arange(3 * compare.CHUNK // 2, dtype=np.uint16).view(np.float16)  # more than one chunk
    monkeypatch.setattr(compare, "compare_values", element_wise)
    assert compare.compare_buffer("x", a, a.copy(), "float16").identical
    b = a.copy()
    b[-1] = 1.0  # in the last chunk: a difference anywhere is seen
    with pytest.raises(AssertionError, match="element-wise"):
        compare.compare_buffer("x", a, b, "float16")


def test_ptxas_runs_below_the_callers_cpu_priority(tmp_path, monkeypatch):
    # a sweep's GPU jobs wait on their own Python: the machine's ptxas runs must not starve it
    from rr.run.compile import PTXAS_NICENESS, compile_ptx

    fake = tmp_path / "bin" / "ptxas"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\nps -o ni= -p $$ > {tmp_path / 'ni'}\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    (tmp_path / "k.ptx").write_text(".version 8.0\n.target sm_90\n.address_size 64\n")
    compile_ptx(tmp_path / "k.ptx", tmp_path / "k.cubin")
    assert int((tmp_path / "ni").read_text()) == os.nice(0) + PTXAS_NICENESS


def test_a_launch_description_is_validated_once_per_process_and_a_bad_one_every_time(tmp_path):
    # a frame's layers are read several times a job (the same descriptions from one splice's
    # frame to the next); the schema check of one that passed is not repeated, one that fails
    # is refused with its message however often it is read
    from rr.validation import _valid

    struct_launch(tmp_path / "l")
    _valid.cache_clear()
    for _ in range(3):
        read_launch(tmp_path / "l")
    assert (_valid.cache_info().misses, _valid.cache_info().hits) == (1, 2)
    raw = json.loads((tmp_path / "l" / "launch.json").read_text())
    raw["block"] = [2048, 1, 1]
    (tmp_path / "l" / "launch.json").write_text(json.dumps(raw))
    for _ in range(2):
        with pytest.raises(LaunchError, match=r"launch.json: block"):
            read_launch(tmp_path / "l")
