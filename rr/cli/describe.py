"""The describe commands: spec (the phase table for people, or JSON) and describe (its files, the workflow's describe stage)."""

from __future__ import annotations

from rr.cli.common import NoPhases, function_of, grouping_option, recorded, resolve_ptx


def _module(args) -> tuple:
    """The parsed module that defines args.entry in args.file, and the SHA-1 of its text (the
    descriptor's `module_sha1`: what `rr splice --descriptor` tells its module by)."""
    from rr.describe.spec import module_sha1
    from rr.ptx import parse
    from rr.ptx.parser import read_text

    path = resolve_ptx(args.file, args.entry)
    text = read_text(path)
    return parse(text, str(path)), module_sha1(text)


def _described(args, module, digest: str) -> dict:
    """DESIGN §3's description of args.entry in `module`; NoPhases if it has no phases."""
    from rr.describe.spec import NothingToDescribe, spec_json

    f = function_of(module, args.entry)
    try:
        spec = spec_json(f, grouping=args.grouping, module=module)
    except NothingToDescribe as e:
        raise NoPhases(str(e)) from None
    return {"entry": spec["entry"], "module_sha1": digest, **spec}


def cmd_spec(args) -> int:
    import json

    from rr.describe.spec import spec_table

    spec = _described(args, *_module(args))
    print(json.dumps(spec, indent=2) if args.json else spec_table(spec))
    return 0


def cmd_describe(args) -> int:
    from rr.describe.spec import write_description

    module, digest = _module(args)
    try:
        spec = _described(args, module, digest)
    except NoPhases as e:
        # for pipelines: a layer without mma is a descriptor without phases, its status the row's
        return recorded(args, e, lambda failed: write_description(
            {"entry": args.entry, "module_sha1": digest, "grouping": args.grouping, **failed, "phases": [],
             "epilogues": []}, args.output))
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
