"""Collecting one layer × phase cell: the records each stage wrote, one row per recipe.

For recipe R the cell directory holds `R.ptx.splice.json` (rr splice), `R.cubin.json`
(rr compile), `R.run.json` (the spliced capture's run record, from rr run), `R.compare.json`
(rr compare --json of the reference and spliced captures) and `R.timing.json` (rr time -o); the
layer's unspliced module has its own compile record (`reference.cubin.json`), read beside every
row (their names, shapes and status words: rr.records, whose reader checks each). A missing
record makes its stage `not_run`, with the reason: an earlier stage failed or did
not run, or the stage has not run for this cell. The recipe's checks are then evaluated on the row
(rr.results.checks).
"""

from __future__ import annotations

import datetime
import math
import os
from pathlib import Path

import pyarrow as pa

from rr import __version__
from rr.fingerprint import fingerprint as code_fingerprint
from rr.records import COMPARE, COMPILE, DESCRIPTOR, LAYER_TIMING, RUN, SPLICE, TIMING, Kind, Status, read_record
from rr.results.checks import evaluate, verdict
from rr.results.schema import RESULTS_SCHEMA
from rr.run.compile import FIGURES, entry_figures
from rr.splice.recipe import RecipeError, load_recipe, recipe_name
from rr.validation import read_json, validate

CPU_NO_TIMING = ("the captures ran on the cpu backend (rr's PTX interpreter), which gives no timing: "
                 "timing needs the cuda backend, so none was scheduled")


def read_descriptor(path: str | Path) -> dict:
    """A layer's descriptor.json, checked for what the rows are made of."""
    return read_record(path, DESCRIPTOR)


def launch_frame(launch: str | Path) -> str | None:
    """"WIDTHxHEIGHT" of the frame a launch directory covers (its frame.json), if it says."""
    path = Path(launch) / "frame.json"
    if not path.is_file():
        return None
    record = read_json(path)
    validate(record, {"type": "object", "required": ["frame"], "properties": {"frame": {
        "type": "array", "minItems": 2, "maxItems": 2, "items": {"type": "integer"}}}}, str(path))
    return f"{record['frame'][0]}x{record['frame'][1]}"


def _read(path: Path, kind: Kind) -> dict | list | None:
    """A stage's record of `kind` (rr.records.read_record), or None where the stage wrote none
    (anything else at `path`, a FIFO or a directory, is refused naming it)."""
    return read_record(path, kind) if os.path.lexists(path) else None


def _not_run(row: dict, stage: str, why: str) -> None:
    row[f"{stage}_status"] = Status.NOT_RUN
    row[f"{stage}_message"] = why


def _psnr(value) -> float | None:
    return float("inf") if value == "inf" else value


def _buffers(compare: list) -> list[dict]:
    """The row's per-buffer verdicts from rr compare's record."""
    return [{"name": r["buffer"], "dtype": r["dtype"], "identical": r["identical"], "elements": r["elements"],
             "differing_elements": r["differing_elements"], "max_abs_diff": _psnr(r["max_abs_diff"]),
             "psnr_db": _psnr(r["psnr_db"])} for r in compare]


def worst_buffer(buffers: list[dict]) -> dict | None:
    """The differing buffer with the lowest PSNR (non-finite differences first, then the larger
    share of differing elements); None when every buffer is identical."""
    differing = [b for b in buffers if not b["identical"]]
    if not differing:
        return None
    return min(differing, key=lambda b: (-math.inf if b["psnr_db"] is None else b["psnr_db"],
                                         -b["differing_elements"] / max(b["elements"], 1)))


def reference_compile(path: str | Path | None, entry: str) -> dict:
    """The ref_* columns from the unspliced module's compile record (rr compile of the layer's module)."""
    record = _read(Path(path), COMPILE) if path else None
    if record is None:
        return {"ref_compile_status": Status.NOT_RUN,
                "ref_compile_message": f"no compile record of the unspliced module{f' ({path})' if path else ''}"}
    cols = {"ref_compile_status": record["status"], "ref_compile_message": record["message"]}
    figures = entry_figures(record, entry) or {}
    cols.update({f"ref_{f}": figures.get(f) for f in FIGURES})
    return cols


