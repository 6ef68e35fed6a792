"""The command line against hostile inputs and faults (issue 14): an output that would destroy
data, YAML alias bombs, launch directories of the wrong types, phase numbers, operating-system
errors, partial multi-file outputs and small bounds. Every case is a clear `rr: error: PATH: reason`
with exit status 2 (or a status record), no traceback, no partial or stray file, no lost input.

Faults of the file system are real where this machine allows it: a full disk is a tiny tmpfs
(`mount -t tmpfs -o size=…`), a read-only one a tmpfs mounted `ro`, and permission denied a
directory or file the command cannot use, run without root's CAP_DAC_OVERRIDE (`setpriv`) when
the tests run as root (chmod alone does not stop root). Mounting needs root: elsewhere those tests
are skipped with that reason."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from rr.cli.main import main
from run_kernels import PTX, single_buffer_launch, struct_launch

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "rr" / "data" / "sample_swin.ptx"
SAMPLE_ENTRY = "cuda_dldn_engine_swin_sample_kernel"
RECIPES = ROOT / "config" / "recipes"


def rr(capsys, *argv) -> tuple[int, str, str]:
    """`rr ARGV` in this process: (exit status, stdout, stderr). An exception escaping main fails
    the test, as a traceback would."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as e:  # argparse's refusals
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def rr_process(*argv, timeout=120, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rr", *map(str, argv)], capture_output=True, text=True,
                          timeout=timeout, **kwargs)


def snapshot(directory: Path) -> dict:
    """{relative path: bytes} of every file under directory."""
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def temporaries(directory: Path) -> list[str]:
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*") if p.name.endswith(".tmp"))


def is_error(code: int, err: str, *parts: str) -> bool:
    return code == 2 and err.startswith("rr: error: ") and "Traceback" not in err and all(p in err for p in parts)


@pytest.fixture
def launch(tmp_path) -> Path:
    single_buffer_launch(tmp_path / "L", "work.ptx", "rr_test_work", scalars=(10,))
    return tmp_path / "L"


@pytest.fixture
def small_fs(tmp_path):
    """small_fs(size, readonly=False) -> a fresh tmpfs of that size, unmounted after the test."""
    mounted = []

    def mount(size: str = "64k", readonly: bool = False) -> Path:
        d = tmp_path / f"fs{len(mounted)}"
        d.mkdir()
        opts = f"size={size}" + (",ro" if readonly else "")
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(d)], capture_output=True, text=True)
        if r.returncode:
            pytest.skip(f"cannot mount a tmpfs here (needs root): {r.stderr.strip()}")
        mounted.append(d)
        return d

    yield mount
    for d in mounted:
        subprocess.run(["umount", str(d)], check=True)


def without_dac_override(argv: list) -> list:
    """argv run so that file permissions apply: as root, without CAP_DAC_OVERRIDE/DAC_READ_SEARCH."""
    if os.geteuid() != 0:
        return argv
    if not shutil.which("setpriv"):
        pytest.skip("running as root without setpriv: file permissions cannot be made to apply")
    caps = "-dac_override,-dac_read_search"
    return ["setpriv", f"--bounding-set={caps}", f"--inh-caps={caps}", *argv]


# ---- 1. outputs never destroy data -------------------------------------------------------------

def test_an_output_directory_rr_did_not_write_is_refused_and_its_files_kept(tmp_path, capsys, monkeypatch):
    (tmp_path / "keep.txt").write_text("precious")
    monkeypatch.chdir(tmp_path)
    code, _, err = rr(capsys, "synth", "enc2", "-o", ".")
    assert is_error(code, err, "not written by rr"), err
    assert snapshot(tmp_path) == {"keep.txt": b"precious"} and temporaries(tmp_path.parent) == []


def test_a_run_into_its_own_launch_directory_is_refused_and_the_launch_kept(launch, capsys, monkeypatch):
    before = snapshot(launch)
    for out in (launch, launch / "out", "."):
        monkeypatch.chdir(launch.parent if out == "." else "/")
        code, _, err = rr(capsys, "run", launch, "--backend", "cpu", "-o", out)
        assert is_error(code, err, "input"), (out, err)
        assert snapshot(launch) == before and temporaries(launch.parent) == []


def test_an_output_never_replaces_its_own_input_file(tmp_path, capsys):
    ptx = tmp_path / "k.ptx"
    shutil.copy(SAMPLE, ptx)
    code, _, err = rr(capsys, "linearise", ptx, "--entry", SAMPLE_ENTRY, "-o", ptx)
    assert is_error(code, err, str(ptx), "input"), err
    assert ptx.read_bytes() == SAMPLE.read_bytes()


