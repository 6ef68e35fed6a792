"""The whole network over a frame (rr.synth.network): the launches in order and the buffers between
them, the host-made inputs, the numpy model of the frame, and — layer by layer, each on the
buffers the layers before it wrote — the cpu backend equal to that model byte for byte."""

from __future__ import annotations

import numpy as np
import pytest

from rr.numerics import fp8
from rr.run.cpu import run_cpu
from rr.run.launch import write_launch
from rr.synth import model
from rr.synth.family import NAMES
from rr.synth.network import (
    FINAL,
    downsample,
    embed,
    network_inputs,
    network_layout,
    network_model,
    noisy_frame,
)
from rr.synth.swin import build_layer

FRAME = (32, 32)


@pytest.fixture(scope="module")
def layout():
    return network_layout(FRAME)


@pytest.fixture(scope="module")
def frame_run(layout):
    arrays = network_inputs(layout)
    return arrays, network_model(arrays, layout)


def test_layers_run_in_network_order_at_their_levels(layout):
    assert [lyr.layer for lyr in layout.layers] == list(NAMES)
    ext = {lyr.layer: lyr.extents for lyr in layout.layers}
    assert ext["enc0"] == (8, 8) and ext["enc2"] == (2, 2) and ext["dec0"] == ext["enc0"]
    assert all(ext[f"dec{i}"] == ext[f"enc{i}"] for i in range(5))
    assert layout.layer("dec0").out_extents == FRAME and layout.layer("dec1").out_extents == ext["enc0"]
    assert network_layout((3840, 2160)).layer("enc2").extents == (240, 135)  # the reference's 4K frame


def test_every_buffer_read_is_made_by_the_host_or_an_earlier_layer(layout):
    written = set()
    for lyr in layout.layers:
        for name in lyr.reads:
            b = layout.buffers[name]
            assert b.producer == "host" or b.producer in {x.layer for x in layout.layers[:NAMES.index(lyr.layer)]}
            assert lyr.layer in b.consumers
        written |= set(lyr.writes)
    hosts = {n for n, b in layout.buffers.items() if b.producer == "host"}
    assert hosts == {"noisy", "enc0.input", "enc0.texture"} | {f"{n}.weights" for n in NAMES}
    assert set(layout.buffers) == hosts | written
    assert layout.buffers[FINAL].producer == "dec0" and layout.buffers[FINAL].shape == (32, 32, 4)


def test_the_documented_flow(layout):
    b = {lyr.layer: lyr.bindings for lyr in layout.layers}
    for i in range(4):
        assert b[f"enc{i + 1}"]["input"] == f"enc{i}.half_out" and b[f"enc{i + 1}"]["texture"] == f"enc{i}.surface2"
        assert b[f"dec{i + 1}"]["skip"] == f"enc{i + 1}.arena"
    assert b["dec5"]["input"] == "enc4.half_out" and "skip" not in b["dec5"]
    for i in range(5):
        assert b[f"dec{i}"]["input"] == f"dec{i + 1}.expanded" and b[f"dec{i}"]["skip"] == f"enc{i}.arena"
    assert b["dec0"]["noisy"] == "noisy" and b["dec0"]["texture"] == "dec1.surface2" and b["dec0"]["frame"] == FINAL
    # a buffer another layer reads has the shape that layer reads it with
    assert layout.buffers["enc1.half_out"].shape == (2, 2, 96)  # enc2 reads tokens of 96 bytes
    assert layout.buffers["dec3.expanded"].shape == (3, 2, 2, 32)


def test_launches_bind_every_buffer_at_its_parameter(layout):
    for lyr in layout.layers:
        bound = {f.buffer for f in lyr.launch.fields if f.buffer}
        assert bound == set(lyr.reads) | set(lyr.writes) == set(lyr.launch.buffers)
        assert lyr.launch.grid == (-(-lyr.extents[0] // 8), -(-lyr.extents[1] // 8), 1)


def test_host_inputs_come_from_the_noisy_frame():
    flat = np.full((16, 16, 4), 0.5, np.float16)
    flat[..., 2] = 0.25
    tokens = model.image_channels(embed(flat, (4, 4)))
    assert np.all(tokens[..., :16] == tokens[0, 0, 0]) and np.all(tokens[..., 16:] == tokens[0, 0, 16])
    assert float(fp8.from_e4m3(tokens[0, 0, 16])) == 0.125  # (R - B) / 2
    assert np.all(downsample(flat, (4, 4)) == flat[:4, :4])
    a, b = noisy_frame((40, 24)), noisy_frame((40, 24))
    assert a.shape == (24, 40, 4) and np.array_equal(a, b) and not np.array_equal(a, noisy_frame((40, 24), 8))


def test_the_final_frame_is_finite_and_every_layer_writes(layout, frame_run):
    _, after = frame_run
    frame = after[FINAL].astype(np.float64)
    assert np.isfinite(frame).all() and np.unique(frame).size > 500
    for name, b in layout.buffers.items():
        if b.producer not in ("host", "enc3", "enc4") and b.format is None:  # enc3, enc4 are 1×1: nothing to merge
            assert np.count_nonzero(after[name]), name


def _with_head_bias(arrays: dict, layer: str) -> dict:
    """The arrays with the bias of the layer's head column 10 (E38's sigmoid input) set to 3."""
    lay = model.layer_layout(layer)
    changed = dict(arrays)
    changed[f"{layer}.weights"] = w = arrays[f"{layer}.weights"].copy()
    at = lay.phases[lay.head].bias_offset + 2 * 10
    w[at:at + 2] = np.array([3.0], np.float16).view(np.uint8)
    return changed


def test_a_deep_encoders_head_reaches_the_final_frame_through_the_texture_chain():
    """enc3's head feeds only its surfaces: surface2 is enc4's texture, enc4's is dec5's, and so on
    up to dec1's, dec0's coarse texture. (From 128×128 pixels on every level has two tokens.)"""
    layout = network_layout((128, 128))
    arrays = network_inputs(layout)
    after = network_model(arrays, layout)
    changed = network_model(_with_head_bias(arrays, "enc3"), layout)
    differ = [n for n in layout.buffers if not np.array_equal(changed[n], after[n])]
    assert FINAL in differ and "enc3.arena" not in differ and "enc4.surface2" in differ


def test_each_layer_of_the_frame_on_the_cpu_equals_the_model(layout, frame_run, tmp_path):
    """Every layer's launch, on the buffers the model of the layers before it wrote."""
    arrays, _ = frame_run
    before = dict(arrays)
    for lyr in layout.layers:
        d = tmp_path / lyr.layer
        write_launch(d, lyr.launch, {n: before[n] for n in lyr.launch.buffers})
        (d / lyr.launch.module).write_text(build_layer(lyr.layer))
        _, out = run_cpu(d)
        after = network_model(before, layout, layers=[lyr.layer])
        for name in lyr.writes:
            got, want = np.ascontiguousarray(out[name]), after[name]
            assert got.shape == want.shape and np.array_equal(got.view(np.uint8), want.view(np.uint8)), name
        before = after
