"""The direct template: a phase whose operand is pack(D of phase p) or transpose(D of phase p) gets
that operand built straight from phase p's accumulators — the staging it removes found from the
description and the dataflow, the mma statements unchanged, ptxas clean, and the kernel's outputs
byte-identical to the unspliced kernel's on the cpu backend (enc2's P·V phase, nvcc-built kernels
with transposed and packed accumulators); phases without such an operand, or whose staging is read
elsewhere too, are refused with the reason and no output."""

from __future__ import annotations

import json
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
from rr.synth.inputs import write_enc2
from rr.synth.layout import ENTRY
from rr.templates import TemplateError
from rr.templates.direct import MOVMATRIX, accumulator, build, evaluate, _Builder
from rr.templates.transposed import is_movmatrix


def _rr(*args):
    return subprocess.run([sys.executable, "-m", "rr.cli", *map(str, args)], capture_output=True, text=True)


def _splice(ptx: Path, entry: str, phase: int, out: Path) -> dict:
    r = _rr("splice", ptx, "--entry", entry, "--recipe", "direct", "--phase", phase, "-o", out)
    assert r.returncode == 0, r.stderr
    return json.loads(Path(f"{out}.splice.json").read_text())


def _movmatrix_count(statements) -> int:
    return sum(1 for s in statements if is_movmatrix(s.code))


def _run_cpu(launch: Path, module: Path, out: Path) -> Path:
    relaunched = out.with_suffix(".launch")
    assert _rr("relaunch", launch, "--module", module, "-o", relaunched).returncode == 0
    r = _rr("run", relaunched, "--backend", "cpu", "-o", out)
    assert r.returncode == 0, r.stderr
    return out


def _identical(a: Path, b: Path) -> bool:
    rows = json.loads(_rr("compare", a, b, "--json").stdout)
    assert rows
    return all(row["identical"] for row in rows)


def _ptxas_clean(ptx: Path) -> None:
    if PTXAS:
        c = run_ptxas(ptx, "sm_90", "-v")
        assert c.returncode == 0, c.stderr
        assert "warning" not in c.stderr.lower(), c.stderr


def test_the_shipped_recipe_names_the_template_and_no_widening():
    from rr.splice.recipe import load_recipe

    r = load_recipe("direct")
    assert r.template == "direct" and r.phase == 8 and "identical_output" in r.checks
    assert (r.with_epilogue_before, r.with_epilogue_after) == (0, 0) and r.params["place"] == "staging"


# -- enc2's phase 8 -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def enc2(tmp_path_factory) -> Path:
    """The synthetic enc2 at 10×6 tokens (two windows, the second partial) and its unspliced run."""
    d = write_enc2(tmp_path_factory.mktemp("enc2") / "e", (10, 6))
    _run_cpu(d / "launch", d / "enc2.ptx", d / "ref.out")
    return d


