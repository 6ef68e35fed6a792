"""Where the `direct` template applies in the eleven-layer network, and whether each splice it
makes keeps the final frame byte-identical (cpu backend, a small frame): every layer × phase is
spliced by config/recipes/direct.yaml (or --recipe, e.g. direct_transposed); a refusal is listed
with its reason, a splice is run as the whole frame with that layer replaced and compared with the
unspliced frame.

    python benchmarks/direct_network.py [--frame 64x64] [--recipe direct_transposed] [--out DIR]
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
import time
from pathlib import Path

from common import rr, work_dir

RECIPES = Path(__file__).resolve().parents[1] / "config" / "recipes"


def candidates(corpus: Path, entry: str, recipe: Path):
    """(phase, None) where the template makes a splice, else (phase, its reason): the layer parsed
    and described once, the template asked phase by phase (what `rr splice` does per call)."""
    from rr.corpus.extract import find_entry
    from rr.splice.recipe import load_recipe
    from rr.splice.splice import applied, described_entry

    (path, _), = find_entry(corpus, entry)
    described, chosen = described_entry(path, entry), load_recipe(recipe)
    for phase in range(1, len(described.phases) + 1):
        try:
            applied(described, chosen, phase)
            yield phase, None
        except ValueError as e:
            yield phase, str(e)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--frame", default="64x64")
    ap.add_argument("--recipe", default="direct", help="a recipe of the direct template (config/recipes/NAME.yaml)")
    ap.add_argument("--out")
    args = ap.parse_args()
    recipe = RECIPES / f"{args.recipe}.yaml"
    w = work_dir(args.out)
    t0 = time.perf_counter()
    rr("synth", "engine", "-o", w / "engine.bin")
    rr("extract", w / "engine.bin", "-o", w / "corpus")
    rr("launch", "frame", w / "corpus", "--frame", args.frame, "-o", w / "layout")
    rr("frame", w / "layout", "--backend", "cpu", "-o", w / "ref")
    frame = json.loads((w / "layout" / "frame.json").read_text())
    rows = []
    for layer in frame["layers"]:
        name, entry = layer["layer"], layer["launch"]["entry"]
        for phase, reason in candidates(w / "corpus", entry, recipe):
            row = {"layer": name, "phase": phase}
            if reason:
                row.update(status="refused", reason=reason)
            else:
                out = w / "splices" / f"{name}_{phase}.ptx"
                out.parent.mkdir(exist_ok=True)
                rr("splice", w / "corpus", "--entry", entry, "--recipe", recipe, "--phase", phase, "-o", out)
                d = json.loads(Path(f"{out}.splice.json").read_text())["direct"]
                run = w / "runs" / f"{name}_{phase}"
                run.parent.mkdir(exist_ok=True)
                rr("frame", w / "layout", "--backend", "cpu", "--replace", f"{name}={out}", "-o", run)
                same = rr("compare", w / "ref", run, check=False).returncode == 0
                row.update(status="ok", frame_identical=same, removed=d["removed"]["statements"],
                           added=d["added"]["instructions"], roles=[o["role"] for o in d["operands"]])
            rows.append(row)
            print(json.dumps(row), flush=True)
    (w / "direct_network.json").write_text(json.dumps(rows, indent=1))
    ok = [r for r in rows if r["status"] == "ok"]
    def kind(reason: str) -> str:  # the reason without the statements and registers it names
        if "neither operand" in reason or "no operand is a transpose" in reason:
            return reason.split(": ")[-1]
        return re.sub(r" \(s\d+.*?\)", "", reason.split(":")[0])

    reasons = collections.Counter(kind(r["reason"]) for r in rows if r["status"] == "refused")
    print(f"\n{len(rows)} phases in {len(frame['layers'])} layers, {time.perf_counter() - t0:.0f} s: direct applied to "
          f"{len(ok)} ({args.recipe}), frame-identical {sum(r['frame_identical'] for r in ok)}; refused {len(rows) - len(ok)}:")
    for reason, n in reasons.most_common():
        print(f"  {n:4d}  {reason}")
    print(w / "direct_network.json")


if __name__ == "__main__":
    sys.exit(main())
