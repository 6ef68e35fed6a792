"""Prints a sweep's rows (results/*_phase*.parquet of a workflow directory) as one table, a line
per layer, phase and recipe: what the splice, the capture and the timing said — what
benchmarks/own_engine/run.sh shows of each sweep."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

COLUMNS = ["layer", "phase", "recipe", "splice_status", "compile_status", "capture_status", "frame_identical",
           "timing_status", "ratio", "noise", "arch"]


def main(work: str) -> int:
    files = sorted(f for f in (Path(work) / "results").glob("*.parquet") if f.name not in ("summary.parquet",
                                                                                               "composed.parquet"))
    if not files:
        print(f"{work}: no rows")
        return 1
    rows = pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)
    shown = rows[[c for c in COLUMNS if c in rows.columns]]
    with pd.option_context("display.width", 200, "display.max_rows", 500, "display.max_colwidth", 40):
        print(shown.to_string(index=False))
    print(f"{len(rows)} rows from {len(files)} cells")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
