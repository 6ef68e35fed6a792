"""The workflow as users run it, measured: a sweep through Snakemake, then no-op reruns.

    python benchmarks/workflow_sweep.py --cores 4 [--configfile extra.yaml] [TARGET ...]

Runs `snakemake --cores N [TARGET ...]` in the repository root and prints: the sweep's wall time,
its jobs per rule, the wall time per job, the start-up cost of one `python3 -m rr` process (what
every job pays), how many GPU jobs ran at once and on which devices (from the run and timing
records' `gpu`), how long the GPU workers spent on captures and timings (their logs: what held a
GPU), the rows written, then the wall time of `--noop-runs` reruns, each of which must say
"Nothing to be done". A sweep longer than one sitting goes in segments: `--timeout T` stops one,
`--segment` goes on from there and adds up the segments' wall times in `--json`.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
GPU_RULES = {"capture_reference", "capture_frame", "measure", "measure_in_frame"}
WORKERS = ROOT / ".snakemake" / "rr-workers"  # RR_WORKER_DIR of the sweep: its workers' logs


def snakemake(cores: int, configfiles: list[str], targets: list[str],
              gpu_samples: list | None = None, timeout: float | None = None) -> tuple[float, str, int]:
    """One `snakemake --cores N` run: (wall seconds, its log, exit status). With `gpu_samples` a
    list, nvidia-smi samples the GPUs' utilisation every 100 ms meanwhile, into it."""
    cmd = [sys.executable, "-m", "snakemake", "--cores", str(cores), *targets]
    if configfiles:
        cmd += ["--configfile", *configfiles]
    smi = None
    if gpu_samples is not None and shutil.which("nvidia-smi"):
        smi = subprocess.Popen(["nvidia-smi", "--query-gpu=index,utilization.gpu", "--format=csv,noheader,nounits",
                                "-lms", "100"], stdout=subprocess.PIPE, text=True)
    t0 = time.perf_counter()
    try:
        r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                           env={**os.environ, "RR_WORKER_DIR": str(WORKERS)})
    except subprocess.TimeoutExpired as e:  # the figures of how far it got; a rerun finishes it
        r = subprocess.CompletedProcess(cmd, None, _text(e.stdout), _text(e.stderr))
    finally:
        if smi is not None and smi.poll() is None:
            smi.terminate()
    wall = time.perf_counter() - t0
    if smi is not None:
        out, _ = smi.communicate()
        gpu_samples += [tuple(int(x) for x in line.split(",")) for line in out.splitlines() if line.count(",") == 1]
    return wall, r.stdout + r.stderr, r.returncode


def _text(b) -> str:
    return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")


def job_intervals(log: str) -> dict[int, dict]:
    """jobid → rule, start, end, from Snakemake's log (one-second timestamps)."""
    jobs: dict[int, dict] = {}
    stamp, rule = None, None
    for line in log.splitlines():
        if m := re.match(r"^\[(\w{3} \w{3} +\d+ [\d:]+ \d{4})\]$", line.strip()):
            stamp = datetime.strptime(m.group(1), "%a %b %d %H:%M:%S %Y").timestamp()
        elif m := re.match(r"^(?:local)?(?:rule|checkpoint) (\w+):$", line):
            rule = m.group(1)
        elif (m := re.match(r"^\s+jobid: (\d+)$", line)) and rule:
            jobs[int(m.group(1))] = {"rule": rule, "start": stamp}
            rule = None
        elif m := re.match(r"^Finished jobid: (\d+)", line):
            if int(m.group(1)) in jobs:
                jobs[int(m.group(1))]["end"] = stamp
    return jobs


def worker_jobs() -> dict[str, list[float]]:
    """Seconds of each job the GPU workers served, by kind (run: a capture; time: a timing), from
    their logs: the time a device was held for the work itself."""
    kinds: dict[str, list[float]] = collections.defaultdict(list)
    for log in WORKERS.glob("*.log"):
        for line in log.read_text().splitlines():
            if m := re.match(r"^\d\d:\d\d:\d\d (\S+) .*: exit -?\d+ in ([\d.]+) s", line):
                kinds["time" if m.group(1) == "time" else "run"].append(float(m.group(2)))
    return dict(kinds)


