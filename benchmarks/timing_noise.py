"""Timing self-check on a GPU: `rr time` of a kernel against itself (twenty repeats: the A/A
series, whose ratio should be within 1 ± 2·noise in 19 of 20) and against a kernel doing twice
the work. Prints the ratios, noise and rounds recorded in docs/benchmarks.md.

    python benchmarks/timing_noise.py [--repeats 20] [--iterations 20000]
    python benchmarks/timing_noise.py --launch DIR [--launch DIR2 …] --in-process [--min-rounds 4]

With --launch, the A/A series of each given launch or frame directory (e.g. network_gpu.py's
ref.frame and enc2.alone) instead of the work kernel's. With --in-process the timings run in this
one process on one Resident, as the GPU worker runs them (no process start per timing), and
--min-rounds / --min-samples set the rounds a timing takes before it may stop.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
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
    p.add_argument("--launch", action="append", type=Path, help="A/A of this launch or frame directory")
    p.add_argument("--in-process", action="store_true", help="time_pair in this process, as the worker runs it")
    p.add_argument("--min-rounds", type=int, help="rounds per instance pair before a timing may stop")
    p.add_argument("--min-samples", type=int, help="rounds in all before a timing may stop")
    a = p.parse_args()
    timed = rr_time
    if a.in_process:
        from rr.run.cuda import Resident
        from rr.run.timing import time_pair

        resident = Resident()
        options = {k: v for k, v in (("min_rounds_per_pair", a.min_rounds), ("min_samples", a.min_samples))
                   if v is not None}

        def timed(x, y):
            t = time_pair(str(x), str(y), resident=resident, **options)
            resident.trim(None)
            return t
    with tempfile.TemporaryDirectory() as d:
        if a.launch:
            rows = [(f"self {x.name}"[:14], x, x) for x in a.launch for _ in range(a.repeats)]
        else:
            one = work_launch(Path(d) / "one", a.iterations)
            two = work_launch(Path(d) / "two", 2 * a.iterations)
            rows = [("self", one, one)] * a.repeats + [("2x work", one, two)]
        print(f"{'case':<14} {'ref median ms':>13} {'other median ms':>15} {'ratio':>8} {'noise':>7} "
              f"{'rounds':>8} {'pairs':>5} {'throttled':>9}  within 1±2·noise  wall s  instance pairs' ratios")
        within_count: dict[str, list[bool]] = {}
        for label, x, y in rows:
            started = time.perf_counter()
            t = timed(x, y)
            wall = time.perf_counter() - started
            ref, oth = t["reference"], t["other"]
            within = abs(t["ratio"] - 1) <= 2 * t["ratio_noise"] if label.startswith("self") else ""
            if within != "":
                within_count.setdefault(label, []).append(within)
            print(f"{label:<14} {ref['median_ms']:>13.4f} {oth['median_ms']:>15.4f} {t['ratio']:>8.4f} "
                  f"{t['ratio_noise']:>7.2%} {t['rounds']:>8} {t['instances']:>5} "
                  f"{ref['throttled'] + oth['throttled']:>9}  {str(within):<17} {wall:>6.3f}  "
                  + " ".join(f"{r:.4f}" for r in t["instance_ratios"]) + f"  ({t['stop']})")
        for label, hits in within_count.items():
            print(f"A/A {label}: {sum(hits)} of {len(hits)} within 1 ± 2·noise")
        print(f"device {t['device']['name']}, driver {t['device']['driver']}, cupy {t['device']['cupy']}, "
              f"SM clock {t['sm_clock_mhz']}")


if __name__ == "__main__":
    main()
