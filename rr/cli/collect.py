"""The collect command: one Parquet row per recipe of a cell (the workflow's collect stage)."""

from __future__ import annotations

from rr.cli.common import UserError, phase_number, resolve_ptx
from rr.validation import read_bytes


def cmd_collect(args) -> int:
    from rr.corpus.fnv import fnv1a64_hex
    from rr.io import write_parquet
    from rr.results.collect import collect_cell, launch_frame, read_descriptor

    descriptor = read_descriptor(args.descriptor)
    if args.phase is None and descriptor["phases"]:
        raise UserError(f"--phase is required: {args.descriptor} has phases 1–{len(descriptor['phases'])}")
    module = resolve_ptx(args.module, descriptor["entry"])
    frame = launch_frame(args.launch) if args.launch else None
    table = collect_cell(args.layer, args.phase, args.recipes.split(","), descriptor, args.cell,
                         fnv1a64_hex(read_bytes(module)), frame, args.reference_compile, args.backend)
    write_parquet(args.output, table)
    statuses = ", ".join(f"{r['recipe']}: splice {r['splice_status']}, compile {r['compile_status']}, "
                         f"capture {r['capture_status']}, timing {r['timing_status']}" for r in table.to_pylist())
    print(f"{args.output}: {table.num_rows} rows ({statuses})")
    return 0


def add_parsers(sub) -> None:
    s = sub.add_parser("collect", help="one Parquet row per recipe of a layer × phase cell")
    s.add_argument("cell", help="the cell directory holding the recipes' stage records")
    s.add_argument("--layer", required=True, help="the layer's name, as the rows give it")
    s.add_argument("--phase", type=phase_number, help="the cell's phase (none for a layer without phases)")
    s.add_argument("--recipes", required=True,
                   help="comma-separated recipes (names, resolved as rr splice does, or files): their checks are "
                        "evaluated; records go by the name or the file's stem")
    s.add_argument("--descriptor", required=True, help="the layer's descriptor.json")
    s.add_argument("--module", required=True, help="the layer's PTX file or corpus directory")
    s.add_argument("--launch", help="the layer's launch directory (for the frame size)")
    s.add_argument("--reference-compile", metavar="JSON",
                   help="the unspliced module's compile record (rr compile of the layer's module): the ref_* "
                        "columns and the deltas")
    s.add_argument("--backend", choices=("cuda", "cpu"),
                   help="the backend the captures ran on; cpu: the rows say there is no timing (default: "
                        "timing as the records say)")
    s.add_argument("-o", "--output", required=True, help="OUT.parquet")
    s.set_defaults(func=cmd_collect, reads=("cell", "descriptor", "module", "launch", "reference_compile"))
