"""`rr extract` on hostile sources of growing size: time and peak memory (max RSS) of each run.

Three families (issue 14): one NUL-terminated run of repeated `.version` lines (once quadratic:
108 KB took 260 s), a sparse file with one module at each end (once read whole), and a
fatbin whose Zstd entry inflates to 2 GiB (once inflated whole). Each run is a fresh
`python -m rr.cli extract` process; its max RSS comes from wait4, and includes the interpreter
with pyarrow (the `baseline` row extracts the sample engine). Time should grow linearly with the
size and memory not at all. Prints the table recorded in docs/benchmarks.md.

    python benchmarks/extract_hostile.py [--out DIR] [--sparse-gib 0.5,1,2,4]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import work_dir  # noqa: E402

from rr.corpus import write_container  # noqa: E402
from rr.corpus.fatbin import ENTRY, FLAG_ZSTD, HEADER, KIND_PTX, MAGIC  # noqa: E402
from rr.corpus.sample import sample_engine, sample_ptx  # noqa: E402


def extract(src: Path, out: Path) -> tuple[float, float, int, str]:
    """(wall seconds, CPU seconds, max RSS in bytes, last line of output) of one `rr extract` in a
    fresh process. CPU time (user + system) is the steadier figure on a shared machine."""
    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "rr.cli", "extract", str(src), "-o", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    seconds = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    lines = output.strip().splitlines()
    result = f"exit {p.returncode}: {lines[-1].split(': ', 1)[-1][:70] if lines else ''}"
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024, result


def versions(path: Path, size: int) -> Path:
    line = b".version 8.7\n"
    path.write_bytes(b"\0" + line * (size // len(line)) + sample_ptx().encode() + b"\0")
    return path


def sparse(path: Path, size: int) -> Path:
    module = sample_ptx().encode() + b"\0"
    with open(path, "wb") as f:
        f.truncate(size)
        f.seek(4096)
        f.write(module)
        f.seek(size - len(module) - 1)
        f.write(module)
    return path


def zstd_bomb(path: Path, inflated: int, declared: int) -> Path:
    import zstandard

    w = zstandard.ZstdCompressor(level=1).compressobj()
    chunk = bytes(1 << 24)
    frame = b"".join(w.compress(chunk) for _ in range(inflated // len(chunk))) + w.flush()
    padded = frame + b"\0" * (-len(frame) % 8)
    entry = ENTRY.pack(KIND_PTX, 0x0101, ENTRY.size, len(padded), len(frame), 0x40, 7, 8, 90, 0, 0,
                       FLAG_ZSTD | 0x11, 0, declared) + padded
    good = write_container([(KIND_PTX, 90, sample_ptx().encode() + b"\0", "lz4")])
    path.write_bytes(HEADER.pack(MAGIC, 1, HEADER.size, len(entry)) + entry + good)
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="work directory (default: a new temporary one)")
    ap.add_argument("--versions-kb", default="108,1000,10000", help="sizes of the .version run, in kB")
    ap.add_argument("--sparse-gib", default="0.5,1,2,4", help="sizes of the sparse file, in GiB")
    args = ap.parse_args()
    work = work_dir(args.out)

    runs = []
    (work / "engine.bin").write_bytes(sample_engine())
    runs.append(("baseline: sample engine", work / "engine.bin"))
    for kb in map(float, args.versions_kb.split(",")):
        runs.append((f".version run, {kb:g} kB", versions(work / f"versions-{kb:g}.bin", int(kb * 1000))))
    for gib in map(float, args.sparse_gib.split(",")):
        runs.append((f"sparse file, {gib:g} GiB", sparse(work / f"sparse-{gib:g}.bin", int(gib * (1 << 30)))))
    runs.append(("zstd entry inflating to 2 GiB, declared 2 GiB", zstd_bomb(work / "bomb-a.bin", 2 << 30, 2 << 30)))
    runs.append(("zstd entry inflating to 2 GiB, declared 4 KiB", zstd_bomb(work / "bomb-b.bin", 2 << 30, 4096)))

    print("| source | file size | wall | CPU | max RSS | result |\n|---|---|---|---|---|---|")
    for name, src in runs:
        seconds, cpu, rss, result = extract(src, work / f"corpus-{src.stem}")
        print(f"| {name} | {src.stat().st_size:,} B | {seconds:.2f} s | {cpu:.2f} s | {rss / (1 << 20):.0f} MiB "
              f"| {result} |", flush=True)
        if "sparse" in name:
            src.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
