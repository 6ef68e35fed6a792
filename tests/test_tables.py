"""The shipped MUFU tables are decoded from their int8 differences once per machine: the decoded
table is cached under $XDG_CACHE_HOME/rr, named by the shipped file's content, and later
processes map it instead of decoding it again. A cache that cannot be used is passed by, and the
bits are the same with or without it."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from rr import tables
from rr.numerics import mufu

SHIPPED = mufu.MUFU_TABLES


def _summed(name: str) -> np.ndarray:
    """The table as the differences define it, summed in int64 and cut to 32 bits."""
    from importlib import resources

    with resources.files("rr.data").joinpath(SHIPPED).open("rb") as f, np.load(f) as z:
        d = z[f"{name}_diff"].astype(np.int64)
        return (int(z[f"{name}_first"]) + np.concatenate([[0], np.cumsum(d)])).astype(np.uint32)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "rr"


def test_a_decoded_table_is_the_shipped_first_value_plus_its_differences(cache):
    for name in ("rcp", "ex2"):
        assert np.array_equal(tables.table(SHIPPED, name), _summed(name))


def test_the_next_process_maps_the_cached_table_without_decoding_it(cache, monkeypatch):
    first = tables.table(SHIPPED, "rcp")
    (cached,) = cache.glob("mufu_h200-*-rcp.npy")
    monkeypatch.setattr(tables, "decode", lambda *a: pytest.fail("decoded again"))
    again = tables.table(SHIPPED, "rcp")
    assert np.array_equal(again, first) and not again.flags.writeable and not first.flags.writeable
    # another process, as the cpu backend's children are, finds it too
    code = ("import sys, numpy as np; from rr import tables; tables.decode = None; "
            "t = tables.table(sys.argv[1], 'rcp'); print(t.dtype, t.size, int(t[12345]))")
    r = subprocess.run([sys.executable, "-c", code, SHIPPED], capture_output=True, text=True,
                       env={**os.environ, "XDG_CACHE_HOME": str(cache.parent)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["uint32", str(first.size), str(int(first[12345]))]
    assert not list(cache.glob("*.tmp"))  # no temporaries left


@pytest.mark.parametrize("damage", ["truncated", "other_table", "garbage"])
def test_a_damaged_cached_table_is_decoded_again_and_replaced(cache, damage):
    tables.table(SHIPPED, "ex2")
    (cached,) = cache.glob("mufu_h200-*-ex2.npy")
    if damage == "truncated":
        cached.write_bytes(cached.read_bytes()[:1000])
    elif damage == "other_table":
        np.save(cached, np.zeros(8, np.uint32))
    else:
        cached.write_bytes(b"not an array")
    assert np.array_equal(tables.table(SHIPPED, "ex2"), _summed("ex2"))
    assert np.array_equal(np.load(cached), _summed("ex2"))


def test_a_cache_that_cannot_be_written_is_passed_by(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("the cache directory's parent is a file")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    assert np.array_equal(tables.table(SHIPPED, "rcp"), _summed("rcp"))
    assert blocker.read_text() == "the cache directory's parent is a file"


def test_a_table_cached_from_another_version_of_the_shipped_file_is_removed(cache):
    cache.mkdir(parents=True)
    stale = cache / "mufu_h200-0000000000000000-v1-rcp.npy"
    np.save(stale, np.zeros(4, np.uint32))
    other = cache / "mufu_h200-0000000000000000-v1-rsqrt.npy"  # another table: kept
    np.save(other, np.zeros(4, np.uint32))
    tables.table(SHIPPED, "rcp")
    assert not stale.exists() and other.exists() and len(list(cache.glob("mufu_h200-*-rcp.npy"))) == 1


def test_the_mufu_functions_read_the_same_bits_through_the_cache(cache):
    x = np.float32([0.3, 1.7, 3.9, 1e-3, 7e4])
    mufu.mufu_table.cache_clear()  # the process's own memo: the tables come from rr.tables again
    try:
        uncached = [mufu.rcp_approx(x), mufu.rsqrt_approx(x), mufu.ex2_approx(-x)]
        assert len(list(cache.glob("*.npy"))) == 3  # they cached what they decoded
        mufu.mufu_table.cache_clear()
        again = [mufu.rcp_approx(x), mufu.rsqrt_approx(x), mufu.ex2_approx(-x)]
    finally:
        mufu.mufu_table.cache_clear()
    assert all(np.array_equal(a.view(np.uint32), b.view(np.uint32)) for a, b in zip(uncached, again))
