"""rr capture on a shared machine (issue 33): the library preloaded into the user's program is one
rr built itself — the interposer's cache is used only when it is the user's own and writable by no
one else (else the library is built for the capture alone in a private temporary directory), a
build is made writable by no one else whatever the umask, and its SHA-256 is checked before it is
preloaded. And capture.json is read back through one checked reader: a malformed index, or a
launch `dir` that would lead out of the capture, is `rr: error: CAP/capture.json: KEY: reason`.

The other user is uid 65534 (nobody), given the files by chown (the tests run as root, else they
are skipped with that reason). A planted library's constructor writes a marker file: it was loaded
if and only if the marker appears."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from rr.capture.build import CaptureError, build_interposer, library_name
from test_capture import CC, fake, rr  # noqa: F401 (fake: the fake driver and programs, a fixture)

NOBODY = 65534
needs_cc = pytest.mark.skipif(CC is None, reason="no C compiler (cc) on PATH: rr capture builds its interposer with it")
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user (chown) needs root")
pytestmark = needs_cc

PLANTED = r"""
#include <fcntl.h>
#include <unistd.h>
__attribute__((constructor)) static void planted(void) {
    int fd = open(MARKER, O_WRONLY | O_CREAT, 0644);
    if (fd >= 0) close(fd);
}
"""


@pytest.fixture
def planted(tmp_path):
    """A library whose constructor makes tmp_path/marker, built here; shown to do so when preloaded
    (so a test that finds no marker knows the library was not loaded, not that it failed)."""
    src, lib, marker = tmp_path / "planted.c", tmp_path / "planted.so", tmp_path / "marker"
    src.write_text(PLANTED)
    subprocess.run([CC, "-shared", "-fPIC", f'-DMARKER="{marker}"', "-o", lib, src], check=True)
    subprocess.run(["true"], env=dict(os.environ, LD_PRELOAD=str(lib)), check=True)
    assert marker.exists()
    marker.unlink()
    return {"library": lib, "marker": marker}


def plant(planted, directory: Path, owner: int = NOBODY, mode: int = 0o755) -> Path:
    """The planted library under the name rr's build has in `directory`, with a record of its own
    hash beside it (so only who owns and may write the files can keep rr from loading it)."""
    target = directory / library_name()
    shutil.copyfile(planted["library"], target)
    digest = hashlib.sha256(target.read_bytes()).hexdigest()
    record = target.with_name(target.name + ".sha256")
    record.write_text(f"{digest}  {target.name}\n")
    for path in (target, record):
        os.chown(path, owner, owner)
    target.chmod(mode)
    return target


def capture(fake, out: Path, cache_home: Path, umask: int | None = None,
            tmpdir: Path | None = None) -> subprocess.CompletedProcess:
    """rr capture of the fake engine's three launches, with $XDG_CACHE_HOME at `cache_home`."""
    env = dict(fake["env"], XDG_CACHE_HOME=str(cache_home), **({"TMPDIR": str(tmpdir)} if tmpdir else {}))
    argv = [sys.executable, "-m", "rr", "capture", "-o", str(out), "--", str(fake["dir"] / "fake_app"), "engine",
            str(fake["ptx"])]
    return subprocess.run(argv, capture_output=True, text=True, env=env, umask=-1 if umask is None else umask,
                          timeout=300)


def captured_entries(out: Path) -> list[str]:
    from rr.capture import read_capture

    return [e["entry"] for e in read_capture(out)["launches"]]


def built_aside(done: subprocess.CompletedProcess, refused: str, reason: str) -> None:
    """The capture says, in one line, which cache it refused and why, and where it built instead;
    that directory is gone after it."""
    lines = [line for line in done.stderr.splitlines() if "building the interposer in" in line]
    assert len(lines) == 1, done.stderr
    assert refused in lines[0] and reason in lines[0], lines[0]
    tmp = re.search(r"building the interposer in (\S+) for this capture", lines[0]).group(1)
    assert not os.path.exists(tmp)


# -- the interposer's cache ------------------------------------------------------------------------

@as_root
def test_a_library_planted_in_a_world_writable_cache_home_is_not_loaded_and_the_capture_works(fake, planted,
                                                                                              tmp_path):
    home = tmp_path / "shared"
    (home / "rr").mkdir(parents=True)
    for d in (home, home / "rr"):
        d.chmod(0o777)
        os.chown(d, NOBODY, NOBODY)
    library = plant(planted, home / "rr")
    before = library.read_bytes()
    done = capture(fake, tmp_path / "cap", home)
    assert done.returncode == 0, done.stderr
    assert not planted["marker"].exists()
    assert captured_entries(tmp_path / "cap") == ["rr_cap_struct", "rr_cap_list", "rr_cap_list"]
    built_aside(done, str(home / "rr"), f"{home} is owned by another user (uid {NOBODY})")
    assert library.read_bytes() == before and sorted(p.name for p in (home / "rr").iterdir()) == sorted(
        [library.name, library.name + ".sha256"])  # nothing built into it, nothing replaced


