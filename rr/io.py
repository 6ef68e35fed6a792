"""Writing outputs: every file and output directory appears whole or not at all, and no output
ever destroys data.

* A temporary beside the target (never inside it), renamed onto it only when the writing succeeded;
  the several files of one stage are renamed together, after all of them were written.
* A directory rr writes whole carries a marker file (`.rr`); an existing directory is replaced only
  if it has the marker or is empty, so `-o .` or `-o ~/data` is refused, not emptied. The marker
  counts only as rr wrote it — a regular file (not a link to one), holding rr's own text — and
  every directory rr replaces or moves a directory onto is checked here (`written_by_rr`), so a
  user's directory with a `.rr` of its own (a link to any file) is never taken for an output.
* An output is never an input of the same command, nor inside one, nor contains one.
* Temporaries are named `.NAME.rr-HOST-PID-XXXX.tmp`; the next write of NAME removes those whose
  writer is gone (its process is dead, or another process holds its pid now; from another host:
  older than a day), so a killed run leaves nothing behind for long. A command's scratch space
  (`scratch_dir`) is such a temporary too, removed when the command ends however it ends.
* An OSError names what the user asked for: one without a file name (a write on a full disk) is
  raised again naming the target, one naming a temporary (or a file in one) names the target (or
  that file in it), and a copy that did not fit names where it was copied to, not from.
* A directory a write made for its output is removed again when the write fails and left it empty.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import stat
import tempfile
import time
from pathlib import Path

MARKER = ".rr"
MARKER_TEXT = "written by rr: rr may replace this directory with a newer output\n"
FOREIGN_STALE_S = 24 * 3600  # a temporary of a writer on another host is stale after this long


class OutputRefused(ValueError):
    """An output rr will not write (it would destroy data); the message names it."""


def _default_mode(directory: bool) -> int:
    """The mode a plain open()/mkdir() would give: temporaries are created 0600/0700, and results
    on a shared filesystem must be as readable as any other file the user writes."""
    umask = os.umask(0)
    os.umask(umask)
    return (0o777 if directory else 0o666) & ~umask


def _host() -> str:
    import hashlib  # with socket, secrets: 10 ms of the start of commands that write nothing
    import socket

    return hashlib.sha1(socket.gethostname().encode()).hexdigest()[:8]


def _temporary_prefix(target: Path) -> str:
    return f".{target.name}.rr-{_host()}-{os.getpid()}-"


def _temporary_name(name: str) -> re.Pattern:
    return re.compile(rf"\.{re.escape(name)}\.rr-(?P<host>[0-9a-f]{{8}})-(?P<pid>\d+)-[^/]*\.tmp")


def _writer_gone(path: Path, host: str, pid: int) -> bool:
    try:
        made = path.lstat().st_mtime
    except FileNotFoundError:
        return False
    if host != _host():
        return time.time() - made > FOREIGN_STALE_S
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        pass
    try:  # the pid was taken by a process that started after the temporary was made
        return os.stat(f"/proc/{pid}").st_mtime > made + 1
    except FileNotFoundError:
        return False


def remove_stale_temporaries(target: str | Path) -> list[Path]:
    """Remove the temporaries of `target` left by rr writers that are gone; returns them."""
    target = Path(target)
    pattern, removed = _temporary_name(target.name), []
    try:
        entries = list(os.scandir(target.parent))
    except FileNotFoundError:
        return removed
    for entry in entries:
        m = pattern.fullmatch(entry.name)
        if m and _writer_gone(Path(entry.path), m["host"], int(m["pid"])):
            p = Path(entry.path)
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(p, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    p.unlink()
            removed.append(p)
    return removed


def resolved(path: str | Path) -> Path:
    """`Path(path).resolve()`, a loop of symbolic links an OSError naming the path (ELOOP, as the
    operating system says it), not the RuntimeError of Python before 3.13."""
    try:
        return Path(path).resolve()
    except RuntimeError:
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), str(path)) from None


def check_output(path: str | Path, inputs=(), kind: str = "file") -> Path:
    """The resolved target of an output, or OutputRefused naming why it may not be written.
    `kind` is "file", "dir" (a directory written whole, replacing what was there) or "into" (a
    directory that named files are written into). Refused: the output is one of `inputs` or (a
    file or a whole directory) inside one, or a whole directory that contains one; a path above
    it is a file; a file where a directory goes; a directory where a file goes; a non-empty
    directory rr did not write (no marker) where a whole directory goes."""
    shown = str(path)
    target = resolved(path)
    if target == target.parent:
        raise OutputRefused(f"{shown}: the root directory is not an output")
    for item in inputs:
        if item is None:
            continue
        source = resolved(item)
        if target == source or (kind != "into" and source in target.parents):
            raise OutputRefused(f"{shown}: the output would be written over or inside its input {item}")
        if kind == "dir" and target in source.parents:
            raise OutputRefused(f"{shown}: the output would replace its input {item}, which it contains")
    for above in target.parents:
        if above.exists():
            if not above.is_dir():
                raise OutputRefused(f"{shown}: {above} is a file, not a directory")
            break
    if kind == "file" and target.is_dir():
        raise OutputRefused(f"{shown}: is a directory")
    if kind != "file" and target.exists() and not target.is_dir():
        raise OutputRefused(f"{shown}: exists and is not a directory")
    if kind == "dir":
        _check_replaceable(target, shown)
    return target


def written_by_rr(directory: str | Path) -> bool:
    """Whether `directory` carries the marker as rr writes it: `.rr` a regular file (lstat: not a
    link, whatever it points to), holding rr's text. Opened without following a link and without
    blocking (a FIFO put there after the lstat)."""
    marker = Path(directory) / MARKER
    try:
        if not stat.S_ISREG(marker.lstat().st_mode):
            return False
        fd = os.open(marker, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode) and os.read(fd, len(MARKER_TEXT) + 1) == MARKER_TEXT.encode()
    except OSError:
        return False
    finally:
        os.close(fd)


def _check_replaceable(target: Path, shown: str | Path) -> None:
    """OutputRefused unless `target` is absent, an empty directory, or a directory rr wrote — the
    one check before every directory rr replaces."""
    try:
        mode = target.lstat().st_mode
    except FileNotFoundError:
        return
    if stat.S_ISLNK(mode):  # a link put there since the output was resolved: not replaced through it
        raise OutputRefused(f"{shown}: is a symbolic link, not a directory rr wrote: refusing to replace it")
    if not stat.S_ISDIR(mode):
        raise OutputRefused(f"{shown}: exists and is not a directory")
    if not written_by_rr(target) and any(target.iterdir()):
        raise OutputRefused(f"{shown}: a non-empty directory not written by rr (it has no {MARKER} marker "
                            f"written by rr): refusing to replace it; remove it or choose another output")


def _shown(name, renames: dict) -> str:
    """A file name as the user knows it: a temporary of `renames` (or a file in one) as its target."""
    name = os.fsdecode(name)
    for tmp, target in renames.items():
        if name == str(tmp) or name.startswith(f"{tmp}{os.sep}"):
            return str(target) + name[len(str(tmp)):]
    return name


@contextlib.contextmanager
def _naming(target: Path, renames: dict | None = None):
    """OSErrors naming what the user asked for, not rr's temporaries (`renames`: temporary → the
    target it stands for): one without a file name (ENOSPC from a write, EDQUOT) names `target`; a
    copy that did not fit (shutil names the source first, the destination second) names the
    destination."""
    renames = renames or {}
    try:
        yield
    except OSError as e:
        if e.filename is None:  # pyarrow's errors have no errno either: its message is the reason
            raise OSError(e.errno, e.strerror or str(e), str(target)) from e
        written = e.filename2 if e.filename2 is not None and e.errno in (errno.ENOSPC, errno.EDQUOT) else e.filename
        name = _shown(written, renames)
        if name != e.filename:
            raise OSError(e.errno, e.strerror or str(e), name) from e
        raise


def _make_parents(directory: Path) -> list[Path]:
    """mkdir -p `directory`; the directories it made, deepest first."""
    made = []
    for d in [directory, *directory.parents]:
        if d.exists():
            break
        made.append(d)
    directory.mkdir(parents=True, exist_ok=True)
    return made


def _remove_if_empty(made: list[Path]) -> None:
    """Undo _make_parents where the failed write left the directories empty."""
    for d in made:
        try:
            d.rmdir()
        except OSError:  # not empty (another writer's output is there now), or gone
            return


@contextlib.contextmanager
def atomic_paths(*paths: str | Path, inputs=(), shown: str | Path | None = None):
    """Temporary paths beside each of `paths`; only if the block succeeds are they renamed onto
    them, in the order given: put the file that says the rest is complete last. That file is
    removed before the first rename, so a reader never finds it beside a mix of old and new files
    (a kill between the renames leaves the set without it, which no reader takes for whole). On a
    failure every temporary is removed and no target is touched. An error without a file name
    names `shown` (default: the first path)."""
    targets = [check_output(p, inputs) for p in paths]
    name = Path(shown if shown is not None else paths[0])
    temporaries, made = [], []
    try:
        with _naming(name):
            for target in targets:
                made += _make_parents(target.parent)
                remove_stale_temporaries(target)
                fd, tmp = tempfile.mkstemp(prefix=_temporary_prefix(target), suffix=".tmp", dir=target.parent)
                os.close(fd)
                temporaries.append(Path(tmp))
        with _naming(name, dict(zip(temporaries, paths))):
            yield temporaries if len(paths) > 1 else temporaries[0]
            for tmp in temporaries:
                os.chmod(tmp, _default_mode(directory=False))
            if len(targets) > 1:
                with contextlib.suppress(FileNotFoundError):
                    targets[-1].unlink()
            for tmp, target in zip(temporaries, targets):
                os.replace(tmp, target)
    except BaseException:
        for tmp in temporaries:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        _remove_if_empty(made)
        raise


def atomic_path(path: str | Path, inputs=()):
    """Yield a temporary path beside `path`; it is renamed onto `path` only if the block succeeds."""
    return atomic_paths(path, inputs=inputs)


@contextlib.contextmanager
def atomic_dir(path: str | Path, inputs=()):
    """Yield a new temporary directory beside `path`; only if the block succeeds does it replace
    `path` (refused unless `path` is absent, empty, or an earlier output of rr), so a directory
    output appears whole or not at all."""
    target = check_output(path, inputs, "dir")
    with scratch_dir(path) as tmp:
        yield tmp
        (tmp / MARKER).write_text(MARKER_TEXT)
        os.chmod(tmp, _default_mode(directory=True))
        _swap_in(tmp, target, path)


@contextlib.contextmanager
def scratch_dir(beside: str | Path):
    """A temporary directory beside `beside`, named as rr's temporaries of it are (so the next write
    there removes it if its writer was killed), removed when the block ends however it ends; an
    error naming a file in it names that file under `beside`. A directory made for it is removed
    with it if the block failed and left that directory empty."""
    target = resolved(beside)
    made = []
    with _naming(Path(beside)):
        made = _make_parents(target.parent)
        remove_stale_temporaries(target)
        tmp = Path(tempfile.mkdtemp(prefix=_temporary_prefix(target), suffix=".tmp", dir=target.parent))
    try:
        with _naming(Path(beside), {tmp: beside}):
            yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        _remove_if_empty(made)
        raise
    shutil.rmtree(tmp, ignore_errors=True)  # gone already where it became the output


def replace_dir(src: str | Path, path: str | Path) -> None:
    """Move the directory `src` (a whole output of rr's, on the same file system) onto `path`,
    which must be absent, empty, or rr's (OutputRefused naming it otherwise)."""
    _swap_in(Path(src), resolved(path), path)


def _swap_in(tmp: Path, target: Path, shown: str | Path) -> None:
    """Rename `tmp` onto `target`, checked again to be replaceable; an existing target is first
    renamed out of the way (as a stale temporary of our own, so a crash between the two renames
    leaves it for the next write to remove), put back if the second rename fails, deleted after."""
    _check_replaceable(target, shown)
    old = None
    if target.exists():
        import secrets

        old = target.parent / f"{_temporary_prefix(target)}{secrets.token_hex(4)}.old.tmp"
        os.rename(target, old)
    try:
        os.rename(tmp, target)
    except BaseException:
        if old is not None:
            os.rename(old, target)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def write_bytes(path: str | Path, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def write_text(path: str | Path, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def json_text(obj) -> str:
    return json.dumps(obj, indent=2, sort_keys=False) + "\n"


def write_json(path: str | Path, obj) -> None:
    write_text(path, json_text(obj))


def write_table(table, path: str | Path) -> None:
    """pq.write_table to a file Python opened: pyarrow takes a path for UTF-8, and a file name that
    is not (`-o $'\\xff.parquet'`: surrogates in argv) is one all the same."""
    import pyarrow.parquet as pq

    with open(path, "wb") as f:
        pq.write_table(table, f)


def write_parquet(path: str | Path, table) -> None:
    """A pyarrow Table as Parquet, whole or not at all (pyarrow is imported on the write: the
    commands that write none, such as `rr spec`, start without it)."""
    with atomic_path(path) as tmp:
        write_table(table, tmp)