def test_rr_replaces_a_directory_it_wrote_itself(launch, tmp_path, capsys):
    out = tmp_path / "again"
    for _ in range(2):
        code, _, err = rr(capsys, "relaunch", launch, "--module", PTX / "work.ptx", "-o", out)
        assert code == 0, err
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == ["buf.npy", "kernel.ptx",
                                                                                  "launch.json"]
    assert temporaries(tmp_path) == []


def test_the_temporary_of_a_directory_output_lives_beside_it(tmp_path, monkeypatch):
    from rr.io import atomic_dir

    (tmp_path / "out").mkdir()
    monkeypatch.chdir(tmp_path / "out")
    with atomic_dir(".") as tmp:
        assert tmp.resolve().parent == tmp_path and tmp.name.endswith(".tmp")
        (tmp / "x").write_text("x")
    assert (tmp_path / "out" / "x").read_text() == "x" and temporaries(tmp_path) == []


# ---- 5. YAML alias bombs and echoed values ---------------------------------------------------

BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
    for p, n in zip("abcdefgh", "bcdefghi"))


def test_a_recipe_alias_bomb_is_refused_naming_the_file(tmp_path):
    recipe = tmp_path / "bomb.yaml"
    recipe.write_text(BOMB + "name: bomb\ndescription: *i\ncut: {phase: 1}\ntemplate: {name: regen}\n")
    r = rr_process("splice", SAMPLE, "--entry", SAMPLE_ENTRY, "--recipe", recipe, "-o", tmp_path / "o.ptx",
                   timeout=60)
    assert r.returncode == 2 and r.stderr.startswith(f"rr: error: {recipe}: ") and "alias" in r.stderr, r.stderr
    assert len(r.stderr) < 1000 and not (tmp_path / "o.ptx").exists()


def test_an_echoed_value_is_cut_to_a_few_hundred_characters(tmp_path, capsys):
    recipe = tmp_path / "long.yaml"
    recipe.write_text(f"name: {'A' * 1_000_000}\ndescription: x\ncut: {{phase: 1}}\ntemplate: {{name: regen}}\n")
    code, _, err = rr(capsys, "splice", SAMPLE, "--entry", SAMPLE_ENTRY, "--recipe", recipe, "-o",
                      tmp_path / "o.ptx")
    assert is_error(code, err, f"{recipe}: name: 'AAAA", "does not match"), err[:2000]
    assert len(err) < 1000
    bad_line = tmp_path / "bad.ptx"
    bad_line.write_text(".version 8.7\n.target sm_90\n.address_size 64\n" + "@" * 1_000_000 + "\n")
    code, _, err = rr(capsys, "entries", bad_line)
    assert is_error(code, err, str(bad_line)) and len(err) < 1000, err[:2000]


# ---- 6. launch directories: one validation layer ------------------------------------------------

def _edit_launch(directory: Path, edit) -> Path:
    path = directory / "launch.json"
    raw = json.loads(path.read_text())
    raw = edit(raw)
    path.write_text(json.dumps(raw))
    return path


def _set(key_path, value):
    def edit(raw):
        node = raw
        for k in key_path[:-1]:
            node = node[k]
        node[key_path[-1]] = value
        return raw
    return edit


BAD_LAUNCHES = [  # (edit of the struct launch, what the message must name)
    (lambda raw: 5, "(top level): 5 is not of type 'object'"),
    (_set(["grid"], 4), "grid: 4 is not of type 'array'"),
    (_set(["grid"], [4.0, 1, 1]), "grid[0]: 4.0 is not of type 'integer'"),
    (_set(["buffers", "a"], 3), "buffers.a: 3 is not of type 'object'"),
    (_set(["fields", 0, "offset"], "abc"), "fields[0].offset: 'abc' is not of type 'integer'"),
    (_set(["fields", 0, "offset"], -8), "fields[0].offset: -8 is less than the minimum of 0"),
    (_set(["fields", 5, "dtype"], "object"), "fields[5].dtype: 'object' is not one of"),
    (_set(["fields", 5, "value"], [1e39]), "fields[5].value: 1e+39 does not fit float32"),
    (_set(["fields", 5], {"offset": 40, "kind": "scalar", "dtype": "uint16", "value": [70000]}),
     "fields[5].value: 70000 does not fit uint16"),
    (_set(["fields", 1, "offset"], 4), "fields[1] (8 bytes at offset 4)"),
    (_set(["fields", 1, "offset"], 0), "fields[1] (8 bytes at offset 0) overlaps fields[0] (8 bytes at offset 0)"),
    (_set(["params", "size"], 10 ** 12), "params.size: 1000000000000 is greater than the maximum of"),
    (_set(["block"], [1024, 1024, 64]), "block: [1024, 1024, 64] is 67108864 threads, more than CUDA's 1024"),
    (_set(["block"], [32, 1, 65]), "block[2]: 65 is greater than the maximum of 64"),
    (_set(["buffers", "a", "file"], "../../a.npy"), "buffers.a.file: '../../a.npy' does not match"),
    (_set(["module"], "missing.ptx"), "module: 'missing.ptx': no such file in"),
]


