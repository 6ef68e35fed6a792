"""The report commands: summary (every cell's rows in one table) and report (its figures and pages; the workflow's report stage)."""

from __future__ import annotations

from rr.cli.common import UserError


def cmd_summary(args) -> int:
    from rr.io import write_parquet
    from rr.results.report import summary_table

    try:
        table = summary_table(args.cells)
    except ValueError as e:
        raise UserError(str(e)) from None
    write_parquet(args.output, table)
    print(f"{args.output}: {table.num_rows} rows from {len(args.cells)} cells")
    return 0


def cmd_report(args) -> int:
    from rr.results.collect import read_descriptor
    from rr.results.report import read_results, write_report

    descriptors = {}
    for item in args.descriptor:
        layer, _, path = item.partition("=")
        if not path:
            raise UserError(f"--descriptor {item!r}: expected LAYER=PATH")
        descriptors[layer] = read_descriptor(path)
    written = write_report(read_results(args.summary), descriptors, args.output)
    print(f"{args.output}: {', '.join(p.name for p in written)}")
    return 0


def add_parsers(sub) -> None:
    s = sub.add_parser("summary", help="concatenate cells' results into one table")
    s.add_argument("cells", nargs="*", help="results/<layer>_phase<P>.parquet files")
    s.add_argument("-o", "--output", required=True, help="summary.parquet")
    s.set_defaults(func=cmd_summary, reads=("cells",))

    s = sub.add_parser("report", help="the report's figures, tables and first page from a summary")
    s.add_argument("summary", help="results/summary.parquet")
    s.add_argument("--descriptor", action="append", default=[], help="LAYER=descriptor.json (repeatable)")
    s.add_argument("-o", "--output", required=True, help="directory for the PNG figures, HTML and CSV tables and "
                   "run.rst (the report's first page)")
    s.set_defaults(func=cmd_report, reads=("summary",), writes="dir")
