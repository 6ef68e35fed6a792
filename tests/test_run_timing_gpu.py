"""Timing on a real GPU, in one process as the GPU worker times: the reference side's instances
are kept from one timing to the next and restored to the files' bytes before each, and a splice
that launches the reference's own buffer files shares each pair's buffers."""

from __future__ import annotations

import os

import numpy as np
import pytest

from run_kernels import single_buffer_launch

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("gpu")]


def _work(directory, iterations):
    single_buffer_launch(directory, "work.ptx", "rr_test_work", grid=(264, 1, 1), block=(256, 1, 1),
                         size=264 * 256 * 4, scalars=(iterations,))
    return str(directory)


def test_a_second_timing_of_the_same_reference_takes_its_kept_instances_restored(tmp_path):
    from rr.run.cuda import Resident
    from rr.run.timing import time_pair

    one, two = _work(tmp_path / "one", 20000), _work(tmp_path / "two", 40000)
    resident = Resident()
    first = time_pair(one, two, time_limit_s=10, resident=resident)
    second = time_pair(one, two, time_limit_s=10, resident=resident)
    assert first["instances_kept"] == 0 and first["shared_buffers"] is False  # two files of its own
    assert second["instances_kept"] == second["instances"] == first["instances"] > 1
    for t in (first, second):
        assert 1.8 < t["ratio"] < 2.2, t
    (kept,) = [k for k in resident._kept.values() if k.instances]
    assert len(kept.instances) == first["instances"] and kept.nbytes > 0
    # the kernel wrote its buffer in every launch; restored, it holds the file's zeros again
    device = kept.instances[0].device
    assert device.copy_back("buf").any()
    device.restore()
    assert not device.copy_back("buf").any()


def test_a_launch_of_the_references_own_files_shares_each_pairs_buffers(tmp_path):
    from rr.run.cuda import Resident
    from rr.run.timing import time_pair

    one = tmp_path / "one"
    _work(one, 20000)
    same = tmp_path / "same"  # another launch directory on the same buffer file, as a splice's
    same.mkdir()
    for f in one.iterdir():
        os.link(f, same / f.name)
    t = time_pair(str(one), str(same), time_limit_s=10, resident=Resident())
    assert t["shared_buffers"] is True
    assert abs(t["ratio"] - 1) <= max(2 * t["ratio_noise"], 0.01), t
    assert np.isfinite(t["ratio_noise"])
