"""How a timing makes its instance pairs (rr.run.timing._instance_pairs), without a GPU: the device's
memory and the instances are stand-ins that count what is allocated and restored. The reference
side's instances are kept in the worker's Resident for the next timing of it, restored, not made
again; the second side shares a pair's buffers only where it launches the same ones; and the
pairs are as many as half the free memory holds."""

from __future__ import annotations

import sys
import types

import pytest

from rr.run import timing
from rr.run.cuda import Resident

GIB = 1 << 30


class Device:
    """A stand-in device: `free` bytes left, allocations taken from it."""

    def __init__(self, free: int):
        self.free, self.taken = free, 0

    def allocate(self, n: int) -> None:
        self.free -= n
        self.taken += n

    def memory(self):
        return self.free, self.taken


class Buffers:
    def __init__(self):
        self.restored = 0

    def restore(self):
        self.restored += 1


class Instance:
    def __init__(self, side, device):
        self.side, self.device = side, device


class Side:
    """A timing side whose every instance takes `nbytes` of buffers unless it is given another's."""

    def __init__(self, name: str, device: Device, nbytes: int, buffers_of=None):
        self.key, self.dev, self.nbytes, self.buffers_of = ("dir", name), device, nbytes, buffers_of
        self.made = 0

    def launches_buffers_of(self, other) -> bool:
        return self.buffers_of is other

    def instance(self, device=None):
        self.made += 1
        if device is None:
            self.dev.allocate(self.nbytes)
            device = Buffers()
        self.dev.allocate(1 << 20)  # its module loads
        return Instance(self, device)


@pytest.fixture
def device(monkeypatch):
    dev = Device(100 * GIB)
    monkeypatch.setattr(timing, "_device_memory", dev.memory)
    cuda = types.SimpleNamespace(Device=lambda: types.SimpleNamespace(synchronize=lambda: None))
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=cuda))
    return dev


def test_the_reference_sides_instances_are_kept_and_restored_for_the_next_timing(device):
    resident = Resident()
    reference = Side("reference", device, GIB)
    splice = Side("splice", device, GIB, buffers_of=reference)
    pairs, reused = timing._instance_pairs([reference, splice], 8, resident)
    assert (len(pairs), reused, reference.made, splice.made) == (8, 0, 8, 8)
    assert all(b.device is a.device for a, b in pairs)  # the splice on the pair's buffers
    kept = resident.kept(reference.key)
    assert kept.instances == [a for a, _ in pairs] and kept.nbytes == 8 * (GIB + (1 << 20))
    # the next splice timed against the same reference: its eight instances again, restored once each
    again = Side("next splice", device, GIB, buffers_of=reference)
    pairs, reused = timing._instance_pairs([reference, again], 8, resident)
    assert (len(pairs), reused, reference.made, again.made) == (8, 8, 8, 8)
    assert [a for a, _ in pairs] == kept.instances
    assert all(a.device.restored == 1 for a, _ in pairs)


def test_a_side_of_other_buffers_gets_its_own_and_the_pairs_are_what_half_the_free_memory_holds(device):
    device.free = 9 * GIB  # the first pair takes 2 GiB; half of the 7 left holds one more
    a, b = Side("a", device, GIB), Side("b", device, GIB)
    pairs, reused = timing._instance_pairs([a, b], 8, Resident())
    assert (len(pairs), reused) == (2, 0)
    assert pairs[0][0].device is not pairs[0][1].device


def test_kept_instances_count_for_nothing_but_the_second_side_when_memory_is_short(device):
    resident = Resident()
    reference = Side("reference", device, GIB)
    timing._instance_pairs([reference, Side("s", device, GIB, buffers_of=reference)], 8, resident)
    device.free = 2 * GIB  # eight reference instances kept; the splice's module loads fit beside them
    pairs, reused = timing._instance_pairs([reference, Side("t", device, GIB, buffers_of=reference)], 8, resident)
    assert (len(pairs), reused, reference.made) == (8, 8, 8)
    # a side with buffers of its own does not fit beside them but in one pair: one kept instance
    # taken, and only it restored
    restored = [a.device.restored for a in resident.kept(reference.key).instances]
    pairs, reused = timing._instance_pairs([reference, Side("u", device, GIB)], 8, resident)
    assert (len(pairs), reused) == (1, 1)
    after = [a.device.restored for a in resident.kept(reference.key).instances]
    assert [x - y for x, y in zip(after, restored)] == [1] + [0] * 7
