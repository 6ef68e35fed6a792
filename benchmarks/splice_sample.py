"""On a GPU: the isolate, regen and f32acc splices of each phase of the bundled sample kernel — byte
identity and PSNR of the output against the unspliced kernel, and the time ratio spliced /
reference (`rr time`).

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
RECIPES = Path(__file__).resolve().parents[1] / "config" / "recipes"


def rr(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rr.cli", *args], capture_output=True, text=True)


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        sample_launch(d / "ref", SAMPLE)
        rr("run", str(d / "ref"), "-o", str(d / "ref_out"))
        print(f"{'template':<8} {'phase':>5} {'identical':>9} {'PSNR dB':>8} {'ref ms':>9} {'spliced ms':>10} "
              f"{'ratio':>7} {'noise':>6}")
        for template in ("isolate", "regen", "f32acc"):
            for phase in (1, 2):
                tag = f"{template}{phase}"
                spliced = d / f"{tag}.ptx"
                r = rr("splice", str(SAMPLE), "--entry", SAMPLE_ENTRY, "--recipe", str(RECIPES / f"{template}.yaml"),
                       "--phase", str(phase), "-o", str(spliced))
                if r.returncode:
                    sys.exit(r.stderr)
                sample_launch(d / tag, spliced)
                rr("run", str(d / tag), "-o", str(d / f"{tag}_out"))
                rows = json.loads(rr("compare", str(d / "ref_out"), str(d / f"{tag}_out"), "--json").stdout)
                out = next(row for row in rows if row["buffer"] == "out")
                rr("time", str(d / "ref"), "--vs", str(d / tag), "--time-limit", "20", "-o", str(d / "t.json"))
                t = json.loads((d / "t.json").read_text())
                psnr = out["psnr_db"] if out["psnr_db"] == "inf" else f"{out['psnr_db']:.1f}"
                print(f"{template:<8} {phase:>5} {str(out['identical']):>9} {psnr:>8} {t['reference']['median_ms']:>9.4f} "
                      f"{t['other']['median_ms']:>10.4f} {t['ratio']:>7.3f} {t['ratio_noise']:>6.2%}")


if __name__ == "__main__":
    main()
