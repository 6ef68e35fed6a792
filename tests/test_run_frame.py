"""Frames: layers run in order over shared buffers (rr/run/frame.py) — what one layer writes, the
next reads, a surface written by one is the texture the next samples; one layer's module replaced
(`rr relaunch --layer`, `rr frame --replace`); two frame runs compared final frame first, naming
the first layer whose outputs differ; bad frame directories named. On nvcc-built layers
(tests/cuda/frame_layers.cu) and, for the network, the synthetic engine's eleven layers."""

from __future__ import annotations

import json
from re import search as re_search
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rr.run.frame import Frame, FrameBuffer, FrameLayer, read_frame, write_frame
from rr.run.launch import Buffer, Field, Launch, LaunchError

K = 3.0
THREADS = 64


def _rr(*args):
    return subprocess.run([sys.executable, "-m", "rr.cli", *map(str, args)], capture_output=True, text=True)


def _frame(ptx: Path, out: Path, x: np.ndarray) -> Path:
    """The two-layer frame of frame_layers.cu over the input x."""
    buf = lambda n, role, fmt=None, dt=None: Buffer(n, f"{n}.npy", role, fmt, dt)  # noqa: E731
    scale = Launch("frame_scale", "scale.ptx", (1, 1, 1), (THREADS, 1, 1),
                   (Field("buffer", buffer="x"), Field("buffer", buffer="y"), Field("scalar", 0, "float32", (K,)),
                    Field("surface", buffer="image")),
                   {"x": buf("x", "in", dt="float32"), "y": buf("y", "out", dt="float32"),
                    "image": buf("image", "out", "rgba16f", "float16")}, layout="list")
    blend = Launch("frame_blend", "blend.ptx", (1, 1, 1), (THREADS, 1, 1),
                   (Field("buffer", buffer="y"), Field("texture", buffer="image"), Field("buffer", buffer="z")),
                   {"y": buf("y", "in", dt="float32"), "image": buf("image", "in", "rgba16f", "float16"),
                    "z": buf("z", "out", dt="float32")}, layout="list")
    buffers = {"x": FrameBuffer("x", "x.npy", None, "float32", "host", ("scale",)),
               "y": FrameBuffer("y", "y.npy", None, "float32", "scale", ("blend",)),
               "image": FrameBuffer("image", "image.npy", "rgba16f", "float16", "scale", ("blend",)),
               "z": FrameBuffer("z", "z.npy", None, "float32", "blend", ())}
    frame = Frame((8, 8), "z", buffers, (FrameLayer("scale", scale), FrameLayer("blend", blend)))
    arrays = {"x": x, "y": np.zeros(THREADS, np.float32), "image": np.zeros((8, 8, 4), np.float16),
              "z": np.zeros(THREADS, np.float32)}
    write_frame(out, frame, arrays, {"scale": ptx, "blend": ptx})
    return out


def _scaled(x: np.ndarray, offset: float = 0.0) -> np.ndarray:
    """scale's y: x·k + offset as nvcc fuses it (one fma: exact in f64, rounded once to f32)."""
    return (x.astype(np.float64) * K + offset).astype(np.float32)


def _expected(x: np.ndarray, offset: float = 0.0) -> np.ndarray:
    y = _scaled(x, offset)
    return (y + y.astype(np.float16).astype(np.float32)).astype(np.float32)


@pytest.fixture
def x():
    return np.random.default_rng(5).uniform(-4, 4, THREADS).astype(np.float32)


