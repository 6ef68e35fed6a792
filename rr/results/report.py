"""The sweep's summary and the report's figures and tables.

`summary_table(cells)` concatenates the cells' Parquet files (one row per recipe per cell, the
fixed schema). `write_report(summary, descriptors, out)` writes, whole or not at all, what the
Snakemake report shows (workflow/report/ holds the captions):

* `identity.png` — per recipe a layer × phase grid of the recipe's check verdicts: passed (with
  `=` for a byte-identical frame, else the worst buffer's PSNR), failed (with the check or stage
  that failed), or not measured;
* `ratios.png` — per layer, each recipe's time ratio spliced/reference over the phases, the noise
  as error bars (or why there is no timing);
* `compile.png` and `compile.html` — the splice's ptxas figures against the unspliced kernel's:
  registers, spill stores, spill loads, stack, shared and constant memory, and the deltas;
* `phases/phases_<layer>.html` / `.csv` — the layer's phase table; `summary.html` / `summary.csv` —
  every row with its checks and per-buffer verdicts;
* `run.rst` — the report's first page: backend, frame size, device, what ran.
"""

from __future__ import annotations

import html
import json
import math
import textwrap
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from rr.io import atomic_dir
from rr.records import Status
from rr.results.schema import RESULTS_SCHEMA
from rr.run.compile import FIGURES
from rr.validation import InvalidInput, cut, open_regular

_PHASE_COLUMNS = ("phase", "first_stmt", "last_stmt", "mma", "a_quads", "b_pairs", "chains", "chain_len",
                  "M", "N", "K", "identity", "a_source", "b_source", "c_source", "slab_stride")
_VERDICT_COLOURS = {True: "#2e7d32", False: "#c62828", None: "#9e9e9e"}
_FIGURE_TITLES = {"registers": "registers per thread", "spill_stores": "spill stores (bytes)",
                  "spill_loads": "spill loads (bytes)", "stack_bytes": "stack frame (bytes)",
                  "shared_bytes": "shared memory (bytes)", "constant_bytes": "constant memory (bytes)"}


def read_results(path: str | Path, what: str = "an rr summary") -> pa.Table:
    """A results table as rr writes them (a cell's, or the summary of the cells), read from a
    regular file (rr.validation.open_regular); InvalidInput naming the file when it is not Parquet
    or not such a table: columns of RESULTS_SCHEMA missing or of another type."""
    try:
        with open_regular(path) as f:
            table = pq.read_table(f)
    except pa.ArrowException as e:
        raise InvalidInput(f"{path}: not {what} (not a Parquet file: {cut(str(e))})") from None
    names = set(table.schema.names)
    missing = [f.name for f in RESULTS_SCHEMA if f.name not in names]
    if missing:
        raise InvalidInput(f"{path}: not {what} (missing columns {cut(', '.join(missing))})")
    other = [f"{f.name} is {table.schema.field(f.name).type}, not {f.type}" for f in RESULTS_SCHEMA
             if not table.schema.field(f.name).type.equals(f.type)]
    if other:
        raise InvalidInput(f"{path}: not {what} of this rr version ({cut('; '.join(other))})")
    return table


def summary_table(cells: list[str | Path]) -> pa.Table:
    tables = [read_results(c, "a results table") for c in cells]
    for c, t in zip(cells, tables):
        if not t.schema.equals(RESULTS_SCHEMA, check_metadata=False):
            raise ValueError(f"{c}: not a results table of this rr version (schema differs)")
    return pa.concat_tables(tables) if tables else RESULTS_SCHEMA.empty_table()


def _number(value: float | None) -> str:
    return "–" if value is None else f"{value:.4g}"


def _psnr_text(psnr: float | None) -> str:
    return "–" if psnr is None else ("inf" if math.isinf(psnr) else f"{psnr:.1f}")


def outcome(row: dict) -> tuple[bool | None, str]:
    """(verdict, short label) of one recipe on one cell, as the identity grid shows it: the stage
    that did not end ok, else a failed check that is not about the output, else `=` for a
    byte-identical frame or the worst buffer's PSNR."""
    passed = row.get("passed")
    for stage in ("splice", "compile", "capture"):
        status = row.get(f"{stage}_status")
        if status in (Status.OK, None) or (stage == "compile" and status in (Status.NO_PTXAS, Status.NOT_RUN)):
            continue
        if status == Status.NOT_APPLICABLE:  # the recipe is not for this phase: grey, not a failure
            return passed, "n/a"
        return passed, f"{stage}\n{status.replace('_', ' ')}"
    failed = [c["check"] for c in row.get("checks") or [] if c["passed"] is False
              and c["check"] not in ("identical_output", "psnr")]
    if failed:
        return passed, failed[0]
    return passed, "=" if row.get("frame_identical") else _psnr_text(row.get("psnr_db"))


