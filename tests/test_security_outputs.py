"""What rr writes and deletes, and what the cpu backend allocates (issue 33): a directory is replaced
only when rr wrote it (its `.rr` marker a regular file of rr's text, not a link), `rr measure
--keep` included; a full disk leaves no partial output and names the output that did not fit; a
multi-file output cut short between its renames is never taken for whole; scratch directories go
whatever happens; a kernel that declares more memory than the interpreter allocates is a
`resource` record naming the state space and the size, and no record's message is traceback lines.

Full disks are real: a tiny tmpfs (the small_fs fixture of test_hostile_cli, which needs root)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from rr.run.launch import Buffer, Field, Launch, write_launch
from run_kernels import PTX, single_buffer_launch
from test_hostile_cli import SAMPLE, SAMPLE_ENTRY, is_error, rr, small_fs, snapshot, temporaries  # noqa: F401

PTXAS = shutil.which("ptxas")


@pytest.fixture(autouse=True)
def fresh_children(monkeypatch):
    """Runs in fresh child processes (not a GPU worker) with the interpreter's default memory limit."""
    monkeypatch.setenv("RR_WORKER", "0")
    monkeypatch.delenv("RR_CPU_MEMORY_BYTES", raising=False)


@pytest.fixture
def launch(tmp_path) -> Path:
    single_buffer_launch(tmp_path / "L", "work.ptx", "rr_test_work", scalars=(10,))
    return tmp_path / "L"


@pytest.fixture
def reference(launch, tmp_path, capsys) -> Path:
    code, _, err = rr(capsys, "run", launch, "--backend", "cpu", "-o", tmp_path / "ref")
    assert code == 0, err
    return tmp_path / "ref"


def _measure(capsys, launch, reference, cell, *more):
    return rr(capsys, "measure", launch, "--module", launch / "kernel.ptx", "--reference", reference,
              "--recipe", "x", "--backend", "cpu", "-o", cell, *more)