def test_a_frame_runs_its_layers_in_order_on_shared_buffers(nvcc_ptx, tmp_path, x):
    # blend reads the y that scale wrote and samples the surface scale painted as its texture
    layout = _frame(nvcc_ptx("frame_layers"), tmp_path / "layout", x)
    r = _rr("run", layout, "--backend", "cpu", "-o", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    out = read_frame(tmp_path / "out")
    assert [lyr.layer for lyr in out.layers] == ["scale", "blend"]
    z = np.load(tmp_path / "out" / "z.npy")
    assert np.array_equal(z.view(np.uint32), _expected(x).view(np.uint32))
    record = json.loads((tmp_path / "out" / "run.json").read_text())
    assert record["status"] == "ok" and [lyr["layer"] for lyr in record["layers"]] == ["scale", "blend"]
    assert np.array_equal(np.load(tmp_path / "layout" / "z.npy"), np.zeros(THREADS, np.float32))  # input untouched


def test_a_frame_output_in_a_directory_not_made_yet_is_made_as_every_output_is(nvcc_ptx, tmp_path, x):
    layout = _frame(nvcc_ptx("frame_layers"), tmp_path / "layout", x)
    out = tmp_path / "runs" / "cell" / "spliced"
    r = _rr("frame", layout, "--backend", "cpu", "--replace", f"scale={nvcc_ptx('frame_layers')}", "-o", out)
    assert r.returncode == 0, r.stderr
    assert np.array_equal(np.load(out / "z.npy").view(np.uint32), _expected(x).view(np.uint32))
    assert [p.name for p in out.parent.iterdir()] == ["spliced"]  # no temporary left beside it


def test_a_replaced_layer_changes_the_frame_and_the_comparison_names_where(nvcc_ptx, tmp_path, x):
    layout = _frame(nvcc_ptx("frame_layers"), tmp_path / "layout", x)
    variant = nvcc_ptx("frame_layers", "-DOFFSET=0.5f")
    assert _rr("run", layout, "--backend", "cpu", "-o", tmp_path / "ref").returncode == 0
    r = _rr("frame", layout, "--backend", "cpu", "--replace", f"scale={variant}", "-o", tmp_path / "spliced")
    assert r.returncode == 0, r.stderr
    z = np.load(tmp_path / "spliced" / "z.npy")
    assert np.array_equal(z.view(np.uint32), _expected(x, 0.5).view(np.uint32))
    r = _rr("compare", tmp_path / "ref", tmp_path / "spliced", "--json")
    rows = json.loads(r.stdout)
    assert r.returncode == 1 and rows[0]["buffer"] == "z" and not rows[0]["identical"]  # the final frame first
    first = next(row for row in rows[1:] if not row["identical"])
    assert (first["buffer"], first["layer"]) == ("y", "scale")
    text = _rr("compare", tmp_path / "ref", tmp_path / "spliced").stdout
    assert "final frame z: differs; first differing layer scale (y)" in text
    # the same module put back: identical, and relaunch --layer is the same replacement
    assert _rr("relaunch", layout, "--layer", "scale", "--module", nvcc_ptx("frame_layers"),
               "-o", tmp_path / "same").returncode == 0
    assert _rr("run", tmp_path / "same", "--backend", "cpu", "-o", tmp_path / "same.out").returncode == 0
    assert _rr("compare", tmp_path / "ref", tmp_path / "same.out").returncode == 0


def test_a_frame_resumed_at_the_replaced_layer_gives_the_whole_frames_outputs(nvcc_ptx, tmp_path, x):
    # blend replaced, resumed from the reference capture: scale is not run again, its y and image
    # come from the capture, and every buffer equals a full run of the replaced frame
    layout = _frame(nvcc_ptx("frame_layers"), tmp_path / "layout", x)
    variant = nvcc_ptx("frame_layers", "-DOFFSET=0.5f")
    assert _rr("run", layout, "--backend", "cpu", "-o", tmp_path / "ref").returncode == 0
    for name, extra in (("full", ()), ("resumed", ("--resume", tmp_path / "ref"))):
        r = _rr("relaunch", layout, "--layer", "blend", "--module", variant, *extra, "-o", tmp_path / name)
        assert r.returncode == 0, r.stderr
        assert _rr("run", tmp_path / name, "--backend", "cpu", "-o", tmp_path / f"{name}.out").returncode == 0
    record = json.loads((tmp_path / "resumed.out" / "run.json").read_text())
    assert record["start"] == "blend" and [lyr["layer"] for lyr in record["layers"]] == ["blend"]
    assert _rr("compare", tmp_path / "full.out", tmp_path / "resumed.out").returncode == 0
    # scale replaced by the variant, resumed: its y differs from the reference's, so blend runs too
    # and the frame differs; scale replaced by itself: its outputs match, and the rest of the frame
    # is the reference's without running blend
    for name, module, layers, completed in (("variant", variant, ["scale", "blend"], None),
                                            ("itself", nvcc_ptx("frame_layers"), ["scale"], "scale")):
        assert _rr("relaunch", layout, "--layer", "scale", "--module", module, "--resume", tmp_path / "ref",
                   "-o", tmp_path / name).returncode == 0
        assert _rr("run", tmp_path / name, "--backend", "cpu", "-o", tmp_path / f"{name}.out").returncode == 0
        record = json.loads((tmp_path / f"{name}.out" / "run.json").read_text())
        assert [lyr["layer"] for lyr in record["layers"]] == layers
        assert record["completed_from_reference_after"] == completed
    z = np.load(tmp_path / "variant.out" / "z.npy")
    assert np.array_equal(z.view(np.uint32), _expected(x, 0.5).view(np.uint32))
    assert _rr("compare", tmp_path / "ref", tmp_path / "itself.out").returncode == 0
    # a run of another frame (its buffers named otherwise) is no reference to resume from
    shutil.copytree(tmp_path / "ref", tmp_path / "other")
    text = (tmp_path / "other" / "frame.json").read_text()
    (tmp_path / "other" / "frame.json").write_text(text.replace('"z"', '"w"'))
    r = _rr("relaunch", layout, "--layer", "blend", "--module", variant, "--resume", tmp_path / "other",
            "-o", tmp_path / "wrong")
    assert r.returncode == 2 and "not a run of" in r.stderr and not (tmp_path / "wrong").exists(), r.stderr
    with pytest.raises(LaunchError, match="start: 'nothing' is not one of the frame's layers"):
        raw = json.loads((tmp_path / "resumed" / "frame.json").read_text())
        (tmp_path / "resumed" / "frame.json").write_text(json.dumps({**raw, "start": "nothing"}))
        read_frame(tmp_path / "resumed")


def test_a_frame_run_with_its_reference_links_what_the_splice_left_as_it_was(nvcc_ptx, tmp_path, x):
    # scale replaced by the variant: the host input x is the reference's, what scale and blend
    # write differs and is written as files of its own; scale replaced by itself: all linked; the
    # same in frames resumed from the reference (blend's variant writes blend's bytes: the offset
    # is scale's, and scale is not run again)
    layout = _frame(nvcc_ptx("frame_layers"), tmp_path / "layout", x)
    variant = nvcc_ptx("frame_layers", "-DOFFSET=0.5f")
    ref = tmp_path / "ref"
    assert _rr("run", layout, "--backend", "cpu", "-o", ref).returncode == 0
    cases = (("variant", "scale", variant, (), ["x"]),
             ("itself", "scale", nvcc_ptx("frame_layers"), (), ["x", "y", "image", "z"]),
             ("resumed", "blend", variant, ("--resume", ref), ["x", "y", "image", "z"]),
             ("resumed.variant", "scale", variant, ("--resume", ref), ["x"]))
    for name, layer, module, resume, linked in cases:
        assert _rr("relaunch", layout, "--layer", layer, "--module", module, *resume, "-o", tmp_path / name
                   ).returncode == 0
        r = _rr("run", tmp_path / name, "--backend", "cpu", "--reference", ref, "-o", tmp_path / f"{name}.out")
        assert r.returncode == 0, r.stderr
        record = json.loads((tmp_path / f"{name}.out" / "run.json").read_text())
        assert record["linked_to_reference"] == linked, name
        for buffer in ("x", "y", "image", "z"):
            out, held = (tmp_path / f"{name}.out" / f"{buffer}.npy"), ref / f"{buffer}.npy"
            same = out.stat().st_ino == held.stat().st_ino
            assert same == (buffer in linked), (name, buffer)
            assert same or not np.array_equal(np.load(out), np.load(held)), (name, buffer)
    assert ref.joinpath("x.npy").stat().st_nlink == 5  # the reference's, and each run's link to it
    assert not (tmp_path / "resumed.out" / "reference").exists()  # the resumed frame's reference stays with it
    r = _rr("compare", ref, tmp_path / "itself.out")
    assert r.returncode == 0 and "4 of the 4 buffers are one file in both runs" in r.stderr
    r = _rr("compare", ref, tmp_path / "variant.out", "--json")
    assert r.returncode == 1 and [row["identical"] for row in json.loads(r.stdout)] == [False, False, False, True]
    z = np.load(tmp_path / "variant.out" / "z.npy")
    assert np.array_equal(z.view(np.uint32), _expected(x, 0.5).view(np.uint32))


def test_a_layer_of_a_frame_run_is_a_launch_of_its_own(nvcc_ptx, tmp_path, x):
    # blend extracted from the reference run: it reads the y and image scale left, and writes z again
    layout = _frame(nvcc_ptx("frame_layers"), tmp_path / "layout", x)
    assert _rr("run", layout, "--backend", "cpu", "-o", tmp_path / "ref").returncode == 0
    r = _rr("relaunch", tmp_path / "ref", "--layer", "blend", "--extract", "-o", tmp_path / "blend")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "blend" / "launch.json").is_file() and not (tmp_path / "blend" / "frame.json").exists()
    assert _rr("run", tmp_path / "blend", "--backend", "cpu", "-o", tmp_path / "blend.out").returncode == 0
    assert np.array_equal(np.load(tmp_path / "blend.out" / "z.npy"), np.load(tmp_path / "ref" / "z.npy"))
    r = _rr("relaunch", tmp_path / "ref", "--layer", "scale", "--extract", "--module",
            nvcc_ptx("frame_layers", "-DOFFSET=0.5f"), "-o", tmp_path / "scale")
    assert r.returncode == 0, r.stderr
    assert _rr("run", tmp_path / "scale", "--backend", "cpu", "-o", tmp_path / "scale.out").returncode == 0
    y = np.load(tmp_path / "scale.out" / "y.npy")
    assert np.array_equal(y, _scaled(x, 0.5))


