"""Every shipped recipe on every phase of the chosen layers, in one process: the splices' time and a
digest of each output, to compare two versions of the splice stage (the same digests, less time).

    python benchmarks/splice_all.py CORPUS enc0,enc2,dec0 [-o digests.json]

CORPUS is an extracted corpus (resources/corpus after the workflow's extract rule); a layer is
chosen when its entry's name contains one of the words given. A refusal is recorded with its reason.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import tempfile
import time
from pathlib import Path

from rr.corpus import find_entry
from rr.splice.assemble import SpliceError
from rr.splice.recipe import load_recipe, shipped_recipes
from rr.splice.splice import described_entry, splice


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus")
    ap.add_argument("layers", help="comma-separated words an entry's name must contain one of")
    ap.add_argument("-o", "--output", help="write the digests (JSON) here")
    args = ap.parse_args()
    chosen = sorted(find_entry(args.corpus, "|".join(map(re.escape, args.layers.split(",")))), key=lambda h: h[1])
    if not chosen:
        sys.exit(f"{args.corpus}: no entry's name contains any of {args.layers!r}")
    recipes = {r: load_recipe(r) for r in shipped_recipes()}
    digests, spent = {}, 0.0
    out = Path(tempfile.mkdtemp()) / "spliced.ptx"
    for ptx, name in chosen:
        for phase in range(1, len(described_entry(ptx, name).phases) + 1):
            for r, recipe in recipes.items():
                t0 = time.perf_counter()
                try:
                    splice(ptx, name, recipe, phase, out)
                    digest = hashlib.sha1(out.read_bytes() + Path(f"{out}.splice.json").read_bytes()).hexdigest()
                except SpliceError as e:
                    digest = f"refused: {e}"
                spent += time.perf_counter() - t0
                digests[f"{name} phase {phase} {r}"] = digest
        print(f"{name}: {spent:.1f} s so far", file=sys.stderr)
    refused = sum(d.startswith("refused") for d in digests.values())
    print(f"{len(digests)} splices ({refused} refused) in {spent:.1f} s, {spent / len(digests) * 1e3:.0f} ms each")
    if args.output:
        Path(args.output).write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
