"""rr's child processes and the state it keeps in shared temporary directories (issue 33): the
GPU workers' and the GPU locks' directories are used only when private — another user's links
there are never followed, and a pid file is believed only with its process's start time, so a
timeout signals no process a planted file names; no child outlives the rr command that started
it — a run's child, ptxas, a captured program, a worker's job — whether rr gets SIGTERM, SIGHUP,
SIGINT (Ctrl-C: exit 130) or SIGKILL; a worker setting that is not a number is named with its value.

Processes are found by their command lines in /proc (a marker: the test's own paths), and counted
gone when they have exited (a zombie no one reaped yet is gone). The other user is uid 65534
(nobody), given the directory by chown where the tests run as root, else skipped with that reason."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rr.cli.main import main
from rr.private import NotPrivate, private_dir, process_start
from rr.run import worker
from rr.run.gpus import claimed_gpu
from run_kernels import PTX, single_buffer_launch

NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user (chown) needs root")
DEVICES = ("GPU-aaaaaaaa-0000-0000-0000-000000000000",)
ENDING = [signal.SIGTERM, signal.SIGINT, signal.SIGKILL]  # (SIGHUP is SIGTERM's case: rr run's test has it)


def alive(*markers: str) -> list[int]:
    """Pids of the processes still running whose command line holds every marker."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            argv = (d / "cmdline").read_bytes().decode(errors="replace")
            state = (d / "stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if state != "Z" and all(m in argv for m in markers):
            found.append(int(d.name))
    return found


def running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def written(pid: int) -> int:
    """Bytes process `pid` has written so far (/proc/PID/io's wchar); 0 once it is gone."""
    try:
        return int(dict(line.split(": ") for line in Path(f"/proc/{pid}/io").read_text().splitlines())["wchar"])
    except OSError:
        return 0


def eventually(predicate, timeout_s: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def rr_started(*argv, **env) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "rr", *map(str, argv)], env={**os.environ, **env},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def ended(rr: subprocess.Popen, signum: int) -> tuple[int, str]:
    rr.send_signal(signum)
    _, err = rr.communicate(timeout=60)
    return rr.returncode, err


def expected_status(signum: int) -> int:
    """What rr exits with: 128 + the signal after ending its children; SIGKILL is seen only by the shell."""
    return -signum if signum == signal.SIGKILL else 128 + signum


@pytest.fixture(autouse=True)
def no_process_outlives_its_test(tmp_path):
    """After the test (whose assertions came first), whatever still runs with its paths is killed."""
    yield
    for pid in alive(str(tmp_path)):
        os.kill(pid, signal.SIGKILL)


@pytest.fixture
def launch(tmp_path) -> Path:
    single_buffer_launch(tmp_path / "work", "work.ptx", "rr_test_work", scalars=(10,))
    return tmp_path / "work"


@pytest.fixture
def hang(tmp_path) -> Path:
    single_buffer_launch(tmp_path / "hang", "hang.ptx", "rr_test_hang")
    return tmp_path / "hang"


def _shared(tmp_path: Path, how: str) -> Path:
    """A directory another user could have made or can write: world-writable, or nobody's."""
    d = tmp_path / "shared"
    d.mkdir()
    if how == "world-writable":
        d.chmod(0o777)
    else:
        os.chown(d, NOBODY, NOBODY)
    return d


def _planted_links(d: Path, names: list[str], tmp_path: Path) -> dict[Path, bytes | None]:
    """Links in `d` to files of the victim's (one there, one not yet): {target: its bytes, None if absent}."""
    victims = {tmp_path / "victim.txt": b"keep\n", tmp_path / "absent.txt": None}
    (tmp_path / "victim.txt").write_bytes(b"keep\n")
    for i, name in enumerate(names):
        (d / name).symlink_to(list(victims)[i % 2])
    return victims


def _untouched(victims: dict[Path, bytes | None]) -> bool:
    return all((p.read_bytes() if p.exists() else None) == content for p, content in victims.items())


WHERE = ["RR_WORKER_DIR", "TMPDIR"]
HOW = ["world-writable", pytest.param("other-owned", marks=as_root)]


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize("how", HOW)
def test_a_worker_directory_that_is_not_private_is_refused_and_its_links_are_not_followed(tmp_path, launch, where,
                                                                                          how):
    d = _shared(tmp_path, how)
    if where == "TMPDIR":  # the default name under a shared TMPDIR, made first by another user
        (tmp_path / "tmp").mkdir(mode=0o1777)
        (tmp_path / "tmp").chmod(0o1777)
        d = d.rename(tmp_path / "tmp" / f"rr-workers-{os.getuid()}")
        env = {"TMPDIR": str(tmp_path / "tmp")}
    else:
        env = {"RR_WORKER_DIR": str(d)}
    key = worker._key(None)
    victims = _planted_links(d, [f"{key}.log", f"{key}.lock", f"{key}.pid"], tmp_path)
    rr = subprocess.run([sys.executable, "-m", "rr", "run", launch, "--backend", "cpu", "-o", tmp_path / "out"],
                        env={**os.environ, "RR_WORKER": "1", **env}, capture_output=True, text=True, timeout=120)
    assert rr.returncode == 2 and rr.stderr.startswith(f"rr: error: {d}: refusing to use it as rr's worker directory")
    assert "Traceback" not in rr.stderr and not (tmp_path / "out").exists()
    assert _untouched(victims) and not (d / f"{key}.sock").exists()


@pytest.mark.parametrize("where", ["argument", "RR_GPU_LOCK_DIR", "TMPDIR"])
@pytest.mark.parametrize("how", HOW)
def test_a_gpu_lock_directory_that_is_not_private_is_refused_and_its_links_are_not_followed(tmp_path, monkeypatch,
                                                                                            where, how):
    d = _shared(tmp_path, how)
    if where == "TMPDIR":
        (tmp_path / "tmp").mkdir()
        (tmp_path / "tmp").chmod(0o1777)
        d = d.rename(tmp_path / "tmp" / f"rr-gpu-locks-{os.getuid()}")
        monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
        monkeypatch.setattr("tempfile.tempdir", None)  # gettempdir() reads TMPDIR again
    elif where == "RR_GPU_LOCK_DIR":
        monkeypatch.setenv("RR_GPU_LOCK_DIR", str(d))
    victims = _planted_links(d, [f"{DEVICES[0]}.lock"], tmp_path)
    with pytest.raises(NotPrivate, match=f"^{d}: refusing to use it as rr's GPU lock directory"):
        with claimed_gpu(DEVICES, d if where == "argument" else None):
            pass
    assert _untouched(victims)


@pytest.mark.parametrize("record", ["bare pid", "another start time"])
def test_a_timeout_signals_no_process_that_a_planted_pid_file_names(tmp_path, launch, record):
    # an innocent process leading its own group (as a worker does), named by a pid file beside a
    # socket that takes connections and never answers: the job times out, the process lives on
    d = private_dir(tmp_path / "workers")
    base = d / worker._key(None)
    innocent = subprocess.Popen(["sleep", "300"], start_new_session=True)
    silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        silent.bind(str(base.with_suffix(".sock")))
        silent.listen(8)
        start = process_start(innocent.pid)
        base.with_suffix(".pid").write_text(f"{innocent.pid}\n" if record == "bare pid" else
                                            f"{innocent.pid} {start + 1}\n")
        rr = subprocess.run([sys.executable, "-m", "rr", "run", launch, "--backend", "cpu", "--timeout", "1",
                             "-o", tmp_path / "out"], env={**os.environ, "RR_WORKER": "1", "RR_WORKER_DIR": str(d)},
                            capture_output=True, text=True, timeout=120)
        assert rr.returncode == 1, rr.stderr
        assert json.loads((tmp_path / "out" / "run.json").read_text())["status"] == "timeout"
        time.sleep(0.2)
        assert innocent.poll() is None and running(innocent.pid)
    finally:
        silent.close()
        innocent.kill()
        innocent.wait()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGKILL],
                         ids=lambda s: signal.Signals(s).name)
