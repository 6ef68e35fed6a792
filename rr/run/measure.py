"""One splice measured whole: its launch made, captured, compared with the reference, and timed —
what the workflow did in six jobs a recipe, done in one (`rr measure`).

A sweep's GPU work is many small pieces (a 4K capture's kernels run 2 ms, a timing's samples a
quarter of a second), and a job for each — a process to start, a launch directory to validate,
Snakemake's own bookkeeping — cost more than the work: 4.5 s of jobs a cell. Here the pieces of a
recipe run one after another in one process, each through the same functions the separate
commands call (rr relaunch, rr run --reference, rr compare, rr time, rr relaunch --extract), and
each writes the record that command's job wrote, under the same name. The GPU is claimed for each
piece on the device only (rr.run.isolate), so a comparison or another job's start-up runs beside a
capture or a timing — never two of those at once on one GPU — and with RR_WORKER=1 they go to the
GPU's long-lived worker, where the frame stays resident from one job to the next (rr.run.worker).

The directories in between (the splice's launch, its capture, its layer alone) are made under a
temporary directory beside the cell (rr.io.scratch_dir: the same file system, so hard links; a
killed measurement's is removed by the next) and removed at the end, or kept in the cell with
`keep` — each replacing only a directory rr wrote there, which is checked before any work. A
piece that fails leaves its record saying so and the next pieces record what they can: a splice
that does not launch is a bad_launch run, nothing compared, and timings of the same status, as the
separate jobs recorded it. The cell appears with the first record written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rr.io import check_output, replace_dir, scratch_dir
from rr.records import COMPARE, LAYER_TIMING, RUN, TIMING, Kind, Status, write_record


@dataclass(frozen=True)
class Measurement:
    """What to measure: a splice's module in a launch or frame (the layer it replaces, for a frame),
    against the reference capture of that launch or frame; its splice record says what a probe
    splice's extra parameter points to (rr.run.launch.replacing)."""

    launch: Path  # the layer's launch directory, or the frame layout
    module: Path  # the splice: a cubin on cuda, PTX on the cpu backend
    reference: Path  # the unspliced capture of `launch`
    layer: str | None = None  # for a frame: the layer the splice replaces
    alone: Path | None = None  # for a frame on cuda: the layer alone from the reference (rr relaunch --extract)
    backend: str = "auto"
    noise: float = 0.005
    time_limit_s: float = 30.0
    timeout_s: float = 3600.0
    splice_record: Path | None = None  # rr splice's record of `module`


def measure(m: Measurement, cell: Path, recipe: str, keep: bool = False, say=print) -> dict[Kind, dict | list]:
    """Measure one recipe's splice into `cell`: <recipe>.run.json, .compare.json and, on cuda,
    .timing.json (the frame or launch) and, for a frame, .layer_timing.json (its layer alone);
    returns them by kind. With `keep` its launch, capture and layer-alone directories stay in
    `cell` (<recipe>.launch, .capture, .alone.launch); OutputRefused, before any work, where one
    of those is there and not rr's."""
    from rr.run.gpus import resolve_backend
    from rr.run.isolate import run_isolated

    backend = resolve_backend(m.backend)
    kinds = ("launch", "capture", "alone.launch")
    if keep:
        for kind in kinds:
            check_output(cell / f"{recipe}.{kind}", (m.launch, m.module, m.reference, m.alone, m.splice_record), "dir")
    records = {}
    with scratch_dir(cell) as work:
        dirs = {kind: work / f"{recipe}.{kind}" for kind in kinds}
        _splice_launch(m, backend, dirs["launch"])
        records[RUN] = _in_cell(run_isolated(dirs["launch"], dirs["capture"], backend, m.timeout_s,
                                             reference=m.reference), work, cell)
        say(f"{recipe}: run {records[RUN]['status']}")
        write_record(RUN.in_cell(cell, recipe), records[RUN])
        records[COMPARE] = _compare(m.reference, dirs["capture"])
        same = all(r["identical"] for r in records[COMPARE]) if records[COMPARE] else None
        say(f"{recipe}: " + ("nothing compared" if same is None else "identical" if same else "differs"))
        write_record(COMPARE.in_cell(cell, recipe), records[COMPARE])
        if backend == "cuda":
            records[TIMING] = _in_cell(_timed(m, m.launch, dirs["launch"], recipe, "", say), work, cell)
            write_record(TIMING.in_cell(cell, recipe), records[TIMING])
            if m.alone is not None:
                _layer_alone(m, dirs["alone.launch"])
                records[LAYER_TIMING] = _in_cell(_timed(m, m.alone, dirs["alone.launch"], recipe, " (layer alone)",
                                                        say), work, cell)
                write_record(LAYER_TIMING.in_cell(cell, recipe), records[LAYER_TIMING])
        if keep:
            for d in dirs.values():
                if d.exists():
                    replace_dir(d, cell / d.name)
    return records


def _in_cell(record: dict, work: Path, cell: Path) -> dict:
    """The record with its message naming the cell's directories, not the temporary they were made in."""
    if record.get("message"):
        record["message"] = record["message"].replace(str(work), str(cell))
    return record


def _splice_launch(m: Measurement, backend: str, out: Path) -> None:
    """The launch (or frame) with the splice's module; where it cannot be made, a launch directory
    saying why (what `rr relaunch --record` writes), which the runs of it record."""
    from rr.run.frame import is_frame, replace_layer
    from rr.run.launch import LaunchError, relaunch, write_launch_error

    try:
        if is_frame(m.launch):
            if m.layer is None:
                raise LaunchError(f"{m.launch} is a frame: say which layer the splice replaces")
            # the cpu backend resumes the frame at the replaced layer from the reference capture
            replace_layer(m.launch, m.layer, m.module, out, m.reference if backend == "cpu" else None,
                          m.splice_record)
        else:
            relaunch(m.launch, m.module, out, m.splice_record)
    except LaunchError as e:
        write_launch_error(out, e)


def _layer_alone(m: Measurement, out: Path) -> None:
    """The replaced layer alone with the splice's module, its buffers as the reference run left them."""
    from rr.run.frame import extract_layer
    from rr.run.launch import LaunchError, write_launch_error

    try:
        extract_layer(m.reference, m.layer, out, m.module, m.splice_record)
    except LaunchError as e:
        write_launch_error(out, e)


def _compare(reference: Path, capture: Path) -> list[dict]:
    """What `rr compare --record` writes: the comparison, or nothing for a run without buffers."""
    from rr.run.frame import compare_runs
    from rr.run.launch import LaunchError

    try:
        return compare_runs(reference, capture).records()
    except LaunchError:
        return []


def _timed(m: Measurement, reference: Path, other: Path, recipe: str, what: str, say) -> dict:
    from rr.run.isolate import time_isolated

    record = time_isolated(reference, other, m.noise, m.time_limit_s, "cuda")
    if record["status"] == Status.OK:
        say(f"{recipe}: ratio{what} {record['ratio']:.4f} ± {record['ratio_noise']:.2%} ({record['stop']})")
    else:
        say(f"{recipe}: timing{what} {record['status']}: {record.get('message', '')}")
    return record

