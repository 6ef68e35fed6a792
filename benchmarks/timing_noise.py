"""Timing self-check on a GPU: `rr time` of a kernel against itself (twenty repeats: the A/A
series, whose ratio should be within 1 ± 2·noise in 19 of 20) and against a kernel doing twice
the work. Prints the ratios, noise and rounds recorded in docs/benchmarks.md.

    python benchmarks/timing_noise.py [--repeats 20] [--iterations 20000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from rr.run.launch import Buffer, Field, Launch, write_launch

KERNEL = Path(__file__).resolve().parents[1] / "tests" / "ptx" / "work.ptx"


def work_launch(directory: Path, iterations: int) -> Path:
    launch = Launch(entry="rr_test_work", module="kernel.ptx", grid=(264, 1, 1), block=(256, 1, 1),
                    layout="list", fields=(Field("buffer", buffer="out"), Field("scalar", 0, "uint32", (iterations,))),
                    buffers={"out": Buffer("out", "out.npy", "out")})
    write_launch(directory, launch, {"out": np.zeros(264 * 256 * 4, dtype=np.uint8)}, KERNEL)
    return directory


def rr_time(a: Path, b: Path) -> dict:
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "t.json"
        r = subprocess.run([sys.executable, "-m", "rr.cli", "time", str(a), "--vs", str(b), "-o", str(out)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(r.stderr)
        return json.loads(out.read_text())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--iterations", type=int, default=20000)
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        one = work_launch(Path(d) / "one", a.iterations)
        two = work_launch(Path(d) / "two", 2 * a.iterations)
        print(f"{'case':<14} {'ref median ms':>13} {'other median ms':>15} {'ratio':>8} {'noise':>7} "
              f"{'rounds':>8} {'pairs':>5} {'throttled':>9}  within 1±2·noise  instance pairs' ratios")
        rows = [("self", one, one)] * a.repeats + [("2x work", one, two)]
        within_count = 0
        for label, x, y in rows:
            t = rr_time(x, y)
            ref, oth = t["reference"], t["other"]
            within = abs(t["ratio"] - 1) <= 2 * t["ratio_noise"] if label == "self" else ""
            within_count += within is True
            print(f"{label:<14} {ref['median_ms']:>13.4f} {oth['median_ms']:>15.4f} {t['ratio']:>8.4f} "
                  f"{t['ratio_noise']:>7.2%} {t['rounds']:>8} {t['instances']:>5} "
                  f"{ref['throttled'] + oth['throttled']:>9}  {str(within):<17} "
                  + " ".join(f"{r:.4f}" for r in t["instance_ratios"]))
        print(f"A/A: {within_count} of {a.repeats} within 1 ± 2·noise")
        print(f"device {t['device']['name']}, driver {t['device']['driver']}, cupy {t['device']['cupy']}, "
              f"SM clock {t['sm_clock_mhz']}")


if __name__ == "__main__":
    main()
