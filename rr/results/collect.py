"""Collecting one layer × phase cell: the records each stage wrote, one row per recipe.

For recipe R the cell directory holds `R.ptx.splice.json` (rr splice), `R.cubin.json`
(rr compile), `R.run.json` (the spliced capture's run record, from rr run), `R.compare.json`
(rr compare --json of the reference and spliced captures) and `R.timing.json` (rr time -o). A missing record makes its stage `not_run`, with the reason: an earlier
stage failed or did not run, or the stage has not run for this cell.
"""

from __future__ import annotations

import datetime
from pathlib import Path

import pyarrow as pa

from rr import __version__
from rr.fingerprint import fingerprint as code_fingerprint
from rr.results.schema import RESULTS_SCHEMA
from rr.validation import read_json, validate


DESCRIPTOR_SCHEMA = {  # what collect and the report read of a descriptor.json (rr describe writes it all)
    "type": "object",
    "required": ["entry", "phases"],
    "properties": {"entry": {"type": "string"},
                   "phases": {"type": "array", "items": {"type": "object", "required": ["phase"],
                                                         "properties": {"phase": {"type": "integer"}}}}},
}


def read_descriptor(path: str | Path) -> dict:
    """A layer's descriptor.json, checked for what the rows are made of."""
    descriptor = read_json(path)
    validate(descriptor, DESCRIPTOR_SCHEMA, str(path))
    return descriptor


def launch_frame(launch: str | Path) -> str | None:
    """"WIDTHxHEIGHT" of the frame a launch directory covers (its frame.json), if it says."""
    path = Path(launch) / "frame.json"
    if not path.is_file():
        return None
    record = read_json(path)
    validate(record, {"type": "object", "required": ["frame"], "properties": {"frame": {
        "type": "array", "minItems": 2, "maxItems": 2, "items": {"type": "integer"}}}}, str(path))
    return f"{record['frame'][0]}x{record['frame'][1]}"


def _read(path: Path) -> dict | None:
    return read_json(path) if path.is_file() else None


def _not_run(row: dict, stage: str, why: str) -> None:
    row[f"{stage}_status"] = "not_run"
    row[f"{stage}_message"] = why


def recipe_row(layer: str, phase: int | None, recipe: str, descriptor: dict, cell: Path, module_hash: str,
               fingerprint: str) -> dict:
    p = next((x for x in descriptor["phases"] if x["phase"] == phase), None)
    row = {"layer": layer, "phase": phase, "recipe": recipe, "entry": descriptor["entry"],
           "module_hash": module_hash, "rr_version": __version__, "code_fingerprint": fingerprint,
           "created_at": datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)}
    if not descriptor["phases"]:  # a layer without mma (rr describe --record): its status row, phase null
        row.update(splice_status=descriptor.get("status", "no_phases"), splice_message=descriptor.get("message", ""))
        for stage in ("compile", "capture", "timing"):
            _not_run(row, stage, "the layer has no phases")
        return row
    if p is not None:
        row.update({k: p[k] for k in ("M", "N", "K", "mma", "first_stmt", "last_stmt", "b_offsets", "c_offsets")})
    splice = _read(cell / f"{recipe}.ptx.splice.json")
    if splice is None:
        _not_run(row, "splice", f"no splice record {cell / (recipe + '.ptx.splice.json')}: the splice failed "
                 f"or did not run (its log says why)")
        for stage in ("compile", "capture", "timing"):
            _not_run(row, stage, "no spliced PTX")
        return row
    if splice["status"] != "ok":
        row.update(splice_status=splice["status"], splice_message=splice.get("message", ""))
        for stage in ("compile", "capture", "timing"):
            _not_run(row, stage, "the splice was refused")
        return row
    row.update(template=splice["template"], splice_status=splice["status"], splice_message="",
               stmts_cut=splice["cut"]["statements"], stmts_inserted=splice["inserted_statements"],
               live_in=len(splice["live_in"]), live_out=len(splice["live_out"]), spliced_sha1=splice["spliced_sha1"])
    if "regen" in splice:
        row.update({k: splice["regen"][k] for k in ("operands_rebuilt", "operands_live_in", "operands_chained")})
    compiled = _read(cell / f"{recipe}.cubin.json")
    if compiled is None:
        _not_run(row, "compile", "no compile report")
    else:
        fn = compiled["functions"].get(descriptor["entry"], {})
        row.update(compile_status=compiled["status"], compile_message=compiled["message"], compile_backend="ptxas",
                   arch=compiled["arch"], registers=fn.get("registers"),
                   spill_bytes=(fn.get("spill_stores") or 0) + (fn.get("spill_loads") or 0) if fn else None,
                   shared_bytes=fn.get("shared_bytes"), compile_ms=compiled["compile_ms"])
    run = _read(cell / f"{recipe}.run.json")
    compare = _read(cell / f"{recipe}.compare.json")
    if run is not None and run["status"] != "ok":
        row.update(capture_status=run["status"], capture_message=run["message"], capture_backend=run.get("backend"))
    elif compare is None:
        _not_run(row, "capture", "no capture comparison for this cell (capture is not part of the pipeline yet)")
    else:
        psnrs = [float("inf") if r["psnr_db"] == "inf" else r["psnr_db"] for r in compare if r["psnr_db"] is not None]
        diffs = [r["max_abs_diff"] for r in compare if r["max_abs_diff"] is not None]
        row.update(capture_status="ok", capture_message="", capture_backend=(run or {}).get("backend"),
                   buffers_identical=[(r["buffer"], r["identical"]) for r in compare],
                   differing_bytes=sum(r["differing_bytes"] for r in compare),
                   max_abs_diff=max(diffs) if diffs else None, psnr_db=min(psnrs) if psnrs else None,
                   frame_identical=all(r["identical"] for r in compare))
    timing = _read(cell / f"{recipe}.timing.json")
    if timing is None:
        _not_run(row, "timing", "no timing for this cell")
    elif timing["status"] != "ok":
        row.update(timing_status=timing["status"], timing_message=timing["message"])
    else:
        ref, oth = timing["reference"], timing["other"]
        row.update(timing_status="ok", timing_message="", ref_median_ms=ref["median_ms"],
                   splice_median_ms=oth["median_ms"], splice_min_ms=oth["min_ms"], splice_max_ms=oth["max_ms"],
                   noise=timing["ratio_noise"], samples=oth["samples"], ratio=timing["ratio"],
                   gpu=timing["device"]["name"], driver=str(timing["device"].get("driver_version") or
                                                             timing["device"]["driver"]))
    return row


def collect_cell(layer: str, phase: int, recipes: list[str], descriptor: dict, cell: str | Path,
                 module_hash: str, frame: str | None = None) -> pa.Table:
    """One row per recipe; `frame` ("WIDTHxHEIGHT" in pixels) is the frame the captures ran on."""
    fingerprint = code_fingerprint("all")
    rows = [recipe_row(layer, phase, r, descriptor, Path(cell), module_hash, fingerprint) for r in recipes]
    for row in rows:
        row["frame"] = frame
    return pa.Table.from_pylist(rows, schema=RESULTS_SCHEMA)