def test_bad_frame_directories_are_named(nvcc_ptx, tmp_path, x):
    layout = _frame(nvcc_ptx("frame_layers"), tmp_path / "layout", x)
    raw = json.loads((layout / "frame.json").read_text())
    raw["layers"][1]["launch"]["buffers"]["y"]["file"] = "other.npy"
    (layout / "frame.json").write_text(json.dumps(raw))
    with pytest.raises(LaunchError, match=r"layers\[1\]\.launch\.buffers\.y: not the frame's buffer"):
        read_frame(layout)
    r = _rr("run", layout, "--backend", "cpu", "-o", tmp_path / "out")
    assert r.returncode == 1 and "bad_launch" in r.stderr
    raw["layers"][1]["launch"]["buffers"]["y"]["file"] = "y.npy"
    raw["final"] = "nothing"
    (layout / "frame.json").write_text(json.dumps(raw))
    with pytest.raises(LaunchError, match="final: 'nothing' is not one of the frame's buffers"):
        read_frame(layout)
    r = _rr("relaunch", tmp_path / "layout", "--module", nvcc_ptx("frame_layers"), "-o", tmp_path / "x")
    assert r.returncode == 2 and "--layer" in r.stderr


@pytest.mark.gpu
def test_a_frame_gives_the_same_bytes_on_the_gpu(gpu, nvcc_ptx, tmp_path, x):
    layout = _frame(nvcc_ptx("frame_layers"), tmp_path / "layout", x)
    for backend in ("cpu", "cuda"):
        assert _rr("run", layout, "--backend", backend, "-o", tmp_path / backend).returncode == 0
    assert _rr("compare", tmp_path / "cpu", tmp_path / "cuda").returncode == 0
    z = np.load(tmp_path / "cuda" / "z.npy")
    assert np.array_equal(z.view(np.uint32), _expected(x).view(np.uint32))


