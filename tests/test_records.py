"""rr.records, the one contract between the stages: a record of every kind round-trips through the
one writer and the one reader; a record of the wrong shape is `FILE: KEY: reason`; a failure's
record takes its status from its exception; no status word or record file name is spelled outside
rr/records.py (so a typo cannot turn a failure into "not measured"); and `rr relaunch` has no
hidden input — a probe splice is relaunched with the splice record it is given, and without one is
refused saying so, though the record lies beside the module."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import numpy as np
import pytest

from conftest import PTXAS, needs_ptxas
from rr.records import (COMPARE, COMPILE, DESCRIPTOR, KINDS, LAUNCH_ERROR, LAYER_TIMING, RUN, SPLICE, TIMING, Status,
                        failure, read_own_record, read_record, record_text, write_record)
from rr.run.launch import LaunchError, read_launch
from rr.validation import InvalidInput
from test_hostile_cli import SAMPLE, SAMPLE_ENTRY, is_error, rr, rr_process

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> Path:
    """The sample kernel as the stages leave it: its descriptor, the probe splice of phase 1 in a
    cell (<cell>/probe.ptx and its record), the unspliced launch (`ref`) and its cpu run (`ref.out`)."""
    d = tmp_path_factory.mktemp("sample")
    for argv in (("describe", SAMPLE, "--entry", SAMPLE_ENTRY, "-o", d),
                 ("splice", SAMPLE, "--entry", SAMPLE_ENTRY, "--recipe", "probe", "--phase", 1, "-o",
                  d / "cell" / "probe.ptx"),
                 ("sample-launch", SAMPLE, "-o", d / "ref"),
                 ("run", d / "ref", "--backend", "cpu", "-o", d / "ref.out")):
        r = rr_process(*argv)
        assert r.returncode == 0, r.stderr
    return d


@pytest.fixture(scope="module")
def measured(sample) -> Path:
    """The probe splice measured on the cpu backend, its splice record declared: the cell's records."""
    cell = sample / "cell"
    r = rr_process("measure", sample / "ref", "--module", cell / "probe.ptx", "--splice-record",
                   SPLICE.in_cell(cell, "probe"), "--reference", sample / "ref.out", "--recipe", "probe",
                   "--backend", "cpu", "-o", cell)
    assert r.returncode == 0, r.stderr
    return cell


def _written(sample: Path, measured: Path) -> dict:
    """Each kind's records, ok and failed: as a stage wrote them where one runs here (a file), else
    as their stages build them (compile needs ptxas, timing a GPU)."""
    from rr.cli.common import NoPhases
    from rr.run.compile import CompileResult, FunctionReport
    from rr.splice.assemble import SpliceError

    figures = {SAMPLE_ENTRY: FunctionReport(SAMPLE_ENTRY, 40, 1, 0, 0, 0, 0, {"cmem[0]": 392})}
    timing = {"status": Status.OK, "backend": "cuda", "reference": {"median_ms": 1.0},
              "other": {"median_ms": 1.1, "min_ms": 1.05, "max_ms": 1.2, "samples": 40}, "ratio": 1.1,
              "ratio_noise": 0.004, "device": {"name": "NVIDIA H200", "driver_version": "570.1"}}
    throttled = failure(Status.THROTTLED, "every sample throttled", backend="cuda")
    return {
        DESCRIPTOR: [DESCRIPTOR.within(sample),
                     {"entry": SAMPLE_ENTRY, **failure(NoPhases("no mma")), "phases": [], "epilogues": []}],
        SPLICE: [SPLICE.in_cell(measured, "probe"), failure(SpliceError("phase 9 does not exist"))],
        COMPILE: [CompileResult(Status.OK, "", "sm_90", PTXAS, 12.5, figures).as_dict(),
                  CompileResult(Status.NO_PTXAS, "ptxas not found", "sm_90", None, None).as_dict()],
        RUN: [RUN.in_cell(measured, "probe"), failure(Status.FAULT, "illegal address", backend="cuda")],
        COMPARE: [COMPARE.in_cell(measured, "probe"), []],
        TIMING: [timing, throttled],
        LAYER_TIMING: [timing, failure(Status.TIMEOUT, "timing did not finish; its process was killed")],
        LAUNCH_ERROR: [failure(LaunchError("k.ptx: an empty module file", Status.NO_MODULE))],
    }


