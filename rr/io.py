"""Writing outputs: every file and output directory appears whole or not at all, and no output
ever destroys data.

* A temporary beside the target (never inside it), renamed onto it only when the writing succeeded;
  the several files of one stage are renamed together, after all of them were written.
* A directory rr writes whole carries a marker file (`.rr`); an existing directory is replaced only
  if it has the marker or is empty, so `-o .` or `-o ~/data` is refused, not emptied.
* An output is never an input of the same command, nor inside one, nor contains one.
* Temporaries are named `.NAME.rr-HOST-PID-XXXX.tmp`; the next write of NAME removes those whose
  writer is gone (its process is dead, or another process holds its pid now; from another host:
  older than a day), so a killed run leaves nothing behind for long.
* An OSError without a file name (a write on a full disk) is raised again naming the target.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

MARKER = ".rr"
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
    if kind == "dir" and target.is_dir() and not (target / MARKER).is_file() and any(target.iterdir()):
        raise OutputRefused(f"{shown}: a non-empty directory not written by rr (it has no {MARKER} marker): "
                            f"refusing to replace it; remove it or choose another output")
    return target


@contextlib.contextmanager
def _naming(target: Path):
    """An OSError without a file name (ENOSPC from a write, EDQUOT) is raised again naming target."""
    try:
        yield
    except OSError as e:
        if e.filename is None:  # pyarrow's errors have no errno either: its message is the reason
            raise OSError(e.errno, e.strerror or str(e), str(target)) from e
        raise


@contextlib.contextmanager
def atomic_paths(*paths: str | Path, inputs=()):
    """Temporary paths beside each of `paths`; only if the block succeeds are they renamed onto
    them, in the order given (put the file that says the rest is complete last). On a failure
    every temporary is removed and no target is touched."""
    targets = [check_output(p, inputs) for p in paths]
    temporaries = []
    try:
        with _naming(Path(paths[0]) if len(paths) == 1 else Path(paths[0]).parent):
            for target in targets:
                target.parent.mkdir(parents=True, exist_ok=True)
                remove_stale_temporaries(target)
                fd, tmp = tempfile.mkstemp(prefix=_temporary_prefix(target), suffix=".tmp", dir=target.parent)
                os.close(fd)
                temporaries.append(Path(tmp))
            yield temporaries if len(paths) > 1 else temporaries[0]
            for tmp, target in zip(temporaries, targets):
                os.chmod(tmp, _default_mode(directory=False))
                os.replace(tmp, target)
    except BaseException:
        for tmp in temporaries:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
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
    with _naming(Path(path)):
        target.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(target)
        tmp = Path(tempfile.mkdtemp(prefix=_temporary_prefix(target), suffix=".tmp", dir=target.parent))
        try:
            yield tmp
            (tmp / MARKER).write_text("written by rr: rr may replace this directory with a newer output\n")
            os.chmod(tmp, _default_mode(directory=True))
            _swap_in(tmp, target)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise


def _swap_in(tmp: Path, target: Path) -> None:
    """Rename `tmp` onto `target`; an existing target is first renamed out of the way (as a stale
    temporary of our own, so a crash between the two renames leaves it for the next write to
    remove) and deleted after."""
    old = None
    if target.exists():
        import secrets

        old = target.parent / f"{_temporary_prefix(target)}{secrets.token_hex(4)}.old.tmp"
        os.rename(target, old)
    os.rename(tmp, target)
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
