"""The describe commands: spec (the phase table for people, or JSON) and describe (its files, the workflow's describe stage)."""

from __future__ import annotations

from rr.cli.common import NoPhases, function_of, grouping_option, load_ptx, recorded


def _described(args) -> dict:
    """DESIGN §3's description of args.entry in args.file; UserError if it has no phases."""
    from rr.describe.spec import NothingToDescribe, spec_json

    module, _ = load_ptx(args.file, args.entry)
    f = function_of(module, args.entry)
    try:
        return spec_json(f, grouping=args.grouping, module=module)
    except NothingToDescribe as e:
        raise NoPhases(str(e)) from None


def cmd_spec(args) -> int:
    import json

    from rr.describe.spec import spec_table

    spec = _described(args)
    print(json.dumps(spec, indent=2) if args.json else spec_table(spec))
    return 0


def cmd_describe(args) -> int:
    from rr.describe.spec import write_description

    try:
        spec = _described(args)
    except NoPhases as e:
        # for pipelines: a layer without mma is a descriptor without phases, its status the row's
        return recorded(args, e, lambda failed: write_description(
            {"entry": args.entry, **failed, "phases": [], "epilogues": []}, args.output))
    write_description(spec, args.output)
    print(f"{args.output}: {len(spec['phases'])} phases, {len(spec['epilogues'])} epilogues of {spec['entry']}")
    return 0


def add_parsers(sub) -> None:
    s = sub.add_parser("spec", help="the phase table of an entry (geometry from the mma chains)")
    s.add_argument("file", help="a PTX file, or a corpus directory made by `rr extract`")
    s.add_argument("--entry", required=True, help="the kernel entry to describe")
    s.add_argument("--json", action="store_true",
                   help="print the JSON object (docs/formats.md, Descriptions) instead of the table")
    grouping_option(s)
    s.set_defaults(func=cmd_spec)

    s = sub.add_parser("describe", help="write phases.parquet, epilogues.parquet and descriptor.json")
    s.add_argument("file", help="a PTX file, or a corpus directory made by `rr extract`")
    s.add_argument("--entry", required=True, help="the kernel entry to describe")
    s.add_argument("-o", "--output", required=True, help="output directory")
    s.add_argument("--record", action="store_true",
                   help="for an entry without mma, write a descriptor without phases (status no_phases) and exit 0")
    grouping_option(s)
    s.set_defaults(func=cmd_describe, reads=("file",), writes="into")
