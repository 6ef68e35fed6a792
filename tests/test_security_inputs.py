"""The files rr reads, made hostile: a FIFO or a device where a file goes (never a hang: every read
opens without blocking and refuses anything but a regular file), names that lead out of a
directory (a frame's reference, a buffer that is a symbolic link, a recipe name), files of the
right name and the wrong type (frame.json, stage records, Parquet files), a launch directory that
is a loop of links, file names that are not UTF-8 and terminals that are not, a frame too large
for the machine, a PTX file named like an option and control characters in an echoed line. Each
is `rr: error: PATH: reason` with exit status 2 (or, for `rr run`, a bad_launch record), no
traceback, nothing written outside the output."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import PTXAS
from rr.run.frame import Frame, FrameBuffer, FrameLayer, write_frame
from rr.run.launch import Buffer, Field, Launch
from run_kernels import PTX, single_buffer_launch
from test_hostile_cli import SAMPLE, SAMPLE_ENTRY, is_error, rr, rr_process, snapshot

FIFO_TIMEOUT = 60  # seconds: a run that blocks on a FIFO never ends; one that refuses it takes ~1 s


@pytest.fixture
def launch(tmp_path) -> Path:
    single_buffer_launch(tmp_path / "L", "work.ptx", "rr_test_work", scalars=(10,))
    return tmp_path / "L"


def one_layer_frame(directory: Path) -> Path:
    """A frame of one layer (rr_test_work on the buffer `buf`) written as `rr launch frame` writes one."""
    launch = Launch(entry="rr_test_work", module="work.ptx", grid=(1, 1, 1), block=(32, 1, 1), layout="list",
                    fields=(Field("buffer", buffer="buf"), Field("scalar", 0, "uint32", (10,))),
                    buffers={"buf": Buffer("buf", "buf.npy", "inout")})
    frame = Frame((8, 8), "buf", {"buf": FrameBuffer("buf", "buf.npy", None, None, "work", ())},
                  (FrameLayer("work", launch),))
    write_frame(directory, frame, {"buf": np.zeros(4096, np.uint8)}, {"work": PTX / "work.ptx"})
    return directory


@pytest.fixture
def frame(tmp_path) -> Path:
    return one_layer_frame(tmp_path / "F")


def edit_frame(directory: Path, edit) -> Path:
    path = directory / "frame.json"
    raw = json.loads(path.read_text())
    edit(raw)
    path.write_text(json.dumps(raw))
    return path


def fifo_at(path: Path) -> Path:
    if path.exists():
        path.unlink()
    os.mkfifo(path)
    return path


@pytest.fixture(scope="module")
def described(tmp_path_factory) -> Path:
    """The sample kernel's descriptor.json, as rr describe writes it."""
    out = tmp_path_factory.mktemp("described")
    assert rr_process("describe", SAMPLE, "--entry", SAMPLE_ENTRY, "-o", out).returncode == 0
    return out / "descriptor.json"


@pytest.fixture(scope="module")
def spliced(tmp_path_factory) -> Path:
    """A cell holding the sample's regen splice and its record, as rr splice writes them."""
    cell = tmp_path_factory.mktemp("spliced")
    assert rr_process("splice", SAMPLE, "--entry", SAMPLE_ENTRY, "--recipe", "regen", "--phase", "1",
                      "-o", cell / "regen.ptx").returncode == 0
    return cell


def collect(capsys, cell: Path, descriptor: Path, out: Path):
    return rr(capsys, "collect", cell, "--layer", "sample", "--phase", "1", "--recipes", "regen",
              "--descriptor", descriptor, "--module", SAMPLE, "-o", out)


# ---- 1. no read blocks: anything but a regular file is refused by name -------------------------

def _buffer_fifo(t: Path, described: Path):
    fifo_at(t / "L2" / "buf.npy")
    return ["compare", t / "L", t / "L2"], t / "L2" / "buf.npy"


def _device_buffer(t: Path, described: Path):
    (t / "L2" / "buf.npy").unlink()
    (t / "L2" / "buf.npy").symlink_to("/dev/zero")
    return ["compare", t / "L", t / "L2"], t / "L2" / "buf.npy"


