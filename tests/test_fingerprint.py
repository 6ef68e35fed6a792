"""Each pipeline stage's code fingerprint changes when, and only when, code that stage runs changes:
the stage is the `rr` command module its rules run, the code is that module's import closure as
the sources say it, and an edit that changes no code (a comment, a docstring) reruns nothing. So
an edit of the analysis module the interpreter shares (rr.describe.kernel) reruns the reference
frame's capture with the spliced ones, and an edit of the command-line dispatcher reruns no stage."""

from __future__ import annotations

import modulefinder
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rr.fingerprint import STAGES, closure, fingerprint

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "rr"


@pytest.fixture
def copy(tmp_path) -> Path:
    """A copy of the rr package to edit."""
    dest = tmp_path / "rr"
    shutil.copytree(PACKAGE, dest, ignore=shutil.ignore_patterns("__pycache__"))
    fingerprint("all")  # the package's own cache of what its modules import, made or brought up to date...
    (dest / "__pycache__").mkdir()  # ...and taken along: parsing the whole package again takes a second
    shutil.copy(PACKAGE / "__pycache__" / "rr-fingerprint.json", dest / "__pycache__")
    return dest


def edit(path: Path, line: str = "_RR_TEST_EDIT = 1") -> None:
    with path.open("a") as f:
        f.write(f"\n{line}\n")


def changed_by(copy: Path, relative: str, line: str = "_RR_TEST_EDIT = 1") -> set[str]:
    before = {stage: fingerprint(stage, copy) for stage in STAGES}
    target = copy / relative
    if target.suffix == ".py":
        edit(target, line)
    else:
        target.write_text(target.read_text() + "\n# an edit\n")
    return {stage for stage in STAGES if fingerprint(stage, copy) != before[stage]}


def test_the_copy_has_the_packages_fingerprints(copy):
    assert {s: fingerprint(s, copy) for s in STAGES} == {s: fingerprint(s) for s in STAGES}


# (the file edited, the stages whose code it is: what each stage's command imports, directly or not)
# (compose makes sub-compositions, runs and times the composed frame and writes the report's page:
# the splicer's, the run stage's and the report's code are its own too)
EDITS = [
    # the PTX front end: every stage that reads a module (the corpus's index names its entries)
    ("corpus/fatbin.py", set(STAGES)),
    ("ptx/parser.py", set(STAGES)),
    # the cpu backend lays out the parameter space as the analysed kernel does (a frame's layers
    # run on it too): run and launch with describe and splice; collect reads the descriptor as
    # JSON and does not; the operand provenance is describe's and the templates' alone
    ("describe/kernel.py", {"describe", "splice", "run", "launch", "compose"}),
    ("describe/provenance.py", {"describe", "splice", "compose"}),
    ("splice/assemble.py", {"splice", "compose"}),
    ("templates/regen.py", {"splice", "compose"}),
    # ptxas's figures: the compile itself, and the columns collect and the report read of them
    ("run/compile.py", {"compile", "collect", "report", "compose"}),
    # launch directories: made by `rr launch`, by a synthetic layer's and the sample's own, read by run
    ("run/launch.py", {"corpus", "synth", "launch", "run", "compose"}),
    ("run/frame.py", {"launch", "run", "compose"}),
    ("run/cpu/semantics.py", {"run", "launch", "compose"}),
    # the synthetic layers' builder: the engine binary and the layers' launches
    ("synth/swin.py", {"synth", "launch"}),
    ("results/report.py", {"report", "compose"}),
    # the command-line dispatcher is no stage's code: no stage reruns for it
    ("cli/main.py", set()),
    ("data/recipes/regen.yaml", {"splice", "run", "collect", "report", "compose"}),
    ("data/launch.schema.json", {"corpus", "synth", "launch", "run", "compose"}),
]


