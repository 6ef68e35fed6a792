"""rr on kernels it did not write: our own nvcc-built fp8 mma kernels (tests/cuda/nvvm/), whose
truth comes from their CUDA source (tests/nvvm_suite.py), not from rr.

- `rr spec --json` gives every phase the shape, operand sources, bases, offsets, lane parts,
  address terms and loop facts its source has (and `--grouping gemm` joins a GEMM that NVVM's
  interleaved loads cut into several phases);
- on every phase, `regen` and `isolate` leave the kernel's output byte-identical (or regen refuses
  naming the loop, where the truth allows it), and regen rebuilt from memory every operand the
  truth places there (its own loads in the cut, and splice.json's regen.by_role says so);
  `f32acc` runs with finite output (and does not apply to a phase that accumulates in f32 already); `probe`'s recorded operands replayed by the mma model give
  back the probed D (exactly, on the cpu backend and on the H200: the model is the H200's own
  arithmetic); every spliced module passes ptxas.
"""

from __future__ import annotations

import contextlib
import io
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from conftest import PTXAS, run_ptxas
from nvvm_suite import (FLAGS, KERNELS, MEMORY_KINDS, differences, expected_phase, mma_runs, outputs,
                        phase_bounds, write_kernel_launch)

from rr.numerics.mma import mma_sync
from rr.ptx import linearise, parse_file

RECIPES = Path(__file__).resolve().parents[1] / "config" / "recipes"
SPEC_CASES = [(name, flags) for name in KERNELS for flags in FLAGS]
PHASE_CASES = [(name, flags, p) for name, flags in SPEC_CASES for p in range(1, len(KERNELS[name].phases) + 1)]
# the splices run on every kernel as -O3 builds it, and on two with -lineinfo (.loc inside the cut)
RUN_CASES = [(name, flags, p) for name, flags, p in PHASE_CASES
             if flags == "O3" or name in ("pointers", "rolled")]


def _rr(*args) -> tuple[int, str, str]:
    """`rr ARGS` in this process: (exit status, stdout, stderr)."""
    from rr.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in args])
        except SystemExit as e:  # argparse: an option rr does not know
            code = e.code
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="session")
def ptx(nvcc_ptx):
    """ptx(name, flags) -> the PTX nvcc makes for tests/cuda/nvvm/<name>.cu."""
    return lambda name, flags: nvcc_ptx(KERNELS[name].source, *FLAGS[flags])


@pytest.fixture(scope="session")
def spec(ptx):
    """spec(name, flags, *options) -> `rr spec --json` of the kernel (cached)."""
    cache = {}

    def get(name: str, flags: str, *options: str) -> dict:
        key = (name, flags, options)
        if key not in cache:
            code, out, err = _rr("spec", ptx(name, flags), "--entry", KERNELS[name].entry, "--json", *options)
            assert code == 0, f"rr spec {' '.join(options)} failed ({code}): {err}"
            cache[key] = json.loads(out)
        return cache[key]

    return get


def _params(cases: list) -> list:
    """Cases as pytest params named kernel-flags[-phaseN], so a failure says where."""
    return [pytest.param(*case, id="-".join(f"phase{x}" if isinstance(x, int) else x for x in case))
            for case in cases]


# -- rr spec --------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,flags", _params(SPEC_CASES))
def test_spec_finds_the_phases_nvvm_emitted(spec, name, flags):
    phases = spec(name, flags)["phases"]
    assert [p["mma"] for p in phases] == list(KERNELS[name].phases)


@pytest.mark.parametrize("name,flags,phase", _params(PHASE_CASES))
def test_spec_describes_each_phase_as_its_source_writes_it(spec, name, flags, phase):
    phases = spec(name, flags)["phases"]
    assert len(phases) >= phase, f"rr finds {len(phases)} phases, the PTX has {len(KERNELS[name].phases)}"
    diffs = differences(phases[phase - 1], expected_phase(KERNELS[name], phase))
    assert not diffs, "\n".join(diffs)


GROUPED = [(name, flags) for name, flags in SPEC_CASES if KERNELS[name].grouping_gemm]