@pytest.mark.gpu
def test_a_frame_run_on_the_gpu_with_its_reference_links_what_the_splice_left_as_it_was(gpu, nvcc_ptx, tmp_path, x):
    layout = _frame(nvcc_ptx("frame_layers"), tmp_path / "layout", x)
    ref = tmp_path / "ref"
    assert _rr("run", layout, "--backend", "cuda", "-o", ref).returncode == 0
    for name, module, linked in (("itself", nvcc_ptx("frame_layers"), ["x", "y", "image", "z"]),
                                 ("variant", nvcc_ptx("frame_layers", "-DOFFSET=0.5f"), ["x"])):
        assert _rr("relaunch", layout, "--layer", "scale", "--module", module, "-o", tmp_path / name).returncode == 0
        r = _rr("run", tmp_path / name, "--backend", "cuda", "--reference", ref, "-o", tmp_path / f"{name}.out")
        assert r.returncode == 0, r.stderr
        assert json.loads((tmp_path / f"{name}.out" / "run.json").read_text())["linked_to_reference"] == linked
        for buffer in ("x", "y", "image", "z"):
            same = (tmp_path / f"{name}.out" / f"{buffer}.npy").stat().st_ino == (ref / f"{buffer}.npy").stat().st_ino
            assert same == (buffer in linked), (name, buffer)


