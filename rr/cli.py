"""The `rr` command line: one subcommand per stage, each runnable alone on the files of the stage
before it. Errors in the input are reported as `rr: error: …` with exit status 2, no traceback,
and no output file."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from rr import __version__


class UserError(Exception):
    """Bad input or arguments: printed without a traceback, exit status 2."""


def _load(path: str, entry: str | None = None):
    """Parse a PTX file; a corpus directory (from `rr extract`) resolves to the module of `entry`."""
    from rr.corpus import find_entry
    from rr.ptx import parse_file

    p = Path(path)
    if p.is_dir() and (p / "index.parquet").is_file() and entry:
        hits = [m for m, e in find_entry(p, f"^{re.escape(entry)}$")]
        if not hits:
            raise UserError(f"{path}: no module in this corpus defines entry {entry!r}")
        p = hits[0]
    elif not p.is_file():
        raise UserError(f"{path}: no such file")
    return parse_file(p), str(p)


def _function(module, name: str):
    try:
        return module.function(name)
    except KeyError as e:
        raise UserError(e.args[0]) from None


def cmd_entries(args) -> int:
    module, _ = _load(args.file)
    rows = []
    for f in module.functions:
        if not f.has_body:
            continue
        n = sum(1 for _ in f.instructions())
        rows.append((f.kind, f.name, n, f.line, f.last_line))
    if not rows:
        print(f"{args.file}: no .entry or .func with a body", file=sys.stderr)
        return 1
    width = max(len(r[1]) for r in rows)
    print(f"{'kind':<6} {'name':<{width}} {'statements':>10} {'lines':>7} {'first-last':>15}")
    for kind, name, n, first, last in rows:
        print(f"{kind:<6} {name:<{width}} {n:>10} {last - first + 1:>7} {f'{first}-{last}':>15}")
    return 0


def cmd_roundtrip(args) -> int:
    from rr.ptx import emit

    module, _ = _load(args.file)
    original = Path(args.file).read_text(encoding="utf-8")
    out = emit(module)
    if out == original:
        print(f"{args.file}: round trip exact ({len(original)} bytes, "
              f"{original.count(chr(10)) + 1} lines)")
        return 0
    a, b = original.splitlines(keepends=True), out.splitlines(keepends=True)
    for i, (x, y) in enumerate(zip(a, b), start=1):
        if x != y:
            break
    else:
        i = min(len(a), len(b)) + 1
        x = a[i - 1] if i <= len(a) else "<end of file>"
        y = b[i - 1] if i <= len(b) else "<end of file>"
    print(f"{args.file}:{i}: round trip differs\n  file:    {x!r}\n  emitted: {y!r}")
    return 1


def cmd_linearise(args) -> int:
    from rr.io import write_parquet
    from rr.ptx import linearise, statements_table

    module, source = _load(args.file, args.entry)
    f = _function(module, args.entry)
    statements = linearise(f)
    write_parquet(args.output, statements_table(statements, f.name, source))
    print(f"{args.output}: {len(statements)} statements of {f.name} "
          f"(lines {f.line}-{f.last_line})")
    return 0


def cmd_extract(args) -> int:
    from rr.corpus import find_entry, scan_source, write_corpus

    try:
        extraction = scan_source(args.source)
    except FileNotFoundError as e:
        raise UserError(str(e)) from None
    for w in extraction.warnings:
        print(f"rr: warning: {w}", file=sys.stderr)
    table = write_corpus(extraction, args.output)
    distinct = len(set(table.column("hash").to_pylist()))
    print(f"{args.output}: {distinct} distinct modules from {table.num_rows} occurrences "
          f"({len(extraction.warnings)} warnings)")
    if args.find:
        hits = find_entry(args.output, args.find)
        if not hits:
            print(f"rr: no entry matching {args.find!r} in {args.output}", file=sys.stderr)
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


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rr", description=__doc__.split("\n")[0])
    p.add_argument("--version", action="version", version=f"rr {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    s = sub.add_parser("entries", help="list the entries and functions of a PTX file")
    s.add_argument("file")
    s.set_defaults(func=cmd_entries)

    s = sub.add_parser("roundtrip", help="check that parse + emit reproduces a PTX file exactly")
    s.add_argument("file")
    s.set_defaults(func=cmd_roundtrip)

    s = sub.add_parser("linearise", help="write an entry's statements (sNNNN, lines, defs, uses)")
    s.add_argument("file", help="a PTX file, or a corpus directory made by `rr extract`")
    s.add_argument("--entry", required=True)
    s.add_argument("-o", "--output", required=True, help="OUT.parquet")
    s.set_defaults(func=cmd_linearise)

    s = sub.add_parser("extract", help="extract PTX modules from an engine binary or .ptx files")
    s.add_argument("source", help="a binary, a .ptx file or a directory of them")
    s.add_argument("-o", "--output", required=True, help="corpus directory")
    s.add_argument("--find", metavar="PATTERN", help="print the module defining a matching entry")
    s.set_defaults(func=cmd_extract)

    s = sub.add_parser("sample-engine", help="write a small engine-style binary (bundled sample PTX)")
    s.add_argument("-o", "--output", required=True, help="engine binary to write")
    s.set_defaults(func=cmd_sample_engine)
    return p


def main(argv: list[str] | None = None) -> int:
    from rr.ptx import ParseError

    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (UserError, ParseError) as e:
        print(f"rr: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