@pytest.mark.parametrize("edit,message", BAD_LAUNCHES, ids=[m[:40] for _, m in BAD_LAUNCHES])
def test_a_bad_launch_description_names_the_key_and_value(tmp_path, edit, message):
    from rr.run.launch import LaunchError, read_launch

    struct_launch(tmp_path / "l")
    path = _edit_launch(tmp_path / "l", edit)
    with pytest.raises(LaunchError) as e:
        read_launch(tmp_path / "l")
    assert str(e.value).startswith(f"{path}: ") and message in str(e.value), str(e.value)


@pytest.mark.parametrize("content,message", [
    (lambda: np.lib.format.magic(1, 0) + b"\x00\x00", "not a .npy array"),
    (lambda: os.urandom(4096), "not a .npy array"),
    (lambda: _npy_bytes(np.arange(1000, dtype=np.uint32))[:2000], "truncated"),
    (lambda: _npy_bytes(np.array([{"x": 1}], dtype=object)), "object"),
])
def test_a_truncated_random_or_pickled_buffer_file_is_named(launch, content, message):
    from rr.run.launch import LaunchError, load_buffers, read_launch

    (launch / "buf.npy").write_bytes(content())
    with pytest.raises(LaunchError) as e:
        load_buffers(launch, read_launch(launch))
    assert str(e.value).startswith(f"{launch / 'buf.npy'}: ") and message in str(e.value), str(e.value)


def _npy_bytes(a: np.ndarray) -> bytes:
    import io

    f = io.BytesIO()
    np.save(f, a, allow_pickle=True)
    return f.getvalue()


def test_every_command_reports_a_bad_launch_naming_key_and_value(launch, tmp_path, capsys):
    _edit_launch(launch, _set(["grid"], 4))
    message = f"{launch / 'launch.json'}: grid: 4 is not of type 'array'"
    code, _, err = rr(capsys, "run", launch, "--backend", "cpu", "-o", tmp_path / "O")
    record = json.loads((tmp_path / "O" / "run.json").read_text())
    assert code == 1 and record["status"] == "bad_launch" and message in record["message"], record
    assert "Traceback" not in record["message"] and "Traceback" not in err
    code, _, err = rr(capsys, "relaunch", launch, "--module", PTX / "work.ptx", "-o", tmp_path / "R")
    assert is_error(code, err, message) and not (tmp_path / "R").exists(), err
    code, _, err = rr(capsys, "compare", launch, launch)
    assert is_error(code, err, message), err
    for backend in ("cpu", "cuda"):
        code, _, err = rr(capsys, "time", launch, "--vs", launch, "--backend", backend, "-o", tmp_path / "t.json")
        record = json.loads((tmp_path / "t.json").read_text())
        assert code == 1 and record["status"] == "bad_launch" and message in record["message"], record


