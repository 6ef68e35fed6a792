"""Front end against public PTX: for every .ptx file under a directory, ptxas, then rr.

Each file is first given to ptxas (`-arch` from its `.target`, raised to the oldest architecture
this ptxas supports, keeping an `a`/`f` suffix; as a whole program or else as relocatable code, so
calls to functions defined elsewhere are fine); files ptxas rejects are counted apart and not held
against rr. Every file ptxas accepts must then pass `rr roundtrip` (the raw bytes back),
`rr entries` (exit 0) and the linearisation of every function with a body. Prints the counts and
the first failures of each stage.

    python benchmarks/public_ptx.py DIR [--cache verdicts.json] [--show 5]

The files are other projects' code: keep them outside the repository and commit none of them.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from collections import Counter, defaultdict
from datetime import date
from pathlib import Path

_TARGET = re.compile(rb"^[ \t]*\.target[ \t]+([\w]+)", re.M)
_VERSION = re.compile(rb"^[ \t]*\.version[ \t]+([\d.]+)", re.M)


def ptxas_arch(data: bytes, oldest: int) -> str:
    m = _TARGET.search(data)
    target = m.group(1).decode() if m else "sm_52"
    arch = re.fullmatch(r"(?:sm|compute)_(\d+)([af]?)", target)
    if arch is None:
        return f"sm_{oldest}"
    number, suffix = int(arch.group(1)), arch.group(2)
    return f"sm_{max(number, oldest)}{suffix}"


def oldest_arch() -> int:
    """The oldest real architecture this CUDA's nvcc lists (ptxas has no such option), else 75."""
    nvcc = shutil.which("nvcc")
    out = subprocess.run([nvcc, "--list-gpu-code"], capture_output=True, text=True).stdout if nvcc else ""
    found = [int(a) for a in re.findall(r"sm_(\d+)\b", out)]
    return min(found) if found else 75


def ptxas_verdict(ptxas: str, path: Path, arch: str) -> tuple[bool, str]:
    """Whether ptxas accepts the file as a whole program or, failing that, as relocatable code
    (`-c`, which ptxas takes from PTX 3.1 on), so a module that calls functions defined elsewhere
    counts as accepted; with the first error line otherwise."""
    first = ""
    for flags in ([], ["-c"]):
        try:
            r = subprocess.run([ptxas, *flags, f"-arch={arch}", str(path), "-o", os.devnull],
                               capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            return False, "ptxas timed out"
        if r.returncode == 0:
            return True, ""
        lines = r.stderr.strip().splitlines()
        first = first or next((l for l in lines if "error" in l or "fatal" in l), lines[0] if lines else "")
    return False, first[:200]


def _cli(*args: str) -> tuple[int, str]:
    from rr.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as e:  # argparse
            code = e.code if isinstance(e.code, int) else 1
    return code, (err.getvalue() or out.getvalue()).strip()


def check_rr(path: Path) -> list[tuple[str, str]]:
    """The stages this file fails in rr, with a message each (empty: it passed them all)."""
    from rr.ptx import linearise, parse_file

    failures = []
    code, message = _cli("roundtrip", str(path))
    if code != 0:
        failures.append(("roundtrip", message.splitlines()[0] if message else f"exit {code}"))
    code, message = _cli("entries", str(path))
    if code != 0:
        failures.append(("entries", message.splitlines()[0] if message else f"exit {code}"))
    try:
        module = parse_file(path)
        for f in module.functions:
            if f.has_body:
                linearise(f)
    except Exception as e:  # noqa: BLE001 — every failure is counted and shown
        failures.append(("linearise", f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]))
    return failures


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("directory", type=Path)
    p.add_argument("--cache", type=Path, help="JSON file keeping ptxas verdicts between runs")
    p.add_argument("--show", type=int, default=5, help="failures shown per stage")
    a = p.parse_args()
    ptxas = shutil.which("ptxas")
    if ptxas is None:
        sys.exit("ptxas is not on PATH")
    files = sorted(f for f in a.directory.rglob("*") if f.is_file() and f.suffix.lower() == ".ptx")
    cache = json.loads(a.cache.read_text()) if a.cache and a.cache.exists() else {}
    oldest = oldest_arch()

    t0 = time.perf_counter()
    counts: Counter = Counter()
    failures: dict = defaultdict(list)
    rejected: Counter = Counter()
    versions: Counter = Counter()
    entries = functions = 0
    sources: dict = defaultdict(lambda: [0, 0])  # first directory under DIR -> [files, accepted]
    for path in files:
        data = path.read_bytes()
        counts["files"] += 1
        source = sources[path.relative_to(a.directory).parts[0] if path.parent != a.directory else "."]
        source[0] += 1
        key = "whole or -c " + hashlib.sha1(data).hexdigest()
        if key not in cache:
            cache[key] = ptxas_verdict(ptxas, path, ptxas_arch(data, oldest))
        accepted, message = cache[key]
        if not accepted:
            rejected[re.sub(r"^ptxas [^,]*, line \d+; ", "", message)[:80]] += 1
            continue
        counts["accepted by ptxas"] += 1
        source[1] += 1
        v = _VERSION.search(data)
        versions[v.group(1).decode() if v else "?"] += 1
        failed = check_rr(path)
        for stage, message in failed:
            failures[stage].append((path, message))
        stages = {s for s, _ in failed}
        counts["round trip exact"] += "roundtrip" not in stages
        counts["entries listed"] += "entries" not in stages
        counts["linearised"] += "linearise" not in stages
        if "linearise" not in stages:
            from rr.ptx import parse_file

            module = parse_file(path)
            entries += len(module.entries)
            functions += sum(f.has_body for f in module.functions)
    if a.cache:
        a.cache.write_text(json.dumps(cache))

    print(f"{date.today()} {platform.node()}; {subprocess.run([ptxas, '--version'], capture_output=True, text=True).stdout.strip().splitlines()[-1]}")
    print(f"{a.directory}: {counts['files']} files in {time.perf_counter() - t0:.0f} s")
    for key in ("accepted by ptxas", "round trip exact", "entries listed", "linearised"):
        print(f"  {key:<20} {counts[key]:>6}")
    print(f"  functions with a body linearised: {functions} ({entries} entries)")
    print("  PTX versions accepted: " + ", ".join(f"{v} ×{n}" for v, n in sorted(versions.items(),
                                                                               key=lambda kv: [int(x) for x in kv[0].split('.') if x.isdigit()])))
    print("  by source (files/accepted): " + ", ".join(f"{k} {f}/{n}" for k, (f, n) in sorted(sources.items())))
    print(f"  rejected by ptxas     {counts['files'] - counts['accepted by ptxas']:>6}")
    for message, n in rejected.most_common(8):
        print(f"      {n:>4}  {message}")
    print(f"failures: {sum(len(v) for v in failures.values())}")
    for stage, items in failures.items():
        print(f"  {stage}: {len(items)}")
        for path, message in items[:a.show]:
            print(f"      {path}: {message}")


if __name__ == "__main__":
    main()