@pytest.mark.parametrize("kind", KINDS, ids=[k.name for k in KINDS])
def test_a_record_of_each_kind_round_trips_through_the_writer_and_the_reader(sample, measured, tmp_path, kind):
    for given in _written(sample, measured)[kind]:
        if isinstance(given, Path):  # what the stage wrote: the one writer writes it byte for byte again
            record = json.loads(given.read_text())
            assert record_text(record) == given.read_text()
        else:
            record = given
        write_record(tmp_path / kind.file, record)
        assert read_record(tmp_path / kind.file, kind) == json.loads(json.dumps(record))


def test_a_failure_record_is_written_as_run_records_always_were():
    failed = failure(Status.BAD_LAUNCH, "no such launch", backend="cpu")
    assert list(failed) == ["status", "backend", "message"]  # the order run records have always had
    assert record_text(failed) == ('{\n  "status": "bad_launch",\n  "backend": "cpu",\n'
                                   '  "message": "no such launch"\n}\n')


WRONG_SHAPES = [  # (kind, content, what the message says after FILE:)
    (RUN, [{"status": "ok"}], "(top level): [{'status': 'ok'}] is not of type 'object'"),
    (RUN, {"status": "fault"}, "(top level): 'message' is a required property"),
    (COMPILE, {"status": "ok", "message": "", "arch": "sm_90", "functions": {}}, "'compile_ms' is a required property"),
    (RUN, {"status": "faulted", "message": "x"}, "status: 'faulted' is not one of ['ok', 'not_run', "),
    (SPLICE, {"status": "OK"}, "status: 'OK' is not one of ['ok', "),
    (TIMING, {"status": "ok", "ratio": "fast"}, "ratio: 'fast' is not of type 'number'"),
    (LAUNCH_ERROR, {"status": "no_launch"}, "(top level): 'message' is a required property"),
    (DESCRIPTOR, {"entry": 5, "phases": []}, "entry: 5 is not of type 'string'"),
]


@pytest.mark.parametrize("kind,content,message", WRONG_SHAPES, ids=[f"{k.name}-{m[:28]}" for k, _, m in WRONG_SHAPES])
def test_a_record_of_the_wrong_shape_is_an_error_naming_the_file_and_the_key(tmp_path, kind, content, message):
    path = tmp_path / kind.file
    path.write_text(json.dumps(content))
    with pytest.raises(InvalidInput) as e:
        read_record(path, kind)
    assert str(e.value).startswith(f"{path}: ") and message in str(e.value), e.value


def test_rr_says_which_file_and_key_of_a_cell_is_wrong(sample, measured, tmp_path, capsys):
    import shutil

    cell = tmp_path / "cell"
    shutil.copytree(measured, cell)
    RUN.in_cell(cell, "probe").write_text(json.dumps({"status": "crashed", "message": "x"}))
    code, _, err = rr(capsys, "collect", cell, "--layer", "sample", "--phase", 1, "--recipes", "probe", "--descriptor",
                      DESCRIPTOR.within(sample), "--module", SAMPLE, "-o", tmp_path / "c.parquet")
    assert is_error(code, err, f"rr: error: {RUN.in_cell(cell, 'probe')}: status: 'crashed' is not one of"), err
    assert not (tmp_path / "c.parquet").exists()


def test_a_launch_directory_standing_for_no_launch_is_read_through_the_reader(tmp_path):
    LAUNCH_ERROR.within(tmp_path).write_text(json.dumps({"status": "gone", "message": "x"}))
    with pytest.raises(LaunchError, match=f"{LAUNCH_ERROR.within(tmp_path)}: status: 'gone' is not one of"):
        read_launch(tmp_path)
    write_record(LAUNCH_ERROR.within(tmp_path), failure(Status.NO_LAUNCH, "no launch for layer x"))
    with pytest.raises(LaunchError) as e:
        read_launch(tmp_path)
    assert e.value.status == Status.NO_LAUNCH and str(e.value).endswith(": no launch for layer x")


def test_the_writer_refuses_a_status_that_is_no_status_word(tmp_path):
    with pytest.raises(ValueError, match="'okay' is not a valid Status"):
        write_record(tmp_path / "run.json", {"status": "okay", "message": ""})
    assert not (tmp_path / "run.json").exists()