def most_at_once(intervals: list[tuple[float, float]]) -> int:
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals], key=lambda x: (x[0], x[1]))
    best = now = 0
    for _, step in events:
        now += step
        best = max(best, now)
    return best


def union_length(intervals: list[tuple[float, float]]) -> float:
    """Seconds covered by at least one interval."""
    total, end = 0.0, float("-inf")
    for s, e in sorted(intervals):
        if e > end:
            total += e - max(s, end)
            end = e
    return total


def rr_start_s(runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "rr", "--help"], cwd=ROOT, capture_output=True, check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("targets", nargs="*")
    ap.add_argument("--cores", type=int, default=4)
    ap.add_argument("--configfile", action="append", default=[])
    ap.add_argument("--noop-runs", type=int, default=3)
    ap.add_argument("--log", help="write Snakemake's log of the sweep here")
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--timeout", type=float, help="stop the sweep after this many seconds")
    ap.add_argument("--segment", action="store_true",
                    help="go on with a sweep an earlier --timeout stopped: its workers' logs are kept, and the "
                         "figures (--json) say how many segments and how much wall time the whole took so far")
    args = ap.parse_args()

    earlier = json.loads(Path(args.json).read_text()) if args.segment and args.json and Path(args.json).exists() \
        else None
    if args.segment:  # the segment before was killed at its --timeout: its lock is left
        subprocess.run([sys.executable, "-m", "snakemake", "--unlock", *args.targets], cwd=ROOT, capture_output=True)
    else:
        shutil.rmtree(WORKERS, ignore_errors=True)
    samples: list = []
    wall, log, rc = snakemake(args.cores, args.configfile, args.targets, samples, args.timeout)
    if args.log:
        Path(args.log).write_text(log)
    stopped = rc is None
    if stopped:
        print(f"snakemake stopped by --timeout {args.timeout:.0f} s: the figures are of the jobs done by then")
    elif rc != 0:
        print(log[-4000:])
        print(f"snakemake failed (exit {rc}) after {wall:.0f} s")
        return 1
    jobs = job_intervals(log)
    per_rule = collections.Counter(j["rule"] for j in jobs.values())
    gpu_spans = [(j["start"], j["end"]) for j in jobs.values() if j["rule"] in GPU_RULES and "end" in j]
    devices = collections.Counter()
    for record in [*ROOT.glob("results/*/phase*/*.run.json"), *ROOT.glob("results/*/phase*/*.timing.json"),
                   *ROOT.glob("results/*/reference/run.json")]:
        devices[json.loads(record.read_text()).get("gpu")] += 1
    summary = ROOT / "results/summary.parquet"
    rows = pq.read_metadata(summary).num_rows if summary.exists() else None
    cells = len(list(ROOT.glob("results/*_phase*.parquet")))
    start = rr_start_s()
    noop = []
    for _ in range(0 if stopped else args.noop_runs):
        t, out, rc = snakemake(args.cores, args.configfile, args.targets)
        if rc != 0 or "Nothing to be done" not in out:
            print(out[-3000:])
            print("a rerun did work or failed: the sweep is not up to date")
            return 1
        noop.append(t)

    # what the records say the work itself took: ptxas, and the timings' sampling
    compile_s = sum(json.loads(p.read_text()).get("compile_ms") or 0 for p in ROOT.glob("results/**/*.cubin.json")) / 1e3
    timings = [json.loads(p.read_text()) for p in ROOT.glob("results/*/phase*/*timing.json")]
    timing_s = sum(t.get("wall_s") or 0 for t in timings)
    # how the timings ended, and how many took the reference's instances a worker had kept
    stops = collections.Counter(t.get("stop") or t.get("status") for t in timings)
    kept = sum(bool(t.get("instances_kept")) for t in timings)
    longest = max((t.get("wall_s") or 0 for t in timings), default=0.0)
    # seconds of job time per rule (the log's one-second stamps: summed over many jobs, not exact)
    rule_s = collections.Counter()
    for j in jobs.values():
        if "end" in j:
            rule_s[j["rule"]] += j["end"] - j["start"]
    # the share of the sweep's wall time some GPU job held its claim, and nvidia-smi's utilisation
    claimed = union_length(gpu_spans)
    busy = {str(g): statistics.mean(u for i, u in samples if i == g) for g in sorted({i for i, _ in samples})}
    served = worker_jobs()
    held = sum(sum(v) for v in served.values())
    figures = {
        "wall_s": wall, "stopped_by_timeout": stopped, "jobs": len(jobs), "per_rule": dict(per_rule), "summary_rows": rows, "cells": cells,
        "wall_per_job_s": wall / max(len(jobs), 1), "rr_start_s": start,
        "gpu_jobs": len(gpu_spans), "gpu_jobs_at_once": most_at_once(gpu_spans),
        "records_per_gpu": {str(k): v for k, v in devices.items()}, "noop_s": noop,
        "rule_job_s": dict(rule_s), "ptxas_s": compile_s, "timing_sampling_s": timing_s,
        "timing_stops": dict(stops), "timings_with_kept_instances": kept, "longest_sampling_s": longest, "gpu_claimed_share": claimed / wall, "gpu_utilisation_pct": busy,
        "worker_jobs": {k: {"jobs": len(v), "s": sum(v), "median_s": statistics.median(v)} for k, v in served.items()},
        "worker_held_share": held / wall,
    }
    print(f"sweep: {wall:.1f} s wall, {len(jobs)} jobs, {wall / max(len(jobs), 1):.2f} s per job at --cores {args.cores}")
    print("jobs per rule: " + ", ".join(f"{r} {n}" for r, n in per_rule.most_common()))
    print(f"cells collected: {cells}; rows in results/summary.parquet: {rows}; one `python3 -m rr` start-up: {start:.2f} s")
    print(f"GPU jobs: {len(gpu_spans)}, at most {most_at_once(gpu_spans)} at once (1 s log resolution); a GPU "
          f"job running {claimed:.0f} s of the {wall:.0f} s ({claimed / wall:.0%})")
    for kind, v in sorted(served.items()):
        print(f"  GPU workers' {kind} jobs: {len(v)}, {sum(v):.0f} s, median {statistics.median(v):.3f} s")
    print(f"  a worker serving a job {held:.0f} s of the {wall:.0f} s ({held / wall:.0%}; all GPUs summed)")
    print(f"ptxas (the compile records' compile_ms, summed): {compile_s:.0f} s; the timings' sampling: {timing_s:.0f} s "
          f"(the longest {longest:.1f} s)")
    if timings:
        print(f"timings: {len(timings)}: " + ", ".join(f"{n} {why}" for why, n in stops.most_common())
              + f"; {kept} on instances of the reference a worker had kept")
    print("job seconds per rule: " + ", ".join(f"{r} {t:.0f}" for r, t in rule_s.most_common()))
    for g, u in busy.items():
        print(f"  GPU {g}: mean utilisation {u:.1f} % (nvidia-smi, every 100 ms)")
    for device, n in devices.most_common():
        print(f"  records on GPU {device}: {n}")
    print("no-op reruns: " + ", ".join(f"{t:.2f} s" for t in noop))
    if earlier is not None:  # the whole sweep so far: its segments' wall times, one after another
        figures["segments_wall_s"] = earlier.get("segments_wall_s", [earlier["wall_s"]]) + [wall]
        print(f"the sweep's {len(figures['segments_wall_s'])} segments: {sum(figures['segments_wall_s']):.0f} s "
              "of wall time in all")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
