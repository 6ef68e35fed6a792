"""A long-lived child per GPU: runs and timings without a process start per job.

`rr run`, `rr frame` and `rr time` do their device work in a child process (rr.run.isolate), and a
fresh child per job pays Python's start, importing cupy and creating a CUDA context — most of the
0.72 s of wall time a sweep's job took. With `RR_WORKER=1` in the environment the child is instead
a worker that stays: one per claimed GPU (and per interpreter and rr code, so a changed checkout
never runs old code), started by the first job that needs it, serving one job at a time over a
Unix socket, and gone after `RR_WORKER_IDLE_S` seconds (default 120) without work. A job sends the
worker exactly the arguments `python -m rr.run.child` would get; the worker runs the same
functions the child runs, which write the same records into the job's temporary directory, so the
parent's records, atomic outputs and cache semantics are unchanged.

The worker keeps what its jobs read (rr.run.cuda.Resident): the buffer files of a frame layout,
of its splices (hard links to the layout's) and of the reference capture are read and uploaded by
the first job and found on the device by the next ones — a capture compares its outputs with the
reference's there, and copies back only what differs. A timing's first side — the reference frame
or layer every splice is timed against — keeps its prepared instances (allocations, CUDA arrays,
module loads) for the next timing of it, which restores their buffers from the files' bytes on the
device instead of making them again. What is kept is bounded (RR_RESIDENT_BYTES, default a
quarter of the device's memory up to 8 GiB, for the files; RR_INSTANCES_BYTES, a quarter up to
16 GiB, for the instances), least recently used out, between jobs.

Fault isolation is kept: a job that ends in a fault (status fault, an illegal address may have
left the context unusable) or that the worker cannot report is the worker's last — it exits after
replying, and the next job starts a fresh one; a job that outlives its time limit has the worker
killed (its whole process group) and gets the same timeout record a child would; a worker that
dies mid-job leaves a fault record saying so.

The worker outlives the commands it serves — that is its point (rr.children.start_detached: a
session of its own, no parent-death signal) — but no job outlives its command: while a job runs, a
thread of the worker's watches the job's connection, and when the client closes it before the
reply (the `rr run` that sent it was killed, by any signal, or gave up) the worker ends itself at
once, mid-job; it is not reused, and the next job starts a fresh one.

The worker's socket, pid record, start lock and log are in a private directory
($TMPDIR/rr-workers-<uid>, or RR_WORKER_DIR: rr.private.private_dir — one that is not the user's
own or that others can write is refused, never used); the files in it are opened without following
links, the pid record is written whole under a fresh name and renamed into place, and the worker's
process group is signalled only when the pid the record names is still the process that wrote it
(its start time) and leads its group. The GPU claim (rr.run.gpus) still gives each job the
device alone, so a worker never serves two jobs at once on one GPU; timings and captures queue as
before. Without a GPU (the cpu backend) there is no claim, and one worker serves the machine's
jobs one after another: meant for tests and for single-job use, not for a parallel cpu sweep.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import hashlib
import io
import json
import os
import signal
import socket
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

from rr.private import live_pid, open_private, pid_record, private_dir
from rr.validation import InvalidInput

ENABLE_ENV = "RR_WORKER"
DIR_ENV = "RR_WORKER_DIR"
IDLE_ENV = "RR_WORKER_IDLE_S"
RESIDENT_ENV = "RR_RESIDENT_BYTES"
INSTANCES_ENV = "RR_INSTANCES_BYTES"
DEFAULT_IDLE_S = 120.0
START_TIMEOUT_S = 60.0
# a job that died (1), the child's fault/no-device/timeout status (3) and its io_error exit (5):
# the worker that ran it is not reused
FATAL_EXITS = (1, 3, 5)


def enabled() -> bool:
    return os.environ.get(ENABLE_ENV, "") not in ("", "0")


def worker_dir() -> Path:
    """The workers' private directory (NotPrivate, naming it, when it is not one)."""
    import tempfile

    d = os.environ.get(DIR_ENV) or Path(tempfile.gettempdir()) / f"rr-workers-{os.getuid()}"
    return private_dir(d, "rr's worker directory")


def _setting(name: str, default, parse, valid, what: str):
    """$name parsed, `default` when unset or empty; InvalidInput naming the variable and its value
    when it does not parse or is out of range (a worker given it would die at start)."""
    text = os.environ.get(name, "")
    if not text:
        return default
    try:
        value = parse(text)
    except ValueError:
        value = None
    if value is None or not valid(value):
        raise InvalidInput(f"{name}={text!r}: not {what}")
    return value


def idle_s() -> float:
    """RR_WORKER_IDLE_S: how long a worker waits for its next job."""
    return _setting(IDLE_ENV, DEFAULT_IDLE_S, float, lambda v: 0 < v < float("inf"), "a number of seconds above 0")


def _bytes_setting(name: str) -> int | None:
    return _setting(name, None, int, lambda v: v >= 0, "a whole number of bytes (0 or more)")