@pytest.mark.parametrize("name,flags", _params(GROUPED))
def test_grouping_gemm_joins_the_runs_that_interleaved_loads_split(spec, name, flags):
    kernel = KERNELS[name]
    phases = spec(name, flags, "--grouping", "gemm")["phases"]
    assert [p["mma"] for p in phases] == list(kernel.grouping_gemm)
    for number, got in enumerate(phases, start=1):
        diffs = differences(got, expected_phase(kernel, number, kernel.grouping_gemm))
        assert not diffs, f"phase {number} under --grouping gemm:\n" + "\n".join(diffs)


@pytest.mark.parametrize("name,flags", _params(SPEC_CASES))
def test_the_truths_phase_split_is_the_one_in_this_nvccs_ptx(ptx, name, flags):
    """A check on the truth itself, without rr: where NVVM ends its runs of mma (read from
    CUDA 13.0's PTX when the truth was written). A failure here means the truth needs re-reading
    for this nvcc, not that rr is wrong."""
    assert mma_runs(ptx(name, flags).read_text(), KERNELS[name].entry) == list(KERNELS[name].phases)


def test_the_truth_covers_every_mma_of_every_kernel():
    """A check on the truth table itself: each kernel's phases hold all its mma, once."""
    for kernel in KERNELS.values():
        for counts in filter(None, (kernel.phases, kernel.grouping_gemm)):
            assert [i for r in phase_bounds(counts) for i in r] == list(range(len(kernel.mma))), kernel.name
            for p in range(1, len(counts) + 1):
                expected_phase(kernel, p, counts)  # raises on an inconsistent truth


# -- splices, run -----------------------------------------------------------------------------------

def _run(launch_dir: Path, backend: str) -> tuple[dict, dict]:
    """(record, buffers after the run) of a launch directory on `backend`."""
    if backend == "cpu":
        from rr.run.cpu import run_cpu

        return run_cpu(launch_dir)
    from rr.run.isolate import run_isolated
    from rr.run.launch import load_buffers, read_launch

    out = launch_dir.with_name(launch_dir.name + ".out")
    record = run_isolated(launch_dir, out, backend)
    assert record["status"] == "ok", f"{backend} run of {launch_dir}: {record['status']}: {record['message']}"
    return record, load_buffers(out, read_launch(out))


@pytest.fixture(scope="session")
def reference(ptx, tmp_path_factory):
    """reference(name, flags, backend) -> (launch dir, run record, outputs) of the unspliced kernel."""
    cache = {}

    def get(name: str, flags: str, backend: str):
        key = (name, flags, backend)
        if key not in cache:
            kernel = KERNELS[name]
            directory = tmp_path_factory.mktemp(f"{name}-{flags}-{backend}") / "ref"
            write_kernel_launch(kernel, directory, ptx(name, flags))
            record, buffers = _run(directory, backend)
            outs = {b: buffers[b] for b in outputs(kernel)}
            for b, data in outs.items():  # the kernel really computed something
                assert np.count_nonzero(data) > data.size // 2, f"{name}: output {b} is mostly zero"
            cache[key] = directory, record, outs
        return cache[key]

    return get


def _splice(ptx_path: Path, name: str, recipe: str, phase: int, out: Path, grouping: str = "run") -> tuple[int, str]:
    code, _, err = _rr("splice", ptx_path, "--entry", KERNELS[name].entry, "--recipe", RECIPES / f"{recipe}.yaml",
                       "--phase", phase, "--grouping", grouping, "-o", out)
    return code, err


@dataclass
class Spliced:
    """One recipe spliced into one phase and run on the reference's inputs."""
    code: int  # rr splice's exit status
    message: str  # its stderr (the refusal)
    reference: dict  # the unspliced run's record
    expected: dict  # the unspliced run's outputs
    module: Path  # the spliced PTX
    splice: dict | None = None  # its splice.json
    record: dict | None = None  # the spliced run's record
    buffers: dict | None = None  # the spliced run's buffers


