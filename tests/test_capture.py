"""rr capture: the launches of a running program, through the interposer on the driver API.

Without a GPU the interposer is driven by a fake driver (tests/capture/fake_cuda.c, built here as
libcuda.so.1) whose launches run host functions computing what tests/capture/kernels.cu computes,
and by fake programs linked against it (fake_app.c: a driver-API program; fake_runtime.c: one that
reaches the driver as cudart does). A captured launch replayed on rr's cpu backend must give back
the captured after-state byte for byte — the capture's own check. On the H200 (marked gpu) the
engine-style program tests/cuda/capture_app.cu is captured for real, replayed with `rr run
--backend cuda` and compared the same way, and the workflow runs on it.
"""

from __future__ import annotations

import ctypes.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rr.run.launch import param_images, read_launch
from test_hostile_cli import small_fs  # noqa: F401 (a fixture: a tmpfs of a given size)

HERE = Path(__file__).parent / "capture"
CC = shutil.which("cc")
needs_cc = pytest.mark.skipif(CC is None, reason="no C compiler (cc) on PATH: rr capture builds its interposer with it")
pytestmark = needs_cc


def rr(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rr", *args], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=300)


@pytest.fixture(scope="session")
def fake(tmp_path_factory, nvcc_ptx):
    """The fake driver and programs, built; the kernels' PTX; the environment rr capture runs in
    (the interposer's cache in a fresh directory, so its first-use build is part of the test)."""
    d = tmp_path_factory.mktemp("fake")
    cc = [CC, "-O2", "-Wall", "-Werror", f"-I{HERE}"]
    subprocess.run([*cc, "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", d / "libcuda.so.1", HERE / "fake_cuda.c"],
                   check=True)
    (d / "libcuda.so").symlink_to("libcuda.so.1")
    subprocess.run([*cc, "-o", d / "fake_app", HERE / "fake_app.c", f"-L{d}", "-lcuda", f"-Wl,-rpath,{d}"], check=True)
    subprocess.run([*cc, "-o", d / "fake_runtime", HERE / "fake_runtime.c", "-ldl"], check=True)
    env = dict(os.environ, XDG_CACHE_HOME=str(d / "cache"), LD_LIBRARY_PATH=str(d))
    return {"dir": d, "ptx": nvcc_ptx("../capture/kernels"), "env": env}


def capture(fake, out: Path, *program: str, options=()) -> subprocess.CompletedProcess:
    exe = [str(fake["dir"] / program[0]), *program[1:]] if program[0].startswith("fake_") else list(program)
    return rr("capture", "-o", str(out), *options, "--", *exe, env=fake["env"])


@pytest.fixture(scope="session")
def engine(fake, tmp_path_factory):
    """The fake engine's three launches, captured."""
    out = tmp_path_factory.mktemp("engine") / "cap"
    done = capture(fake, out, "fake_app", "engine", str(fake["ptx"]))
    assert done.returncode == 0, done.stderr
    return out, done


def index(cap: Path) -> dict:
    from rr.capture import read_capture

    return read_capture(cap)  # what every reader of capture.json reads: each capture here passes its checks


def launch_dir(cap: Path, i: int) -> Path:
    return cap / index(cap)["launches"][i]["dir"]


def replay_matches_after(launch: Path, tmp: Path) -> subprocess.CompletedProcess:
    """rr run of the captured launch on the cpu backend, then rr compare against its after/."""
    run = rr("run", str(launch), "--backend", "cpu", "-o", str(tmp / f"replay-{launch.name}"))
    assert run.returncode == 0, run.stderr
    return rr("compare", str(launch / "after"), str(tmp / f"replay-{launch.name}"), "--json")


def test_every_launch_of_a_driver_api_program_is_a_launch_directory_in_order(engine, fake):
    cap, done = engine
    assert "fake_app: in[1] = 1037" in done.stdout  # the program ran as it does without rr
    launches = index(cap)["launches"]
    assert [(e["entry"], e["api"], e["layout"]) for e in launches] == [
        ("rr_cap_struct", "cuLaunchKernel", "block"), ("rr_cap_list", "cuLaunchKernelEx", "list"),
        ("rr_cap_list", "cuLaunchKernel", "list")]
    assert [(e["grid"], e["block"]) for e in launches] == [([1, 1, 1], [64, 1, 1]), ([2, 1, 1], [32, 1, 1]),
                                                           ([1, 1, 1], [64, 1, 1])]
    for e in launches:
        launch = read_launch(cap / e["dir"])  # what rr run accepts
        assert read_launch(cap / e["dir"] / "after") == launch
        assert (cap / e["dir"] / launch.module).read_text() == fake["ptx"].read_text()


def test_the_interposer_is_built_on_first_use_into_the_cache_once(engine, fake, tmp_path):
    from rr.capture import build_interposer

    built = list((fake["dir"] / "cache" / "rr").glob("capture-*.so"))
    assert len(built) == 1  # rr capture built it on first use; the next captures took it from the cache
    library = build_interposer(tmp_path).path
    stamp = library.stat().st_mtime_ns
    assert build_interposer(tmp_path).path == library and library.stat().st_mtime_ns == stamp
    assert library.name == built[0].name  # named by the source (and compiler): the same build


def test_modules_are_stored_once_named_by_the_fnv1a64_of_their_text(engine, fake):
    from rr.corpus import fnv1a64_hex

    cap, _ = engine
    text = fake["ptx"].read_bytes()
    assert index(cap)["modules"] == [f"{fnv1a64_hex(text)}.ptx"]
    assert {e["module"] for e in index(cap)["launches"]} == {f"{fnv1a64_hex(text)}.ptx"}
    assert (cap / "modules" / f"{fnv1a64_hex(text)}.ptx").read_bytes() == text


def test_each_replay_of_a_captured_launch_gives_back_its_captured_after_state(engine, tmp_path):
    cap, _ = engine
    for i in range(3):
        d = launch_dir(cap, i)
        written = [b for b in read_launch(d).buffers.values() if b.role == "inout"]
        assert written and all((d / b.file).read_bytes() != (d / "after" / b.file).read_bytes() for b in written)
        compared = replay_matches_after(d, tmp_path)
        assert compared.returncode == 0, compared.stdout
        assert all(row["identical"] for row in json.loads(compared.stdout))


def test_pointers_inside_the_136_byte_block_are_buffer_fields_at_their_offsets(engine):
    cap, _ = engine
    d = launch_dir(cap, 0)
    launch = read_launch(d)
    handles = {(f.offset, f.kind, f.buffer, f.at) for f in launch.fields if f.kind != "scalar"}
    assert handles == {(8, "buffer", "p8", 0), (40, "buffer", "p40", 64), (88, "texture", "tex88", 0),
                       (112, "surface", "surf112", 0)}
    # the scalars are the captured bytes: with the captured handles put back, the block is params.bin
    entry = index(cap)["launches"][0]
    values = {b["name"]: b.get("base", 0) for b in entry["buffers"]}
    raw = (d / "params.bin").read_bytes()
    handles = {"p8": values["p8"], "p40": values["p40"], "tex88": int.from_bytes(raw[88:96], "little"),
               "surf112": int.from_bytes(raw[112:120], "little")}
    assert launch.params_size == 136 and param_images(launch, handles) == [raw]


def test_memory_allocated_where_the_interposer_cannot_see_is_found_through_the_address_range(engine):
    cap, _ = engine
    found = {b["name"]: b["found_by"] for b in index(cap)["launches"][1]["buffers"]}
    assert found == {"p0": "allocation", "p8": "address_range"}


def test_textures_and_surfaces_are_their_rgba16f_arrays_before_and_after(engine):
    cap, _ = engine
    d = launch_dir(cap, 0)
    tex, surf_before, surf_after = (np.load(p) for p in (d / "tex88.npy", d / "surf112.npy", d / "after/surf112.npy"))
    assert tex.shape == surf_after.shape == (8, 8, 4) and tex.dtype == np.float16
    assert (tex.view(np.uint16).ravel() == (0x3c00 + 3 * np.arange(256)).astype(np.uint16)).all()  # as uploaded
    assert (surf_before.view(np.uint16).ravel() == (0x2000 + 3 * np.arange(256)).astype(np.uint16)).all()
    assert (surf_after.view(np.uint16) == tex.view(np.uint16)[:, :, ::-1]).all()  # the kernel's reversal
    buffers = read_launch(d).buffers
    assert (buffers["tex88"].role, buffers["surf112"].role, buffers["tex88"].format) == ("in", "inout", "rgba16f")


def test_a_buffer_shared_by_two_launches_is_captured_as_each_found_it(engine):
    cap, _ = engine
    first, second = launch_dir(cap, 0), launch_dir(cap, 1)
    out_after = np.load(first / "after/p40.npy")
    assert (np.load(second / "p0.npy") == out_after).all()  # launch 1 reads what launch 0 wrote
    written = np.load(second / "after/p8.npy").view(np.uint32)
    assert (written == out_after[64:].view(np.uint32) + 5).all()
    # found as the last captured launch left it: its file is that launch's, not written again
    assert (second / "p0.npy").stat().st_ino == (first / "after/p40.npy").stat().st_ino
    assert index(cap)["launches"][1]["bytes_written"] < index(cap)["launches"][1]["bytes_copied"] // 2


def test_a_program_that_reaches_the_driver_as_cudart_does_is_captured(fake, tmp_path):
    out = tmp_path / "cap"
    done = capture(fake, out, "fake_runtime", str(fake["ptx"]))
    assert done.returncode == 0, done.stderr
    launches = index(out)["launches"]
    assert [(e["entry"], e["api"], e["params_source"]) for e in launches] == [
        ("rr_cap_list", "cuLaunchKernel", "extra"), ("rr_cap_list", "cuLaunchKernelEx", "param_info")]
    for i in range(2):
        assert replay_matches_after(launch_dir(out, i), tmp_path).returncode == 0


def test_kernels_selects_the_entries_a_regular_expression_matches(fake, tmp_path):
    done = capture(fake, tmp_path / "cap", "fake_app", "engine", str(fake["ptx"]), options=("--kernels", "_li?st$"))
    assert done.returncode == 0, done.stderr
    assert [(e["entry"], e["process_launch"], e["match"]) for e in index(tmp_path / "cap")["launches"]] == [
        ("rr_cap_list", 1, 0), ("rr_cap_list", 2, 1)]


def test_launches_counts_the_launches_that_match(fake, tmp_path):
    done = capture(fake, tmp_path / "cap", "fake_app", "engine", str(fake["ptx"]),
                   options=("--kernels", "list", "--launches", "1:"))
    assert done.returncode == 0, done.stderr
    assert [(e["entry"], e["process_launch"]) for e in index(tmp_path / "cap")["launches"]] == [("rr_cap_list", 2)]
    done = capture(fake, tmp_path / "cap2", "fake_app", "engine", str(fake["ptx"]), options=("--launches", "0,2"))
    assert [e["process_launch"] for e in index(tmp_path / "cap2")["launches"]] == [0, 2]


def test_a_bad_range_or_expression_is_refused_before_the_program_runs(fake, tmp_path):
    for options, says in ((("--launches", "3:1"),), "--launches"), ((("--kernels", "a(b"),), "--kernels"):
        done = capture(fake, tmp_path / "cap", "fake_app", "engine", str(fake["ptx"]), options=options[0])
        assert done.returncode == 2 and done.stderr.startswith(f"rr: error: {says}") and "fake_app:" not in done.stdout
        assert not (tmp_path / "cap").exists()


def test_an_expression_that_matches_nothing_says_so_names_what_ran_and_writes_nothing(fake, tmp_path):
    done = capture(fake, tmp_path / "cap", "fake_app", "engine", str(fake["ptx"]), options=("--kernels", "enc2"))
    assert done.returncode == 0  # the program's status
    assert "no launch matched --kernels 'enc2'" in done.stderr
    assert "rr_cap_struct (1)" in done.stderr and "rr_cap_list (2)" in done.stderr
    assert not (tmp_path / "cap").exists()


def test_a_program_that_is_not_a_cuda_program_captures_nothing_and_keeps_its_status(fake, tmp_path):
    done = capture(fake, tmp_path / "cap", "sh", "-c", "echo plain; exit 5")
    assert done.returncode == 5 and done.stdout == "plain\n"
    assert "made no CUDA driver call" in done.stderr and not (tmp_path / "cap").exists()
    assert "(not a CUDA program?)" in done.stderr  # the fake driver is there: the program did not call it


@pytest.mark.skipif(ctypes.util.find_library("cuda") is not None,
                    reason="this machine has a CUDA driver in the linker's cache: no driver cannot be shown here")
def test_a_cuda_program_on_a_machine_without_the_driver_is_told_so(fake, tmp_path):
    env = {k: v for k, v in fake["env"].items() if k != "LD_LIBRARY_PATH"}  # the fake driver out of reach
    done = rr("capture", "-o", str(tmp_path / "cap"), "--", str(fake["dir"] / "fake_runtime"), env=env)
    assert "no CUDA driver on this machine: libcuda.so.1 is neither on LD_LIBRARY_PATH" in done.stderr
    assert "not a CUDA program?" not in done.stderr and not (tmp_path / "cap").exists()


def test_a_program_that_exits_mid_capture_keeps_its_launches_and_its_status(fake, tmp_path):
    done = capture(fake, tmp_path / "cap", "fake_app", "exit", str(fake["ptx"]))
    assert done.returncode == 3, done.stderr
    assert [e["entry"] for e in index(tmp_path / "cap")["launches"]] == ["rr_cap_struct", "rr_cap_list"]


def test_a_program_that_crashes_in_a_launch_keeps_the_launches_before_and_not_the_partial_one(fake, tmp_path):
    done = capture(fake, tmp_path / "cap", "fake_app", "crash", str(fake["ptx"]))
    assert done.returncode == 128 + 6 and "killed by SIGABRT" in done.stderr
    cap = tmp_path / "cap"
    assert [e["entry"] for e in index(cap)["launches"]] == ["rr_cap_struct"]
    assert sorted(p.name for p in (cap / "launches").iterdir()) == ["000000"]
    assert not (cap / "raw").exists() and not list(cap.rglob("*.tmp"))
    assert replay_matches_after(launch_dir(cap, 0), tmp_path).returncode == 0


def whole_launches(cap: Path) -> list[str]:
    """The entries of a capture's launches, each checked whole: launch.json, every buffer file
    before and after, and nothing left of a temporary anywhere under the capture."""
    for e in index(cap)["launches"]:
        launch = read_launch(cap / e["dir"])
        assert read_launch(cap / e["dir"] / "after") == launch
        assert all((cap / e["dir"] / side / b.file).is_file() for b in launch.buffers.values() for side in ("", "after"))
    assert sorted(p.name for p in (cap / "launches").iterdir()) == [f"{i:06d}" for i in range(len(index(cap)["launches"]))]
    assert not list(cap.rglob("*.tmp")) and not (cap / "raw").exists()
    return [e["entry"] for e in index(cap)["launches"]]


def test_a_disk_that_fills_mid_capture_keeps_the_launches_before_and_names_the_one_that_failed(fake, small_fs):  # noqa: F811
    fs = small_fs("2m")
    done = capture(fake, fs / "cap", "fake_app", "engine", str(fake["ptx"]), str(fs / "filler"))  # full after launch 0
    assert "fake_app: in[1] = 1037" in done.stdout  # the program ran on
    assert done.returncode == 2 and "Traceback" not in done.stderr
    error = done.stderr.splitlines()[-1]
    assert error.startswith("rr: error: launch 1 (rr_cap_list, process ") and "launch 1) could not be written (No " \
        "space left on device); the capture stopped there, " in error and error.endswith("keeps the 1 launch before it, each whole")
    assert whole_launches(fs / "cap") == ["rr_cap_struct"]
    assert index(fs / "cap")["stopped"] == error[len("rr: error: "):]
    assert replay_matches_after(launch_dir(fs / "cap", 0), fs).returncode == 0
    assert sorted(p.name for p in fs.iterdir()) == ["cap", "replay-000000"]  # no temporary left beside it


def test_a_program_that_fails_after_the_disk_filled_keeps_its_own_status(fake, small_fs):  # noqa: F811
    fs = small_fs("2m")
    done = capture(fake, fs / "cap", "fake_app", "exit", str(fake["ptx"]), str(fs / "filler"))
    assert done.returncode == 3 and "rr: error: launch 1 (rr_cap_list" in done.stderr
    assert whole_launches(fs / "cap") == ["rr_cap_struct"]


def test_a_disk_that_stays_full_leaves_whole_launches_or_no_capture_and_says_why(fake, small_fs):  # noqa: F811
    for size in ("40k", "48k", "56k", "64k", "72k", "2m"):  # the disk fills at each stage of the capture in turn
        fs = small_fs(size)
        done = capture(fake, fs / "cap", "fake_app", "engine", str(fake["ptx"]), str(fs / "filler"), "keep")
        assert done.returncode == 2 and "Traceback" not in done.stderr, (size, done.stderr)
        assert "No space left on device" in done.stderr.splitlines()[-1], (size, done.stderr)
        if (fs / "cap").exists():
            assert whole_launches(fs / "cap") in (["rr_cap_struct"], []), size
        else:
            assert "no launch is kept: " in done.stderr, (size, done.stderr)
        assert sorted(p.name for p in fs.iterdir()) in (["cap", "filler"], ["filler"]), size  # no temporary left


def test_a_small_disk_keeps_the_first_launches_each_whole(fake, small_fs):  # noqa: F811
    kept = set()
    for size in ("32k", "40k", "48k", "56k", "64k", "72k", "96k"):  # the disk fills at each launch in turn
        fs = small_fs(size)
        done = capture(fake, fs / "cap", "fake_app", "engine", str(fake["ptx"]))
        assert "Traceback" not in done.stderr, (size, done.stderr)
        entries = whole_launches(fs / "cap") if (fs / "cap").exists() else []
        assert entries == ["rr_cap_struct", "rr_cap_list", "rr_cap_list"][:len(entries)]
        assert done.returncode == (0 if len(entries) == 3 else 2), (size, done.stderr)
        if len(entries) < 3:
            assert f"rr: error: launch {len(entries)} (" in done.stderr, (size, done.stderr)
        kept.add(len(entries))
        assert [p.name for p in fs.iterdir()] in (["cap"], []), size
    assert {1, 2} <= kept  # sizes at which the disk filled after one launch and after two


def test_rr_launch_takes_a_layers_launch_from_a_capture_with_the_corpus_module(engine, fake, tmp_path):
    cap, _ = engine
    corpus = tmp_path / "corpus"
    assert rr("extract", str(fake["ptx"]), "-o", str(corpus)).returncode == 0
    out = tmp_path / "L"
    done = rr("launch", "struct", str(corpus), "--entry-pattern", "rr_cap_{layer}", "--launches", str(cap), "-o", str(out))
    assert done.returncode == 0, done.stderr
    launch, captured = read_launch(out), read_launch(launch_dir(cap, 0))
    assert (launch.entry, launch.fields, launch.module) == (captured.entry, captured.fields, "kernel.ptx")
    run = rr("run", str(out), "--backend", "cpu", "-o", str(tmp_path / "R"))
    assert run.returncode == 0, run.stderr
    assert rr("compare", str(launch_dir(cap, 0) / "after"), str(tmp_path / "R")).returncode == 0
    missing = rr("launch", "crash", str(corpus), "--entry-pattern", "rr_cap_{layer}", "--launches", str(cap),
                 "--record", "-o", str(tmp_path / "N"))
    error = json.loads((tmp_path / "N" / "launch.error.json").read_text())
    assert missing.returncode == 0 and error["status"] == "no_launch"
    assert "no launch of rr_cap_crash (the capture has rr_cap_list, rr_cap_struct)" in error["message"]


# -- modules: what a backend loads is what the file holds -----------------------------------------

def test_a_module_is_loaded_as_what_its_bytes_are_whatever_its_file_is_called(fake, tmp_path):
    from rr.run.compile import compile_ptx
    from rr.run.launch import LaunchError, module_image

    text = fake["ptx"].read_bytes()
    assert compile_ptx(fake["ptx"], tmp_path / "k.cubin", "sm_90").status == "ok"
    cubin = (tmp_path / "k.cubin").read_bytes()
    assert module_image(fake["ptx"]) == text + b"\0"  # the driver reads PTX up to its NUL
    for name, image in (("cubin.ptx", cubin), ("ptx.cubin", text), ("ptx0.ptx", text + b"\0")):
        (tmp_path / name).write_bytes(image)
    assert module_image(tmp_path / "cubin.ptx") == cubin  # a cubin called .ptx gets no NUL
    assert module_image(tmp_path / "ptx.cubin") == text + b"\0"  # PTX called .cubin gets one
    assert module_image(tmp_path / "ptx0.ptx") == text + b"\0"  # and never a second
    (tmp_path / "empty.ptx").write_bytes(b"")
    (tmp_path / "junk.ptx").write_bytes(b"\x01\x02\0\x03")
    with pytest.raises(LaunchError, match="an empty module file") as empty:
        module_image(tmp_path / "empty.ptx")
    assert empty.value.status == "no_module"
    with pytest.raises(LaunchError, match="not a module"):
        module_image(tmp_path / "junk.ptx")


def test_a_relaunched_module_is_named_by_what_it_holds(engine, fake, tmp_path):
    from rr.run.compile import compile_ptx

    cap, _ = engine
    compile_ptx(fake["ptx"], tmp_path / "k.cubin", "sm_90")
    (tmp_path / "k.ptx").write_bytes((tmp_path / "k.cubin").read_bytes())  # a cubin under a PTX name
    done = rr("relaunch", str(launch_dir(cap, 0)), "--module", str(tmp_path / "k.ptx"), "-o", str(tmp_path / "L"))
    assert done.returncode == 0, done.stderr
    assert read_launch(tmp_path / "L").module == "kernel.cubin"
    run = rr("run", str(tmp_path / "L"), "--backend", "cpu", "--record", "-o", str(tmp_path / "R"))
    record = json.loads((tmp_path / "R" / "run.json").read_text())
    assert run.returncode == 0 and record["status"] == "unsupported" and "a cubin (SASS only), no PTX of rr_cap_struct" in record["message"]


def test_a_refused_splice_is_no_launch_and_its_empty_module_reaches_no_backend(engine, fake, tmp_path):
    cap, _ = engine
    corpus = tmp_path / "corpus"
    assert rr("extract", str(fake["ptx"]), "-o", str(corpus)).returncode == 0
    spliced = tmp_path / "isolate.ptx"  # rr_cap_struct has no mma: the splice is refused, as in a workflow
    done = rr("splice", str(corpus), "--entry", "rr_cap_struct", "--recipe", "isolate", "--phase", "1", "--record",
              "-o", str(spliced))
    assert done.returncode == 0 and spliced.read_bytes() == b""
    assert json.loads(Path(f"{spliced}.splice.json").read_text())["status"] == "error"
    done = rr("relaunch", str(launch_dir(cap, 0)), "--module", str(spliced), "--record", "-o", str(tmp_path / "L"))
    assert done.returncode == 0 and not (tmp_path / "L" / "launch.json").exists()
    for backend in ("cpu", "cuda"):  # without a device: what is refused is refused before one is asked for
        rr("run", str(tmp_path / "L"), "--backend", backend, "--record", "-o", str(tmp_path / backend))
        record = json.loads((tmp_path / backend / "run.json").read_text())
        assert record["status"] == "no_module" and "an empty module file" in record["message"], record
    done = rr("relaunch", str(launch_dir(cap, 0)), "--module", str(spliced), "-o", str(tmp_path / "M"))
    assert done.returncode == 2 and done.stderr.startswith(f"rr: error: {spliced}: an empty module file")


def capture_app_launches(out: Path, width: int, height: int, module: Path) -> None:
    """capa's and capb's launches as tests/cuda/capture_app.cu makes them, written by hand as
    docs/formats.md describes (DIR/<layer>/ for corpus.launches), with `module` (the program's
    fatbin) as theirs: the inputs of the workflow's run of the program's binary where no GPU
    captures them."""
    from rr.run.launch import Buffer, Field, Launch, write_launch

    rng = np.random.default_rng(7)
    grid = ((width + 7) // 8, (height + 7) // 8, 1)
    tiles = grid[0] * grid[1] * 4
    arena = np.zeros(tiles * 256 + 256, np.uint8)
    texels = (0x3000 + rng.integers(0, 1024, (height, width, 4))).astype(np.uint16).view(np.float16)
    capa = Launch("cuda_dldn_engine_swin_capa_kernel", "kernel.fatbin", grid, (32, 1, 4), (
        Field("scalar", 0, "uint32", (width, height)), Field("buffer", 8, buffer="input"),
        Field("scalar", 16, "uint32", (0x5eed, 0)), Field("buffer", 40, buffer="weights"),
        Field("buffer", 48, buffer="arena", at=256), Field("texture", 88, buffer="noisy"),
        Field("surface", 112, buffer="out0")), {
        "input": Buffer("input", "input.npy", "in"), "weights": Buffer("weights", "weights.npy", "in"),
        "arena": Buffer("arena", "arena.npy", "inout"),
        "noisy": Buffer("noisy", "noisy.npy", "in", format="rgba16f", dtype="float16"),
        "out0": Buffer("out0", "out0.npy", "inout", format="rgba16f", dtype="float16")}, layout="block",
        params_size=136)
    write_launch(out / "capa", capa, {
        "input": rng.integers(0, 256, grid[0] * 4 * 512, dtype=np.uint8) & 0x7e,
        "weights": rng.integers(0, 256, 4 * 256, dtype=np.uint8) & 0x3e, "arena": arena, "noisy": texels,
        "out0": np.zeros_like(texels)}, module)
    n = tiles * 64
    capb = Launch("cuda_dldn_engine_swin_capb_kernel", "kernel.fatbin", (-(-n // 256), 1, 1), (256, 1, 1), (
        Field("buffer", 0, buffer="arena", at=256), Field("buffer", 8, buffer="out"),
        Field("scalar", 16, "uint32", (n,)), Field("scalar", 20, "uint32", (77,))), {
        "arena": Buffer("arena", "arena.npy", "in"), "out": Buffer("out", "out.npy", "out")}, layout="list")
    write_launch(out / "capb", capb, {"arena": rng.integers(0, 256, arena.size, dtype=np.uint8),
                                      "out": np.zeros(n, np.uint32)}, module)


def test_the_workflow_on_the_programs_binary_splices_both_recipes_into_its_launches(app, tmp_path):
    """The cpu twin of the H200's workflow test: capture_app's binary as the corpus, its two
    launches written by hand. Both recipes must splice capa's phase 1 and give back the unspliced
    launch's bytes: regen rebuilds an A address of a base pointer and %ctaid, %tid.z and lane
    terms (a program whose address it cannot see through gets a refused splice, and its row
    says so)."""
    pytest.importorskip("snakemake", reason="the workflow needs Snakemake")
    import pyarrow.parquet as pq
    from test_workflow import _configure, _copy_workflow, _snakemake

    capture_app_launches(tmp_path / "launches", 16, 16, app["fatbin"])
    work = _copy_workflow(tmp_path / "work")
    _configure(work, corpus={"source": str(app["app"]), "launches": str(tmp_path / "launches"),
                             "entry_pattern": "cuda_dldn_engine_swin_{layer}_kernel"},
               layers=["capa", "capb"], recipes=["regen", "isolate"], backend="cpu")
    run = _snakemake(work, "results/capa_phase1.parquet", "results/capb_nophases.parquet")
    assert run.returncode == 0, run.stderr[-4000:]
    rows = pq.read_table(work / "results/capa_phase1.parquet").to_pylist()
    assert [(r["recipe"], r["splice_status"], r["compile_status"], r["capture_status"], r["frame_identical"])
            for r in rows] == [("regen", "ok", "ok", "ok", True), ("isolate", "ok", "ok", "ok", True)], rows
    assert {r["splice_status"] for r in pq.read_table(work / "results/capb_nophases.parquet").to_pylist()} == {
        "no_phases"}


# -- on the GPU: the engine-style program of tests/cuda/capture_app.cu, captured for real --------

GENCODE = "-gencode=arch=compute_90,code=[sm_90,compute_90]"  # SASS to run, PTX for the corpus


def build_capture_app(out: Path, link_stub: Path) -> dict:
    """capture_app and the fatbin its driver-API half loads, built by nvcc. It links against the
    fake driver as a stub for libcuda.so.1 (no rpath: at run time the system's driver is loaded;
    the toolkit here ships no stub)."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not on PATH: it builds tests/cuda/capture_app.cu")
    src = Path(__file__).parent / "cuda" / "capture_app.cu"
    subprocess.run([nvcc, "-O2", GENCODE, "-o", out / "capture_app", src, f"-L{link_stub}", "-lcuda"], check=True)
    subprocess.run([nvcc, "-fatbin", GENCODE, "-o", out / "capture_app.fatbin", src], check=True)
    env = dict(os.environ, XDG_CACHE_HOME=str(out / "cache"))  # the fake driver is not on its library path
    return {"app": out / "capture_app", "fatbin": out / "capture_app.fatbin", "env": env}


@pytest.fixture(scope="session")
def app(fake, tmp_path_factory):
    return build_capture_app(tmp_path_factory.mktemp("app"), fake["dir"])


@pytest.mark.gpu
def test_the_engine_style_program_is_captured_and_each_replay_on_the_gpu_is_byte_identical(gpu, app, tmp_path):
    plain = subprocess.run([app["app"], app["fatbin"], "256", "128"], capture_output=True, text=True, env=app["env"])
    assert plain.returncode == 0, plain.stderr
    cap = tmp_path / "cap"
    done = rr("capture", "-o", str(cap), "--", str(app["app"]), str(app["fatbin"]), "256", "128", env=app["env"])
    assert done.returncode == 0, done.stderr
    checksum = [line for line in plain.stdout.splitlines() if "checksum" in line]
    assert checksum and checksum[0] in done.stdout  # captured, the program computes what it computes alone
    launches = index(cap)["launches"]
    assert [(e["entry"], e["status"]) for e in launches] == [
        ("cuda_dldn_engine_swin_capa_kernel", "ok"), ("cuda_dldn_engine_swin_capb_kernel", "ok")], done.stderr
    assert launches[0]["api"].startswith("cuLaunchKernel") and launches[1]["api"] == "cuLaunchKernel"
    capa, capb = (read_launch(cap / e["dir"]) for e in launches)
    assert (capa.layout, capa.params_size, capa.grid, capa.block) == ("block", 136, (32, 16, 1), (32, 1, 4))
    assert {(f.offset, f.kind, f.at) for f in capa.fields if f.kind != "scalar"} == {
        (8, "buffer", 0), (40, "buffer", 0), (48, "buffer", 256), (88, "texture", 0), (112, "surface", 0)}
    assert capb.layout == "list" and [f.kind for f in capb.fields] == ["buffer", "buffer", "scalar", "scalar"]
    # capb reads the arena as capa left it
    assert (cap / launches[1]["dir"] / "p0.npy").read_bytes() == (cap / launches[0]["dir"] / "after/p48.npy").read_bytes()
    for e in launches:
        replay = tmp_path / f"replay{e['index']}"
        run = rr("run", str(cap / e["dir"]), "--backend", "cuda", "-o", str(replay), env=app["env"])
        assert run.returncode == 0, run.stderr
        compared = rr("compare", str(cap / e["dir"] / "after"), str(replay), "--json", env=app["env"])
        assert compared.returncode == 0, compared.stdout
        assert all(row["identical"] for row in json.loads(compared.stdout))


@pytest.mark.gpu
def test_the_workflow_runs_on_the_programs_binary_and_its_capture(gpu, app, tmp_path):
    pytest.importorskip("snakemake", reason="the workflow needs Snakemake (on the H200: source .whl/prelude.sh)")
    import pyarrow.parquet as pq
    from test_workflow import _configure, _copy_workflow, _snakemake

    cap = tmp_path / "cap"
    done = rr("capture", "-o", str(cap), "--", str(app["app"]), str(app["fatbin"]), "256", "128", env=app["env"])
    assert done.returncode == 0, done.stderr
    work = _copy_workflow(tmp_path / "work")
    _configure(work, corpus={"source": str(app["app"]), "launches": str(cap),
                             "entry_pattern": "cuda_dldn_engine_swin_{layer}_kernel"},
               layers=["capa", "capb"], recipes=["regen", "isolate"], backend="cuda",
               timing={"noise": 0.05, "time_limit_s": 2})
    run = _snakemake(work, env=app["env"])
    assert run.returncode == 0, run.stderr[-4000:]
    rows = pq.read_table(work / "results/capa_phase1.parquet").to_pylist()
    assert [(r["recipe"], r["splice_status"], r["compile_status"], r["capture_status"], r["capture_backend"],
             r["frame_identical"]) for r in rows] == [("regen", "ok", "ok", "ok", "cuda", True),
                                                      ("isolate", "ok", "ok", "ok", "cuda", True)], rows
    nophases = pq.read_table(work / "results/capb_nophases.parquet").to_pylist()
    assert {r["splice_status"] for r in nophases} == {"no_phases"}
    assert (work / "results/summary.parquet").is_file()