@as_root
@pytest.mark.parametrize("owner, mode, reason", [
    (NOBODY, 0o755, f"is owned by another user (uid {NOBODY})"),
    (0, 0o777, "is writable by other users (mode 777)"),
], ids=["another-users-file", "others-may-write-it"])
def test_a_library_in_the_users_own_cache_that_someone_else_owns_or_may_write_is_not_loaded(
        fake, planted, tmp_path, owner, mode, reason):
    home = tmp_path / "cache"
    library = plant(planted, build_interposer(home / "rr").path.parent, owner, mode)  # the user's own cache
    done = capture(fake, tmp_path / "cap", home)
    assert done.returncode == 0, done.stderr
    assert not planted["marker"].exists()
    assert captured_entries(tmp_path / "cap") == ["rr_cap_struct", "rr_cap_list", "rr_cap_list"]
    built_aside(done, str(library), reason)


@as_root
def test_a_cache_directory_another_user_owns_is_not_built_into(fake, tmp_path):
    home = tmp_path / "cache"
    (home / "rr").mkdir(parents=True)
    os.chown(home / "rr", NOBODY, NOBODY)
    done = capture(fake, tmp_path / "cap", home)
    assert done.returncode == 0, done.stderr
    assert list((home / "rr").iterdir()) == []
    built_aside(done, str(home / "rr"), f"{home / 'rr'} is owned by another user (uid {NOBODY})")
    assert captured_entries(tmp_path / "cap") == ["rr_cap_struct", "rr_cap_list", "rr_cap_list"]


