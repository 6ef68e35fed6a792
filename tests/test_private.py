"""rr.private, what rr trusts on a shared machine (issue 33): a directory is used only when it is
the user's own, not a link and writable by no one else, below directories no one else can rename
it out of; a pid file is believed only with its process's start time. The other user is uid 65534
(nobody), given the files by chown where the tests run as root, else skipped with that reason."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from rr.private import NotPrivate, live_pid, open_private, pid_record, private_dir, trusted_file, why_not_private

NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user (chown) needs root")


def test_a_missing_directory_is_made_0700_and_its_parents_writable_by_no_one_else_under_umask_000(tmp_path):
    old = os.umask(0)
    try:
        d = private_dir(tmp_path / "a" / "b")
    finally:
        os.umask(old)
    assert (d.stat().st_mode & 0o777) == 0o700
    assert (d.parent.stat().st_mode & 0o022) == 0
    assert why_not_private(d) is None
    assert private_dir(d) == d  # found again, trusted


def test_a_symbolic_link_is_refused_even_to_a_private_directory(tmp_path):
    real = private_dir(tmp_path / "real")
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(NotPrivate, match="symbolic link"):
        private_dir(tmp_path / "link")


def test_a_directory_writable_by_others_is_refused_not_repaired(tmp_path):
    d = tmp_path / "open"
    d.mkdir()
    d.chmod(0o777)
    with pytest.raises(NotPrivate, match="writable by other users"):
        private_dir(d)
    assert (d.stat().st_mode & 0o777) == 0o777


def test_nothing_is_made_below_a_directory_others_may_write_that_is_not_sticky(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(NotPrivate, match="not sticky"):
        private_dir(shared / "mine")
    assert not (shared / "mine").exists()
    shared.chmod(0o1777)  # /tmp's mode: only an entry's owner may rename it
    assert why_not_private(private_dir(shared / "mine")) is None


@as_root
def test_a_directory_or_file_of_another_user_is_refused(tmp_path):
    d = tmp_path / "theirs"
    d.mkdir(mode=0o700)
    os.chown(d, NOBODY, NOBODY)
    with pytest.raises(NotPrivate, match="owned by another user"):
        private_dir(d)
    f = tmp_path / "lib.so"
    f.write_bytes(b"x")
    os.chown(f, NOBODY, NOBODY)
    assert "owned by another user" in trusted_file(f)


def test_open_private_does_not_follow_a_link_and_makes_the_exact_mode(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "log").symlink_to(victim)
    with pytest.raises(OSError):
        open_private(tmp_path / "log", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    assert victim.read_text() == "precious"
    old = os.umask(0)
    try:
        os.close(open_private(tmp_path / "new", os.O_WRONLY | os.O_CREAT | os.O_EXCL))
    finally:
        os.umask(old)
    assert (tmp_path / "new").stat().st_mode & 0o777 == 0o600


def test_a_pid_is_believed_only_with_its_start_time():
    assert live_pid(pid_record()) == os.getpid()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        record = pid_record(child.pid)
        assert live_pid(record) == child.pid
        pid, start = record.split()
        assert live_pid(f"{pid} {int(start) + 1}") is None  # the same pid, another process
    finally:
        child.kill()
        child.wait()
    assert live_pid(record) is None  # gone
    for planted in ("", "1 0", f"{os.getpid()}", "abc def", f"{os.getpid()} -1"):
        assert live_pid(planted) is None
