"""rr compare's element-wise comparison (rr.run.compare.compare_values) against the whole-array one
it replaced (the reference copy in tests/test_compare_speed_equivalence.py), on the buffers of a 4K
frame whose splice changed the numerics: a (2160, 3840, 4) f16 pair and a 64 MiB f32 pair, most
elements an ulp or two apart. Best of several runs each, the results checked equal, and the most
memory each allocates at once (tracemalloc, a run of its own). Prints the figures recorded in
docs/benchmarks.md.

    python benchmarks/compare_values.py [--runs 5]
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_compare_speed_equivalence import bits, reference  # noqa: E402

from rr.run.compare import compare_values  # noqa: E402


def ulps_apart(x: np.ndarray, rng) -> np.ndarray:
    """`x` with nine elements in ten moved 1 or 2 ulps (the bits' integer up or down), left where that is not finite."""
    u = np.dtype(f"u{x.dtype.itemsize}")
    step = rng.choice(np.array([-2, -1, 1, 2, 0, -1, 1, -1, 1, 2]), x.shape)
    y = (x.view(u).astype(np.int64) + step).astype(u).view(x.dtype)
    off = ~np.isfinite(y)
    y[off] = x[off]
    return y


def best(f, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return min(times)


def peak_allocated(f) -> int:
    tracemalloc.start()
    f()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    frame = rng.random((2160, 3840, 4), dtype=np.float32).astype(np.float16) + np.float16(2 ** -10)
    activations = rng.standard_normal(16 << 20, dtype=np.float32)
    print("| buffers | old (whole arrays) | new (chunks) | speed-up | most allocated at once, old / new |")
    print("|---|---|---|---|---|")
    for label, x, dtype in (("(2160, 3840, 4) f16, 63 MiB each", frame, "f16"),
                            ("16 Mi f32, 64 MiB each", activations, "f32")):
        y = ulps_apart(x, rng)
        old, new = reference("x", x, y, dtype), compare_values("x", x, y, dtype)
        assert [bits(v) for v in vars(old).values()] == [bits(v) for v in vars(new).values()], (old, new)
        t_old = best(lambda: reference("x", x, y, dtype), args.runs)
        t_new = best(lambda: compare_values("x", x, y, dtype), args.runs)
        m_old = peak_allocated(lambda: reference("x", x, y, dtype))
        m_new = peak_allocated(lambda: compare_values("x", x, y, dtype))
        print(f"| {label}: {new.differing_elements / new.elements:.0%} of the elements differ, "
              f"PSNR {new.psnr_db:.1f} dB | {t_old:.3f} s | {t_new:.3f} s | {t_old / t_new:.1f}x "
              f"| {m_old / 2 ** 20:.0f} MiB / {m_new / 2 ** 20:.1f} MiB |")


if __name__ == "__main__":
    main()