def test_a_failure_record_takes_its_status_from_its_exception():
    from rr.cli.common import NoPhases
    from rr.splice.assemble import SpliceError
    from rr.splice.recipe import RecipeError
    from rr.synth.inputs import NoLaunch

    for error, status in ((SpliceError("phase 9: no such phase"), Status.ERROR),
                          (SpliceError("phase 2: no pack", Status.NOT_APPLICABLE), Status.NOT_APPLICABLE),
                          (RecipeError("x.yaml: not a recipe"), Status.ERROR),
                          (LaunchError("launch.json: grid: bad"), Status.BAD_LAUNCH),
                          (NoLaunch("no launch for layer x"), Status.NO_LAUNCH),
                          (NoPhases("no mma"), Status.NO_PHASES)):
        assert failure(error) == {"status": status, "message": str(error)}


def test_every_status_word_has_a_meaning_and_docs_formats_names_it():
    formats = (ROOT / "docs" / "formats.md").read_text()
    for status in Status:
        assert status.meaning and f"`{status}`" in formats, status


# ---- the contract holds: status words and record names are spelled in rr/records.py only -------

WORDS = {s.value for s in Status}
RECORD_FILE = re.compile(r"(^|[./])(ptx\.splice|splice|cubin|run|compare|timing|layer_timing|launch\.error|descriptor)"
                         r"\.json$")


