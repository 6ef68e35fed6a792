"""Describe benchmark: `rr spec` of each of the synthetic engine's eleven layers from a corpus
directory, as people run it (a fresh `python -m rr` process each time: start-up, the corpus index,
parse, linearise, phases, operand provenance, epilogues, parameters, the table or the JSON).
Goal (issue 15): under 1 s per layer.

    python benchmarks/spec_layers.py [--runs 5] [--json] [--build build/bench]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from rr.synth.family import NAMES


def corpus(build: Path) -> Path:
    """The engine binary's corpus (`rr synth engine`, `rr extract`), made once under `build` (again
    when it lacks entries.json: a corpus of older rr, whose entries are found through pyarrow)."""
    out = build / "engine_corpus"
    if not (out / "entries.json").is_file():
        build.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "rr", "synth", "engine", "-o", str(build / "engine.bin")], check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run([sys.executable, "-m", "rr", "extract", str(build / "engine.bin"), "-o", str(out)], check=True,
                       stdout=subprocess.DEVNULL)
    return out


def time_spec(source: Path, entry: str, runs: int, as_json: bool) -> tuple[list[float], str]:
    times, out = [], ""
    for _ in range(runs):
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "rr", "spec", str(source), "--entry", entry,
                            *(["--json"] if as_json else [])], check=True, capture_output=True, text=True)
        times.append(time.perf_counter() - t0)
        out = r.stdout
    return times, out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--json", action="store_true", help="time `rr spec --json` (default: the table)")
    p.add_argument("--build", type=Path, default=Path("build/bench"))
    a = p.parse_args()
    source = corpus(a.build)
    print(f"rr spec {source} --entry cuda_dldn_engine_swin_<layer>_kernel{' --json' if a.json else ''}, "
          f"{a.runs} runs each")
    print(f"{'layer':<6} {'statements':>10} {'phases':>6} {'best s':>7} {'median s':>8}")
    for layer in NAMES:
        entry = f"cuda_dldn_engine_swin_{layer}_kernel"
        times, _ = time_spec(source, entry, a.runs, a.json)
        _, out = time_spec(source, entry, 1, True)
        spec = json.loads(out)
        print(f"{layer:<6} {spec['statements']:>10} {len(spec['phases']):>6} {min(times):>7.2f} "
              f"{statistics.median(times):>8.2f}{'' if min(times) < 1 else '   over the 1 s goal'}")


if __name__ == "__main__":
    main()
