"""What the benchmark scripts share: running the `rr` CLI of this checkout, and their work directory."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path


def rr(*args, check: bool = True) -> subprocess.CompletedProcess:
    """`python -m rr.cli ARGS`; exits with its output when it fails and `check` is set."""
    r = subprocess.run([sys.executable, "-m", "rr.cli", *map(str, args)], capture_output=True, text=True,
                       check=False)
    if check and r.returncode:
        sys.exit(f"rr {' '.join(map(str, args))}: exit {r.returncode}\n{r.stdout}{r.stderr}")
    return r


def work_dir(out: str | None) -> Path:
    """`--out` when given (created if need be), else a new temporary directory."""
    work = Path(out) if out else Path(tempfile.mkdtemp())
    work.mkdir(parents=True, exist_ok=True)
    return work