def _launch_json_fifo(t: Path, described: Path):
    fifo_at(t / "L2" / "launch.json")
    return ["compare", t / "L2", t / "L"], t / "L2" / "launch.json"


def _frame_json_fifo(t: Path, described: Path):
    fifo_at(t / "F" / "frame.json")
    return ["compare", t / "F", t / "L"], t / "F" / "frame.json"


def _frame_buffer_fifo(t: Path, described: Path):
    fifo_at(t / "F" / "buf.npy")
    return ["relaunch", t / "F", "--layer", "work", "--module", PTX / "work.ptx", "-o", t / "out"], t / "F" / "buf.npy"


def _module_fifo(t: Path, described: Path):
    return ["relaunch", t / "L", "--module", fifo_at(t / "k.ptx"), "-o", t / "out"], t / "k.ptx"


def _ptx_fifo(t: Path, described: Path):
    return ["compile", fifo_at(t / "k.ptx"), "-o", t / "out"], t / "k.ptx"


def _recipe_fifo(t: Path, described: Path):
    return ["splice", SAMPLE, "--entry", SAMPLE_ENTRY, "--recipe", fifo_at(t / "r.yaml"), "--phase", "1",
            "-o", t / "out"], t / "r.yaml"


def _stage_record_fifo(t: Path, described: Path):
    (t / "cell").mkdir()
    fifo_at(t / "cell" / "regen.ptx.splice.json")
    return ["collect", t / "cell", "--layer", "sample", "--phase", "1", "--recipes", "regen", "--descriptor",
            described, "--module", SAMPLE, "-o", t / "out"], t / "cell" / "regen.ptx.splice.json"


def _descriptor_fifo(t: Path, described: Path):
    (t / "cell").mkdir()
    return ["collect", t / "cell", "--layer", "sample", "--phase", "1", "--recipes", "regen", "--descriptor",
            fifo_at(t / "d.json"), "--module", SAMPLE, "-o", t / "out"], t / "d.json"


def _summary_fifo(t: Path, described: Path):
    return ["report", fifo_at(t / "summary.parquet"), "-o", t / "out"], t / "summary.parquet"


FIFOS = [_buffer_fifo, _device_buffer, _launch_json_fifo, _frame_json_fifo, _frame_buffer_fifo, _module_fifo,
         _ptx_fifo, _recipe_fifo, _stage_record_fifo, _descriptor_fifo, _summary_fifo]


@pytest.mark.parametrize("make", FIFOS, ids=[f.__name__.strip("_") for f in FIFOS])
def test_a_fifo_or_device_where_a_file_is_read_is_refused_at_once(tmp_path, launch, frame, described, make):
    (tmp_path / "L2").mkdir()
    for f in launch.iterdir():
        (tmp_path / "L2" / f.name).write_bytes(f.read_bytes())
    argv, path = make(tmp_path, described)
    r = rr_process(*argv, timeout=FIFO_TIMEOUT)  # subprocess.TimeoutExpired: the read blocked
    assert is_error(r.returncode, r.stderr, f"{path}: not a regular file"), r.stderr
    assert not (tmp_path / "out").exists()


def test_a_fifo_buffer_is_a_bad_launch_of_the_run(launch, tmp_path):
    fifo_at(launch / "buf.npy")
    r = rr_process("run", launch, "--backend", "cpu", "-o", tmp_path / "O", timeout=FIFO_TIMEOUT)
    record = json.loads((tmp_path / "O" / "run.json").read_text())
    assert r.returncode == 1 and record["status"] == "bad_launch", record
    assert f"{launch / 'buf.npy'}: not a regular file" in record["message"] and "Traceback" not in r.stderr


def test_reading_a_file_never_opens_it_twice_by_name(launch, monkeypatch):
    # a buffer is checked and read through one open file: a FIFO swapped in after the check
    # cannot be what is read (np.load by name would open it again, and block)
    from rr.run.launch import load_buffer

    opened = []
    real_open = os.open
    monkeypatch.setattr(os, "open", lambda path, *a, **k: opened.append(str(path)) or real_open(path, *a, **k))
    for mmap in (False, True):
        assert load_buffer(launch / "buf.npy", mmap=mmap).nbytes == 4096
    assert opened == [str(launch / "buf.npy")] * 2


