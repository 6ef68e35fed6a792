"""The corpus commands: extract (the workflow's corpus stage) and sample-engine."""

from __future__ import annotations

from rr.cli.common import UserError, byte_count, note


def cmd_extract(args) -> int:
    from rr.corpus import MAX_MODULE_BYTES, CorpusError, find_entry, iter_source, write_corpus

    warnings = []

    def warn(message: str) -> None:
        warnings.append(message)
        note(f"rr: warning: {message}")

    try:
        table = write_corpus(iter_source(args.source, warn, args.max_module_bytes or MAX_MODULE_BYTES),
                             args.output, args.source)
    except CorpusError as e:
        raise UserError(str(e)) from None
    distinct = len(set(table.column("hash").to_pylist()))
    print(f"{args.output}: {counted(distinct, 'distinct module')} from {counted(table.num_rows, 'occurrence')} "
          f"({counted(len(warnings), 'warning')})")
    if args.find:
        hits = find_entry(args.output, args.find)
        if not hits:
            note(f"rr: no entry matching {args.find!r} in {args.output}")
            return 1
        for path, entry in hits:
            print(f"{path}\t{entry}")
    return 0


def cmd_sample_engine(args) -> int:
    from rr.corpus.sample import sample_engine
    from rr.io import write_bytes

    data = sample_engine()
    write_bytes(args.output, data)
    print(f"{args.output}: sample engine binary, {len(data)} bytes")
    return 0


def add_parsers(sub) -> None:
    s = sub.add_parser("extract", help="extract PTX modules from an engine binary or .ptx files")
    s.add_argument("source", help="a binary, a .ptx file or a directory of them")
    s.add_argument("-o", "--output", required=True, help="corpus directory")
    s.add_argument("--find", metavar="PATTERN", help="print the module defining a matching entry")
    s.add_argument("--max-module-bytes", type=byte_count, metavar="N",
                   help="the largest module read: a decompressed fatbin entry or a text module over "
                        "it is skipped with a warning (default 256M; K, M, G suffixes)")
    s.set_defaults(func=cmd_extract, reads=("source",), writes="dir")

    s = sub.add_parser("sample-engine", help="write a small engine-style binary (bundled sample PTX)")
    s.add_argument("-o", "--output", required=True, help="engine binary to write")
    s.set_defaults(func=cmd_sample_engine)


def counted(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"