@as_root
def test_with_neither_the_cache_nor_the_temporary_directory_private_the_capture_is_refused(fake, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # not sticky: anyone may rename what rr makes there
    done = capture(fake, tmp_path / "cap", shared, tmpdir=shared)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert re.search(rf"rr: error: {re.escape(str(shared))}/rr-interposer-\S+: refusing to build the interposer there: "
                     rf"{re.escape(str(shared))} is writable by other users and not sticky", done.stderr), done.stderr
    assert os.listdir(shared) == [] and not (tmp_path / "cap").exists()


def test_under_umask_000_the_cache_and_the_library_are_writable_by_no_one_else(fake, tmp_path):
    home = tmp_path / "fresh" / "cache"
    done = capture(fake, tmp_path / "cap", home, umask=0)
    assert done.returncode == 0, done.stderr
    made = [tmp_path / "fresh", *(tmp_path / "fresh").rglob("*")]
    assert any(p.name == library_name() for p in made)  # built into the cache, not aside
    assert {str(p): oct(stat.S_IMODE(p.lstat().st_mode)) for p in made if p.lstat().st_mode & 0o022} == {}
    assert stat.S_IMODE((home / "rr" / library_name()).stat().st_mode) == 0o755
    assert stat.S_IMODE((home / "rr").stat().st_mode) == 0o700


def test_a_cached_library_changed_after_its_build_is_rebuilt_not_preloaded(fake, planted, tmp_path):
    home = tmp_path / "cache"
    built = build_interposer(home / "rr")
    shutil.copyfile(planted["library"], built.path)  # the user's own file, mode unchanged: only its bytes differ
    done = capture(fake, tmp_path / "cap", home)
    assert done.returncode == 0, done.stderr
    assert not planted["marker"].exists()
    assert f"{built.path}: its SHA-256 is not the one" in done.stderr and "rebuilding it" in done.stderr
    assert hashlib.sha256(built.path.read_bytes()).hexdigest() == built.sha256  # rr's own build again
    assert captured_entries(tmp_path / "cap") == ["rr_cap_struct", "rr_cap_list", "rr_cap_list"]


def test_the_library_is_checked_again_as_it_goes_into_ld_preload(planted, tmp_path):
    library = build_interposer(tmp_path / "cache")
    assert library.preload() == str(library.path)
    shutil.copyfile(planted["library"], library.path)
    with pytest.raises(CaptureError, match=rf"{re.escape(str(library.path))}: refusing to preload the interposer: "
                                           "its SHA-256 is no longer"):
        library.preload()
    library = build_interposer(tmp_path / "cache")  # rebuilt: the record no longer matches
    library.path.chmod(0o775)
    with pytest.raises(CaptureError, match="writable by other users"):
        library.preload()


# -- capture.json read back -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def engine_capture(fake, tmp_path_factory):
    """A capture of the fake engine, and a corpus of its module (what `rr launch` takes the module from)."""
    d = tmp_path_factory.mktemp("engine")
    done = capture(fake, d / "cap", d / "cache")
    assert done.returncode == 0, done.stderr
    assert rr("extract", str(fake["ptx"]), "-o", str(d / "corpus")).returncode == 0
    return d / "cap", d / "corpus"


def launch_from(engine_capture, tmp_path, edit):
    """`rr launch struct` (the capture's launch 0) from a copy of the capture whose capture.json
    `edit` changed (edit(index, cap) returns the new index); (exit status, stderr, output)."""
    cap = tmp_path / "cap"
    shutil.copytree(engine_capture[0], cap, symlinks=True)
    index = json.loads((cap / "capture.json").read_text())
    (cap / "capture.json").write_text(json.dumps(edit(index, cap)))
    out = tmp_path / "L"
    argv = ["launch", "struct", str(engine_capture[1]), "--entry-pattern", "rr_cap_{layer}", "--launches", str(cap),
            "-o", str(out)]
    done = subprocess.run([sys.executable, "-m", "rr", *argv], capture_output=True, text=True, timeout=300)
    return done.returncode, done.stderr, out, cap


def launch_elsewhere(cap: Path) -> Path:
    """A copy of the capture's launch 0 beside the capture, outside it: a launch rr would replay."""
    shutil.copytree(cap / "launches" / "000000", cap.parent / "outside")
    return cap.parent / "outside"


def test_an_unchanged_capture_json_is_read(engine_capture, tmp_path):
    status, stderr, out, _ = launch_from(engine_capture, tmp_path, lambda index, cap: index)
    assert status == 0 and (out / "launch.json").is_file(), stderr


MALFORMED = {
    "a-list": (lambda index, cap: [], "(top level): [] is not of type 'object'"),
    "a-list-of-a-number": (lambda index, cap: [5], "(top level): [5] is not of type 'object'"),
    "launches-a-number": (lambda index, cap: {**index, "launches": 5}, "launches: 5 is not of type 'array'"),
    "launches-missing": (lambda index, cap: {k: v for k, v in index.items() if k != "launches"},
                         "(top level): 'launches' is a required property"),
    "a-launch-a-number": (lambda index, cap: {**index, "launches": [5]}, "launches[0]: 5 is not of type 'object'"),
    "dir-not-a-string": (lambda index, cap: edit_launch(index, 1, dir=7), "launches[1].dir: 7 is not of type 'string'"),
    "dir-missing": (lambda index, cap: edit_launch(index, 2, dir=None), "launches[2]: 'dir' is a required property"),
    "entry-missing": (lambda index, cap: edit_launch(index, 0, entry=None),
                      "launches[0]: 'entry' is a required property"),
    "status-not-a-string": (lambda index, cap: edit_launch(index, 0, status=["ok"]),
                            "launches[0].status: ['ok'] is not one of ['ok', 'unsupported']"),
    "grid-of-strings": (lambda index, cap: edit_launch(index, 2, grid=["1", 1, 1]),
                        "launches[2].grid[0]: '1' is not of type 'integer'"),
}


def edit_launch(index: dict, i: int, **values) -> dict:
    """`index` with launch i's keys set to `values` (None: the key removed)."""
    launch = {k: v for k, v in index["launches"][i].items() if values.get(k, 0) is not None}
    launch.update({k: v for k, v in values.items() if v is not None})
    return {**index, "launches": [launch if j == i else e for j, e in enumerate(index["launches"])]}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_capture_json_is_an_error_naming_the_file_and_the_key(engine_capture, tmp_path, case):
    edit, says = MALFORMED[case]
    status, stderr, out, cap = launch_from(engine_capture, tmp_path, edit)
    assert status == 2 and "Traceback" not in stderr, stderr
    assert f"rr: error: {cap / 'capture.json'}: {says}" in stderr, stderr
    assert not out.exists()


ESCAPES = {
    "absolute": (lambda index, cap: edit_launch(index, 0, dir=str(launch_elsewhere(cap))),
                 "is an absolute path"),
    "dot-dot": (lambda index, cap: edit_launch(index, 0, dir=f"../{launch_elsewhere(cap).name}"),
                "goes up out of its directory (..)"),
    "dot-dot-inside": (lambda index, cap: edit_launch(index, 0, dir="launches/../../outside"),
                       "goes up out of its directory (..)"),
    "symlink-out": (lambda index, cap: edit_launch(index, 0, dir=str(linked_out(cap))),
                    "(through a symbolic link), outside the capture"),
    "the-capture-itself": (lambda index, cap: edit_launch(index, 0, dir="."),
                           "is the capture itself, not a launch directory in it"),
}


def linked_out(cap: Path) -> str:
    """launches/elsewhere: a link in the capture to a launch directory outside it."""
    (cap / "launches" / "elsewhere").symlink_to(launch_elsewhere(cap))
    return "launches/elsewhere"


@pytest.mark.parametrize("case", sorted(ESCAPES))
def test_a_launch_dir_that_leads_out_of_the_capture_is_refused(engine_capture, tmp_path, case):
    edit, says = ESCAPES[case]
    status, stderr, out, cap = launch_from(engine_capture, tmp_path, edit)
    assert status == 2 and "Traceback" not in stderr, stderr
    assert stderr.startswith(f"rr: error: {cap / 'capture.json'}: launches[0].dir: "), stderr
    assert says in stderr and "a launch's dir is a relative path inside the capture" in stderr, stderr
    assert not out.exists()