# ---- 2. names that lead out of their directory -------------------------------------------------

@pytest.mark.parametrize("reference", ["..", ".", "../F"])
def test_a_frame_reference_outside_the_frame_directory_is_refused(frame, tmp_path, capsys, reference):
    path = edit_frame(frame, lambda raw: raw.update(start="work", reference=reference))
    code, _, err = rr(capsys, "compare", frame, frame)
    assert is_error(code, err, f"{path}: reference: {reference!r}"), err
    code, _, err = rr(capsys, "relaunch", frame, "--layer", "work", "--module", PTX / "work.ptx", "-o", tmp_path / "R")
    assert is_error(code, err, f"{path}: reference"), err
    assert not (tmp_path / "R").exists()


def test_a_frame_reference_that_is_a_link_to_a_directory_is_refused(frame, tmp_path, capsys):
    (tmp_path / "elsewhere").mkdir()
    (frame / "reference").symlink_to(tmp_path / "elsewhere")
    path = edit_frame(frame, lambda raw: raw.update(start="work", reference="reference"))
    code, _, err = rr(capsys, "compare", frame, frame)
    assert is_error(code, err, f"{path}: reference: 'reference' is not a subdirectory"), err


def _relaunch_launch(src: Path, out: Path):
    return ["relaunch", src, "--module", PTX / "work.ptx", "-o", out]


def _replace_layer(src: Path, out: Path):
    return ["relaunch", src, "--layer", "work", "--module", PTX / "work.ptx", "-o", out]


def _extract_layer(src: Path, out: Path):
    return ["relaunch", src, "--layer", "work", "--extract", "-o", out]


RELAUNCHES = [("L", _relaunch_launch), ("F", _replace_layer), ("F", _extract_layer)]


@pytest.mark.parametrize("directory,argv", RELAUNCHES, ids=["relaunch", "replace-layer", "extract-layer"])
def test_a_buffer_linked_out_of_its_directory_is_refused_naming_it(launch, frame, tmp_path, capsys, directory, argv):
    src = tmp_path / directory
    (tmp_path / "secret.npy").write_bytes((src / "buf.npy").read_bytes())
    (src / "buf.npy").unlink()
    (src / "buf.npy").symlink_to("../secret.npy")  # relative: from the output it would name another file
    before = snapshot(tmp_path)
    code, _, err = rr(capsys, *argv(src, tmp_path / "out"))
    assert is_error(code, err, f"{src / 'buf.npy'}: a buffer file that is a symbolic link to", "outside"), err
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("directory,argv", RELAUNCHES, ids=["relaunch", "replace-layer", "extract-layer"])
def test_a_buffer_linked_within_its_directory_is_shared_as_its_file(launch, frame, tmp_path, capsys, directory, argv):
    src = tmp_path / directory
    (src / "data").mkdir()
    (src / "buf.npy").rename(src / "data" / "buf.npy")
    (src / "buf.npy").symlink_to("data/buf.npy")
    code, _, err = rr(capsys, *argv(src, tmp_path / "out"))
    assert code == 0, err
    copied = tmp_path / "out" / "buf.npy"
    assert not copied.is_symlink() and os.path.samefile(copied, src / "data" / "buf.npy")