def test_enc2_phase8_b_is_built_from_phase6s_accumulators_with_half_the_movmatrix(enc2, tmp_path):
    out = tmp_path / "d8.ptx"
    record = _splice(enc2 / "enc2.ptx", ENTRY, 8, out)
    d = record["direct"]
    assert [(o["role"], o["source"]) for o in d["operands"]] == [("B", "transpose(D of phase 6)")]
    before = linearise(parse_file(enc2 / "enc2.ptx").function(ENTRY))
    after = linearise(parse_file(out).function(ENTRY))
    first, n = record["cut"]["first_stmt"], record["inserted_statements"]
    inserted = after[first - 1:first - 1 + n]
    phase8 = [s for s in before[record["cut"]["first_stmt"] - 1:record["cut"]["last_stmt"]]
              if s.opcode.startswith("mma.")]
    # the mma are the original statements, in order, reading the registers they read
    assert [s.text for s in inserted if s.opcode.startswith("mma.")] == [s.text for s in phase8]
    b_registers = {s.uses[4 + i] for s in phase8 for i in (0, 1)}
    assert set(d["operands"][0]["built"]) == b_registers
    # the V transpose went: every movmatrix of the entry was staging, one per B register is left
    assert d["removed"]["ops"][next(k for k in d["removed"]["ops"] if k.startswith("movmatrix"))] \
        == _movmatrix_count(before)
    assert _movmatrix_count(after) == _movmatrix_count(inserted) == len(b_registers) == _movmatrix_count(before) // 2
    assert d["mapping"]["movmatrix_bytes"] == 4 * len(b_registers) and d["mapping"]["in_lane_bytes"] == 0
    # the cut is the removed staging plus what is kept verbatim; the inserted code the kept plus the added
    assert record["cut"]["statements"] == d["removed"]["statements"] + d["kept_in_cut"]["statements"]
    assert n == d["kept_in_cut"]["statements"] + d["added"]["instructions"]
    kept = Counter(s.text for s in before[first - 1:record["cut"]["last_stmt"]]) & Counter(s.text for s in inserted)
    assert sum(kept.values()) == d["kept_in_cut"]["statements"]
    _ptxas_clean(out)


def test_enc2_phase8_direct_splice_gives_a_byte_identical_frame_on_the_cpu(enc2, tmp_path):
    out = tmp_path / "d8.ptx"
    _splice(enc2 / "enc2.ptx", ENTRY, 8, out)
    assert _identical(enc2 / "ref.out", _run_cpu(enc2 / "launch", out, tmp_path / "d8.out"))
    # and the comparison sees a wrong byte order: the first B register's final prmt made the identity
    text = out.read_text()
    at = text.index("prmt.b32", text.index(MOVMATRIX))
    broken = tmp_path / "broken.ptx"
    broken.write_text(text[:at] + text[at:].replace("0x3120;", "0x3210;", 1))
    assert not _identical(enc2 / "ref.out", _run_cpu(enc2 / "launch", broken, tmp_path / "broken.out"))


def _recipe(path: Path, phase: int, **params) -> Path:
    path.write_text(f"name: {path.stem}\ndescription: x\ncut: {{phase: {phase}}}\n"
                    f"template: {{name: direct, params: {json.dumps(params)}}}\n")
    return path


@pytest.mark.parametrize("outline", ["phase", "construction"])
def test_outlined_direct_runs_the_phase_in_a_func_called_once_with_a_byte_identical_frame(enc2, tmp_path, outline):
    out = tmp_path / "o8.ptx"
    r = _rr("splice", enc2 / "enc2.ptx", "--entry", ENTRY, "--recipe", _recipe(tmp_path / "o.yaml", 8, outline=outline),
            "-o", out)
    assert r.returncode == 0, r.stderr
    record = json.loads(Path(f"{out}.splice.json").read_text())
    outlined = record["direct"]["outline"]
    module = parse_file(out)
    entry, func = linearise(module.function(ENTRY)), linearise(module.function(outlined["function"]))
    before = linearise(parse_file(enc2 / "enc2.ptx").function(ENTRY))
    phase8 = [s.text for s in before[record["cut"]["first_stmt"] - 1:record["cut"]["last_stmt"]]
              if s.opcode.startswith("mma.")]
    # the phase's mma, as they were, run in the function and nowhere else; the entry calls it once
    assert [s.text for s in func if s.opcode.startswith("mma.")] == phase8
    assert sum(s.opcode.startswith("mma.") for s in entry) == sum(s.opcode.startswith("mma.") for s in before) - len(phase8)
    assert [s.opcode for s in entry].count("call.uni") == 1
    # the construction (one movmatrix per B register) stays in the entry, or goes with the phase
    built = len(record["direct"]["operands"][0]["built"])
    assert (_movmatrix_count(entry), _movmatrix_count(func)) == ((built, 0) if outline == "phase" else (0, built))
    # both ranges end where the cut ends: what the function returns is what the cut leaves live
    assert outlined["what"] == outline and outlined["live_out"] == len(record["live_out"])
    assert _identical(enc2 / "ref.out", _run_cpu(enc2 / "launch", out, tmp_path / "o8.out"))
    _ptxas_clean(out)