def _spelled(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, text) of each string constant in `tree` that is a status word or a record file's name,
    but for docstrings, dict keys and subscripts (`s["throttled"]`: a key that is no status), and
    the left side of `in` (`"error" in line`: a substring, not a status)."""
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body and \
                isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant):
            skip.add(id(node.body[0].value))
        elif isinstance(node, ast.Dict):
            skip.update(id(k) for k in node.keys if k is not None)
        elif isinstance(node, ast.Subscript):
            skip.add(id(node.slice))
        elif isinstance(node, ast.Compare) and isinstance(node.ops[0], (ast.In, ast.NotIn)):
            skip.add(id(node.left))
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
            and (node.value in WORDS or RECORD_FILE.search(node.value))]


def test_no_status_word_or_record_file_name_is_spelled_outside_rr_records():
    found = []
    for path in sorted((ROOT / "rr").rglob("*.py")):
        if path != ROOT / "rr" / "records.py":
            found += [f"{path.relative_to(ROOT)}:{line}: {text!r}"
                      for line, text in _spelled(ast.parse(path.read_text()))]
    for path in sorted((ROOT / "rr" / "data").glob("*.schema.json")):  # rr.records puts the words in
        text = path.read_text()
        found += [f"{path.relative_to(ROOT)}: {word!r}" for word in WORDS if f'"{word}"' in text]
    for path in [ROOT / "Snakefile", *sorted((ROOT / "workflow" / "rules").glob("*.smk"))]:
        for i, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#")[0]
            found += [f"{path.relative_to(ROOT)}:{i}: {m.group()}" for m in re.finditer(r"[\"'][^\"']*[\"']", code)
                      if m.group()[1:-1] in WORDS or RECORD_FILE.search(m.group()[1:-1])]
    assert not found, "status words or record file names spelled outside rr/records.py:\n" + "\n".join(found)


def test_the_contract_test_finds_a_status_word_and_a_record_name_where_they_are_spelled():
    tree = ast.parse('"""ok"""\nif r["status"] != "ok": pass\nd = {"fault": 1, "s": "fault"}\n'
                     'x = f"{cell}/run.json"\np = f"{out}.splice.json"\nif "error" in line: pass\n'
                     'help = "X.cubin (the report goes to X.cubin.json)"\n')
    assert sorted(_spelled(tree)) == [(2, "ok"), (3, "fault"), (4, "/run.json"), (5, ".splice.json")]


# ---- rr relaunch: the probe splice's record is a declared input, never looked for -------------

def _probe_module(sample: Path, kind: str) -> Path:
    module = sample / "cell" / "probe.ptx"
    if kind == "cubin":
        r = rr_process("compile", module, "-o", sample / "cell" / "probe.cubin")
        assert r.returncode == 0, r.stderr
        module = sample / "cell" / "probe.cubin"
    return module


@pytest.mark.parametrize("kind", ["ptx", pytest.param("cubin", marks=needs_ptxas)])
def test_a_probe_splice_is_relaunched_with_its_declared_record(sample, tmp_path, capsys, kind):
    module = _probe_module(sample, kind)
    record = SPLICE.in_cell(sample / "cell", "probe")
    code, _, err = rr(capsys, "relaunch", sample / "ref", "--module", module, "--splice-record", record,
                      "-o", tmp_path / "L")
    assert code == 0, err
    words = read_record(record, SPLICE)["probe"]["words_per_thread"]
    launch = read_launch(tmp_path / "L")
    assert [f.buffer for f in launch.extra] == ["probe"] and launch.parameters == 5
    assert np.load(tmp_path / "L" / "probe.npy").shape == (1, 32, words)


@pytest.mark.parametrize("kind", ["ptx", pytest.param("cubin", marks=needs_ptxas)])
def test_a_probe_splice_relaunched_without_its_record_is_refused_saying_so(sample, tmp_path, capsys, kind):
    module = _probe_module(sample, kind)
    assert SPLICE.in_cell(sample / "cell", "probe").is_file()  # beside the module, and not looked for
    code, _, err = rr(capsys, "relaunch", sample / "ref", "--module", module, "-o", tmp_path / "L")
    assert is_error(code, err, f"{module}: its entry {SAMPLE_ENTRY} takes 5 parameters, the launch passes 4: a probe "
                    "splice's module takes its probe buffer as one parameter more", "--splice-record"), err
    assert not (tmp_path / "L").exists()
    code, _, err = rr(capsys, "relaunch", sample / "ref", "--module", module, "--record", "-o", tmp_path / "R")
    assert code == 0 and read_record(LAUNCH_ERROR.within(tmp_path / "R"), LAUNCH_ERROR)["status"] == Status.BAD_LAUNCH


def test_a_module_that_takes_no_more_parameters_than_the_launch_needs_no_record(sample, tmp_path, capsys):
    code, _, err = rr(capsys, "relaunch", sample / "ref", "--module", SAMPLE, "-o", tmp_path / "L")
    assert code == 0, err
    assert read_launch(tmp_path / "L").extra == ()
    code, _, err = rr(capsys, "relaunch", sample / "ref", "--splice-record", SPLICE.in_cell(sample / "cell", "probe"),
                      "-o", tmp_path / "M")
    assert is_error(code, err, "--splice-record is the record of --module's splice: it goes with --module"), err


def test_measure_runs_a_probe_splice_with_the_declared_record_and_records_its_absence(sample, measured, tmp_path):
    run = read_record(RUN.in_cell(measured, "probe"), RUN)
    assert run["status"] == Status.OK
    assert all(b["identical"] for b in read_record(COMPARE.in_cell(measured, "probe"), COMPARE))
    r = rr_process("measure", sample / "ref", "--module", measured / "probe.ptx", "--reference", sample / "ref.out",
                   "--recipe", "probe", "--backend", "cpu", "--record", "-o", tmp_path)
    assert r.returncode == 0, r.stderr
    undeclared = read_record(RUN.in_cell(tmp_path, "probe"), RUN)
    assert undeclared["status"] == Status.BAD_LAUNCH and "--splice-record" in undeclared["message"], undeclared


@needs_ptxas
def test_the_parameter_count_of_a_cubin_is_read_from_its_attributes(sample):
    from rr.run.launch import entry_parameters

    cubin = _probe_module(sample, "cubin").read_bytes()
    assert entry_parameters(cubin, "cubin", SAMPLE_ENTRY) == 5
    assert entry_parameters(cubin, "cubin", "no_such_kernel") is None
    assert entry_parameters(cubin[:200], "cubin", SAMPLE_ENTRY) is None  # headers that point past the file
    assert entry_parameters(SAMPLE.read_bytes(), "ptx", SAMPLE_ENTRY) == 4


def test_a_child_checks_the_record_it_writes_and_its_parent_reads_it_without_the_schema(tmp_path):
    # the child (rr.run.child) writes with its kind: what the definition refuses is refused there
    with pytest.raises(InvalidInput, match="the run record being written: backend: 3 is not of type"):
        record_text({"status": "ok", "backend": 3}, RUN)
    good = tmp_path / "run.json"
    good.write_text(record_text({"status": "ok", "backend": "cpu"}, RUN))
    assert read_own_record(good, RUN) == {"status": "ok", "backend": "cpu"}
    # the parent's light read still refuses what is no record of rr's
    for name, text in (("list.json", "[1]"), ("word.json", '{"status": "fine"}'), ("none.json", "{}")):
        (tmp_path / name).write_text(text)
        with pytest.raises(InvalidInput, match=f"{name}: not a run record"):
            read_own_record(tmp_path / name, RUN)