@pytest.mark.gpu
def test_the_network_frame_on_the_gpu_equals_its_model(gpu, tmp_path):
    # the eleven layers of the synthetic engine at 64x64 pixels, buffers resident between launches
    from rr.run.frame import load_frame_buffers
    from rr.synth.network import network_inputs, network_layout, network_model

    assert _rr("synth", "engine", "-o", tmp_path / "engine.bin").returncode == 0
    assert _rr("extract", tmp_path / "engine.bin", "-o", tmp_path / "corpus").returncode == 0
    assert _rr("launch", "frame", tmp_path / "corpus", "--frame", "64x64", "-o", tmp_path / "layout").returncode == 0
    r = _rr("run", tmp_path / "layout", "--backend", "cuda", "-o", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    layout = network_layout((64, 64))
    model = network_model(network_inputs(layout), layout)
    got = load_frame_buffers(tmp_path / "out", read_frame(tmp_path / "out"))
    # the model rounds as the H200 does (its mma, .approx tables, ptxas's contractions, and the
    # zeros an integer texture coordinate past the edge reads — the deep layers are 1 token wide
    # here): every buffer of the frame, the final frame first, byte for byte
    names = ["frame"] + sorted(k for k in model if k in got and k != "frame")
    assert len(names) > 60
    for name in names:
        assert np.array_equal(np.asarray(got[name]).view(np.uint8), np.asarray(model[name]).view(np.uint8)), name


@pytest.fixture(scope="module")
def engine_corpus(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("engine")
    assert _rr("synth", "engine", "-o", d / "engine.bin").returncode == 0
    assert _rr("extract", d / "engine.bin", "-o", d / "corpus").returncode == 0
    return d / "corpus"


@pytest.fixture(scope="module")
def sample_cubin(engine_corpus, tmp_path_factory) -> Path:
    """The corpus's sample kernel compiled by ptxas: a small real cubin."""
    out = tmp_path_factory.mktemp("cubin") / "sample.cubin"
    if shutil.which("ptxas") is None:
        pytest.skip("ptxas is not on PATH: no cubin to launch")
    r = _rr("compile", engine_corpus, "--entry", "cuda_dldn_engine_swin_sample_kernel", "-o", out)
    assert r.returncode == 0, r.stderr
    return out


def test_a_launch_given_a_layers_cubin_runs_that_module_named_by_its_kind(engine_corpus, sample_cubin, tmp_path):
    # the frame: the named layer launches the cubin (what ptxas reported is what the GPU runs, with
    # no driver compile at each load), every other layer the corpus's PTX
    r = _rr("launch", "frame", engine_corpus, "--frame", "32x32", "--module", f"enc2={sample_cubin}", "-o", tmp_path / "f")
    assert r.returncode == 0, r.stderr
    frame = read_frame(tmp_path / "f")
    modules = {lyr.layer: lyr.launch.module for lyr in frame.layers}
    assert modules["enc2"] == "enc2.cubin" and (tmp_path / "f/enc2.cubin").read_bytes() == sample_cubin.read_bytes()
    assert all(m == f"{layer}.ptx" for layer, m in modules.items() if layer != "enc2")
    # one layer's launch likewise
    r = _rr("launch", "sample", engine_corpus, "--module", f"sample={sample_cubin}", "-o", tmp_path / "s")
    assert r.returncode == 0, r.stderr
    launch = json.loads((tmp_path / "s/launch.json").read_text())
    assert launch["module"] == "kernel.cubin" and (tmp_path / "s/kernel.cubin").read_bytes() == sample_cubin.read_bytes()


@pytest.mark.parametrize("item,message", [
    ("enc9={cubin}", "--module 'enc9=.*': 'enc9' is not a layer of this launch \\(enc0, enc1"),
    ("enc2", "--module 'enc2': expected LAYER=PATH"),
    ("enc2={missing}", "no such module file"),
])
def test_a_module_for_no_layer_or_no_file_is_refused_and_nothing_written(engine_corpus, sample_cubin, tmp_path,
                                                                         item, message):
    arg = item.format(cubin=sample_cubin, missing=tmp_path / "none.cubin")
    r = _rr("launch", "frame", engine_corpus, "--frame", "32x32", "--module", arg, "-o", tmp_path / "f")
    assert r.returncode == 2 and re_search(message, r.stderr), r.stderr
    assert not (tmp_path / "f").exists()
