"""What rr trusts on a machine it shares with other users: directories and files of the user's own
that no one else can write, and processes known by their start time, not their pid alone.

rr keeps state outside its outputs in a few places — the GPU workers' sockets, pids and logs
($TMPDIR/rr-workers-<uid>), the GPU claims' lock files ($TMPDIR/rr-gpu-locks-<uid>), the capture
interposer's build cache ($XDG_CACHE_HOME/rr). A name under a shared directory such as /tmp can
be taken first by anyone, so a directory found there is used only when it is *private*:

* a real directory (checked with lstat: a symbolic link, even to a directory of the user's own, is
  refused), owned by this user, writable by no one else;
* reached through directories that no one else can rename it out of: every directory above it is
  owned by root or by this user and is not writable by group or others, unless it is sticky (as
  /tmp is: there only an entry's owner may rename or remove it).

A private directory rr makes is made 0700 whatever the umask. Files in one are opened with
O_NOFOLLOW (a link planted before the directory was made private is not followed) and, where rr
makes them, O_EXCL. A pid read from a file is trusted only together with the process's start time
(a pid is reused; a pid file another process wrote over would otherwise let rr signal anyone's)."""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from rr.validation import InvalidInput

OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH


class NotPrivate(InvalidInput):
    """A directory or file rr will not trust; the message names it and says why."""


def _why_untrusted_above(directory: Path) -> str | None:
    """Why a directory above a private one would let another user replace what is below it, or None.
    Resolved first: the directories that hold the entry are the real ones, whatever links led there."""
    uid = os.geteuid()
    for above in [directory, *directory.parents]:
        try:
            st = os.stat(above)
        except OSError as e:
            return f"{above}: {e.strerror}"
        if st.st_uid not in (0, uid):
            return f"{above} is owned by another user (uid {st.st_uid})"
        if st.st_mode & OTHERS_WRITE and not st.st_mode & stat.S_ISVTX:
            return f"{above} is writable by other users and not sticky (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def why_not_private(path: str | Path) -> str | None:
    """Why `path` is not a private directory of this user's (see the module's doc), or None if it is."""
    path = Path(os.path.abspath(path))
    try:
        st = os.lstat(path)
    except OSError as e:
        return f"{path}: {e.strerror}"
    if stat.S_ISLNK(st.st_mode):
        return f"{path} is a symbolic link"
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a directory"
    if st.st_uid != os.geteuid():
        return f"{path} is owned by another user (uid {st.st_uid})"
    if st.st_mode & OTHERS_WRITE:
        return f"{path} is writable by other users (mode {stat.S_IMODE(st.st_mode):o})"
    return _why_untrusted_above(Path(os.path.realpath(path.parent)))


def private_dir(path: str | Path, what: str = "rr's directory") -> Path:
    """`path` as a private directory: made 0700 when absent (and the missing directories above it
    0755 at most, writable by no one else whatever the umask); NotPrivate naming it and the reason
    when it exists and is not private — it is never repaired, chmod-ed or used."""
    path = Path(os.path.abspath(path))
    made = False
    try:
        _make_parents(path.parent)
        why = _why_untrusted_above(Path(os.path.realpath(path.parent)))
        if why is not None:  # nothing is made where another user could take it over
            raise NotPrivate(f"{path}: refusing to use it as {what}: {why}; point rr elsewhere")
        os.mkdir(path, 0o700)
        made = True
    except FileExistsError:
        pass
    except OSError as e:
        raise NotPrivate(f"{path}: cannot make {what} ({e.strerror})") from None
    if made:
        os.chmod(path, 0o700)  # mkdir's mode went through the umask; an odd umask (0o100) is no excuse
    why = why_not_private(path)
    if why is not None:
        raise NotPrivate(f"{path}: refusing to use it as {what}: {why}; remove it, or point rr elsewhere")
    return path


def _make_parents(directory: Path) -> None:
    missing = []
    while not os.path.lexists(directory):
        missing.append(directory)
        directory = directory.parent
    for d in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(d, 0o755)
            os.chmod(d, 0o755 & ~_umask())


def _umask() -> int:
    umask = os.umask(0o022)
    os.umask(umask)
    return umask


def trusted_file(path: str | Path) -> str | None:
    """Why the file at `path` is not one of this user's own that no one else can write (a regular
    file, not a link, owned by this user, without group or other write), or None if it is."""
    try:
        st = os.lstat(path)
    except OSError as e:
        return f"{path}: {e.strerror}"
    if not stat.S_ISREG(st.st_mode):
        return f"{path} is not a regular file"
    if st.st_uid != os.geteuid():
        return f"{path} is owned by another user (uid {st.st_uid})"
    if st.st_mode & OTHERS_WRITE:
        return f"{path} is writable by other users (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def open_private(path: str | Path, flags: int = os.O_RDONLY, mode: int = 0o600) -> int:
    """os.open with O_NOFOLLOW and O_CLOEXEC: a symbolic link at `path` is an error (ELOOP), never
    followed. With O_CREAT the file is made `mode` exactly (not through the umask)."""
    fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    if flags & os.O_CREAT:
        with contextlib.suppress(OSError):
            st = os.fstat(fd)
            if st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) != mode:
                os.fchmod(fd, mode)
    return fd


def process_start(pid: int) -> int | None:
    """The start time of process `pid` (clock ticks after boot, /proc/PID/stat's 22nd field), or
    None when there is no such process (or no /proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may hold spaces and ')'; fields after its last ')'
    fields = data[data.rfind(b")") + 2:].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def pid_record(pid: int | None = None) -> str:
    """What a pid file holds: `PID START`, this process's by default."""
    pid = os.getpid() if pid is None else pid
    return f"{pid} {process_start(pid)}\n"


def live_pid(text: str) -> int | None:
    """The pid a pid file's `PID START` names when that very process is still running (same pid,
    same start time), else None — a dead writer, a reused pid, or a file that is not one rr wrote."""
    parts = text.split()
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        return None
    pid, start = int(parts[0]), int(parts[1])
    if pid <= 1:
        return None
    return pid if process_start(pid) == start else None
