"""Each pipeline stage's code fingerprint changes when, and only when, code that stage runs
changes — so editing the splicer reruns splices and nothing upstream."""

from __future__ import annotations

import shutil
from pathlib import Path

from rr.fingerprint import STAGES, fingerprint

PACKAGE = Path(__file__).resolve().parents[1] / "rr"


def test_editing_the_splicer_changes_only_the_splice_fingerprint(tmp_path):
    copy = tmp_path / "rr"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    before = {stage: fingerprint(stage, copy) for stage in STAGES}
    assert before == {stage: fingerprint(stage) for stage in STAGES}  # the copy is the package
    with (copy / "splice" / "assemble.py").open("a") as f:
        f.write("\n# an edit\n")
    after = {stage: fingerprint(stage, copy) for stage in STAGES}
    assert [s for s in STAGES if before[s] != after[s]] == ["splice"]
    with (copy / "ptx" / "parser.py").open("a") as f:
        f.write("\n# an edit\n")
    changed = {s for s in STAGES if fingerprint(s, copy) != after[s]}
    assert changed == {"linearise", "describe", "splice"}