def test_a_truncated_buffer_is_a_bad_launch_of_the_run(launch, tmp_path, capsys):
    data = (launch / "buf.npy").read_bytes()
    (launch / "buf.npy").write_bytes(data[:len(data) // 2])
    code, _, err = rr(capsys, "run", launch, "--backend", "cpu", "-o", tmp_path / "O")
    record = json.loads((tmp_path / "O" / "run.json").read_text())
    assert code == 1 and record["status"] == "bad_launch" and f"{launch / 'buf.npy'}: truncated" in record["message"]
    code, _, err = rr(capsys, "compare", launch, launch)
    assert is_error(code, err, f"{launch / 'buf.npy'}: truncated"), err


# ---- 8. phase numbers ---------------------------------------------------------------------------

def test_phase_zero_is_refused_not_taken_for_the_recipes_phase(tmp_path, capsys):
    code, _, err = rr(capsys, "splice", SAMPLE, "--entry", SAMPLE_ENTRY, "--recipe", RECIPES / "regen.yaml",
                      "--phase", "0", "-o", tmp_path / "o.ptx")
    assert code == 2 and "--phase: 0 is not a phase number" in err and not (tmp_path / "o.ptx").exists(), err


def test_a_fractional_phase_in_a_recipe_fails_the_schema(tmp_path):
    from rr.splice.recipe import RecipeError, load_recipe

    recipe = tmp_path / "r.yaml"
    recipe.write_text("name: r\ndescription: x\ncut: {phase: 8.0}\ntemplate: {name: regen}\n")
    with pytest.raises(RecipeError, match=r"cut.phase: 8.0 is not of type 'integer'"):
        load_recipe(recipe)


# ---- 9. operating-system errors -----------------------------------------------------------------

def test_a_full_disk_is_an_error_naming_the_output_and_leaves_nothing(small_fs, capsys):
    fs = small_fs("64k")
    code, _, err = rr(capsys, "synth", "engine", "-o", fs / "engine.bin")
    assert is_error(code, err, f"{fs / 'engine.bin'}: No space left on device"), err
    assert list(fs.iterdir()) == []


def test_a_run_on_a_full_disk_is_an_io_error_record(small_fs, tmp_path, capsys):
    single_buffer_launch(tmp_path / "L", "work.ptx", "rr_test_work", scalars=(10,), size=1 << 18)
    fs = small_fs("64k")
    code, _, err = rr(capsys, "run", tmp_path / "L", "--backend", "cpu", "-o", fs / "O")
    record = json.loads((fs / "O" / "run.json").read_text())
    assert code == 1 and record["status"] == "io_error" and "No space left on device" in record["message"], record
    assert sorted(p.name for p in (fs / "O").iterdir()) == [".rr", "run.json"] and temporaries(fs) == []


def test_a_read_only_file_system_is_an_error_naming_the_output(small_fs, capsys):
    fs = small_fs("64k", readonly=True)
    code, _, err = rr(capsys, "sample-engine", "-o", fs / "e.bin")
    assert is_error(code, err, str(fs), "Read-only file system"), err


def test_permission_denied_is_an_error_naming_the_path(tmp_path):
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o555)
    r = subprocess.run(without_dac_override([sys.executable, "-m", "rr", "sample-engine", "-o", str(closed / "e.bin")]),
                       capture_output=True, text=True)
    assert is_error(r.returncode, r.stderr, str(closed), "Permission denied"), r.stderr
    unreadable = tmp_path / "k.ptx"
    shutil.copy(SAMPLE, unreadable)
    unreadable.chmod(0)
    r = subprocess.run(without_dac_override([sys.executable, "-m", "rr", "entries", str(unreadable)]),
                       capture_output=True, text=True)
    assert is_error(r.returncode, r.stderr, f"{unreadable}: Permission denied"), r.stderr


def test_an_output_that_is_a_file_or_under_one_is_refused(launch, tmp_path, capsys):
    f = tmp_path / "f"
    f.write_text("keep")
    code, _, err = rr(capsys, "relaunch", launch, "--module", PTX / "work.ptx", "-o", f)
    assert is_error(code, err, str(f), "not a directory"), err
    code, _, err = rr(capsys, "sample-engine", "-o", f / "e.bin")
    assert is_error(code, err, str(f), "not a directory"), err
    code, _, err = rr(capsys, "sample-engine", "-o", tmp_path)
    assert is_error(code, err, str(tmp_path), "is a directory"), err
    assert f.read_text() == "keep" and temporaries(tmp_path) == []


def test_a_recipe_that_is_a_directory_or_not_utf8_is_named(tmp_path, capsys):
    (tmp_path / "dir.yaml").mkdir()
    (tmp_path / "latin1.yaml").write_bytes("name: r\ndescription: caf\xe9\n".encode("latin-1"))
    for recipe, reason in (("dir.yaml", "Is a directory"), ("latin1.yaml", "not UTF-8")):
        code, _, err = rr(capsys, "splice", SAMPLE, "--entry", SAMPLE_ENTRY, "--recipe", tmp_path / recipe,
                          "-o", tmp_path / "o.ptx")
        assert is_error(code, err, f"{tmp_path / recipe}", reason), err
    assert not (tmp_path / "o.ptx").exists()


def test_a_closed_pipe_ends_rr_quietly(tmp_path):
    p = subprocess.Popen([sys.executable, "-m", "rr", "spec", str(SAMPLE), "--entry", SAMPLE_ENTRY, "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()  # the reader is gone before rr writes: `rr spec --json | head -0`
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 128 + signal.SIGPIPE and err == "", err


# ---- 10. multi-file outputs appear together, stale temporaries go ------------------------------

def test_describe_on_a_full_disk_leaves_no_tables_without_their_descriptor(tmp_path, small_fs, capsys):
    code, _, err = rr(capsys, "describe", SAMPLE, "--entry", SAMPLE_ENTRY, "-o", tmp_path / "d")
    assert code == 0, err
    pages = {p.name: -(-p.stat().st_size // 4096) for p in (tmp_path / "d").iterdir() if not p.name.startswith(".")}
    fs = small_fs(f"{(pages['phases.parquet'] + pages['epilogues.parquet']) * 4}k")  # the tables fit, not all three
    code, _, err = rr(capsys, "describe", SAMPLE, "--entry", SAMPLE_ENTRY, "-o", fs)
    assert is_error(code, err, "No space left on device"), err
    assert list(fs.iterdir()) == []


def _writer_in_atomic_dir(target: Path, then: str) -> subprocess.Popen:
    """A process inside rr.io.atomic_dir(target) that `then` kills itself or waits on stdin."""
    code = textwrap.dedent(f"""
        import os, signal, sys
        from rr.io import atomic_dir
        with atomic_dir({str(target)!r}) as tmp:
            (tmp / "partial.npy").write_bytes(b"x" * 100)
            print("inside", flush=True)
            {"os.kill(os.getpid(), signal.SIGKILL)" if then == "die" else "sys.stdin.read()"}
    """)
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline() == "inside\n"
    return p


def test_a_killed_writers_temporary_is_removed_by_the_next_write(launch, tmp_path, capsys):
    out = tmp_path / "x.capture"
    _writer_in_atomic_dir(out, "die").wait()
    assert [t for t in temporaries(tmp_path) if t.startswith(".x.capture.")], "the killed writer left no temporary"
    code, _, err = rr(capsys, "relaunch", launch, "--module", PTX / "work.ptx", "-o", out)
    assert code == 0, err
    assert temporaries(tmp_path) == []


def test_a_live_writers_temporary_is_left_alone(launch, tmp_path, capsys):
    out = tmp_path / "x.capture"
    live = _writer_in_atomic_dir(out, "wait")
    try:
        theirs = temporaries(tmp_path)
        code, _, err = rr(capsys, "relaunch", launch, "--module", PTX / "work.ptx", "-o", out)
        assert code == 0, err
        assert temporaries(tmp_path) == theirs != []
    finally:
        live.kill()
        live.wait()


# ---- 13. small bounds ---------------------------------------------------------------------------

@pytest.mark.parametrize("timeout", ["0", "-1", "nan"])
def test_a_timeout_that_is_not_a_positive_number_is_refused(launch, tmp_path, capsys, timeout):
    code, _, err = rr(capsys, "run", launch, "--backend", "cpu", "--timeout", timeout, "-o", tmp_path / "O")
    assert code == 2 and "--timeout" in err and not (tmp_path / "O").exists(), err


def test_extents_past_the_bound_are_refused_with_the_bound(tmp_path, capsys):
    code, _, err = rr(capsys, "synth", "enc2", "--extents", "100000x100000", "-o", tmp_path / "s")
    assert is_error(code, err, "100000x100000", "at most"), err
    code, _, err = rr(capsys, "launch", "enc2", SAMPLE, "--frame", "1600000x1600000", "-o", tmp_path / "l")
    assert is_error(code, err, "1600000x1600000", "at most"), err
    assert list(tmp_path.iterdir()) == []


def test_collect_with_a_missing_or_broken_descriptor_names_it(tmp_path, capsys):
    (tmp_path / "cell").mkdir()
    args = ["collect", tmp_path / "cell", "--layer", "sample", "--phase", "1", "--recipes", "regen", "--module", SAMPLE,
            "-o", tmp_path / "c.parquet"]
    code, _, err = rr(capsys, *args, "--descriptor", tmp_path / "none.json")
    assert is_error(code, err, f"{tmp_path / 'none.json'}: No such file or directory"), err
    (tmp_path / "bad.json").write_text("{not json")
    code, _, err = rr(capsys, *args, "--descriptor", tmp_path / "bad.json")
    assert is_error(code, err, f"{tmp_path / 'bad.json'}:1:2: not valid JSON"), err
    assert not (tmp_path / "c.parquet").exists()


def test_a_ptx_input_that_is_a_directory_fifo_or_device_is_named(tmp_path, capsys):
    fifo, directory = tmp_path / "k.ptx", tmp_path / "d"
    os.mkfifo(fifo)
    directory.mkdir()
    for path, reason in ((fifo, "not a regular file"), ("/dev/zero", "not a regular file"),
                         (directory, "a directory, not a PTX file or a corpus")):
        code, _, err = rr(capsys, "linearise", path, "--entry", SAMPLE_ENTRY, "-o", tmp_path / "s.parquet")
        assert is_error(code, err, f"{path}: {reason}"), err