def _compile(row: dict, compiled: dict, entry: str) -> None:
    figures = entry_figures(compiled, entry) or {}
    row.update(compile_status=compiled["status"], compile_message=compiled["message"], compile_backend="ptxas",
               arch=compiled["arch"], compile_ms=compiled["compile_ms"], **{f: figures.get(f) for f in FIGURES})
    for f in FIGURES:
        if row.get(f) is not None and row.get(f"ref_{f}") is not None:
            row[f"{f}_delta"] = row[f] - row[f"ref_{f}"]


def _capture(row: dict, run: dict | None, compare: list | None) -> None:
    if run is not None and run["status"] != Status.OK:
        row.update(capture_status=run["status"], capture_message=run["message"], capture_backend=run.get("backend"))
        return
    if not compare:
        _not_run(row, "capture", "no capture comparison for this cell (rr compare did not run or compared nothing)")
        return
    buffers = _buffers(compare)
    worst = worst_buffer(buffers)
    row.update(capture_status=Status.OK, capture_message="", capture_backend=(run or {}).get("backend"),
               capture_device=(run or {}).get("device", {}).get("name"), buffers=buffers,
               worst_buffer=worst and worst["name"], frame_identical=worst is None,
               psnr_db=math.inf if worst is None else worst["psnr_db"],
               max_abs_diff=0.0 if worst is None else worst["max_abs_diff"])
    if "layer" in compare[0]:  # two frame runs, the final frame first: the question is its bytes
        differing = next((r for r in compare[1:] if not r["identical"]), None)
        final = buffers[0]  # its PSNR is the row's (the recipe's checks judge the final frame)
        row.update(final_buffer=final["name"], frame_identical=compare[0]["identical"], psnr_db=final["psnr_db"],
                   max_abs_diff=final["max_abs_diff"],
                   first_differing_layer=differing and differing["layer"],
                   first_differing_buffer=differing and differing["buffer"],
                   capture_started_at=(run or {}).get("start"),
                   capture_completed_after=(run or {}).get("completed_from_reference_after"))


def _timing(row: dict, timing: dict | None, backend: str | None, run: dict | None) -> None:
    # nothing to time, whatever the backend
    if backend == "cpu" and run is not None and run["status"] == Status.NO_LAUNCH:
        row.update(timing_status=Status.NO_LAUNCH, timing_message=run["message"])
    elif backend == "cpu":
        row.update(timing_status=Status.UNSUPPORTED, timing_message=CPU_NO_TIMING)
    elif timing is None:
        _not_run(row, "timing", "no timing for this cell")
    elif timing["status"] != Status.OK:
        row.update(timing_status=timing["status"], timing_message=timing["message"])
    else:
        ref, oth = timing["reference"], timing["other"]
        row.update(timing_status=Status.OK, timing_message="", ref_median_ms=ref["median_ms"],
                   splice_median_ms=oth["median_ms"], splice_min_ms=oth["min_ms"], splice_max_ms=oth["max_ms"],
                   noise=timing["ratio_noise"], samples=oth["samples"], ratio=timing["ratio"],
                   gpu=timing["device"]["name"], driver=str(timing["device"].get("driver_version") or
                                                             timing["device"]["driver"]))


