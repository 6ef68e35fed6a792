"""Fingerprints of the code each pipeline stage runs, so Snakemake reruns exactly the stages whose
code changed (it does not track the modules a command imports): a rule passes its stage's
fingerprint as a param, and a changed param reruns the job."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent

# the rr modules (files or subpackages) each stage's command runs
STAGES = {
    "corpus": ("corpus", "io.py", "cli.py"),
    "synth": ("synth", "corpus", "numerics.py", "io.py", "cli.py"),
    "linearise": ("ptx", "io.py", "cli.py"),
    "describe": ("ptx", "describe", "io.py", "cli.py"),
    "splice": ("ptx", "describe", "splice", "templates", "data", "io.py", "cli.py"),
    "compile": ("run/compile.py", "corpus", "io.py", "cli.py"),
    "run": ("run", "numerics.py", "corpus/sample.py", "io.py", "cli.py"),
    "collect": ("results", "run/compile.py", "splice/recipe.py", "data", "corpus/fnv.py", "io.py", "cli.py"),
    "report": ("results", "run/compile.py", "splice/recipe.py", "io.py", "cli.py"),
}


def fingerprint(stage: str, root: str | Path = PACKAGE) -> str:
    """SHA-1 (12 hex digits) over the sources a stage runs; stage "all" is the whole package."""
    root = Path(root)
    h = hashlib.sha1()
    for part in STAGES[stage] if stage != "all" else (".",):
        path = root / part
        files = sorted(p for p in path.rglob("*") if p.suffix in (".py", ".ptx", ".yaml")) if path.is_dir() else [path]
        for f in files:
            h.update(str(f.relative_to(root)).encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:12]


def import_rr_from(checkout: str | Path) -> None:
    """Make every job this process starts (`python3 -P -m rr …`) import rr from `checkout`, the code
    `fingerprint` covers, in whichever environment runs the job: the active one, or a rule's conda
    env, which has rr's dependencies but not rr. (`-P` keeps the job's working directory off
    sys.path: with `snakemake -d DIR` an `rr/` in DIR would come first.)"""
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(checkout), os.environ.get("PYTHONPATH")) if p)

