"""Composition (issue 37, item 1): one module with several phases spliced, each by its own recipe,
every cut checked as it is alone and the whole as one — overlapping cuts and interfering splices
refused naming both phases, the templates' new registers kept apart, the entry parameters and
functions they add composed. Real inputs: the synthetic engine's enc2 in its frame and nvcc-built
kernels, run on the cpu backend."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from conftest import PTXAS, run_ptxas
from rr.ptx import linearise, parse_file
from rr.run.launch import Buffer, Field, Launch, write_launch
from rr.splice.assemble import SpliceError
from rr.splice.compose import compose, read_spec
from rr.splice.recipe import Check, Recipe, load_recipe
from rr.splice.splice import splice
from rr.templates.base import Cut, Entry, Spliced
from rr.templates.registry import TEMPLATES
from rr.validation import InvalidInput

ROOT = Path(__file__).resolve().parents[1]
ENC2 = "cuda_dldn_engine_swin_enc2_kernel"
SAMPLE = ROOT / "rr" / "data" / "sample_swin.ptx"
SAMPLE_ENTRY = "cuda_dldn_engine_swin_sample_kernel"


def rr(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "rr", *map(str, args)], capture_output=True, text=True, cwd=cwd)


def ok(*args):
    r = rr(*args)
    assert r.returncode == 0, r.stderr[-3000:]
    return r


@pytest.fixture(scope="module")
def engine(tmp_path_factory) -> Path:
    """The synthetic engine's corpus, its 128x128 frame and that frame's reference capture."""
    d = tmp_path_factory.mktemp("engine")
    ok("synth", "engine", "-o", d / "engine.bin")
    ok("extract", d / "engine.bin", "-o", d / "corpus")
    ok("launch", "frame", d / "corpus", "--frame", "128x128", "-o", d / "frame")
    ok("run", d / "frame", "--backend", "cpu", "-o", d / "reference")
    return d


def frame_with(engine: Path, module: Path, out: Path) -> dict:
    """The frame with enc2's module replaced, run on the cpu backend, compared with the reference:
    {buffer: identical}."""
    ok("relaunch", engine / "frame", "--layer", "enc2", "--module", module, "--splice-record",
       f"{module}.splice.json", "-o", out / "launch")
    ok("run", out / "launch", "--backend", "cpu", "-o", out / "run", "--reference", engine / "reference")
    rows = json.loads(rr("compare", engine / "reference", out / "run", "--json").stdout)
    return {row["buffer"]: row["identical"] for row in rows}


def test_identity_splices_of_five_enc2_phases_in_one_module_leave_the_frame_byte_identical(engine, tmp_path):
    spec = {3: "isolate", 8: "isolate", 17: "regen", 24: "regen", 30: "probe"}
    out = tmp_path / "c.ptx"
    record = compose(engine / "corpus/modules" / _module_of(engine, ENC2), ENC2, spec, out)
    assert record["template"] == "composition" and record["recipes"] == {str(p): r for p, r in spec.items()}
    assert [p["phase"] for p in record["phases"]] == sorted(spec)
    for part in record["phases"]:  # every phase's cut, recipe and checks, as its own splice records them
        assert part["recipe"] == spec[part["phase"]] and part["cut"]["statements"] > 0 and part["checks"]
    assert record["probe"]["words_per_thread"] > 0  # the probe's buffer: what the relaunch passes
    functions = re.findall(r"\.func\s*\([^)]*\)\s*(\w+)", out.read_text())
    assert sorted(functions) == [f"rr_{ENC2}_phase3_isolated", f"rr_{ENC2}_phase8_isolated"]
    verdicts = frame_with(engine, out, tmp_path)
    assert verdicts["frame"] and all(verdicts.values())


def _module_of(engine: Path, entry: str) -> str:
    entries = json.loads((engine / "corpus/entries.json").read_text())
    return next(f"{h}.ptx" for h, names in entries.items() if entry in names)


def test_a_composition_of_one_phase_is_the_splice_alone(tmp_path):
    compose(SAMPLE, SAMPLE_ENTRY, {2: "regen"}, tmp_path / "c.ptx")
    splice(SAMPLE, SAMPLE_ENTRY, load_recipe("regen"), 2, tmp_path / "s.ptx")
    assert (tmp_path / "c.ptx").read_bytes() == (tmp_path / "s.ptx").read_bytes()


def declared_registers(ptx: Path, entry: str) -> Counter:
    """How often each register (range) of `entry` is declared at its top level."""
    body = ptx.read_text()
    start = body.index(f".entry {entry}(")
    names = re.findall(r"^\s*\.reg\s+\.\w+\s+([^;]+);", body[start:], flags=re.M)
    return Counter(n.strip() for line in names for n in line.split(","))


def test_the_same_template_on_several_phases_keeps_its_new_registers_apart(engine, tmp_path):
    """f32acc declares %rrf<N> and %rrh<N> for each phase: the later phases' are renamed."""
    module = engine / "corpus/modules" / _module_of(engine, ENC2)
    r = ok("splice", module, "--entry", ENC2, "--recipe", "f32acc", "--phase", "8,9,10", "-o", tmp_path / "f.ptx")
    assert "3 phases spliced" in r.stdout
    declared = declared_registers(tmp_path / "f.ptx", ENC2)
    assert max(declared.values()) == 1, [n for n, c in declared.items() if c > 1]
    assert any(n.startswith("%rrf_p9_<") for n in declared) and any(n.startswith("%rrf_p10_<") for n in declared)
    statements = linearise(parse_file(tmp_path / "f.ptx").function(ENC2))
    assert sum(s.opcode.startswith("mma") and ".f32.e4m3.e4m3.f32" in s.opcode for s in statements) > 0
    if PTXAS:
        c = run_ptxas(tmp_path / "f.ptx", "sm_90")
        assert c.returncode == 0, c.stderr
    verdicts = frame_with(engine, tmp_path / "f.ptx", tmp_path)
    assert not verdicts["frame"]  # f32 accumulation is a numerics variant: the frame differs