def recipe_row(layer: str, phase: int | None, recipe: str, descriptor: dict, cell: Path, module_hash: str,
               fingerprint: str, reference: dict | None = None, backend: str | None = None) -> dict:
    """The stages' columns of one recipe's row (its checks are added by `collect_cell`); `reference`
    is the ref_* columns (`reference_compile`), `backend` the one the cell's captures ran on."""
    p = next((x for x in descriptor["phases"] if x["phase"] == phase), None)
    row = {"layer": layer, "phase": phase, "recipe": recipe, "entry": descriptor["entry"],
           "module_hash": module_hash, "rr_version": __version__, "code_fingerprint": fingerprint,
           "created_at": datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0), **(reference or {})}
    if not descriptor["phases"]:  # a layer without mma (rr describe --record): its status row, phase null
        row.update(splice_status=descriptor.get("status", Status.NO_PHASES),
                   splice_message=descriptor.get("message", ""))
        for stage in ("compile", "capture", "timing"):
            _not_run(row, stage, "the layer has no phases")
        return row
    if p is not None:
        row.update({k: p[k] for k in ("M", "N", "K", "mma", "first_stmt", "last_stmt", "b_offsets", "c_offsets")})
    splice = _read(SPLICE.in_cell(cell, recipe), SPLICE)
    if splice is None:
        _not_run(row, "splice", f"no splice record {SPLICE.in_cell(cell, recipe)}: the splice failed "
                 f"or did not run (its log says why)")
        for stage in ("compile", "capture", "timing"):
            _not_run(row, stage, "no spliced PTX")
        return row
    if splice["status"] != Status.OK:
        row.update(splice_status=splice["status"], splice_message=splice.get("message", ""))
        why = ("the recipe does not apply to this phase" if splice["status"] == Status.NOT_APPLICABLE
               else "the splice was refused")
        for stage in ("compile", "capture", "timing"):
            _not_run(row, stage, why)
        return row
    row.update(template=splice["template"], splice_status=splice["status"], splice_message="",
               stmts_cut=splice["cut"]["statements"], stmts_inserted=splice["inserted_statements"],
               live_in=len(splice["live_in"]), live_out=len(splice["live_out"]),
               outside_checked=splice["outside_statements_checked"], spliced_sha1=splice["spliced_sha1"])
    if "regen" in splice:
        row.update({k: splice["regen"][k] for k in ("operands_rebuilt", "operands_live_in", "operands_chained")})
    compiled = _read(COMPILE.in_cell(cell, recipe), COMPILE)
    if compiled is None:
        _not_run(row, "compile", "no compile report")
    else:
        _compile(row, compiled, descriptor["entry"])
    run = _read(RUN.in_cell(cell, recipe), RUN)
    _capture(row, run, _read(COMPARE.in_cell(cell, recipe), COMPARE))
    layer_timing = _read(LAYER_TIMING.in_cell(cell, recipe), LAYER_TIMING)
    if layer_timing is None:  # one layer's launch: its timing is the layer's
        _timing(row, _read(TIMING.in_cell(cell, recipe), TIMING), backend, run)
        return row
    _timing(row, layer_timing, backend, run)  # a frame's cell: the layer alone, then the whole frame
    frame_timing = _read(TIMING.in_cell(cell, recipe), TIMING)
    if frame_timing is not None and frame_timing.get("status") == Status.OK:
        row.update(frame_ref_median_ms=frame_timing["reference"]["median_ms"],
                   frame_splice_median_ms=frame_timing["other"]["median_ms"],
                   frame_noise=frame_timing["ratio_noise"], frame_ratio=frame_timing["ratio"])
    return row


def recipe_checks(given: str, row: dict) -> list[dict]:
    """The checks of a recipe given by name or path, evaluated on its row; a recipe that cannot be
    read (its splice was refused for it) is one failed check saying why."""
    try:
        return evaluate(load_recipe(given), row)
    except RecipeError as e:
        return [{"check": "recipe", "passed": False, "value": None, "threshold": None, "detail": str(e)}]


def collect_cell(layer: str, phase: int | None, recipes: list[str], descriptor: dict, cell: str | Path,
                 module_hash: str, frame: str | None = None, reference: str | Path | None = None,
                 backend: str | None = None) -> pa.Table:
    """One row per recipe (a name or a recipe file); `frame` ("WIDTHxHEIGHT" in pixels) is the frame
    the captures ran on, `reference` the unspliced module's compile record, `backend` the backend
    the captures ran on (cpu: no timing)."""
    fingerprint = code_fingerprint("all")
    ref = reference_compile(reference, descriptor["entry"]) if descriptor["phases"] else None
    rows = []
    for given in recipes:  # the records of recipe file F.yaml go by its stem, as the workflow names them
        row = recipe_row(layer, phase, recipe_name(given), descriptor, Path(cell), module_hash, fingerprint, ref,
                         backend)
        row["frame"] = frame
        if descriptor["phases"]:
            checks = recipe_checks(given, row)
            row.update(checks=checks, passed=verdict(checks))
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=RESULTS_SCHEMA)