def _key(device: str | None) -> str:
    """The worker's name: its device, this interpreter and rr's run-stage code."""
    from rr.fingerprint import fingerprint

    h = hashlib.sha1(f"{device or 'cpu'}\0{sys.executable}\0{fingerprint('run')}".encode()).hexdigest()[:16]
    return f"{(device or 'cpu')[:12]}-{h}"


def _connect(path: Path) -> socket.socket | None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(str(path))
        return s
    except OSError:
        s.close()
        return None


def _record(base: Path) -> str:
    """The worker's pid record (`PID START`, rr.private.pid_record), "" when there is none."""
    try:
        fd = open_private(base.with_suffix(".pid"))
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as f:
        return f.read(64).decode(errors="replace")


def _write_record(base: Path) -> None:
    """This worker's pid record, whole before anyone reads it: written under a fresh name, renamed."""
    tmp = base.with_name(f"{base.name}.pid.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)  # a dead worker's of the same pid
    with os.fdopen(open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL), "w") as f:
        f.write(pid_record())
    os.replace(tmp, base.with_suffix(".pid"))


def _start(base: Path, env: dict) -> socket.socket:
    """The worker at `base`.sock, started if there is none (one starter at a time)."""
    from rr.children import start_detached

    lock = open_private(base.with_suffix(".lock"), os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        sock = _connect(base.with_suffix(".sock"))
        if sock is not None:
            return sock
        base.with_suffix(".sock").unlink(missing_ok=True)
        log = open_private(base.with_suffix(".log"), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            proc = start_detached([sys.executable, "-m", "rr.run.worker", str(base), str(idle_s())], env=env,
                                  stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        finally:
            os.close(log)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            sock = _connect(base.with_suffix(".sock"))
            if sock is not None:
                return sock
            if proc.poll() is not None:
                raise RuntimeError(f"the rr worker exited at start (status {proc.returncode}); its log: "
                                   f"{base.with_suffix('.log')}")
            time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGKILL)  # our own child, not reaped: its pid is still its group's
        raise RuntimeError(f"the rr worker did not start within {START_TIMEOUT_S:.0f} s; its log: "
                           f"{base.with_suffix('.log')}")
    finally:
        os.close(lock)


def call(argv: list[str], device: str | None, env: dict, timeout_s: float) -> subprocess.CompletedProcess:
    """Have the worker of `device` run one child command (`argv` as `python -m rr.run.child` gets
    it): what subprocess.run would give, returncode None where the worker died during the job;
    subprocess.TimeoutExpired after killing the worker when it took longer than timeout_s. A
    worker that closes without taking the job (it was ending) is replaced and the job sent again.
    InvalidInput when the worker directory is not private or a setting does not parse."""
    idle_s(), _bytes_setting(RESIDENT_ENV), _bytes_setting(INSTANCES_ENV)  # refused here, not in the worker
    base = worker_dir() / _key(device)
    for _ in range(3):
        sock = _start(base, env)
        record = _record(base)
        pid = live_pid(record)
        try:
            sock.settimeout(timeout_s)
            sock.sendall(json.dumps({"argv": argv, "cwd": os.getcwd()}).encode() + b"\n")
            lines = sock.makefile("rb")
            ack, reply = lines.readline(), lines.readline()
        except TimeoutError:
            _kill(base, record)
            raise subprocess.TimeoutExpired(argv, timeout_s) from None
        except OSError:
            ack = b""  # reset before it read the job
        finally:
            sock.close()
        if ack != b"+\n":
            continue  # never taken: try a fresh worker
        if not reply.endswith(b"\n"):
            return subprocess.CompletedProcess(argv, None, "", f"the rr worker (pid {pid}) died during the job; its "
                                                                f"log: {base.with_suffix('.log')}")
        reply = json.loads(reply)
        return subprocess.CompletedProcess(argv, reply["code"], "", reply["stderr"])
    raise RuntimeError(f"no rr worker took the job in three tries; its log: {base.with_suffix('.log')}")


def _kill(base: Path, record: str) -> None:
    """Kill the worker whose pid record is `record` (its process group), if that very process is
    still running and leads its group — never whatever process now has a pid a file names."""
    pid = live_pid(record)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if pid is not None and os.getpgid(pid) == pid:
            os.killpg(pid, signal.SIGKILL)
    base.with_suffix(".sock").unlink(missing_ok=True)


def _forget(base: Path) -> None:
    """This worker takes no more jobs: its socket and pid record go (if they are still its own)."""
    if live_pid(_record(base)) == os.getpid():
        base.with_suffix(".sock").unlink(missing_ok=True)
        base.with_suffix(".pid").unlink(missing_ok=True)


@contextlib.contextmanager
def _ended_if_client_goes(conn: socket.socket, base: Path, argv: list[str]):
    """While the block runs, a thread waits on the job's connection: the client sends nothing
    after its request, so the connection turning readable (end of file) or hung up means the client
    is gone — killed, or given up — and the worker ends at once rather than run a job no one
    waits for (os._exit: the job is mid-way in the main thread)."""
    wake_r, wake_w = os.pipe()

    def watch():
        poll = select.poll()
        poll.register(conn, select.POLLIN | select.POLLRDHUP)
        poll.register(wake_r, select.POLLIN)
        if wake_r in dict(poll.poll()):
            return
        print(f"{time.strftime('%H:%M:%S')} {' '.join(argv[:2])}: its client went away during the job; "
              "this worker ends", flush=True)
        _forget(base)
        os._exit(1)

    watcher = threading.Thread(target=watch, name="rr-worker-client-watch", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        os.write(wake_w, b"!")
        watcher.join()
        os.close(wake_r)
        os.close(wake_w)


def _job(conn: socket.socket, resident, base: Path) -> int | None:
    """Read one job from `conn`, acknowledge it, run it with the worker's resident buffers (ending
    the worker if its client goes meanwhile), reply; its exit status (None: no job)."""
    from rr.run.child import child_dispatch

    request = conn.makefile("rb").readline()
    if not request.endswith(b"\n"):
        return None  # a client that went away before asking
    conn.sendall(b"+\n")  # taken: from here a lost reply means this job died with the worker
    job = json.loads(request)
    argv = job["argv"]
    os.chdir(job["cwd"])  # the job's relative paths are its own
    err = io.StringIO()
    started = time.perf_counter()
    with contextlib.redirect_stderr(err), _ended_if_client_goes(conn, base, argv):
        try:
            code = child_dispatch(argv, resident)
        except BaseException as e:  # what a child would die of: reported, then this worker ends
            print(f"{type(e).__name__}: {e}", file=err)
            code = 1
    kept = resident.trim(_resident_budget(), _instances_budget())
    _release()
    tail = "\n".join(err.getvalue().strip().splitlines()[-5:])
    print(f"{time.strftime('%H:%M:%S')} {' '.join(argv[:2])}: exit {code} in {time.perf_counter() - started:.2f} s; "
          f"buffers read {kept['read']}, uploaded {kept['uploaded']}, found resident {kept['reused']}; "
          f"{kept['resident_bytes'] / 2**20:.0f} MiB kept, timing instances {kept['instances_bytes'] / 2**20:.0f} MiB",
          flush=True)
    with contextlib.suppress(OSError):
        conn.sendall(json.dumps({"code": code, "stderr": tail}).encode() + b"\n")
    return code


def _budget(env: str, cap: int) -> int | None:
    """Bytes the worker keeps on the device between jobs: $env, else a quarter of the device's
    memory up to `cap`. None before any job used the device."""
    given = _bytes_setting(env)
    if given is not None:
        return given
    cupy = sys.modules.get("cupy")
    if cupy is None:
        return None
    try:
        return min(cupy.cuda.runtime.memGetInfo()[1] // 4, cap)
    except Exception:  # no device (the cpu backend's worker): nothing is on one
        return None


def _resident_budget() -> int | None:
    """Bytes of buffers the worker keeps on the device (and in its memory) between jobs:
    RR_RESIDENT_BYTES, else a quarter of the device's memory up to 8 GiB — some thirty 4K frames'
    buffers; the rest is the jobs' (a timing's instances take half of what is free)."""
    return _budget(RESIDENT_ENV, 8 << 30)


def _instances_budget() -> int | None:
    """Bytes of timing instances the worker keeps between jobs (rr.run.timing: a side's instances
    made once): RR_INSTANCES_BYTES, else a quarter of the device's memory up to 16 GiB — a 4K
    frame's eight instances and every layer's alone take some 5 GiB (2.1 and 2.7)."""
    return _budget(INSTANCES_ENV, 16 << 30)


def _release() -> None:
    """What a job left on the device goes with it: its launches (and their modules) collected, its
    pinned host buffers handed back. The device memory pool keeps its blocks for the next job —
    allocating them again cost a 4K frame's timing 0.08 s and its capture 0.04 s on the H200 —
    and a timing counts them as free when it sizes its instances (rr.run.timing)."""
    gc.collect()
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        with contextlib.suppress(Exception):
            cupy.get_default_pinned_memory_pool().free_all_blocks()


def serve(base: Path, idle_s: float) -> int:
    """The worker: jobs one at a time until idle_s without one, or until a job ends fatally."""
    path = base.with_suffix(".sock")
    _write_record(base)  # before the first client can connect
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    os.chmod(path, 0o600)
    server.listen(8)
    server.settimeout(idle_s)
    from rr.run.cuda import Resident

    resident = Resident()
    served = 0
    try:
        while True:
            try:
                conn, _ = server.accept()
            except TimeoutError:
                return 0
            with conn:
                code = _job(conn, resident, base)
            if code in FATAL_EXITS:
                return 0
            served += 1
            if served == 1:
                # what the first job imported (cupy, rr's stages) stays for the worker's life: the
                # collection after each job (_release) need not walk it again (≈ 10 ms a job)
                gc.freeze()
    finally:
        # no new connections from here; a client already queued finds the socket closed before
        # its job was acknowledged and sends it to a fresh worker
        _forget(base)
        server.close()


if __name__ == "__main__":
    sys.exit(serve(Path(sys.argv[1]), float(sys.argv[2])))