def test_an_outline_that_is_not_phase_construction_or_none_is_refused(enc2, tmp_path):
    out = tmp_path / "bad.ptx"
    r = _rr("splice", enc2 / "enc2.ptx", "--entry", ENTRY, "--recipe", _recipe(tmp_path / "b.yaml", 8, outline="loop"),
            "-o", out)
    assert r.returncode == 2 and "params.outline: 'loop' is not one of none, phase, construction" in r.stderr
    assert not out.exists()


def test_enc2_phase7_packs_convert_each_accumulator_once(enc2, tmp_path):
    record = _splice(enc2 / "enc2.ptx", ENTRY, 7, tmp_path / "d7.ptx")
    d = record["direct"]
    assert {o["role"]: o["source"] for o in d["operands"]} == {"A": "pack(D of phase 5)", "B": "pack(D of phase 5)"}
    cvt = "cvt.rn.satfinite.e4m3x2.f16x2"
    assert d["added"]["ops"][cvt] == d["accumulators"]["registers"] < d["removed"]["ops"][cvt]
    assert "movmatrix" not in " ".join(d["added"]["ops"]) and d["mapping"]["movmatrix_bytes"] == 0
    assert _identical(enc2 / "ref.out", _run_cpu(enc2 / "launch", tmp_path / "d7.ptx", tmp_path / "d7.out"))


@pytest.mark.parametrize("phase", [1, 9])
def test_phases_without_an_accumulator_operand_are_refused_as_not_applicable_with_the_sources(enc2, tmp_path, phase):
    r = _rr("splice", enc2 / "enc2.ptx", "--entry", ENTRY, "--recipe", "direct", "--phase", phase, "-o", tmp_path / "x.ptx")
    assert r.returncode == 2 and r.stderr.startswith("rr: error: ")
    assert f"phase {phase}: A is " in r.stderr and "neither operand is a pack or transpose" in r.stderr
    assert list(tmp_path.iterdir()) == []
    # for the workflow: the refusal is the record
    r = _rr("splice", enc2 / "enc2.ptx", "--entry", ENTRY, "--recipe", "direct", "--phase", phase, "-o",
            tmp_path / "x.ptx", "--record")
    assert r.returncode == 0
    record = json.loads((tmp_path / "x.ptx.splice.json").read_text())
    assert record["status"] == "not_applicable" and "neither operand is a pack or transpose" in record["message"]
    assert "rr: the recipe does not apply: phase" in r.stderr


# -- nvcc-built kernels ---------------------------------------------------------------------------


def _e4m3_words(rng, words: int) -> np.ndarray:
    values = rng.normal(0, 1, (words, 32, 4)).astype(ml_dtypes.float8_e4m3fn)
    return values.view(np.uint8).view(np.uint32).reshape(-1)


def _kernel_launch(directory: Path, module: Path, entry: str, inputs: dict, out_words: int) -> Path:
    buffers = {**{k: (v, "in") for k, v in inputs.items()}, "out": (np.zeros(out_words * 32, np.uint32), "out")}
    launch = Launch(entry=entry, module="kernel.ptx", grid=(1, 1, 1), block=(32, 1, 1), layout="list",
                    fields=tuple(Field("buffer", buffer=n) for n in buffers),
                    buffers={n: Buffer(n, f"{n}.npy", role) for n, (_, role) in buffers.items()})
    write_launch(directory, launch, {n: a for n, (a, _) in buffers.items()}, module)
    return directory