def recipe_file(path: Path, template: str, before=0, after=0) -> Path:
    path.write_text(f"name: {path.stem}\ndescription: a test recipe\ncut:\n  phase: 1\n"
                    f"  with_epilogue_before: {before!r}\n  with_epilogue_after: {after!r}\n"
                    f"template:\n  name: {template}\n")
    return path


def test_cuts_that_overlap_are_refused_naming_both_phases(tmp_path):
    wide = recipe_file(tmp_path / "wide.yaml", "isolate", after="all")
    early = recipe_file(tmp_path / "early.yaml", "isolate", before="all")
    with pytest.raises(SpliceError, match=r"phase 1 \(wide\) cuts s\d+–s\d+ and phase 2 \(early\) s\d+–s\d+: "
                                          r"the cuts overlap"):
        compose(SAMPLE, SAMPLE_ENTRY, {1: str(wide), 2: str(early)}, tmp_path / "c.ptx")
    assert not (tmp_path / "c.ptx").exists()


class Forgetful:
    """A template of the test's own that drops its cut's last statement: what it wrote, nothing
    after it reads any more."""

    checks = (Check.IDENTICAL_OUTPUT,)

    def apply(self, entry: Entry, cut: Cut, params: dict) -> Spliced:
        kept = entry.statements[cut.first - 1:cut.last - 1]
        return Spliced([s.text for s in kept])


def test_a_splice_that_no_longer_writes_what_a_later_phase_reads_is_refused_naming_both(tmp_path, monkeypatch):
    monkeypatch.setitem(TEMPLATES, "forgetful", Forgetful())
    forgetful = recipe_file(tmp_path / "forgetful.yaml", "forgetful")
    with pytest.raises(SpliceError, match=r"phase 1 \(forgetful\): its splice no longer writes %\w+(, %\w+)*, which "
                                          r"(phase 2's cut \(isolate, s\d+\)|s\d+ \(line \d+\)) reads: the splices "
                                          r"interfere"):
        compose(SAMPLE, SAMPLE_ENTRY, {1: str(forgetful), 2: "isolate"}, tmp_path / "c.ptx")
    assert not (tmp_path / "c.ptx").exists()


def test_two_probes_are_refused_one_launch_passes_one_probe_buffer(tmp_path):
    with pytest.raises(SpliceError, match=r"phase 1 \(probe\) and phase 2 \(probe\) both add the entry parameter "
                                          rf"{SAMPLE_ENTRY}_param_probe"):
        compose(SAMPLE, SAMPLE_ENTRY, {1: "probe", 2: "probe"}, tmp_path / "c.ptx")