def _spliced_run(reference, ptx, tmp_path, name, flags, phase, recipe, backend, grouping="run") -> Spliced:
    ref_dir, ref_record, ref_out = reference(name, flags, backend)
    module = tmp_path / f"{recipe}.ptx"
    code, err = _splice(ptx(name, flags), name, recipe, phase, module, grouping)
    result = Spliced(code, err, ref_record, ref_out, module)
    if code != 0:
        return result
    if PTXAS:  # what the cpu backend runs must be PTX the GPU would take
        compiled = run_ptxas(module)
        assert compiled.returncode == 0, f"ptxas rejects the {recipe} splice of phase {phase}: {compiled.stderr}"
    launch = tmp_path / recipe
    code, _, err = _rr("relaunch", ref_dir, "--module", module, "--splice-record", f"{module}.splice.json",
                       "-o", launch)
    assert code == 0, f"rr relaunch: {err}"
    result.splice = json.loads(Path(f"{module}.splice.json").read_text())
    result.record, result.buffers = _run(launch, backend)
    return result


def _registers(record: dict) -> set:
    return {w.split()[0] for w in record.get("unwritten_registers", [])}


def _check_reloaded(kernel, phase, result: Spliced) -> None:
    """regen's mma read A and B (and C seeds) that the truth places in memory from loads of its
    own, not from the kernel's registers: byte identity then proves the description."""
    statements = linearise(parse_file(result.module).function(kernel.entry))
    first = result.splice["cut"]["first_stmt"]
    cut = statements[first - 1:first - 1 + result.splice["inserted_statements"]]
    loaded: set = set()  # registers loaded in the cut, or joined (mov.b32 %r, {%h1, %h2}) from such
    for s in cut:
        if s.opcode.startswith("ld.") or (s.opcode.startswith("mov.") and s.uses and set(s.uses) <= loaded):
            loaded.update(s.defs)
    chained = {d for s in cut if s.opcode.startswith("mma.") for d in s.defs}
    operands = expected_phase(kernel, phase)["operands"]
    how = (result.splice.get("regen") or {}).get("by_role")  # what splice.json says it rebuilt
    assert isinstance(how, dict), f"regen of phase {phase}: splice.json has no regen.by_role: {result.splice}"
    for name, op in operands.items():
        if op["kind"] in MEMORY_KINDS:
            allowed = {"memory", "chain"} if name == "C" else {"memory"}
            assert set(how.get(name, {})) <= allowed, f"regen of phase {phase}: {name} {how.get(name)}, not rebuilt"
    for s in (s for s in cut if s.opcode.startswith("mma.")):
        width = 4 if ".f32." in s.opcode else 2
        parts = {"A": s.uses[:4], "B": s.uses[4:6], "C": s.uses[6:6 + width]}
        for name, regs in parts.items():
            if operands[name]["kind"] in MEMORY_KINDS:
                allowed = loaded | (chained if name == "C" else set())
                assert set(regs) <= allowed, f"regen of phase {phase}: {name} {regs} not reloaded in the cut: {s.text}"


def _check_identical(kernel, phase, recipe, result: Spliced) -> None:
    if result.code != 0:
        allowed = kernel.regen_refusal.get(phase) if recipe == "regen" else None
        assert allowed, f"{recipe} of phase {phase} refused where the truth says it can be done: {result.message}"
        assert result.code == 2 and all(w in result.message for w in allowed), \
            f"the refusal must name {allowed}: {result.message}"
        return
    for b, want in result.expected.items():
        differ = int(np.count_nonzero(result.buffers[b].view(np.uint8) != want.view(np.uint8)))
        assert differ == 0, f"{recipe} of phase {phase}: output {b} differs in {differ} of {want.nbytes} bytes"
    new = _registers(result.record) - _registers(result.reference)
    assert not new, f"{recipe} of phase {phase} reads registers before any write: {sorted(new)}"
    if recipe == "regen":
        _check_reloaded(kernel, phase, result)


def _check_f32acc(kernel, phase, result: Spliced) -> None:
    if kernel.accumulator == "f32":  # nothing to widen: the recipe does not apply, and says so
        assert result.code != 0 and "accumulate in f32 already" in result.message, result.message
        return
    assert result.code == 0, f"f32acc of phase {phase} refused: {result.message}"
    for b, dtype in outputs(kernel).items():
        values = result.buffers[b].view(dtype)
        assert np.isfinite(values).all(), f"f32acc of phase {phase}: output {b} has non-finite values"