KERNELS = {  # entry -> (input buffers and their words per lane, the phase-2 operand sources)
    "transpose_d": ({"a": 8, "b": 4, "a2": 4}, {"B": "transpose(D of phase 1)"}),
    "transpose_twice_d": ({"a": 8, "b": 4, "a2": 4}, {"B": "transpose(D of phase 1)"}),
    "pack_d": ({"a": 8, "b": 4}, {"A": "pack(D of phase 1)", "B": "pack(D of phase 1)"}),
}


@pytest.mark.parametrize("flags", [(), ("-DPACK_ASM",)], ids=["cuda_fp8.h", "asm"])
@pytest.mark.parametrize("entry", list(KERNELS))
def test_nvcc_kernels_with_accumulator_operands_stay_byte_identical(nvcc_ptx, tmp_path, entry, flags):
    ptx = nvcc_ptx("transpose_d", *flags)
    words, sources = KERNELS[entry]
    rng = np.random.default_rng(22)
    launch = _kernel_launch(tmp_path / "l", ptx, entry, {k: _e4m3_words(rng, n) for k, n in words.items()}, 4)
    ref = _run_cpu(launch, ptx, tmp_path / "ref.out")
    assert np.count_nonzero(np.load(ref / "out.npy"))  # the kernel computed something
    out = tmp_path / "d.ptx"
    record = _splice(ptx, entry, 2, out)
    d = record["direct"]
    assert {o["role"]: o["source"] for o in d["operands"]} == sources
    before = linearise(parse_file(ptx).function(entry))
    after = linearise(parse_file(out).function(entry))
    # movmatrix only where the layouts need it: a transpose of a transpose is the lanes' own data
    assert _movmatrix_count(after) == d["mapping"]["movmatrix_bytes"] // 4
    if entry == "transpose_twice_d":
        assert _movmatrix_count(after) == 0 < _movmatrix_count(before)
    _ptxas_clean(out)
    assert _identical(ref, _run_cpu(launch, out, tmp_path / "d.out"))


@pytest.mark.parametrize("outline", ["none", "phase", "construction"])
def test_direct_in_a_rolled_loop_with_a_branch_after_it_stays_byte_identical(nvcc_ptx, tmp_path, outline):
    # transpose_d_loop: the phases in a loop of a runtime trip count, results carried across its
    # back edge, a lane-dependent branch after it; the construction (and the outlined call) in the body
    ptx = nvcc_ptx("transpose_d")
    rng = np.random.default_rng(23)
    arrays = {"a": _e4m3_words(rng, 16), "b": _e4m3_words(rng, 4), "a2": _e4m3_words(rng, 4),
              "out": np.zeros(4 * 32, np.uint32)}
    launch = Launch(entry="transpose_d_loop", module="kernel.ptx", grid=(1, 1, 1), block=(32, 1, 1), layout="list",
                    fields=tuple(Field("buffer", buffer=n) for n in arrays) + (Field("scalar", 0, "int32", (3,)),),
                    buffers={n: Buffer(n, f"{n}.npy", "out" if n == "out" else "in") for n in arrays})
    write_launch(tmp_path / "l", launch, arrays, ptx)
    ref = _run_cpu(tmp_path / "l", ptx, tmp_path / "ref.out")
    assert np.count_nonzero(np.load(ref / "out.npy"))
    out = tmp_path / "d.ptx"
    r = _rr("splice", ptx, "--entry", "transpose_d_loop", "--recipe", _recipe(tmp_path / "o.yaml", 2, outline=outline),
            "-o", out)
    assert r.returncode == 0, r.stderr
    record = json.loads(Path(f"{out}.splice.json").read_text())
    assert [o["source"] for o in record["direct"]["operands"]] == ["transpose(D of phase 1)"]
    entry = linearise(parse_file(out).function("transpose_d_loop"))
    assert [s.opcode for s in entry].count("call.uni") == (outline != "none")
    assert ("outline" in record["direct"]) == (outline != "none")
    _ptxas_clean(out)
    assert _identical(ref, _run_cpu(tmp_path / "l", out, tmp_path / "d.out"))