@pytest.mark.parametrize("spec, says", [
    ("[8, 9]", "expected a map"),
    ("{zero: isolate}", "not a phase number"),
    ("{0: isolate}", "not a phase number"),
    ("{8: 5}", "is not a recipe"),
])
def test_a_spec_that_is_not_a_map_of_phases_to_recipes_is_refused(spec, says):
    with pytest.raises(InvalidInput, match=says):
        read_spec(spec)


def test_the_command_line_composes_from_a_spec_file_and_from_a_list_of_phases(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text("1: isolate\n2: regen\n")
    r = ok("splice", SAMPLE, "--entry", SAMPLE_ENTRY, "--compose", spec, "-o", tmp_path / "a.ptx")
    assert "phase 1 by isolate" in r.stdout and "phase 2 by regen" in r.stdout
    ok("splice", SAMPLE, "--entry", SAMPLE_ENTRY, "--recipe", "regen", "--phase", "1,2", "-o", tmp_path / "b.ptx")
    record = json.loads((tmp_path / "b.ptx.splice.json").read_text())
    assert record["recipes"] == {"1": "regen", "2": "regen"}
    r = rr("splice", SAMPLE, "--entry", SAMPLE_ENTRY, "--compose", "{1: probe, 2: probe}", "-o", tmp_path / "c.ptx")
    assert r.returncode == 2 and r.stderr.startswith("rr: error: phase 1 (probe) and phase 2 (probe)")
    r = rr("splice", SAMPLE, "--entry", SAMPLE_ENTRY, "--compose", "{1: probe, 2: probe}", "--record",
           "-o", tmp_path / "d.ptx")
    assert r.returncode == 0
    assert json.loads((tmp_path / "d.ptx.splice.json").read_text())["status"] == "error"
    r = rr("splice", SAMPLE, "--entry", SAMPLE_ENTRY, "--compose", spec, "--recipe", "isolate", "-o", tmp_path / "e.ptx")
    assert r.returncode == 2 and "without --recipe and --phase" in r.stderr


# -- nvcc-built kernels -----------------------------------------------------------------------------


def _e4m3_words(rng, words: int) -> np.ndarray:
    values = rng.normal(0, 1, (words, 32, 4)).astype(ml_dtypes.float8_e4m3fn)
    return values.view(np.uint8).view(np.uint32).reshape(-1)


def _launch(directory: Path, module: Path, entry: str, words: dict) -> Path:
    rng = np.random.default_rng(5)
    arrays = {k: _e4m3_words(rng, n) for k, n in words.items()}
    arrays["out"] = np.zeros(4 * 32, np.uint32)
    launch = Launch(entry=entry, module="kernel.ptx", grid=(1, 1, 1), block=(32, 1, 1), layout="list",
                    fields=tuple(Field("buffer", buffer=n) for n in arrays),
                    buffers={n: Buffer(n, f"{n}.npy", "out" if n == "out" else "in") for n in arrays})
    write_launch(directory, launch, arrays, module)
    return directory


def _run(launch: Path, module: Path, out: Path) -> bytes:
    ok("relaunch", launch, "--module", module, "-o", out.with_suffix(".launch"))
    ok("run", out.with_suffix(".launch"), "--backend", "cpu", "-o", out)
    return (out / "out.npy").read_bytes()


@pytest.mark.parametrize("spec", [{1: "isolate", 2: "direct"}, {1: "regen", 2: "isolate"}, {1: "isolate", 2: "regen"}])
def test_an_nvcc_kernel_whose_second_phase_reads_the_firsts_d_composes_byte_identical(nvcc_ptx, tmp_path, spec):
    ptx = nvcc_ptx("transpose_d")
    launch = _launch(tmp_path / "l", ptx, "pack_d", {"a": 8, "b": 4})
    reference = _run(launch, ptx, tmp_path / "ref")
    assert np.count_nonzero(np.frombuffer(reference[-512:], np.uint8))  # the kernel computed something
    record = compose(ptx, "pack_d", spec, tmp_path / "c.ptx")
    assert [p["recipe"] for p in record["phases"]] == [spec[1], spec[2]]
    assert _run(launch, tmp_path / "c.ptx", tmp_path / "c") == reference
    if PTXAS:
        c = run_ptxas(tmp_path / "c.ptx", "sm_90")
        assert c.returncode == 0, c.stderr