def _check_probe(kernel, phase, result: Spliced, spec_phase, rate) -> None:
    from rr.run.probe import replay

    assert result.code == 0, f"probe of phase {phase} refused: {result.message}"
    for b, want in result.expected.items():  # the probe leaves the computation alone
        assert np.array_equal(result.buffers[b].view(np.uint8), want.view(np.uint8)), f"probe changed output {b}"
    replayed = replay(result.buffers["probe"], result.splice["probe"], mma_sync)
    assert replayed["mma"] == spec_phase["mma"], replayed
    rate(replayed)


def _cpu_rate(result):
    # the cpu backend's mma is the model itself: the replay must give back every probed D
    assert result["identical_share"] == 1.0, json.dumps(result)


def _gpu_rate(result):
    # the H200's e4m3 mma against its model (rr.numerics.mma.mma_sync, bit-exact on the probe sets):
    # every probed D given back
    assert result["identical_share"] == 1.0, json.dumps(result)


@pytest.mark.parametrize("recipe", ["regen", "isolate"])
@pytest.mark.parametrize("name,flags,phase", _params(RUN_CASES))
def test_regen_and_isolate_keep_the_output_byte_identical_on_the_cpu(reference, ptx, tmp_path, name, flags,
                                                                      phase, recipe):
    result = _spliced_run(reference, ptx, tmp_path, name, flags, phase, recipe, "cpu")
    _check_identical(KERNELS[name], phase, recipe, result)


GROUPED_RUNS = [(name, flags, p) for name, flags in GROUPED for p in range(1, len(KERNELS[name].grouping_gemm) + 1)]


@pytest.mark.parametrize("recipe", ["regen", "isolate", "f32acc"])
@pytest.mark.parametrize("name,flags,phase", _params(GROUPED_RUNS))
def test_a_phase_grouped_across_interleaved_loads_splices_and_runs_on_the_cpu(reference, ptx, tmp_path, name, flags,
                                                                             phase, recipe):
    # the cut holds the loads NVVM put between the mma: regen loads every operand again itself,
    # isolate moves them along into its function, f32acc keeps them in place
    result = _spliced_run(reference, ptx, tmp_path, name, flags, phase, recipe, "cpu", grouping="gemm")
    assert result.code == 0, f"{recipe} of grouped phase {phase} refused: {result.message}"
    assert result.splice["grouping"] == "gemm"
    if recipe == "f32acc":
        _check_f32acc(KERNELS[name], phase, result)
        return
    for b, want in result.expected.items():
        assert np.array_equal(result.buffers[b].view(np.uint8), want.view(np.uint8)), f"{recipe}: output {b} differs"
    if recipe == "regen":
        by_role = result.splice["regen"]["by_role"]
        assert by_role["A"] == {"memory": KERNELS[name].grouping_gemm[phase - 1]} and "live-in" not in by_role["B"]


@pytest.mark.parametrize("name,flags,phase", _params(RUN_CASES))
def test_f32acc_runs_with_finite_output_on_the_cpu(reference, ptx, tmp_path, name, flags, phase):
    _check_f32acc(KERNELS[name], phase, _spliced_run(reference, ptx, tmp_path, name, flags, phase, "f32acc", "cpu"))


@pytest.mark.parametrize("name,flags,phase", _params(RUN_CASES))
def test_probe_replay_gives_back_the_probed_d_on_the_cpu(reference, ptx, spec, tmp_path, name, flags, phase):
    result = _spliced_run(reference, ptx, tmp_path, name, flags, phase, "probe", "cpu")
    _check_probe(KERNELS[name], phase, result, spec(name, flags)["phases"][phase - 1], _cpu_rate)


@pytest.mark.gpu
@pytest.mark.parametrize("recipe", ["regen", "isolate", "f32acc", "probe"])
@pytest.mark.parametrize("name,flags,phase", _params(RUN_CASES))
def test_splices_of_every_phase_on_the_gpu(gpu, reference, ptx, spec, tmp_path, name, flags, phase, recipe):
    kernel = KERNELS[name]
    result = _spliced_run(reference, ptx, tmp_path, name, flags, phase, recipe, "cuda")
    if recipe == "f32acc":
        _check_f32acc(kernel, phase, result)
    elif recipe == "probe":
        _check_probe(kernel, phase, result, spec(name, flags)["phases"][phase - 1], _gpu_rate)
    else:
        _check_identical(kernel, phase, recipe, result)