def test_an_operand_whose_packs_are_also_stored_is_refused(nvcc_ptx, tmp_path):
    ptx = nvcc_ptx("transpose_d")
    r = _rr("splice", ptx, "--entry", "pack_d_stored", "--recipe", "direct", "--phase", 2, "-o", tmp_path / "x.ptx")
    assert r.returncode == 2 and "also read outside the operand" in r.stderr
    assert list(tmp_path.iterdir()) == []


def test_on_nvcc_built_kernels_a_phase_without_a_staged_operand_does_not_apply_and_a_refused_one_is_an_error(
        nvcc_ptx, tmp_path):
    # transpose_d_loop's phase 1 (in its rolled loop, lanes threadIdx.x & 31) reads A and B from
    # memory: not_applicable; pack_d_stored's phase 2 is a candidate whose packs are also stored:
    # refused, an error with its reason
    ptx = nvcc_ptx("transpose_d")
    for entry, phase, status, says in (("transpose_d_loop", 1, "not_applicable", "neither operand is a pack"),
                                       ("pack_d_stored", 2, "error", "also read outside the operand")):
        out = tmp_path / f"{entry}.ptx"
        r = _rr("splice", ptx, "--entry", entry, "--recipe", "direct", "--phase", phase, "--record", "-o", out)
        assert r.returncode == 0, r.stderr
        record = json.loads(Path(f"{out}.splice.json").read_text())
        assert record["status"] == status and says in record["message"], record
        assert out.read_text() == ""


def test_a_recipe_that_widens_the_cut_is_refused(nvcc_ptx, tmp_path):
    recipe = tmp_path / "wide.yaml"
    recipe.write_text("name: wide\ndescription: x\ncut: {phase: 2, with_epilogue_before: 4}\ntemplate: {name: direct}\n")
    r = _rr("splice", nvcc_ptx("transpose_d"), "--entry", "transpose_d", "--recipe", recipe, "-o", tmp_path / "x.ptx")
    assert r.returncode == 2 and "finds the statements it cuts from the description" in r.stderr


# -- the construction -----------------------------------------------------------------------------


def _ops(text: str):
    from rr.ptx import parse
    from rr.ptx.statements import operands

    body = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\n" + text + "\n\tret;\n}\n"
    s = linearise(parse(body).function("k"))[0]
    return s.code, operands(s)


def test_a_lane_mapping_no_movmatrix_gives_is_refused_as_not_bit_safe():
    # transpose, swap the halves, transpose again: bytes of lanes neither the own nor a transpose's
    values = {"%d": accumulator("%d")}
    for line in ("movmatrix.sync.aligned.m8n8.trans.b16 %x, %d;", "prmt.b32 %y, %x, %x, 0x1032;",
                 "movmatrix.sync.aligned.m8n8.trans.b16 %z, %y;", "cvt.rn.satfinite.e4m3x2.f16x2 %p, %z;",
                 "mov.b32 %b, {%p, %p};"):
        values.update(evaluate(*_ops(line), values.__getitem__, line))
    with pytest.raises(TemplateError, match="neither in-lane nor one movmatrix transpose.*not bit-safe"):
        build({"%b": values["%b"]}, _Builder(set()))


def test_the_construction_is_checked_against_the_original_bytes():
    from rr.templates.direct import check

    values = {"%d0": accumulator("%d0"), "%d1": accumulator("%d1")}
    for line in ("movmatrix.sync.aligned.m8n8.trans.b16 %x, %d0;", "movmatrix.sync.aligned.m8n8.trans.b16 %y, %d1;",
                 "cvt.rn.satfinite.e4m3x2.f16x2 %p, %x;", "cvt.rn.satfinite.e4m3x2.f16x2 %q, %y;",
                 "mov.b32 %b, {%p, %q};"):
        values.update(evaluate(*_ops(line), values.__getitem__, line))
    builder = _Builder(set())
    build({"%b": values["%b"]}, builder)
    check(builder.lines, {"%b": values["%b"]}, {"%d0", "%d1"})  # the emitted code is the staging's bytes
    wrong = [line.replace("%d1", "%d0") for line in builder.lines]
    with pytest.raises(TemplateError, match="differs from the original staging"):
        check(wrong, {"%b": values["%b"]}, {"%d0", "%d1"})


