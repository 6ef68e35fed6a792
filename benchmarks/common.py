"""What the benchmark scripts share: running the `rr` CLI of this checkout."""

from __future__ import annotations

import subprocess
import sys


def rr(*args, check: bool = True) -> subprocess.CompletedProcess:
    """`python -m rr.cli ARGS`; exits with its output when it fails and `check` is set."""
    r = subprocess.run([sys.executable, "-m", "rr.cli", *map(str, args)], capture_output=True, text=True,
                       check=False)
    if check and r.returncode:
        sys.exit(f"rr {' '.join(map(str, args))}: exit {r.returncode}\n{r.stdout}{r.stderr}")
    return r
