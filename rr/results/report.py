"""The sweep's summary and the report's figures and tables.

`summary_table(cells)` concatenates the cells' Parquet files (one row per recipe per cell, the
fixed schema). `write_report(summary, descriptors, out)` writes what the Snakemake report shows:

* `identity.png` — a layer × phase grid per recipe: frame byte-identical, differing (with the
  PSNR), or failed (with the stage);
* `ratios.png` — time ratio spliced/reference per phase and recipe, the noise as error bars;
* `registers.png` — registers and spill bytes of each splice against the reference's;
* `phases_<layer>.csv` — the layer's phase table (DESIGN §3), `summary.csv` — every row.
"""

from __future__ import annotations

import math
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from rr.io import atomic_dir
from rr.results.schema import RESULTS_SCHEMA

_PHASE_COLUMNS = ("phase", "first_stmt", "last_stmt", "mma", "a_quads", "b_pairs", "chains", "chain_len",
                  "M", "N", "K", "identity", "a_source", "b_source", "c_source", "slab_stride")


def summary_table(cells: list[str | Path]) -> pa.Table:
    tables = [pq.read_table(c) for c in cells]
    for c, t in zip(cells, tables):
        if not t.schema.equals(RESULTS_SCHEMA, check_metadata=False):
            raise ValueError(f"{c}: not a results table of this rr version (schema differs)")
    return pa.concat_tables(tables) if tables else RESULTS_SCHEMA.empty_table()


def _outcome(row: dict) -> tuple[str, str]:
    """(category, short label) of one recipe on one cell."""
    for stage in ("splice", "compile", "capture"):
        status = row.get(f"{stage}_status")
        if status not in ("ok", None) and not (stage == "compile" and status == "no_ptxas"):
            return "failed", f"{stage}: {status}"
    if row.get("frame_identical"):
        return "identical", "="
    psnr = row.get("psnr_db")
    return "differs", "—" if psnr is None or math.isinf(psnr) else f"{psnr:.0f}"


def write_report(summary: pa.Table, descriptors: dict[str, dict], out: str | Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with atomic_dir(out) as tmp:
        names = _write_report(summary, descriptors, tmp, plt)
    return [Path(out) / name for name in names]


def _write_report(summary: pa.Table, descriptors: dict[str, dict], out: Path, plt) -> list[str]:
    rows = summary.to_pylist()
    recipes = sorted({r["recipe"] for r in rows})
    cells = sorted({(r["layer"], r["phase"]) for r in rows})
    written = []

    # identity grid: one row per recipe, one column per cell
    colours = {"identical": "#2e7d32", "differs": "#ef8f00", "failed": "#9e9e9e"}
    fig, ax = plt.subplots(figsize=(max(6, 0.45 * len(cells) + 2), 0.6 * len(recipes) + 1.8))
    by = {(r["recipe"], r["layer"], r["phase"]): r for r in rows}
    for i, recipe in enumerate(recipes):
        for j, cell in enumerate(cells):
            row = by.get((recipe, *cell))
            kind, label = _outcome(row) if row else ("failed", "")
            ax.add_patch(plt.Rectangle((j, i), 0.95, 0.9, color=colours[kind]))
            ax.text(j + 0.47, i + 0.45, label, ha="center", va="center", fontsize=7, color="white")
    ax.set_xlim(0, len(cells))
    ax.set_ylim(0, len(recipes))
    ax.set_yticks([i + 0.45 for i in range(len(recipes))], recipes)
    ax.set_xticks([j + 0.47 for j in range(len(cells))], [f"{layer}\np{p}" for layer, p in cells], fontsize=7)
    ax.set_title("Frame byte identity against the unspliced kernel\n"
                 "green: identical (=); orange: differs (PSNR dB); grey: a stage failed", fontsize=10)
    fig.tight_layout()
    written.append(out / "identity.png")
    fig.savefig(written[-1], dpi=120)
    plt.close(fig)

    # time ratios with their noise
    fig, ax = plt.subplots(figsize=(max(6, 0.5 * len(cells) + 2), 4))
    width = 0.8 / max(len(recipes), 1)
    timed = False
    span = [1.0, 1.0]
    for k, recipe in enumerate(recipes):
        xs, ys, es = [], [], []
        for j, cell in enumerate(cells):
            row = by.get((recipe, *cell))
            if row and row.get("ratio") is not None:
                xs.append(j + k * width)
                ys.append(row["ratio"])
                es.append((row.get("noise") or 0) * row["ratio"])
        if xs:
            timed = True
            ax.bar(xs, ys, width, yerr=es, capsize=2, label=recipe)
            span = [min(span[0], *(y - e for y, e in zip(ys, es))), max(span[1], *(y + e for y, e in zip(ys, es)))]
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(cells))], [f"{layer} p{p}" for layer, p in cells],
                  rotation=90, fontsize=7)
    ax.set_ylabel("spliced / reference time")
    if timed:
        pad = 0.1 * (span[1] - span[0]) + 0.01
        ax.set_ylim(span[0] - pad, span[1] + pad)  # around 1: the differences are a few percent
        ax.legend(fontsize=8)
    else:
        reasons = sorted({r["timing_message"] for r in rows if r.get("timing_message")})
        ax.text(0.5, 0.5, "no timings in this sweep:\n" + "\n".join(reasons)[:300], ha="center", va="center",
                transform=ax.transAxes, fontsize=9)
    ax.set_title("Time ratio per phase and recipe (error bars: the ratio's noise)")
    fig.tight_layout()
    written.append(out / "ratios.png")
    fig.savefig(written[-1], dpi=120)
    plt.close(fig)

    # registers and spills
    fig, axes = plt.subplots(1, 2, figsize=(max(8, 0.5 * len(cells) + 4), 4))
    for k, recipe in enumerate(recipes):
        for ax, col in zip(axes, ("registers", "spill_bytes")):
            xs = [j + k * width for j, cell in enumerate(cells) if by.get((recipe, *cell), {}).get(col) is not None]
            ys = [by[(recipe, *cell)][col] for cell in cells if by.get((recipe, *cell), {}).get(col) is not None]
            ax.bar(xs, ys, width, label=recipe)
    for ax, title in zip(axes, ("registers per thread", "spill bytes (stores + loads)")):
        ax.set_title(title)
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(cells))], [f"{layer} p{p}" for layer, p in cells],
                      rotation=90, fontsize=7)
        ax.margins(y=0.25)
        ax.legend(fontsize=8, loc="upper center", ncol=max(len(recipes), 1), frameon=False)
    fig.tight_layout()
    written.append(out / "registers.png")
    fig.savefig(written[-1], dpi=120)
    plt.close(fig)

    for layer, spec in descriptors.items():
        path = out / f"phases_{layer}.csv"
        lines = [",".join(_PHASE_COLUMNS)]
        for p in spec["phases"]:
            lines.append(",".join(f'"{p.get(c)}"' if isinstance(p.get(c), str) else str(p.get(c, ""))
                                  for c in _PHASE_COLUMNS))
        path.write_text("\n".join(lines) + "\n")
        written.append(path)
    keep = ["layer", "phase", "recipe", "M", "N", "K", "splice_status", "compile_status", "registers",
            "spill_bytes", "capture_status", "capture_backend", "frame", "frame_identical", "psnr_db",
            "timing_status", "ref_median_ms", "splice_median_ms", "ratio", "noise"]
    summary.select(keep).to_pandas().to_csv(out / "summary.csv", index=False)
    written.append(out / "summary.csv")
    return [p.name for p in written]