def test_placed_at_the_phase_the_construction_follows_the_rest_of_the_epilogue(nvcc_ptx, tmp_path):
    ptx = nvcc_ptx("transpose_d")
    recipe = tmp_path / "at_phase.yaml"
    recipe.write_text("name: at_phase\ndescription: x\ncut: {phase: 2}\ntemplate: {name: direct, params: {place: phase}}\n")
    out = tmp_path / "p.ptx"
    assert _rr("splice", ptx, "--entry", "transpose_d", "--recipe", recipe, "-o", out).returncode == 0
    record = json.loads(Path(f"{out}.splice.json").read_text())
    before = linearise(parse_file(ptx).function("transpose_d"))
    phase2 = [s for s in before[record["cut"]["first_stmt"] - 1:record["cut"]["last_stmt"]] if s.opcode.startswith("mma.")]
    assert record["direct"]["place"] == "phase" and record["direct"]["at_stmt"] == phase2[0].stmt
    after = linearise(parse_file(out).function("transpose_d"))
    inserted = after[record["cut"]["first_stmt"] - 1:record["cut"]["first_stmt"] - 1 + record["inserted_statements"]]
    tail = inserted[-(record["direct"]["added"]["instructions"] + len(phase2)):]
    assert [s.text for s in tail[-len(phase2):]] == [s.text for s in phase2]
    assert all(not s.opcode.startswith("mma.") for s in tail[:-len(phase2)])
    rng = np.random.default_rng(3)
    words, _ = KERNELS["transpose_d"]
    launch = _kernel_launch(tmp_path / "l", ptx, "transpose_d", {k: _e4m3_words(rng, n) for k, n in words.items()}, 4)
    assert _identical(_run_cpu(launch, ptx, tmp_path / "ref.out"), _run_cpu(launch, out, tmp_path / "p.out"))


def _splice_transposed(ptx: Path, entry: str, phase: int, out: Path) -> dict:
    r = _rr("splice", ptx, "--entry", entry, "--recipe", "direct_transposed", "--phase", phase, "-o", out)
    assert r.returncode == 0, r.stderr
    return json.loads(Path(f"{out}.splice.json").read_text())


def test_enc2_phase6_computed_transposed_removes_every_movmatrix_and_keeps_the_frame_byte_identical(enc2, tmp_path):
    # phase 8's B is transpose(D of phase 6): the V chain (phases 2, 4, 6: three k-steps from
    # zero) computed as Vᵀ = Wᵀ·Xᵀ ends in the 48 movmatrix destinations, which go; the same
    # number of mma, one mov of zero added, everything else in the cut as it was
    out = tmp_path / "t8.ptx"
    record = _splice_transposed(enc2 / "enc2.ptx", ENTRY, 8, out)
    d = record["direct"]
    assert d["construction"] == "transposed" and d["producer"]["phases"] == [2, 4, 6]
    assert (d["producer"]["chains"], d["producer"]["k_steps"]) == (24, 3)
    before = linearise(parse_file(enc2 / "enc2.ptx").function(ENTRY))
    after = linearise(parse_file(out).function(ENTRY))
    assert _movmatrix_count(before) == 48 and _movmatrix_count(after) == 0
    mma = lambda stmts: sum(1 for s in stmts if s.opcode.startswith("mma."))  # noqa: E731
    assert mma(after) == mma(before) and len(after) == len(before) - 48 + 1
    assert d["added"] == {"instructions": 73, "mma": 72, "mov": 1}
    _ptxas_clean(out)
    assert _identical(enc2 / "ref.out", _run_cpu(enc2 / "launch", out, tmp_path / "t8.out"))
    # and the comparison sees a wrong pairing: one transposed step's two B registers swapped
    text = out.read_text()
    at = text.index("mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16 \t")
    line = text[at:text.index("\n", at)]
    b = line.split("}, {")[2]
    first, second = b.split(", ")
    broken = tmp_path / "broken.ptx"
    broken.write_text(text.replace(line, line.replace(f"{{{b}}}", f"{{{second}, {first}}}"), 1))
    assert not _identical(enc2 / "ref.out", _run_cpu(enc2 / "launch", broken, tmp_path / "broken.out"))