@pytest.mark.parametrize("recipe", ["../escaped", "sub/../../escaped"])
def test_a_recipe_given_as_a_path_names_records_inside_the_output(launch, tmp_path, monkeypatch, capsys, recipe):
    (tmp_path / "deep" / "er").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "deep" / "er")
    code, _, err = rr(capsys, "measure", launch, "--module", PTX / "work.ptx", "--reference", launch, "--recipe",
                      recipe, "--backend", "cpu", "-o", "M")
    assert code == 0 and "Traceback" not in err, err
    assert sorted(p.name for p in (tmp_path / "deep" / "er" / "M").iterdir()) == ["escaped.compare.json",
                                                                                  "escaped.run.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["L", "deep"]


@pytest.mark.parametrize("recipe", ["..", ".", "Regen", "a b", "x.tar.gz"])
def test_a_recipe_that_is_not_a_plain_name_is_refused(launch, tmp_path, capsys, recipe):
    code, _, err = rr(capsys, "measure", launch, "--module", PTX / "work.ptx", "--reference", launch, "--recipe",
                      recipe, "--backend", "cpu", "-o", tmp_path / "M")
    assert is_error(code, err, f"{recipe}: not a recipe name (^[a-z][a-z0-9_]*$)"), err
    assert not (tmp_path / "M").exists()


# ---- 3. files of the right name and the wrong type ---------------------------------------------

BAD_FRAMES = [  # (edit of frame.json, what the message names)
    (lambda raw: raw.update(final=[]), "final: [] is not of type 'string'"),
    (lambda raw: raw.update(final="nothing"), "final: 'nothing' is not one of the frame's buffers"),
    (lambda raw: raw.update(start=[1]), "start: [1] is not of type 'string'"),
    (lambda raw: raw.update(start="nothing"), "start: 'nothing' is not one of the frame's layers"),
    (lambda raw: raw["buffers"]["buf"].update(consumers=5), "buffers.buf.consumers: 5 is not of type 'array'"),
    (lambda raw: raw["buffers"]["buf"].update(consumers=["nobody"]), "buffers.buf.consumers[0]: 'nobody' is not"),
    (lambda raw: raw["buffers"]["buf"].update(producer="nobody"), "buffers.buf.producer: 'nobody' is not host"),
    (lambda raw: raw["buffers"]["buf"].update(dtype="object"), "buffers.buf.dtype: 'object' is not one of"),
    (lambda raw: raw["buffers"]["buf"].update(file="../buf.npy"), "buffers.buf.file: '../buf.npy' does not match"),
    (lambda raw: raw.update(frame=[True, True]), "frame[0]: True is not of type 'integer'"),
    (lambda raw: raw.update(frame=[8.0, 8]), "frame[0]: 8.0 is not of type 'integer'"),
    (lambda raw: raw.update(layers={}), "layers: {} is not of type 'array'"),
    (lambda raw: raw["layers"].append(raw["layers"][0]), "layers[1].layer: 'work' names an earlier layer too"),
    (lambda raw: raw["layers"][0]["launch"].update(grid=4), "layers[0].launch: grid: 4 is not of type 'array'"),
    (lambda raw: raw.update(extra=1), "(top level): Additional properties are not allowed ('extra' was unexpected)"),
]


@pytest.mark.parametrize("edit,message", BAD_FRAMES, ids=[m[:40] for _, m in BAD_FRAMES])
def test_a_bad_frame_json_names_the_key_and_value_in_every_command(frame, tmp_path, capsys, edit, message):
    path = edit_frame(frame, edit)
    for argv in (["compare", frame, frame], ["relaunch", frame, "--layer", "work", "--module", PTX / "work.ptx",
                                             "-o", tmp_path / "R"]):
        code, _, err = rr(capsys, *argv)
        assert is_error(code, err, f"{path}: {message}"), (argv[0], err)
    assert not (tmp_path / "R").exists()


def test_a_bad_frame_json_is_a_bad_launch_of_the_run(frame, tmp_path, capsys):
    path = edit_frame(frame, lambda raw: raw.update(final=[]))
    code, _, err = rr(capsys, "run", frame, "--backend", "cpu", "-o", tmp_path / "O")
    record = json.loads((tmp_path / "O" / "run.json").read_text())
    assert code == 1 and record["status"] == "bad_launch" and "Traceback" not in err, record
    assert f"{path}: final: [] is not of type 'string'" in record["message"]


BAD_RECORDS = [  # (record file, its content, what the message names)
    ("regen.ptx.splice.json", [], "(top level): [] is not of type 'object'"),
    ("regen.ptx.splice.json", {"status": "ok", "cut": 5}, "cut: 5 is not of type 'object'"),
    ("regen.cubin.json", 5, "(top level): 5 is not of type 'object'"),
    ("regen.run.json", "ok", "(top level): 'ok' is not of type 'object'"),
    ("regen.run.json", {"status": "fault"}, "(top level): 'message' is a required property"),
    ("regen.compare.json", {"buffer": "x"}, "(top level): {'buffer': 'x'} is not of type 'array'"),
    ("regen.compare.json", [{"buffer": 1}], "[0].buffer: 1 is not of type 'string'"),
    ("regen.timing.json", [1], "(top level): [1] is not of type 'object'"),
    ("regen.timing.json", {"status": "ok", "ratio": "fast"}, "ratio: 'fast' is not of type 'number'"),
    ("regen.layer_timing.json", None, "(top level): None is not of type 'object'"),
]


@pytest.mark.parametrize("name,content,message", BAD_RECORDS, ids=[f"{n}-{m[:30]}" for n, _, m in BAD_RECORDS])
def test_collect_names_a_stage_record_of_the_wrong_type(described, spliced, tmp_path, capsys, name, content,
                                                        message):
    cell = tmp_path / "cell"
    shutil.copytree(spliced, cell)
    if name != "regen.ptx.splice.json":  # the others are read after an ok splice
        (cell / "regen.run.json").write_text(json.dumps({"status": "fault", "message": "x"}))
    (cell / name).write_text(json.dumps(content))
    code, _, err = collect(capsys, cell, described, tmp_path / "c.parquet")
    assert is_error(code, err, f"{cell / name}: {message}"), err
    assert not (tmp_path / "c.parquet").exists()


def test_collect_names_a_descriptor_whose_phases_lack_what_a_row_needs(described, tmp_path, capsys):
    raw = json.loads(described.read_text())
    del raw["phases"][0]["M"]
    (tmp_path / "d.json").write_text(json.dumps(raw))
    (tmp_path / "cell").mkdir()
    code, _, err = collect(capsys, tmp_path / "cell", tmp_path / "d.json", tmp_path / "c.parquet")
    assert is_error(code, err, f"{tmp_path / 'd.json'}: phases[0]: 'M' is a required property"), err


def test_report_names_a_file_that_is_not_an_rr_summary(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "random.parquet").write_bytes(np.random.default_rng(1).bytes(4096))
    pq.write_table(pa.table({"layer": ["enc2"], "x": [1]}), tmp_path / "other.parquet")
    for name, reason in (("random.parquet", "not an rr summary (not a Parquet file"),
                         ("other.parquet", "not an rr summary (missing columns phase, recipe, ")):
        code, _, err = rr(capsys, "report", tmp_path / name, "-o", tmp_path / "out")
        assert is_error(code, err, f"{tmp_path / name}: {reason}"), err
    pq.write_table(pa.table({"x": [1]}), tmp_path / "cell.parquet")
    code, _, err = rr(capsys, "summary", tmp_path / "cell.parquet", "-o", tmp_path / "s.parquet")
    assert is_error(code, err, f"{tmp_path / 'cell.parquet'}: not a results table (missing columns layer, "), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cell.parquet", "other.parquet", "random.parquet"]


@pytest.mark.parametrize("argv", [
    ["run", "{loop}", "--backend", "cpu", "-o", "{tmp}/O"], ["compare", "{loop}", "{launch}"],
    ["relaunch", "{loop}", "--module", PTX / "work.ptx", "-o", "{tmp}/O"],
    ["measure", "{loop}", "--module", PTX / "work.ptx", "--reference", "{launch}", "--recipe", "regen",
     "--backend", "cpu", "-o", "{tmp}/O"],
    ["run", "{launch}", "--backend", "cpu", "-o", "{loop}/O"],
], ids=["run", "compare", "relaunch", "measure", "output-in-a-loop"])
def test_a_launch_directory_that_is_a_loop_of_links_is_named(launch, tmp_path, capsys, argv):
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    args = [str(a).format(loop=loop, tmp=tmp_path, launch=launch) for a in argv]
    code, _, err = rr(capsys, *args)
    assert is_error(code, err, f"{loop}", "Too many levels of symbolic links"), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["L", "loop"]


def test_an_output_name_that_is_not_utf8_is_written_and_echoed_escaped(tmp_path):
    for argv, name in ((["linearise", SAMPLE, "--entry", SAMPLE_ENTRY], b"\xff.parquet"),
                       (["describe", SAMPLE, "--entry", SAMPLE_ENTRY], b"d\xff")):
        r = subprocess.run([sys.executable, "-m", "rr", *map(str, argv), "-o", os.fsencode(tmp_path) + b"/" + name],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
        assert "\\udcff" in r.stdout and name in os.listdir(os.fsencode(tmp_path))


def test_a_terminal_that_is_not_utf8_gets_escapes_not_a_traceback(tmp_path):
    r = rr_process("spec", SAMPLE, "--entry", SAMPLE_ENTRY, env={**os.environ, "PYTHONIOENCODING": "ascii"})
    assert r.returncode == 0 and r.stderr == "" and "\\xd7" in r.stdout  # the table's ×
    bad = tmp_path / "caf\u00e9.ptx"
    r = rr_process("entries", bad, env={**os.environ, "PYTHONIOENCODING": "ascii"})
    assert is_error(r.returncode, r.stderr, "caf\\xe9.ptx: no such file"), r.stderr


def test_a_frame_larger_than_the_memory_available_is_refused_before_anything_is_allocated(tmp_path, capsys,
                                                                                        monkeypatch):
    import rr.synth.network as network

    monkeypatch.setattr(network, "available_memory", lambda: 1 << 30)
    monkeypatch.setattr(network, "network_inputs", lambda *a: pytest.fail("allocated the buffers"))
    code, _, err = rr(capsys, "launch", "frame", SAMPLE, "--frame", "16384x16384", "-o", tmp_path / "D")
    assert is_error(code, err, "a 16384x16384 frame: its buffers take 8.9 GB", "1.1 GB available"), err
    assert list(tmp_path.iterdir()) == []


def test_running_out_of_memory_making_a_frame_is_an_error_naming_its_size(tmp_path, capsys, monkeypatch):
    import rr.synth.network as network

    def out_of_memory(*a):
        raise MemoryError

    monkeypatch.setattr(network, "network_inputs", out_of_memory)
    code, _, err = rr(capsys, "launch", "frame", SAMPLE, "--frame", "64x64", "-o", tmp_path / "D")
    assert is_error(code, err, "--frame 64x64: out of memory making the frame's buffers"), err
    assert list(tmp_path.iterdir()) == []


def test_the_documented_frame_bound_says_what_a_frame_takes():
    from rr.synth.network import inputs_bytes, network_layout

    buffers, peak = inputs_bytes(network_layout((16384, 16384)))
    text = (Path(__file__).resolve().parents[1] / "docs" / "formats.md").read_text()
    assert f"{buffers / 1e9:.1f} GB of buffers" in text and f"{peak / 1e9:.0f} GB of memory" in text


# ---- 4. option-like names and control characters -----------------------------------------------

@pytest.mark.skipif(not PTXAS, reason="needs ptxas on PATH")
def test_a_ptx_file_named_like_an_option_reaches_ptxas_as_a_file(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    Path("-x.ptx").write_bytes((PTX / "work.ptx").read_bytes())
    code, out, err = rr(capsys, "compile", "-o", "k.cubin", "--", "-x.ptx")
    assert code == 0 and Path("k.cubin").stat().st_size > 0, err
    assert json.loads(Path("k.cubin.json").read_text())["status"] == "ok"


def test_control_characters_of_an_input_line_are_escaped_in_messages(tmp_path, capsys):
    ptx = tmp_path / "k\x1b]0;owned\x07.ptx"
    ptx.write_bytes(b".version 8.0\n\x1b[31mbad\x07 line\n")
    code, _, err = rr(capsys, "entries", ptx)
    assert is_error(code, err, "k\\x1b]0;owned\\x07.ptx:2:1:"), err
    assert not any(c in err for c in "\x1b\x07\r\x08")
    line, caret = err.splitlines()[-2:]
    assert line == "    \\x1b[31mbad\\x07 line" and caret == "    ^"


def test_the_caret_stays_under_its_character_after_escapes():
    from rr.ptx.errors import ParseError

    text = "mov.u32 \x1b\x07 %r1, bogus;\n"
    e = ParseError.at(text, text.index("%r1"), "here")
    line, caret = str(e).splitlines()[-2:]
    assert "\\x1b\\x07 %r1" in line and line[caret.index("^"):].startswith("%r1")
