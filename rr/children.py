"""Every process rr starts, started so that it does not outlive the rr command that needs it.

A run's child (`python -m rr.run.child`) spins at full CPU on a hanging kernel, ptxas can take
minutes, a captured program runs for as long as it likes: none of them may go on after the `rr`
that started it, and with it their time limit, is gone. So each child here

* gets the kernel's parent-death signal (PR_SET_PDEATHSIG, Linux): SIGKILL the moment the rr
  process is gone, however it ended — SIGKILL included, which no handler sees;
* leads a process group of its own, which rr ends whole (SIGKILL to the group, so that the child's
  own children go too) when its time limit passes, when the wait for it fails, and when rr gets
  SIGTERM, SIGHUP or SIGINT: main() runs under `ending_children_on_signals`, whose handlers end
  every live child's group and then raise Interrupted, which ends the command cleanly — its
  temporaries removed, no output, no traceback, exit status 128 + the signal (130 for Ctrl-C,
  143 for SIGTERM). What the children were making is thrown away with rr's temporaries, so they
  are killed, not asked to stop.

After a SIGKILL of rr only the direct child gets the parent-death signal; its own children are
its business (rr.run.child, ptxas and the C compiler start none; a captured program's are its own).
The parent-death signal follows the *thread* that started the child: rr starts children from its
main thread only. A child's group is not the terminal's foreground group, so Ctrl-C reaches rr
(which ends the child) and not the child directly; a child in a group of its own that read the
terminal would be stopped by it (SIGTTIN). rr's own children read nothing; the program
`rr capture` runs is the user's, often interactive, so it stays in rr's group (`group=False`),
keeps the terminal, and is ended by its pid alone (its own children are its business).

The one process rr starts that is meant to outlive it is the GPU worker (rr.run.worker,
RR_WORKER=1), which serves many commands' jobs: `start_detached` starts it in a session of its
own, without the parent-death signal; the worker ends itself when the client of the job it is
running goes away (see rr.run.worker).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import signal
import subprocess
import threading
from collections.abc import Iterator, Sequence

ENDING_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
PR_SET_PDEATHSIG = 1

_live: dict[int, subprocess.Popen] = {}  # pid → child, until reaped
_groups: set[int] = set()  # the live children that lead a process group of their own
_interrupted = False  # the first ending signal raised Interrupted; later ones only end children


class Interrupted(KeyboardInterrupt):
    """rr got an ending signal (SIGTERM, SIGHUP, SIGINT); its children are ended. A
    KeyboardInterrupt, so that no `except Exception` takes it for a failure to report."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.status = 128 + signum


@functools.cache
def _prctl():
    """libc's prctl, looked up before any fork (ctypes in the forked child only calls it); None
    where there is none (not Linux)."""
    return getattr(ctypes.CDLL(None, use_errno=True), "prctl", None)


def _in_child(parent: int, niceness: int, group: bool) -> None:
    """Between fork and exec: a process group of its own, death with the parent, a lower priority."""
    if group:
        os.setpgid(0, 0)
    prctl = _prctl()
    if prctl is not None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the signal was asked for
            os.kill(os.getpid(), signal.SIGKILL)
    if niceness:
        os.nice(niceness)


def _end(child: subprocess.Popen) -> None:
    """SIGKILL to the child's process group (or, for a child in rr's group, to the child); it is not
    reaped yet, so the pid and the group are still its."""
    if child.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if child.pid in _groups:
                os.killpg(child.pid, signal.SIGKILL)
            else:
                os.kill(child.pid, signal.SIGKILL)


@contextlib.contextmanager
def started(argv: Sequence[str], niceness: int = 0, group: bool = True, **popen) -> Iterator[subprocess.Popen]:
    """A child running `argv` (subprocess.Popen's keywords but preexec_fn, start_new_session and
    process_group, which are this module's), ended with its group if the block fails, reaped after.
    `group`: in a process group of its own (else in rr's, ended by its pid)."""
    _prctl()
    parent = os.getpid()
    child = subprocess.Popen(list(argv), preexec_fn=lambda: _in_child(parent, niceness, group), **popen)
    _live[child.pid] = child
    if group:
        _groups.add(child.pid)
    try:
        with child:  # closes its pipes and reaps it
            try:
                yield child
            except BaseException:
                _end(child)
                raise
    finally:
        _live.pop(child.pid, None)
        _groups.discard(child.pid)


def run(argv: Sequence[str], *, timeout: float | None = None, capture: bool = False, env: dict | None = None,
        stdin=subprocess.DEVNULL, niceness: int = 0, group: bool = True) -> subprocess.CompletedProcess:
    """subprocess.run for rr's children: the child and its group die with rr and at the time
    limit (subprocess.TimeoutExpired, after the group is killed). `capture`: stdout and stderr as
    text in the result. The child reads nothing unless given a `stdin` (None: rr's own)."""
    pipe = subprocess.PIPE if capture else None
    with started(argv, niceness, group, env=env, stdin=stdin, stdout=pipe, stderr=pipe, text=capture) as child:
        out, err = child.communicate(timeout=timeout)
    return subprocess.CompletedProcess(list(argv), child.returncode, out, err)


def start_detached(argv: Sequence[str], **popen) -> subprocess.Popen:
    """A process meant to outlive this one (the GPU worker): a session of its own, no parent-death
    signal, not ended by rr's signal handlers. Its lifetime is its own to keep (rr.run.worker)."""
    return subprocess.Popen(list(argv), start_new_session=True, **popen)


def end_children() -> None:
    """End every live child's process group now."""
    for child in list(_live.values()):
        _end(child)


def _on_signal(signum, frame) -> None:
    global _interrupted
    end_children()
    if not _interrupted:  # a second signal during the clean-up does not interrupt the clean-up
        _interrupted = True
        raise Interrupted(signum)


@contextlib.contextmanager
def ending_children_on_signals() -> Iterator[None]:
    """While the block runs, SIGTERM, SIGHUP and SIGINT end every child and raise Interrupted in
    the main thread. A signal rr was started with ignored (nohup, a shell's `&`) stays ignored.
    The handlers before are restored after; outside the main thread nothing is changed."""
    global _interrupted
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in ENDING_SIGNALS}
    _interrupted = False
    try:
        for s, handler in previous.items():
            if handler is not signal.SIG_IGN:
                signal.signal(s, _on_signal)
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, signal.SIG_DFL if handler is None else handler)  # None: not set from Python