def test_the_transposed_construction_does_not_apply_without_a_transposed_operand(enc2, tmp_path):
    # phase 7's A and B are packs of phase 5's D, not transposes: nothing to compute transposed
    r = _rr("splice", enc2 / "enc2.ptx", "--entry", ENTRY, "--recipe", "direct_transposed", "--phase", 7,
            "-o", tmp_path / "t7.ptx")
    assert r.returncode != 0 and "no operand is a transpose" in r.stderr and "pack(D of phase 5)" in r.stderr
    assert not (tmp_path / "t7.ptx").exists()


@pytest.mark.parametrize("flags", [(), ("-DPACK_ASM",)], ids=["cuda_fp8.h", "asm"])
@pytest.mark.parametrize("entry", ["transpose_d", "transpose_twice_d"])
def test_nvcc_kernels_with_a_transposed_operand_computed_transposed_stay_byte_identical(nvcc_ptx, tmp_path,
                                                                                       entry, flags):
    # phase 1 (2 m-tiles x 2 n-tiles from zero) computed as Dᵀ: its four movmatrix go (a second
    # transpose of their results stays: it does not read phase 1's accumulators)
    ptx = nvcc_ptx("transpose_d", *flags)
    words, _ = KERNELS[entry]
    rng = np.random.default_rng(23)
    launch = _kernel_launch(tmp_path / "l", ptx, entry, {k: _e4m3_words(rng, n) for k, n in words.items()}, 4)
    ref = _run_cpu(launch, ptx, tmp_path / "ref.out")
    assert np.count_nonzero(np.load(ref / "out.npy"))
    out = tmp_path / "t.ptx"
    d = _splice_transposed(ptx, entry, 2, out)["direct"]
    assert d["producer"] == {"phases": [1], "chains": 4, "k_steps": 1, "m_tiles": 2}
    before = linearise(parse_file(ptx).function(entry))
    after = linearise(parse_file(out).function(entry))
    assert _movmatrix_count(before) - _movmatrix_count(after) == 8  # one per D register of phase 1
    _ptxas_clean(out)
    assert _identical(ref, _run_cpu(launch, out, tmp_path / "t.out"))


def test_a_packed_operand_is_not_computed_transposed(nvcc_ptx, tmp_path):
    ptx = nvcc_ptx("transpose_d")
    r = _rr("splice", ptx, "--entry", "pack_d", "--recipe", "direct_transposed", "--phase", 2, "-o", tmp_path / "t.ptx")
    assert r.returncode != 0 and "no operand is a transpose" in r.stderr and "pack(D of phase 1)" in r.stderr


def test_a_chain_that_does_not_start_from_zero_is_refused_with_its_c(nvcc_ptx, tmp_path):
    # transpose_d's phase 1 with its C made 1.0 (f16x2 0x3C003C00) instead of zero: Dᵀ = Bᵀ·Aᵀ + Cᵀ
    # would need C transposed too, so the construction is refused, naming the chain and its C
    import re

    text = nvcc_ptx("transpose_d").read_text()
    entry = text.index(".entry transpose_d(")
    zero = re.compile(r"mov\.u32\s+(%r\d+), 0;").search(text, entry)
    assert zero and zero.group(1) in text[zero.end():text.index("movmatrix", zero.end())]
    ptx = tmp_path / "c_one.ptx"
    ptx.write_text(text[:zero.start()] + f"mov.u32 \t{zero.group(1)}, 1006648320;" + text[zero.end():])
    r = _rr("splice", ptx, "--entry", "transpose_d", "--recipe", "direct_transposed", "--phase", 2,
            "-o", tmp_path / "t.ptx")
    assert r.returncode != 0 and f"from C = {zero.group(1)}, {zero.group(1)}, not zero" in r.stderr, r.stderr
    assert not (tmp_path / "t.ptx").exists()


