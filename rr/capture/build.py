"""The interposer's shared library: built from the package's C source with the system C
compiler on first use, into a cache directory keyed by the source's hash, so a changed source (a
new rr) is a new build and an unchanged one is built once per machine."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from importlib import resources
from pathlib import Path

from rr import children
from rr.validation import InvalidInput, cut


class CaptureError(InvalidInput):
    """rr capture cannot run: no compiler, a failed build, a bad option. The message says why."""


FLAGS = ("-shared", "-fPIC", "-O2")
LIBS = ("-ldl", "-lpthread")


def cache_dir() -> Path:
    """$XDG_CACHE_HOME/rr, else ~/.cache/rr."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rr"


def interposer_source() -> bytes:
    return resources.files("rr.capture").joinpath("interposer.c").read_bytes()


def build_interposer(cache: str | Path | None = None, compiler: str | None = None) -> Path:
    """The interposer library's path, compiled now unless the cache has this source's build. The
    compiler is $CC or `cc`; a build is written to a temporary name and renamed, so concurrent
    first uses never load a half-written library."""
    source = interposer_source()
    cc = compiler or os.environ.get("CC") or "cc"
    key = hashlib.sha1(source + "\0".join((cc, *FLAGS, *LIBS)).encode()).hexdigest()[:16]
    directory = Path(cache) if cache is not None else cache_dir()
    library = directory / f"capture-{key}.so"
    if library.is_file():
        return library
    if shutil.which(cc) is None:
        raise CaptureError(f"{cc}: no C compiler on PATH; rr capture builds its interposer with it (install gcc, "
                           "or set CC)")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CaptureError(f"{directory}: cannot make the interposer's cache directory ({e.strerror})") from None
    with tempfile.TemporaryDirectory(prefix=".rr-build-", dir=directory) as tmp:
        src = Path(tmp) / "interposer.c"
        src.write_bytes(source)
        out = Path(tmp) / library.name
        done = children.run([cc, *FLAGS, "-o", str(out), str(src), *LIBS], capture=True)
        if done.returncode != 0:
            raise CaptureError(f"{cc}: building the interposer failed:\n{cut(done.stderr.strip(), 2000)}")
        os.replace(out, library)
    return library