def test_a_killed_rr_run_leaves_no_child_running_and_no_output(tmp_path, hang, signum):
    # the child's first write is its progress line (no bytecode is written): from then on it spins,
    # with nothing more to write that could fail once rr is gone
    rr = rr_started("run", hang, "--backend", "cpu", "--timeout", "300", "-o", tmp_path / "out", RR_WORKER="0",
                    PYTHONDONTWRITEBYTECODE="1")
    assert eventually(lambda: alive("rr.run.child", str(hang)))
    child = alive("rr.run.child", str(hang))
    assert eventually(lambda: written(child[0]) > 0)
    code, err = ended(rr, signum)
    assert code == expected_status(signum) and "Traceback" not in err, err
    assert eventually(lambda: not any(map(running, child)), 10)
    assert not (tmp_path / "out").exists()
    if signum != signal.SIGKILL:  # (a killed rr leaves its temporary for the next write to remove)
        assert [p.name for p in tmp_path.iterdir()] == ["hang"]


@pytest.mark.parametrize("signum", ENDING, ids=lambda s: signal.Signals(s).name)
def test_a_job_whose_rr_run_is_killed_ends_its_worker(tmp_path, hang, signum):
    d = tmp_path / "workers"
    rr = rr_started("run", hang, "--backend", "cpu", "--timeout", "300", "-o", tmp_path / "out", RR_WORKER="1",
                    RR_WORKER_DIR=str(d))
    assert eventually(lambda: alive("rr.run.worker", str(d)) and list(d.glob("*.pid")))
    pid = alive("rr.run.worker", str(d))[0]
    time.sleep(1.0)  # the job is taken and under way: the kernel spins
    assert running(pid)
    code, err = ended(rr, signum)
    assert code == expected_status(signum) and "Traceback" not in err, err
    assert eventually(lambda: not running(pid), 10)
    assert not list(d.glob("*.sock")) and not list(d.glob("*.pid"))  # the next job starts a fresh worker
    assert "its client went away during the job" in next(d.glob("*.log")).read_text()