def test_two_n_tiles_of_other_b_types_are_not_joined_into_one_transposed_a(nvcc_ptx, tmp_path):
    # transpose_d's second phase-1 mma made .e4m3.e5m2: its B pair and the first's cannot fill one A
    text = nvcc_ptx("transpose_d").read_text()
    entry = text.index(".entry transpose_d(")
    mma = "mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16"
    second = text.index(mma, text.index(mma, entry) + 1)
    ptx = tmp_path / "mixed.ptx"
    ptx.write_text(text[:second] + mma.replace("e4m3.e4m3", "e4m3.e5m2") + text[second + len(mma):])
    r = _rr("splice", ptx, "--entry", "transpose_d", "--recipe", "direct_transposed", "--phase", 2,
            "-o", tmp_path / "t.ptx")
    assert r.returncode != 0 and "whose B pairs a transposed step joins" in r.stderr and "e4m3.e5m2" in r.stderr, \
        r.stderr
    assert not (tmp_path / "t.ptx").exists()


@pytest.mark.parametrize("extra, message", [("outline: phase", "is not outlined"), ("place: phase", "give no place")])
def test_the_transposed_construction_refuses_the_build_constructions_params(enc2, tmp_path, extra, message):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("name: r\ndescription: x\ncut: {phase: 8}\ntemplate:\n  name: direct\n  params:\n"
                      f"    construction: transposed\n    {extra}\n")
    r = _rr("splice", enc2 / "enc2.ptx", "--entry", ENTRY, "--recipe", recipe, "-o", tmp_path / "t.ptx")
    assert r.returncode != 0 and message in r.stderr, r.stderr
    assert not (tmp_path / "t.ptx").exists()


def test_the_transposed_construction_in_a_rolled_loop_with_a_branch_after_it_stays_byte_identical(nvcc_ptx,
                                                                                                 tmp_path):
    # transpose_d_loop (lanes threadIdx.x & 31, a runtime trip count, results carried across the back
    # edge, a lane-dependent branch after the loop): phase 1 computed transposed inside the body
    ptx = nvcc_ptx("transpose_d")
    rng = np.random.default_rng(29)
    arrays = {"a": _e4m3_words(rng, 16), "b": _e4m3_words(rng, 4), "a2": _e4m3_words(rng, 4),
              "out": np.zeros(4 * 32, np.uint32)}
    launch = Launch(entry="transpose_d_loop", module="kernel.ptx", grid=(1, 1, 1), block=(32, 1, 1), layout="list",
                    fields=tuple(Field("buffer", buffer=n) for n in arrays) + (Field("scalar", 0, "int32", (3,)),),
                    buffers={n: Buffer(n, f"{n}.npy", "out" if n == "out" else "in") for n in arrays})
    write_launch(tmp_path / "l", launch, arrays, ptx)
    ref = _run_cpu(tmp_path / "l", ptx, tmp_path / "ref.out")
    assert np.count_nonzero(np.load(ref / "out.npy"))
    out = tmp_path / "t.ptx"
    d = _splice_transposed(ptx, "transpose_d_loop", 2, out)["direct"]
    assert d["producer"]["phases"] == [1] and d["removed"]["ops"]
    assert _movmatrix_count(linearise(parse_file(out).function("transpose_d_loop"))) == 0
    _ptxas_clean(out)
    assert _identical(ref, _run_cpu(tmp_path / "l", out, tmp_path / "t.out"))
