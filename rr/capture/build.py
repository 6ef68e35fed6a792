"""The interposer's shared library: built from the package's C source with the system C
compiler on first use, into a cache directory keyed by the source's hash, so a changed source (a
new rr) is a new build and an unchanged one is built once per machine.

The library runs inside the user's program (as root, for root's captures), so what is preloaded
is a build of rr's own: the cache is used only when it is a private directory of the user's
(rr.private: owned, writable by no one else, below directories no one else can rename it out of)
and the library and its record in it are files of theirs that no one else can write. Otherwise
the library is built for this capture alone in a private temporary directory, removed when the
capture ends, and rr says why in one line. (Refusing instead would leave a user whose
$XDG_CACHE_HOME is shared or misconfigured without `rr capture`; a build takes about a second.)
Each build records its SHA-256 beside it (`capture-<key>.so.sha256`, as sha256sum writes it): a
cached library that no longer matches its record is rebuilt, and the hash is checked again right
before the library goes into LD_PRELOAD. The library is made 0755 and its record 0644, whatever
the umask."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from rr import children
from rr.private import NotPrivate, open_private, private_dir, trusted_file, why_not_private
from rr.validation import InvalidInput, cut


class CaptureError(InvalidInput):
    """rr capture cannot run: no compiler, a failed build, a bad option. The message says why."""


FLAGS = ("-shared", "-fPIC", "-O2")
LIBS = ("-ldl", "-lpthread")
RECORD = ".sha256"  # the suffix of a library's record of its hash
MAX_RECORD = 4096  # bytes read of a record (a digest and a file name)


@dataclass(frozen=True)
class Library:
    """A built interposer and the SHA-256 of the bytes rr built."""
    path: Path
    sha256: str

    def preload(self) -> str:
        """The library's path for LD_PRELOAD, once the file there is checked to be still the
        build's: a file of the user's that no one else can write, with the build's bytes."""
        why = trusted_file(self.path)
        if why is None and _sha256(self.path) != self.sha256:
            why = f"its SHA-256 is no longer {self.sha256}, the build's: it changed since it was built"
        if why is not None:
            raise CaptureError(f"{self.path}: refusing to preload the interposer: {why}")
        return str(self.path)


def cache_dir() -> Path:
    """$XDG_CACHE_HOME/rr, else ~/.cache/rr."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rr"


def interposer_source() -> bytes:
    return resources.files("rr.capture").joinpath("interposer.c").read_bytes()


def compiler_of(compiler: str | None = None) -> str:
    """The C compiler rr builds with: `compiler`, else $CC (the user's own choice), else `cc`."""
    return compiler or os.environ.get("CC") or "cc"


def library_name(compiler: str | None = None) -> str:
    """The library's file name in a cache: `capture-<key>.so`, keyed by the source and the build
    command, so a new rr or another compiler is another build."""
    key = hashlib.sha1(interposer_source() + "\0".join((compiler_of(compiler), *FLAGS, *LIBS)).encode())
    return f"capture-{key.hexdigest()[:16]}.so"


def _say(message: str) -> None:
    print(f"rr capture: {message}", file=sys.stderr, flush=True)


def build_interposer(cache: str | Path | None = None, compiler: str | None = None,
                     say: Callable[[str], None] = _say) -> Library:
    """The interposer library in the cache `cache` (default cache_dir()), compiled now unless the
    cache has this source's build with its recorded hash; one whose bytes no longer match is
    rebuilt (`say` tells so). NotPrivate, naming the path, when the cache or a file in it is not
    the user's own and writable by no one else — nothing is built into or loaded from it then. A
    build is written to a temporary name and renamed, so concurrent first uses never load a
    half-written library."""
    cc = compiler_of(compiler)
    directory = private_dir(Path(cache) if cache is not None else cache_dir(), "the interposer's build cache")
    library = directory / library_name(cc)
    record = library.with_name(library.name + RECORD)
    for path in (library, record):
        why = trusted_file(path) if os.path.lexists(path) else None
        if why is not None:
            raise NotPrivate(f"{path}: not loading the interposer from the cache: {why}")
    if library.exists() and record.exists():
        recorded = _read_record(record)
        if recorded == _sha256(library):
            return Library(library, recorded)
        say(f"{library}: its SHA-256 is not the one {record} recorded when rr built it: rebuilding it")
    return _build(library, record, cc)


def _build(library: Path, record: Path, cc: str) -> Library:
    if shutil.which(cc) is None:
        raise CaptureError(f"{cc}: no C compiler on PATH; rr capture builds its interposer with it (install gcc, "
                           "or set CC)")
    with tempfile.TemporaryDirectory(prefix=".rr-build-", dir=library.parent) as tmp:
        src = Path(tmp) / "interposer.c"
        src.write_bytes(interposer_source())
        out = Path(tmp) / library.name
        done = children.run([cc, *FLAGS, "-o", str(out), str(src), *LIBS], capture=True)
        if done.returncode != 0:
            raise CaptureError(f"{cc}: building the interposer failed:\n{cut(done.stderr.strip(), 2000)}")
        os.chmod(out, 0o755)  # the compiler made it through the umask: 0777 under umask 000
        digest = _sha256(out)
        fd = open_private(Path(tmp) / record.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        with os.fdopen(fd, "w") as f:
            f.write(f"{digest}  {library.name}\n")
        # the record first: a library found without its record is rebuilt, never trusted unrecorded
        os.replace(Path(tmp) / record.name, record)
        os.replace(out, library)
    return Library(library, digest)


@contextlib.contextmanager
def interposer(cache: str | Path | None = None, compiler: str | None = None,
               say: Callable[[str], None] = _say) -> Iterator[Library]:
    """The interposer for one capture: the cache's (build_interposer) when the cache can be
    trusted, else built into a private temporary directory that is removed when the capture ends,
    `say` telling where and why. CaptureError when not even that directory is private."""
    try:
        library, refused = build_interposer(cache, compiler, say), None
    except NotPrivate as e:
        library, refused = None, str(e)
    if library is not None:
        yield library
        return
    with tempfile.TemporaryDirectory(prefix="rr-interposer-") as tmp:
        why = why_not_private(tmp)
        if why is not None:
            raise CaptureError(f"{tmp}: refusing to build the interposer there: {why} (the cache was refused too: "
                               f"{refused})")
        say(f"{refused}; building the interposer in {tmp} for this capture instead (removed afterwards)")
        yield build_interposer(tmp, compiler, say)


def _sha256(path: Path) -> str:
    """The SHA-256 of the file at `path`, read without following a link."""
    digest = hashlib.sha256()
    with os.fdopen(open_private(path), "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _read_record(record: Path) -> str:
    """The digest a record holds (its first word), '' when it holds none."""
    with os.fdopen(open_private(record), "rb") as f:
        words = f.read(MAX_RECORD).split()
    return words[0].decode("ascii", "replace") if words else ""