@pytest.fixture
def slow_ptxas(tmp_path) -> Path:
    """A `ptxas` first on PATH that starts a child of its own and sleeps; both name the script."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "ptxas"
    script.write_text(f"#!{sys.executable}\nimport subprocess, sys, time\n"
                      "if sys.argv[1:] != ['grandchild']:\n"
                      "    subprocess.Popen([sys.executable, __file__, 'grandchild'])\n"
                      "time.sleep(300)\n")
    script.chmod(0o755)
    return script


@pytest.mark.parametrize("signum", ENDING, ids=lambda s: signal.Signals(s).name)
def test_a_killed_rr_compile_leaves_no_ptxas_running_and_no_cubin(tmp_path, slow_ptxas, signum):
    rr = rr_started("compile", PTX / "work.ptx", "-o", tmp_path / "out.cubin",
                    PATH=f"{slow_ptxas.parent}{os.pathsep}{os.environ['PATH']}")
    assert eventually(lambda: alive(str(slow_ptxas), "grandchild"))
    ptxas = alive(str(slow_ptxas), "-arch=")
    code, err = ended(rr, signum)
    assert code == expected_status(signum) and "Traceback" not in err, err
    assert eventually(lambda: not any(map(running, ptxas)), 10)
    if signum != signal.SIGKILL:  # the handler ends ptxas's process group: its own child too
        assert eventually(lambda: not alive(str(slow_ptxas)), 10)
    # (after a SIGKILL, ptxas's own child is its business, and so are rr's temporaries: the next
    # write of the cubin removes them as a dead writer's)
    left = [p.name for p in tmp_path.glob("*cubin*")]
    if signum == signal.SIGKILL:
        assert all(n.startswith((".out.cubin.rr-", ".out.cubin.json.rr-")) and n.endswith(".tmp") for n in left), left
    else:
        assert left == []


@pytest.fixture(scope="module")
def interposer_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("capture-cache")


@pytest.mark.parametrize("signum", ENDING, ids=lambda s: signal.Signals(s).name)
def test_a_killed_rr_capture_leaves_no_program_running(tmp_path, interposer_cache, signum):
    program = tmp_path / "program.py"
    program.write_text("import time\ntime.sleep(300)\n")
    rr = rr_started("capture", "-o", tmp_path / "cap", "--", sys.executable, program,
                    XDG_CACHE_HOME=str(interposer_cache))
    assert eventually(lambda: alive(str(program)) != [rr.pid] and len(alive(str(program))) == 2)
    captured = [pid for pid in alive(str(program)) if pid != rr.pid]
    code, err = ended(rr, signum)
    assert code == expected_status(signum) and "Traceback" not in err, err
    assert eventually(lambda: not any(map(running, captured)), 10)
    assert not (tmp_path / "cap").exists()


@pytest.mark.parametrize("name, value", [("RR_WORKER_IDLE_S", "abc"), ("RR_WORKER_IDLE_S", "0"),
                                         ("RR_WORKER_IDLE_S", "nan"), ("RR_RESIDENT_BYTES", "1GB"),
                                         ("RR_INSTANCES_BYTES", "-5")])
def test_a_worker_setting_that_is_not_a_number_is_an_error_naming_it_and_its_value(tmp_path, launch, monkeypatch,
                                                                                  capsys, name, value):
    monkeypatch.setenv("RR_WORKER", "1")
    monkeypatch.setenv("RR_WORKER_DIR", str(tmp_path / "workers"))
    monkeypatch.setenv(name, value)
    code = main(["run", str(launch), "--backend", "cpu", "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"rr: error: {name}={value!r}: not a ") and "Traceback" not in err, err
    assert not (tmp_path / "out").exists() and not (tmp_path / "workers").exists()
