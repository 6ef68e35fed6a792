"""Each cuda run or timing claims a GPU of its own: claims never share a device, a claim waits
while all devices are held, and a process that dies releases its device. Devices are named by the
driver's UUIDs, and a child given one sees only that one."""

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
