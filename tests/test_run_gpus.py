"""Each cuda timing claims a GPU of its own and each cuda run one it shares with other runs:
timings never share a device, runs share one with each other but never with a timing, a timing
that waits is not overtaken by runs that come after it, a claim waits while no device can be had,
and a process that dies releases its device. Devices are named by the driver's UUIDs, and a child
given one sees only that one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from rr.run.gpus import claimed_gpu, gpu_env, visible_gpus

DEVICES = ("GPU-aaaaaaaa-0000-0000-0000-000000000000", "GPU-bbbbbbbb-0000-0000-0000-000000000000")


def test_two_claims_hold_different_devices(tmp_path):
    with claimed_gpu(DEVICES, tmp_path) as first, claimed_gpu(DEVICES, tmp_path) as second:
        assert {first, second} == set(DEVICES)


def test_a_claim_waits_while_every_device_is_held_and_says_so(tmp_path):
    said, got = [], []

    def claim():
        with claimed_gpu(DEVICES[:1], tmp_path, poll_s=0.05, say=said.append) as device:
            got.append(device)

    with claimed_gpu(DEVICES[:1], tmp_path) as held:
        waiter = threading.Thread(target=claim)
        waiter.start()
        time.sleep(0.6)
        assert got == [] and len(said) == 1 and "all 1 GPU(s) are held" in said[0]
    waiter.join(5)
    assert got == [held] and said[-1].startswith(f"rr: got GPU {held} after")


def test_a_killed_process_releases_its_device(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", ("import sys, time\nfrom rr.run.gpus import claimed_gpu\n"
                                f"with claimed_gpu({DEVICES[:1]!r}, {str(tmp_path)!r}) as d:\n"
                                "    print(d, flush=True); time.sleep(60)")], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == DEVICES[0]
    said = []
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    with claimed_gpu(DEVICES[:1], tmp_path, say=said.append) as device:
        assert device == DEVICES[0] and said == []


def test_no_devices_means_no_claim_and_an_unchanged_environment(tmp_path):
    with claimed_gpu((), tmp_path) as device:
        assert device is None
    assert gpu_env(None) == dict(os.environ)
    assert gpu_env(DEVICES[1])["CUDA_VISIBLE_DEVICES"] == DEVICES[1]


@pytest.mark.gpu
def test_a_child_given_one_uuid_sees_only_that_device(gpu):
    uuids = visible_gpus()
    assert uuids and all(u.startswith("GPU-") and len(u) == 40 for u in uuids)
    out = subprocess.run([sys.executable, "-c", "from rr.run.gpus import visible_gpus; print(visible_gpus())"],
                         env=gpu_env(uuids[-1]), capture_output=True, text=True, check=True).stdout
    assert out.strip() == repr((uuids[-1],))


def _claim_in_thread(tmp_path, exclusive, got, devices=DEVICES[:1]):
    def claim():
        with claimed_gpu(devices, tmp_path, exclusive=exclusive, say=lambda m: None) as device:
            got.append(device)

    t = threading.Thread(target=claim)
    t.start()
    return t


def test_runs_share_a_device_and_a_timing_waits_for_them(tmp_path):
    with claimed_gpu(DEVICES[:1], tmp_path, exclusive=False) as first:
        with claimed_gpu(DEVICES[:1], tmp_path, exclusive=False) as second:
            assert first == second == DEVICES[0]
            got = []
            timing = _claim_in_thread(tmp_path, True, got)
            time.sleep(0.4)
            assert got == []  # two runs hold it
        time.sleep(0.2)
        assert got == []  # one still does
    timing.join(5)
    assert got == [DEVICES[0]]


def test_a_run_waits_for_a_timing(tmp_path):
    got = []
    with claimed_gpu(DEVICES[:1], tmp_path, exclusive=True):
        run = _claim_in_thread(tmp_path, False, got)
        time.sleep(0.4)
        assert got == []
    run.join(5)
    assert got == [DEVICES[0]]


def test_runs_that_come_while_a_timing_waits_queue_behind_it(tmp_path):
    order = []

    def claim(exclusive, name, hold_s):
        with claimed_gpu(DEVICES[:1], tmp_path, exclusive=exclusive, say=lambda m: None):
            order.append(name)
            time.sleep(hold_s)

    with claimed_gpu(DEVICES[:1], tmp_path, exclusive=False):  # a run holds the device
        timing = threading.Thread(target=claim, args=(True, "timing", 0.3))
        timing.start()
        time.sleep(0.3)  # the timing waits at the device, holding its gate
        late = threading.Thread(target=claim, args=(False, "later run", 0))
        late.start()
        time.sleep(0.3)
        assert order == []  # the later run did not join the one that holds the device
    timing.join(5)
    late.join(5)
    assert order == ["timing", "later run"]


def test_shared_claims_on_several_devices_spread_and_a_timing_takes_a_free_one(tmp_path):
    with claimed_gpu(DEVICES, tmp_path, exclusive=False) as run:
        with claimed_gpu(DEVICES, tmp_path, exclusive=True) as timing:
            assert {run, timing} == set(DEVICES)