def write_report(summary: pa.Table, descriptors: dict[str, dict], out: str | Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with atomic_dir(out) as tmp:
        names = _write_report(summary, descriptors, tmp, plt)
    return [Path(out) / name for name in names]


def _save(fig, path: Path, plt) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _identity_figure(rows: list[dict], recipes: list[str], out: Path, plt) -> Path:
    layers = list(dict.fromkeys(r["layer"] for r in rows))
    phases = sorted({r["phase"] for r in rows if r["phase"] is not None}) or [None]
    by = {(r["recipe"], r["layer"], r["phase"]): r for r in rows}
    cell = 0.42  # inches a square cell takes
    fig, axes = plt.subplots(len(recipes), 1, squeeze=False, figsize=(
        max(7.0, cell * len(phases) + 1.5), (cell * len(layers) + 0.75) * len(recipes) + 1.0))
    for ax, recipe in zip(axes[:, 0], recipes):
        for i, layer in enumerate(layers):
            for j, phase in enumerate(phases):
                # a layer without phases is one status cell, in the first column
                row = by.get((recipe, layer, phase)) or (by.get((recipe, layer, None)) if j == 0 else None)
                if row is None:
                    continue
                passed, label = outcome(row)
                ax.add_patch(plt.Rectangle((j + 0.03, i + 0.05), 0.94, 0.9, color=_VERDICT_COLOURS[passed]))
                ax.text(j + 0.5, i + 0.5, label, ha="center", va="center", fontsize=5.5, color="white")
        ax.set_xlim(0, len(phases))
        ax.set_ylim(len(layers), 0)
        ax.set_aspect("equal", anchor="W")
        ax.set_yticks([i + 0.5 for i in range(len(layers))], layers, fontsize=8)
        ax.set_xticks([j + 0.5 for j in range(len(phases))], ["" if p is None else str(p) for p in phases],
                      fontsize=7)
        ax.tick_params(length=0)
        ax.set_title(recipe, fontsize=9, loc="left")
        for side in ax.spines.values():
            side.set_visible(False)
    axes[-1, 0].set_xlabel("phase", loc="left")
    # wrapped to the figure's width (some 13 characters an inch at this size): a line past it was cut
    width = int(fig.get_figwidth() * 13)
    fig.suptitle("\n".join(textwrap.wrap(
        "Check verdicts per layer and phase — green: every check passed, red: a check failed, grey: not all "
        "measured.", width) + textwrap.wrap(
        "Label: = byte-identical; a number: the PSNR (dB) of the final frame (of a layer captured alone: its "
        "worst buffer's); n/a: the recipe does not apply to the phase; else the stage or check that failed.",
        width)), fontsize=8, x=0.02, ha="left")
    return _save(fig, out / "identity.png", plt)


def _cells(rows: list[dict]) -> list[tuple]:
    return list(dict.fromkeys((r["layer"], r["phase"]) for r in rows))


def _ratio_figure(rows: list[dict], recipes: list[str], out: Path, plt) -> Path:
    """Per layer, the time ratio of each recipe over the phases, the ratio's noise as error bars."""
    timed = [r for r in rows if r.get("ratio") is not None]
    layers = list(dict.fromkeys(r["layer"] for r in timed)) or [None]
    phases = sorted({r["phase"] for r in timed})
    fig, axes = plt.subplots(len(layers), 1, squeeze=False, sharey=True,
                             figsize=(max(7.0, 0.3 * len(phases) + 2.5), 2.6 * len(layers) + 0.8))
    if not timed:
        ax = axes[0, 0]
        reasons = sorted({r["timing_message"] for r in rows if r.get("timing_message")})
        ax.text(0.5, 0.5, "no timings in this sweep:\n" + "\n".join(_wrap(m) for m in reasons)[:600], ha="center",
                va="center", transform=ax.transAxes, fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
    offset = 0.6 / max(len(recipes), 1)
    for ax, layer in zip(axes[:, 0], layers):
        for k, recipe in enumerate(recipes):
            points = [(r["phase"] + (k - (len(recipes) - 1) / 2) * offset, r["ratio"], (r.get("noise") or 0) * r["ratio"])
                      for r in timed if r["layer"] == layer and r["recipe"] == recipe]
            if points:
                xs, ys, es = zip(*points)
                ax.errorbar(xs, ys, yerr=es, fmt="o", markersize=3, capsize=2, linewidth=0.8, label=recipe)
        if timed:
            ax.axhline(1.0, color="black", linewidth=0.8)
            ax.set_xticks(phases, [str(p) for p in phases], fontsize=7)
            ax.set_xlim(min(phases) - 0.6, max(phases) + 0.6)
            ax.set_ylabel(f"{layer}\nspliced / reference", fontsize=8)
            ax.grid(axis="y", linewidth=0.3)
    if timed:
        axes[-1, 0].set_xlabel("phase")
        axes[0, 0].legend(fontsize=7, ncol=len(recipes), loc="upper right")
    fig.suptitle("Time of the spliced kernel over the unspliced one (error bars: the ratio's noise)", fontsize=10,
                 x=0.02, ha="left")
    return _save(fig, out / "ratios.png", plt)


def _wrap(text: str, width: int = 70) -> str:
    return "\n".join(textwrap.wrap(text, width))


def _compile_figure(rows: list[dict], recipes: list[str], out: Path, plt) -> Path:
    """One panel per ptxas figure: each recipe's delta against the unspliced kernel, per cell."""
    cells = _cells(rows)
    at = {cell: j for j, cell in enumerate(cells)}
    shown = ("registers", "spill_stores", "spill_loads", "stack_bytes")
    fig, axes = plt.subplots(len(shown), 1, squeeze=False, sharex=True,
                             figsize=(max(8.0, 0.28 * len(cells) + 3), 1.9 * len(shown) + 1.2))
    offset = 0.6 / max(len(recipes), 1)
    for ax, figure in zip(axes[:, 0], shown):
        refs = sorted({r[f"ref_{figure}"] for r in rows if r.get(f"ref_{figure}") is not None})
        largest = 0
        for k, recipe in enumerate(recipes):
            points = [(at[(r["layer"], r["phase"])] + (k - (len(recipes) - 1) / 2) * offset, r[f"{figure}_delta"])
                      for r in rows if r["recipe"] == recipe and r.get(f"{figure}_delta") is not None]
            if not points:
                continue
            xs, ds = zip(*points)
            ax.plot(xs, ds, "o", markersize=4, label=recipe)
            largest = max(largest, *map(abs, ds))
            if len(cells) <= 12:  # few cells: the figures themselves
                for x, d in points:
                    ax.annotate(f"{d:+d}", (x, d), textcoords="offset points", xytext=(0, 4), ha="center", fontsize=6)
        ax.axhline(0, color="black", linewidth=0.8)
        ax.set_ylim(-1.4 * max(largest, 1), 1.4 * max(largest, 1))  # zero in the middle, also when nothing changed
        reference = ("reference " + (f"{refs[0]}" if len(refs) == 1 else f"{refs[0]}–{refs[-1]}")) if refs else \
            "no reference compile"
        ax.set_ylabel(f"Δ {_FIGURE_TITLES[figure]}\n({reference})", fontsize=7)
        ax.grid(axis="y", linewidth=0.3)
    axes[-1, 0].set_xticks(range(len(cells)), [f"{layer} p{p}" for layer, p in cells], rotation=90, fontsize=7)
    axes[-1, 0].set_xlim(-0.6, len(cells) - 0.4)
    axes[0, 0].legend(fontsize=7, ncol=max(len(recipes), 1), loc="upper right")
    fig.suptitle("ptxas figures of each splice minus the unspliced kernel's (0: no change)", fontsize=10,
                 x=0.02, ha="left")
    return _save(fig, out / "compile.png", plt)


_CSS = """body{font-family:sans-serif;font-size:13px;margin:12px;color:#222}
h1{font-size:17px}p{max-width:70em}
table{border-collapse:collapse}th,td{border:1px solid #ccc;padding:3px 6px;vertical-align:top;text-align:left}
th{background:#eee;position:sticky;top:0}"""


def html_page(title: str, intro: str, frame) -> str:
    """A standalone HTML page: a heading, a paragraph and a pandas DataFrame as a table (the report
    shows it in its page); a cell's lines stay lines."""
    cells = frame.map(lambda v: html.escape(v).replace("\n", "<br>") if isinstance(v, str) else "–" if v is None else v)
    table = cells.to_html(index=False, escape=False, na_rep="–", border=0)
    return (f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f"<style>{_CSS}</style></head>\n<body><h1>{html.escape(title)}</h1><p>{html.escape(intro)}</p>\n"
            f"{table}\n</body></html>\n")


def _mark(passed: bool | None) -> str:
    return {True: "✓", False: "✗", None: "–"}[passed]


_UNITS = {"outside_unchanged": " statements compared", "identical_output": " differing elements"}


def _check_text(check: dict) -> str:
    """`✓ psnr 44.9 dB (threshold 40)`, `✗ identical_output 12 differing elements: …`."""
    value, name = check["value"], check["check"]
    if value is None:
        figure = ""
    elif name == "psnr":
        figure = f" {_psnr_text(value)} dB (threshold {check['threshold']:g})"
    else:
        figure = f" {value:g}{_UNITS.get(name, '')}"
    return f"{_mark(check['passed'])} {name}{figure}" + ("" if check["passed"] else f": {check['detail']}")


SAME_NAMED = 8  # identical buffers named in a row's cell; more are counted


def _buffers_text(buffers: list[dict]) -> str | None:
    """The differing buffers, one a line, and how many are identical."""
    if not buffers:
        return None
    lines = [f"{b['name']} ({b['dtype']}): {b['differing_elements']}/{b['elements']} differ, max |Δ| "
             f"{_number(b['max_abs_diff'])}, PSNR {_psnr_text(b['psnr_db'])} dB" for b in buffers if not b["identical"]]
    same = [b["name"] for b in buffers if b["identical"]]
    if len(same) == len(buffers):
        lines.append(f"all {len(same)} identical")  # a frame's 66 names would fill the cell
    elif len(same) > SAME_NAMED:
        lines.append(f"the other {len(same)} identical")
    elif same:
        lines.append(f"{len(same)} identical: {', '.join(same)}")
    return "\n".join(lines)


def _figure_text(row: dict, figure: str) -> str | None:
    ref, value, delta = row.get(f"ref_{figure}"), row.get(figure), row.get(f"{figure}_delta")
    if value is None and ref is None:
        return None
    text = f"{'–' if ref is None else ref} → {'–' if value is None else value}"
    return text + ("" if delta is None else f" ({delta:+d})")


def _status_text(row: dict) -> str:
    """The stages that did not end ok, with why."""
    lines = [f"{stage}: {row.get(f'{stage}_status')}" + (f" — {m}" if (m := row.get(f"{stage}_message")) else "")
             for stage in ("splice", "compile", "capture", "timing") if row.get(f"{stage}_status") != Status.OK]
    return "\n".join(lines) or "all ok"


def _summary_frame(rows: list[dict]):
    import pandas as pd

    return pd.DataFrame([{
        "layer": r["layer"], "phase": r["phase"], "recipe": r["recipe"],
        "M×N×K": None if r.get("M") is None else f"{r['M']}×{r['N']}×{r['K']}",
        "passed": _mark(r.get("passed")),
        "checks": "\n".join(_check_text(c) for c in r.get("checks") or []),
        "identical": None if r.get("frame_identical") is None else ("yes" if r["frame_identical"] else "no"),
        "worst buffer": r.get("worst_buffer"), "PSNR dB": _psnr_text(r.get("psnr_db")),
        "buffers": _buffers_text(r.get("buffers") or []),
        "registers": _figure_text(r, "registers"), "spill stores / loads": " / ".join(
            t for t in (_figure_text(r, "spill_stores"), _figure_text(r, "spill_loads")) if t) or None,
        "ratio": None if r.get("ratio") is None else f"{r['ratio']:.4f} ± {(r.get('noise') or 0):.2%}",
        "stages not ok": _status_text(r),
    } for r in rows])


def _compile_frame(rows: list[dict]):
    import pandas as pd

    return pd.DataFrame([{
        "layer": r["layer"], "phase": r["phase"], "recipe": r["recipe"], "compile": r.get("compile_status"),
        "reference compile": r.get("ref_compile_status"),
        **{_FIGURE_TITLES[f]: _figure_text(r, f) for f in FIGURES},
    } for r in rows])


def _phase_frame(spec: dict):
    import pandas as pd

    return pd.DataFrame([{c: p.get(c) for c in _PHASE_COLUMNS} for p in spec["phases"]], columns=list(_PHASE_COLUMNS))


def _csv_frame(summary: pa.Table):
    """Every column; the list columns (checks, buffers, offsets) as JSON text."""
    frame = summary.to_pandas()
    for name in ("checks", "buffers", "b_offsets", "c_offsets"):
        frame[name] = [None if v is None else json.dumps(_plain(v)) for v in summary.column(name).to_pylist()]
    return frame


def _plain(value):
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def run_facts(rows: list[dict]) -> str:
    """The first page's reStructuredText: backend, frame size and device the captures ran on, the
    cells and the verdicts (workflow/report/workflow.rst includes it)."""
    backends = sorted({r["capture_backend"] for r in rows if r.get("capture_backend")})
    frames = sorted({r["frame"] for r in rows if r.get("frame")})
    devices = sorted({r["capture_device"] for r in rows if r.get("capture_device")})
    gpus = sorted({f"{r['gpu']} (driver {r['driver']})" for r in rows if r.get("gpu")})
    cells = _cells(rows)
    verdicts = [r.get("passed") for r in rows]
    lines = [f":Backend: {', '.join(backends) or 'none (no capture ran)'}"]
    if "cpu" in backends:
        lines[0] += (" — the captures ran on rr's PTX interpreter (numpy), not on a GPU: its mma is a model of "
                     "the tensor core's, and it gives no timing")
    frame = ", ".join(frames) or "–"
    if "cpu" in backends:
        frame += " pixels — the workflow's ``cpu_frame``, which cpu-backend captures cover instead of ``frame``"
    lines += [f":Frame: {frame}",
              f":GPU: {', '.join(gpus) or ', '.join(d for d in devices if 'interpreter' not in d) or 'none'}",
              f":Cells: {len(cells)} (layer × phase) × {len({r['recipe'] for r in rows})} recipes = {len(rows)} rows",
              f":Verdicts: {verdicts.count(True)} passed every check, {verdicts.count(False)} failed a check, "
              f"{verdicts.count(None)} not fully measured"]
    versions = sorted({f"{r['rr_version']} (code {r['code_fingerprint']})" for r in rows if r.get("rr_version")})
    if versions:
        lines.append(f":rr: {', '.join(versions)}")
    return "\n".join(lines) + "\n"


PHASES = "phases"  # the directory of the layers' phase tables


def _write_report(summary: pa.Table, descriptors: dict[str, dict], out: Path, plt) -> list[str]:
    rows = summary.to_pylist()
    recipes = list(dict.fromkeys(r["recipe"] for r in rows))
    written = [_identity_figure(rows, recipes, out, plt), _ratio_figure(rows, recipes, out, plt),
               _compile_figure(rows, recipes, out, plt)]
    pages = {"compile.html": ("ptxas figures: reference → splice (delta)",
                              "Each splice's entry against the unspliced kernel's, as ptxas -v reports them.",
                              _compile_frame(rows)),
             "summary.html": ("Every row of the sweep",
                              "One row per recipe per layer × phase cell: the recipe's checks (✓ passed, ✗ failed, "
                              "– not measured), the per-buffer verdicts, the compile deltas, the time ratio and "
                              "every stage's status.", _summary_frame(rows))}
    # the layers' phase tables in a directory of their own: the workflow knows that directory
    # before it knows the layers (a corpus of one's own is extracted first, by a checkpoint)
    (out / PHASES).mkdir()
    for layer, spec in descriptors.items():
        pages[f"{PHASES}/phases_{layer}.html"] = (f"Phases of {layer}", f"{spec.get('entry', layer)}: the phase "
                                                  "table as rr spec derives it from the mma chains.", _phase_frame(spec))
        _phase_frame(spec).to_csv(out / PHASES / f"phases_{layer}.csv", index=False)
        written.append(out / PHASES / f"phases_{layer}.csv")
    for name, (title, intro, frame) in pages.items():
        (out / name).write_text(html_page(title, intro, frame), encoding="utf-8")
        written.append(out / name)
    _csv_frame(summary).to_csv(out / "summary.csv", index=False)
    (out / "run.rst").write_text(run_facts(rows), encoding="utf-8")
    written += [out / "summary.csv", out / "run.rst"]
    return [str(p.relative_to(out)) for p in written]