@pytest.mark.parametrize("relative, stages", EDITS, ids=[e[0] for e in EDITS])
def test_an_edit_changes_exactly_the_stages_whose_code_it_is(copy, relative, stages):
    assert changed_by(copy, relative) == stages


@pytest.mark.parametrize("line", ["# a comment", ""], ids=["comment", "blank"])
def test_a_comment_or_a_blank_line_changes_no_fingerprint(copy, line):
    assert changed_by(copy, "run/cpu/semantics.py", line) == set()


def test_a_docstring_changes_no_fingerprint(copy):
    target = copy / "splice" / "assemble.py"
    text = target.read_text()
    target.write_text(text.replace('"""Assembling a spliced module', '"""Assembling — reworded — a spliced module', 1))
    assert target.read_text() != text
    before = fingerprint("splice", PACKAGE)
    assert fingerprint("splice", copy) == before


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_the_closure_holds_every_rr_module_pythons_own_finder_sees(stage):
    """modulefinder reads the imports of the compiled code (function-local ones included): an
    independent count of what the stage's command imports. The closure holds all of it, and
    more only where rr names a module as text (rr.ptx's lazy names, `-m rr.run.child`)."""
    finder = modulefinder.ModuleFinder(path=[str(ROOT)])  # rr's modules only: the rest is no stage's code
    finder.run_script(str(PACKAGE / STAGES[stage]))
    seen = {Path(m.__file__).resolve() for name, m in finder.modules.items()
            if name.startswith("rr.") and m.__file__ and Path(m.__file__).resolve().is_relative_to(PACKAGE)}
    files = set(closure(STAGES[stage]))
    parents = {f for f in seen if f.name == "__init__.py"}  # modulefinder counts the packages above a module
    assert seen - parents <= files
    assert len(seen) >= 5


def test_the_workflow_reruns_the_reference_capture_when_the_interpreter_changes(tmp_path):
    """The bug this design fixes: the run stage's code did not cover the PTX front end and the
    analysis the cpu backend imports, so after such an edit the spliced frames came from the new
    interpreter and the reference they are compared with from the old one."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    for name in ("Snakefile", "workflow", "config", "profiles"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, checkout / name)
    shutil.copytree(PACKAGE, checkout / "rr", ignore=shutil.ignore_patterns("__pycache__"))
    cfg = yaml.safe_load((checkout / "config/config.yaml").read_text())
    cfg.update(backend="cpu", cpu_frame="128x128", recipes=["isolate"], phases=[8], layers=["enc2"])
    (checkout / "config/config.yaml").write_text(yaml.safe_dump(cfg))

    def snakemake(*args):
        r = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", *args], cwd=checkout,
                           capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, r.stderr[-3000:]
        return r.stdout + r.stderr

    def planned() -> dict[str, int]:
        out = snakemake("-n", "results/enc2_phase8.parquet")
        return {line.split()[0]: int(line.split()[1]) for line in out.splitlines()
                if len(line.split()) == 2 and line.split()[1].isdigit() and line.split()[0] != "total"}

    def ran() -> set[str]:
        out = snakemake("results/enc2_phase8.parquet")
        return set(re.findall(r"^(?:local)?(?:rule|checkpoint) (\w+):$", out, flags=re.M))

    snakemake("results/enc2_phase8.parquet")
    assert planned() == {}
    edit(checkout / "rr/cli/main.py", "# the dispatcher, commented")
    edit(checkout / "rr/cli/main.py", "_RR_TEST_EDIT = 1")
    edit(checkout / "rr/run/cpu/semantics.py", "# a comment in the interpreter")
    assert planned() == {}
    edit(checkout / "rr/describe/kernel.py")
    # (a dry run cannot list what follows the describe checkpoint: the run itself says what reran)
    jobs = ran()
    assert {"describe", "capture_frame", "splice", "collect"} <= jobs, jobs
    assert not jobs & {"synth_engine", "extract", "linearise", "compile_reference"}, jobs
