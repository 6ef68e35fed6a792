"""A user's own launches without a GPU (issue 34, items 4 and 5).

Captured launches replay on the cpu backend: a program built by nvcc loads a fatbin, `rr capture`
stores it as the launch's module, and the cpu backend runs the PTX inside it (the capture here is
made by the fake driver of tests/test_capture.py, loading a real nvcc fatbin of
tests/capture/kernels.cu); a module of SASS alone is refused naming the fixes, and `rr run
--module` gives the PTX. And `rr launch-template` makes a launch directory from an entry's
`.param` list (tests/cuda/user_kernels.cu, built by nvcc here) that the cpu backend runs to the
kernel's known result.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import NVCC, needs_nvcc
from test_capture import fake  # noqa: F401 (a fixture: the fake driver and programs)
from test_capture import GENCODE, capture, index, launch_dir, replay_matches_after, rr

pytestmark = needs_nvcc
KERNELS = Path(__file__).parent / "capture" / "kernels.cu"


def fatbin(out: Path, gencode: str) -> Path:
    subprocess.run([NVCC, "-fatbin", gencode, "-o", out, KERNELS], check=True, capture_output=True)
    return out


@pytest.fixture(scope="session")
def captured(fake, tmp_path_factory):  # noqa: F811
    """The fake engine's three launches captured twice: loading an nvcc fatbin with PTX and SASS
    (GENCODE: code=[sm_90,compute_90]), and one of SASS alone (code=sm_90)."""
    d = tmp_path_factory.mktemp("user-capture")
    out = {}
    for name, gencode in (("ptx", GENCODE), ("sass", "-gencode=arch=compute_90,code=sm_90")):
        done = capture(fake, d / name, "fake_app", "engine", str(fatbin(d / f"{name}.fatbin", gencode)))
        assert done.returncode == 0, done.stderr
        out[name] = d / name
    return out


# -- 4. captured launches replay on the cpu backend ------------------------------------------------

def test_a_capture_of_a_program_loading_an_nvcc_fatbin_replays_on_the_cpu_byte_identical_to_after(captured, tmp_path):
    cap = captured["ptx"]
    assert [m.rsplit(".", 1)[1] for m in index(cap)["modules"]] == ["fatbin"]  # what the program loaded
    for i in range(3):
        compared = replay_matches_after(launch_dir(cap, i), tmp_path)
        assert compared.returncode == 0, compared.stdout
        rows = json.loads(compared.stdout)
        assert rows and all(row["identical"] for row in rows)


def test_a_module_of_sass_alone_is_refused_naming_the_module_option_and_the_gencode_that_embeds_ptx(captured, tmp_path):
    d = launch_dir(captured["sass"], 0)
    run = rr("run", str(d), "--backend", "cpu", "-o", str(tmp_path / "R"))
    assert run.returncode == 1
    message = run.stderr
    assert message.startswith("rr: run unsupported: ")
    assert "a fatbin of SASS only (sm_90), no PTX of rr_cap_struct" in message
    assert "rr run LAUNCH --module FILE" in message
    assert "nvcc -gencode arch=compute_90,code=[sm_90,compute_90]" in message
    recorded = rr("run", str(d), "--backend", "cpu", "--record", "-o", str(tmp_path / "Q"))
    record = json.loads((tmp_path / "Q" / "run.json").read_text())
    assert recorded.returncode == 0 and record["status"] == "unsupported" and "--module" in record["message"]


def test_run_module_gives_the_ptx_of_a_sass_capture_as_a_file_or_as_the_corpus_entry(
        captured, fake, tmp_path):  # noqa: F811
    cap = captured["sass"]
    corpus = tmp_path / "corpus"
    assert rr("extract", str(fake["ptx"]), "-o", str(corpus)).returncode == 0
    for i, module in ((0, fake["ptx"]), (1, corpus)):
        d, out = launch_dir(cap, i), tmp_path / f"R{i}"
        run = rr("run", str(d), "--backend", "cpu", "--module", str(module), "-o", str(out))
        assert run.returncode == 0, run.stderr
        assert (out / "kernel.ptx").read_bytes() == fake["ptx"].read_bytes()  # the output names what ran
        assert rr("compare", str(d / "after"), str(out)).returncode == 0
    assert not list(tmp_path.glob(".rr-run-module-*"))  # the relaunch it ran from is gone


def test_a_fatbins_ptx_is_the_one_for_the_newest_architecture_up_to_sm_90_that_defines_the_entry(tmp_path):
    from rr.corpus.fatbin import KIND_ELF, KIND_PTX, write_container
    from rr.run.cpu import CpuUnsupported, module_ptx

    def ptx(arch: int, entry: str = "k") -> bytes:
        text = f".version 8.0\n.target sm_{arch}\n.address_size 64\n.visible .entry {entry}()\n{{\n\tret;\n}}\n"
        return f"{text}\0".encode()

    def module(*entries) -> Path:
        path = tmp_path / f"m{len(list(tmp_path.iterdir()))}.fatbin"
        path.write_bytes(write_container(list(entries)))
        return path

    chosen = module_ptx(module((KIND_PTX, 80, ptx(80), "lz4"), (KIND_PTX, 90, ptx(90), "zstd"),
                               (KIND_PTX, 100, ptx(100), "none"), (KIND_PTX, 90, ptx(90, "other"), "none")), "k")
    assert ".target sm_90\n" in chosen
    newer = module((KIND_PTX, 120, ptx(120), "none"), (KIND_PTX, 100, ptx(100), "none"))
    assert ".target sm_100\n" in module_ptx(newer, "k")  # none up to sm_90: the oldest above it
    with pytest.raises(CpuUnsupported, match=r"no PTX in this fatbin defines k \(its PTX defines other\)"):
        module_ptx(module((KIND_PTX, 90, ptx(90, "other"), "none")), "k")
    with pytest.raises(CpuUnsupported, match=r"SASS only \(sm_80, sm_90\).*code=\[sm_90,compute_90\]"):
        module_ptx(module((KIND_ELF, 80, b"\x7fELF", "none"), (KIND_ELF, 90, b"\x7fELF", "none")), "k")


# -- 5. launches without a GPU: rr launch-template -------------------------------------------------

N, BLOCK = 1000, 256


@pytest.fixture(scope="session")
def user_ptx(nvcc_ptx):
    return nvcc_ptx("user_kernels")


def scale_add(ptx: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return rr("launch-template", str(ptx), "--entry", "scale_add", "-o", str(out), "--grid", f"{-(-N // BLOCK)}",
              "--block", str(BLOCK), *extra)


ALL = ("--buffer", f"param_0={4 * N}:f32", "--buffer", f"param_1={4 * N}:f32:zeros", "--buffer", "param_5=4:zeros",
       "--scalar", f"param_2={N}", "--scalar", "param_3=2.0", "--scalar", "param_4.0=-3", "--scalar", "param_4.4=0.5")


def test_a_template_of_pointers_an_int_a_float_and_a_struct_runs_on_the_cpu_to_the_kernels_result(user_ptx, tmp_path):
    from rr.run.launch import read_launch

    made = scale_add(user_ptx, tmp_path / "L", *ALL)
    assert made.returncode == 0, made.stderr
    assert "param_4.4    +28   float32 0.5" in made.stdout and "param_1      +8    buffer  out" in made.stdout
    launch = read_launch(tmp_path / "L")
    assert launch.layout == "list" and [(f.kind, f.dtype) for f in launch.fields] == [
        ("buffer", None), ("buffer", None), ("scalar", "uint32"), ("scalar", "float32"), ("scalar", "uint8"),
        ("buffer", None)]
    assert {b.name: b.role for b in launch.buffers.values()} == {"param_0": "in", "param_1": "out",
                                                                "param_5": "inout"}  # the atomic reads and writes
    run = rr("run", str(tmp_path / "L"), "--backend", "cpu", "-o", str(tmp_path / "R"))
    assert run.returncode == 0, run.stderr
    x = np.load(tmp_path / "L" / "param_0.npy")
    assert x.dtype == np.float32 and x.shape == (N,) and np.abs(x).max() < 1 and len(np.unique(x)) > N // 2
    y = np.load(tmp_path / "R" / "param_1.npy")
    assert (y == x * np.float32(2.0) * np.float32(0.5) + np.float32(-3)).all()
    assert np.load(tmp_path / "R" / "param_5.npy").view(np.uint32).tolist() == [N]  # one atomic per thread below n


def test_a_kernel_of_one_struct_parameter_is_a_block_whose_pointer_members_are_buffers(user_ptx, tmp_path):
    from rr.run.launch import read_launch

    made = rr("launch-template", str(user_ptx), "--entry", "gather_scaled", "-o", str(tmp_path / "L"), "--grid", "2",
              "--block", "64", "--buffer", "param_0.0=400", "--buffer", "param_0.8=400", "--scalar", "param_0.16=100",
              "--scalar", "param_0.20=-3")
    assert made.returncode == 0, made.stderr
    launch = read_launch(tmp_path / "L")
    assert (launch.layout, launch.params_size) == ("block", 24)
    assert [(f.offset, f.kind, f.buffer or f.value) for f in launch.fields] == [
        (0, "buffer", "param_0.0"), (8, "buffer", "param_0.8"), (16, "scalar", (100,)), (20, "scalar", (2**32 - 3,))]
    assert rr("run", str(tmp_path / "L"), "--backend", "cpu", "-o", str(tmp_path / "R")).returncode == 0
    src = np.load(tmp_path / "L" / "param_0.0.npy").view(np.int32)
    assert (np.load(tmp_path / "R" / "param_0.8.npy").view(np.int32) == src[::-1] * -3).all()


def test_the_missing_and_the_unknown_names_are_refused_together_each_named(user_ptx, tmp_path):
    given = ("--buffer", "param_0=64:f32", "--buffer", "nope=8", "--scalar", "param_1=3", "--scalar", "param_3=2.0")
    refused = scale_add(user_ptx, tmp_path / "L", *given)
    assert refused.returncode == 2 and refused.stderr.startswith(f"rr: error: {user_ptx}: scale_add: ")
    for said in ("--buffer nope: scale_add has no such parameter (its parameters: param_0 (pointer, in), ",
                 "--scalar param_1: a pointer the kernel writes through: give it with --buffer param_1=BYTES",
                 "missing --buffer param_5=BYTES (a pointer it reads and writes through), "
                 "--scalar param_2=VALUE (uint32), --scalar param_4.0=VALUE (uint32), "
                 "--scalar param_4.4=VALUE (float32)"):
        assert said in refused.stderr
    assert "param_3=VALUE" not in refused.stderr and "param_0=BYTES" not in refused.stderr
    assert not (tmp_path / "L").exists()  # no partial output
    bad = scale_add(user_ptx, tmp_path / "L", *ALL[:-2], "--scalar", "param_4.4=x")
    assert bad.returncode == 2 and "--scalar param_4.4=x: not a number (float32)" in bad.stderr
    big = scale_add(user_ptx, tmp_path / "L", *ALL, "--scalar", "param_2=0x100000000")
    assert big.returncode == 2 and big.stderr == "rr: error: --scalar param_2: given twice\n"
    big = scale_add(user_ptx, tmp_path / "L", *ALL[:6], *ALL[8:], "--scalar", "param_2=0x100000000")
    assert big.returncode == 2 and "--scalar param_2=0x100000000: does not fit uint32" in big.stderr
    odd = scale_add(user_ptx, tmp_path / "L", *ALL[2:], "--buffer", "param_0=6:f32")
    assert odd.returncode == 2 and "--buffer param_0=6:f32: not a whole number of 4-byte values" in odd.stderr
    both = scale_add(user_ptx, tmp_path / "L", *ALL, "--buffer", "param_3=8")
    assert both.returncode == 2 and "param_3: given both --buffer and --scalar" in both.stderr
    wrong = scale_add(user_ptx, tmp_path / "L", *ALL[:8], *ALL[10:], "--buffer", "param_3=8")
    assert wrong.returncode == 2
    assert "--buffer param_3: a float32 scalar, not a pointer: give it with --scalar" in wrong.stderr


def test_atomics_and_reductions_make_a_pointer_written_in_rr_specs_parameter_roles(user_ptx):
    from rr.describe.dataflow import Dataflow
    from rr.describe.summary import summarise_params
    from rr.ptx import parse_file

    module = parse_file(user_ptx)
    uses = summarise_params(Dataflow(module.function("scale_add"), None, module))
    assert (uses[32].role, uses[8].role, uses[0].role) == ("read, written", "written", "read")


def test_the_readmes_worked_example_runs_as_written_and_prints_what_it_shows(tmp_path):
    """README's example of a kernel of one's own: its .cu, then each `$ ` command (nvcc, rr,
    python) run in order, printing the lines the README shows under it (the seconds aside)."""
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    example = readme.split("<!-- launch-template example -->")[1].split("<!-- end of launch-template example -->")[0]
    (tmp_path / "add_one.cu").write_text(example.split("```cuda\n")[1].split("```")[0])
    session = example.split("```\n$ ")[1].split("```")[0]
    seconds = re.compile(r"[0-9.]+ s interpreting")
    for step in session.split("\n$ "):
        command, *shown = step.strip().splitlines()
        program, _, rest = command.partition(" ")
        argv = {"rr": [sys.executable, "-m", "rr"], "python": [sys.executable]}.get(program, [program])
        done = subprocess.run(argv + shlex.split(rest), cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, (command, done.stderr)
        assert [seconds.sub("", line) for line in done.stdout.splitlines()] == [seconds.sub("", line) for line in shown]