def _killed_in_scratch(beside: Path, made: str) -> None:
    """A process killed inside rr.io.scratch_dir(beside), having made `made` in it, as a command
    killed halfway is: its scratch directory is left."""
    subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        import os, signal
        from rr.io import scratch_dir
        with scratch_dir({str(beside)!r}) as tmp:
            (tmp / {made!r}).mkdir()
            os.kill(os.getpid(), signal.SIGKILL)
        """)])


# ---- 1. only a directory rr wrote is replaced ----------------------------------------------------

@pytest.mark.parametrize("marker", ["a link to a file", "a link to a marker rr wrote", "a file of other text"])
def test_a_users_directory_whose_rr_marker_is_not_rrs_own_is_not_replaced_and_its_files_stay(
        launch, tmp_path, capsys, marker):
    d = tmp_path / "D"
    d.mkdir()
    (d / "mine.txt").write_text("precious")
    if marker == "a link to a file":
        (d / ".rr").symlink_to("mine.txt")
    elif marker == "a link to a marker rr wrote":
        code, _, err = rr(capsys, "run", launch, "--backend", "cpu", "-o", tmp_path / "rrs")
        assert code == 0, err
        (d / ".rr").symlink_to(tmp_path / "rrs" / ".rr")
    else:
        (d / ".rr").write_text("my notes\n")
    before = snapshot(d)
    code, _, err = rr(capsys, "run", launch, "--backend", "cpu", "-o", d)
    assert is_error(code, err, str(d), "not written by rr"), err
    assert snapshot(d) == before and (d / ".rr").is_symlink() == marker.startswith("a link")
    assert temporaries(tmp_path) == []


def test_a_directory_rr_wrote_is_still_replaced(launch, tmp_path, capsys):
    out = tmp_path / "O"
    for _ in range(2):
        code, _, err = rr(capsys, "run", launch, "--backend", "cpu", "-o", out)
        assert code == 0, err
    assert json.loads((out / "run.json").read_text())["status"] == "ok" and temporaries(tmp_path) == []


def test_measure_keep_refuses_a_capture_directory_rr_did_not_write_before_any_work_and_keeps_it(
        launch, reference, tmp_path, capsys):
    cell = tmp_path / "cell"
    (cell / "x.capture").mkdir(parents=True)
    (cell / "x.capture" / "mine.txt").write_text("precious")
    code, _, err = _measure(capsys, launch, reference, cell, "--keep")
    assert is_error(code, err, str(cell / "x.capture"), "not written by rr"), err
    assert snapshot(cell) == {"x.capture/mine.txt": b"precious"}  # kept, and no record written
    assert temporaries(tmp_path) == []
    # the directories an earlier --keep left are rr's: replaced by the next
    kept = tmp_path / "kept"
    for _ in range(2):
        code, _, err = _measure(capsys, launch, reference, kept, "--keep")
        assert code == 0, err
    assert sorted(p.name for p in kept.iterdir()) == ["x.capture", "x.compare.json", "x.launch", "x.run.json"]
    assert temporaries(tmp_path) == []


# ---- 2. a full disk leaves nothing partial and names the output ----------------------------------

def test_sample_launch_on_a_full_disk_leaves_no_partial_directory_and_names_it(small_fs, capsys):
    fs = small_fs("8k")  # the first buffers fit, not the whole launch
    code, _, err = rr(capsys, "sample-launch", SAMPLE, "-o", fs / "S")
    assert is_error(code, err, str(fs / "S"), "No space left on device"), err
    assert list(fs.iterdir()) == []


@pytest.mark.skipif(PTXAS is None, reason="ptxas is not on PATH")
@pytest.mark.parametrize("room", ["the cubin, not its report", "part of the cubin"])
def test_compile_on_a_full_disk_leaves_no_cubin_without_its_report_and_names_it(small_fs, tmp_path, capsys, room):
    code, _, err = rr(capsys, "compile", SAMPLE, "-o", tmp_path / "k.cubin")
    assert code == 0, err
    pages = -(-(tmp_path / "k.cubin").stat().st_size // 4096)
    # ptxas exits 0 having written part of the cubin: rr finds it short of its ELF headers
    fs = small_fs(f"{(pages if room == 'the cubin, not its report' else pages - 1) * 4}k")
    for record in ((), ("--record",)):
        code, _, err = rr(capsys, "compile", SAMPLE, *record, "-o", fs / "k.cubin")
        assert is_error(code, err, str(fs / "k.cubin"), "No space left on device"), err
        assert list(fs.iterdir()) == []


def test_measure_on_a_full_disk_leaves_no_empty_cell_and_names_the_cell_not_an_input(
        launch, reference, small_fs, capsys):
    fs = small_fs("8k")  # not even the splice's launch fits
    code, _, err = _measure(capsys, launch, reference, fs / "cell")
    assert is_error(code, err, str(fs / "cell"), "No space left on device"), err
    assert str(launch) not in err
    assert list(fs.iterdir()) == []


def test_a_run_record_on_a_full_disk_in_measure_names_the_cells_capture(launch, reference, small_fs, capsys):
    fs = small_fs("32k")  # the splice's launch fits, its capture does not; the run record does
    code, _, err = _measure(capsys, launch, reference, fs / "cell", "--record")
    run = json.loads((fs / "cell" / "x.run.json").read_text())
    assert run["status"] == "io_error" and run["message"] == f"{fs / 'cell' / 'x.capture'}: No space left on device"
    assert temporaries(fs) == []


# ---- 2. a multi-file output cut short is not taken for whole --------------------------------------

class Killed(BaseException):
    """The process dying between two renames (nothing of rr's catches it)."""


def test_describe_cut_short_between_its_renames_leaves_no_descriptor_beside_other_tables(
        tmp_path, capsys, monkeypatch):
    from rr.results.collect import read_descriptor

    out = tmp_path / "d"
    code, _, err = rr(capsys, "describe", SAMPLE, "--entry", SAMPLE_ENTRY, "-o", out)
    assert code == 0, err
    (out / "phases.parquet").write_bytes(b"an older description's table")
    replace = os.replace
    renamed = []

    def dies_after_the_first(src, dst):
        if renamed:
            raise Killed
        renamed.append(dst)
        replace(src, dst)

    monkeypatch.setattr(os, "replace", dies_after_the_first)
    with pytest.raises(Killed):
        rr(capsys, "describe", SAMPLE, "--entry", SAMPLE_ENTRY, "-o", out)
    monkeypatch.setattr(os, "replace", replace)
    assert [Path(p).name for p in renamed] == ["phases.parquet"]
    # what a reader sees: the tables of two descriptions, and no descriptor that says they are one
    assert (out / "phases.parquet").read_bytes() != b"an older description's table"
    assert not (out / "descriptor.json").exists()
    with pytest.raises(FileNotFoundError):
        read_descriptor(out / "descriptor.json")
    # the next describe writes the set whole again
    code, _, err = rr(capsys, "describe", SAMPLE, "--entry", SAMPLE_ENTRY, "-o", out)
    assert code == 0, err
    assert read_descriptor(out / "descriptor.json")["entry"] == SAMPLE_ENTRY and temporaries(out) == []


# ---- 2. scratch directories go, whatever happens -------------------------------------------------

def _one_layer_frame(out: Path) -> Path:
    from rr.run.frame import Frame, FrameBuffer, FrameLayer, write_frame

    work = Launch("rr_test_work", "work.ptx", (1, 1, 1), (32, 1, 1),
                  (Field("buffer", buffer="buf"), Field("scalar", 0, "uint32", (10,))),
                  {"buf": Buffer("buf", "buf.npy", "inout")}, layout="list")
    frame = Frame((8, 4), "buf", {"buf": FrameBuffer("buf", "buf.npy", None, None, "work", ())},
                  (FrameLayer("work", work),))
    write_frame(out, frame, {"buf": np.zeros(128, np.uint8)}, {"work": PTX / "work.ptx"})
    return out


def test_a_frame_run_leaves_no_scratch_directory_and_removes_a_killed_runs(tmp_path, capsys):
    layout = _one_layer_frame(tmp_path / "layout")
    out = tmp_path / "runs" / "out"
    out.parent.mkdir()
    _killed_in_scratch(out, "step0")
    assert temporaries(out.parent), "the killed run left no scratch directory"
    for layer in ("work", "none"):  # a run, then a replacement that fails in the scratch directory
        code, _, err = rr(capsys, "frame", layout, "--replace", f"{layer}={PTX / 'work.ptx'}", "--backend", "cpu",
                          "-o", out)
        assert temporaries(out.parent) == [] and not list(tmp_path.glob("**/.rr-frame-*")), err
    assert is_error(code, err, "no layer 'none'") and (out / "run.json").is_file()  # the first run's output kept


def test_a_killed_measures_scratch_is_removed_by_the_next(launch, reference, tmp_path, capsys):
    cell = tmp_path / "cell"
    _killed_in_scratch(cell, "x.launch")
    assert temporaries(tmp_path), "the killed measurement left no scratch directory"
    code, _, err = _measure(capsys, launch, reference, cell)
    assert code == 0, err
    assert temporaries(tmp_path) == []


# ---- 3. the cpu backend's memory ----------------------------------------------------------------

def _kernel_launch(directory: Path, declarations: str, body: str, block: int = 32, grid: int = 1) -> Path:
    """A launch of kernel `k(out)` over a 4-byte-a-thread buffer, with module-level `declarations`."""
    ptx = directory.parent / f"{directory.name}.ptx"
    ptx.write_text(textwrap.dedent(f"""\
        .version 8.0
        .target sm_90
        .address_size 64
        {declarations}
        .visible .entry k(.param .u64 k_out)
        {{
        	.reg .b32 	%r<4>;
        	.reg .b64 	%rd<6>;
        {body}
        	ret;
        }}
        """))
    launch = Launch("k", "kernel.ptx", (grid, 1, 1), (block, 1, 1), (Field("buffer", buffer="out"),),
                    {"out": Buffer("out", "out.npy", "out")}, layout="list")
    write_launch(directory, launch, {"out": np.zeros(grid * block, np.uint32)}, ptx)
    return directory


# every thread stores its thread index at the start of its depot, reads it back and stores it in out
DEPOT_BODY = """\
	.local .align 8 .b8 	depot[{size}];
	mov.u32 	%r1, %tid.x;
	mov.u32 	%r2, %ctaid.x;
	mov.u64 	%rd1, depot;
	st.local.u32 	[%rd1], %r1;
	ld.local.u32 	%r3, [%rd1];
	mad.lo.s32 	%r3, %r2, 32, %r3;
	ld.param.u64 	%rd2, [k_out];
	cvta.to.global.u64 	%rd3, %rd2;
	mad.lo.s32 	%r2, %r2, 32, %r1;
	mul.wide.u32 	%rd4, %r2, 4;
	add.s64 	%rd5, %rd3, %rd4;
	st.global.u32 	[%rd5], %r3;"""

GLOBAL_BODY = """\
	mov.u32 	%r1, %tid.x;
	mov.u64 	%rd1, big;
	mul.wide.u32 	%rd2, %r1, 4;
	add.s64 	%rd3, %rd1, %rd2;
	st.global.u32 	[%rd3], %r1;"""


def _run(capsys, launch: Path, out: Path) -> tuple[dict, float]:
    t0 = time.perf_counter()
    code, _, err = rr(capsys, "run", launch, "--backend", "cpu", "-o", out)
    record = json.loads((out / "run.json").read_text())
    assert (code == 0) == (record["status"] == "ok"), err
    return record, time.perf_counter() - t0


@pytest.mark.parametrize("space, declarations, body, asked", [
    (".local", "", DEPOT_BODY.format(size=1 << 30), f"{1 << 30} bytes a thread, {32 << 30} bytes for a block of 32"),
    (".global", ".global .align 4 .b8 big[17179869184];", GLOBAL_BODY, f"{16 << 30} bytes"),
], ids=["a 1 GiB local depot for 32 threads", "a 16 GiB global array"])
def test_a_kernel_asking_more_memory_than_the_interpreter_allocates_is_a_resource_record_naming_it(
        tmp_path, capsys, space, declarations, body, asked):
    record, seconds = _run(capsys, _kernel_launch(tmp_path / "L", declarations, body), tmp_path / "O")
    assert record["status"] == "resource", record
    assert f"the kernel's {space} memory is {asked}" in record["message"] and "RR_CPU_MEMORY_BYTES" in record["message"]
    assert "Traceback" not in record["message"] and seconds < 20
    assert sorted(p.name for p in (tmp_path / "O").iterdir()) == [".rr", "run.json"]


def test_a_local_depot_that_fits_one_block_at_a_time_runs_in_smaller_chunks(tmp_path, capsys, monkeypatch):
    # 64 blocks of 32 threads with 16 KiB each: 32 MiB in one chunk, 512 KiB a block; the limit 1 MiB
    monkeypatch.setenv("RR_CPU_MEMORY_BYTES", str(1 << 20))
    launch = _kernel_launch(tmp_path / "L", "", DEPOT_BODY.format(size=16384), grid=64)
    record, _ = _run(capsys, launch, tmp_path / "O")
    assert record["status"] == "ok" and record["lanes"] == 64 * 32, record
    assert np.array_equal(np.load(tmp_path / "O" / "out.npy"), np.arange(64 * 32, dtype=np.uint32))
    monkeypatch.setenv("RR_CPU_MEMORY_BYTES", str(256 << 10))  # not even one block
    record, _ = _run(capsys, launch, tmp_path / "O2")
    assert record["status"] == "resource" and "16384 bytes a thread, 524288 bytes for a block" in record["message"]


def test_an_allocation_past_the_bound_that_fails_is_a_resource_record_not_a_traceback(
        tmp_path, capsys, monkeypatch):
    # the limit lifted: 32 threads of 2^45 bytes (a PiB, past any address space) fail in numpy
    monkeypatch.setenv("RR_CPU_MEMORY_BYTES", str(1 << 60))
    launch = _kernel_launch(tmp_path / "L", "", DEPOT_BODY.format(size=1 << 45))
    record, seconds = _run(capsys, launch, tmp_path / "O")
    assert record["status"] == "resource", record
    assert record["message"].startswith("the cpu backend ran out of memory: Unable to allocate")
    assert "Traceback" not in record["message"] and seconds < 20


def _in_every_child(site: Path, monkeypatch, code: str) -> None:
    """Python `code` run at the start of every child process (a sitecustomize on its PYTHONPATH)."""
    site.mkdir()
    (site / "sitecustomize.py").write_text(textwrap.dedent(code))
    monkeypatch.setenv("PYTHONPATH", f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")


def test_a_fault_record_of_a_child_that_died_of_an_error_is_its_name_and_text_not_traceback_lines(
        launch, tmp_path, capsys, monkeypatch):
    _in_every_child(tmp_path / "site", monkeypatch, """\
        import rr.run.cpu

        def broken(*args, **kwargs):  # an error of the interpreter's own
            raise RuntimeError("an interpreter bug")

        rr.run.cpu.run_cpu = broken
        """)
    record, _ = _run(capsys, launch, tmp_path / "O")
    assert record["status"] == "fault", record
    assert record["message"] == "the run's process died (exit 1): RuntimeError: an interpreter bug"


def test_a_child_killed_by_a_signal_is_a_fault_naming_the_signal(launch, tmp_path, capsys, monkeypatch):
    _in_every_child(tmp_path / "site", monkeypatch, "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    record, _ = _run(capsys, launch, tmp_path / "O")
    assert record["status"] == "fault", record
    assert record["message"] == "the run's process was killed by SIGKILL (out of memory?)"
