"""On a GPU: the isolate splice of each phase of the bundled sample kernel — byte identity of the
output against the unspliced kernel, and the time ratio spliced / reference (`rr time`).

    python benchmarks/splice_sample.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from rr.corpus.sample import SAMPLE_ENTRY, sample_launch

SAMPLE = Path(__file__).resolve().parents[1] / "rr" / "data" / "sample_swin.ptx"
RECIPE = Path(__file__).resolve().parents[1] / "config" / "recipes" / "isolate.yaml"


def rr(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rr.cli", *args], capture_output=True, text=True)


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        sample_launch(d / "ref", SAMPLE)
        rr("run", str(d / "ref"), "-o", str(d / "ref_out"))
        print(f"{'phase':>5} {'identical':>9} {'ref ms':>9} {'spliced ms':>10} {'ratio':>7} {'noise':>6}")
        for phase in (1, 2):
            spliced = d / f"p{phase}.ptx"
            r = rr("splice", str(SAMPLE), "--entry", SAMPLE_ENTRY, "--recipe", str(RECIPE), "--phase", str(phase),
                   "-o", str(spliced))
            if r.returncode:
                sys.exit(r.stderr)
            sample_launch(d / f"l{phase}", spliced)
            rr("run", str(d / f"l{phase}"), "-o", str(d / f"o{phase}"))
            same = rr("compare", str(d / "ref_out"), str(d / f"o{phase}")).returncode == 0
            rr("time", str(d / "ref"), "--vs", str(d / f"l{phase}"), "--time-limit", "20", "-o", str(d / "t.json"))
            t = json.loads((d / "t.json").read_text())
            print(f"{phase:>5} {str(same):>9} {t['reference']['median_ms']:>9.4f} {t['other']['median_ms']:>10.4f} "
                  f"{t['ratio']:>7.3f} {t['ratio_noise']:>6.2%}")


if __name__ == "__main__":
    main()
