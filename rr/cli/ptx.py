"""The PTX front end's commands: entries, roundtrip, linearise (the workflow's linearise stage)."""

from __future__ import annotations

from rr.cli.common import function_of, load_ptx
from rr.validation import read_bytes


def cmd_entries(args) -> int:
    module, _ = load_ptx(args.file)
    rows = []
    for f in module.functions:
        if not f.has_body:
            continue
        n = sum(1 for _ in f.instructions())
        rows.append((f.kind, f.name, n, f.line, f.last_line))
    if not rows:  # a module of declarations only (a library's prototypes, globals) is not an error
        print(f"{args.file}: no entries (no .entry or .func with a body)")
        return 0
    width = max(len(r[1]) for r in rows)
    print(f"{'kind':<6} {'name':<{width}} {'statements':>10} {'lines':>7} {'first-last':>15}")
    for kind, name, n, first, last in rows:
        print(f"{kind:<6} {name:<{width}} {n:>10} {last - first + 1:>7} {f'{first}-{last}':>15}")
    return 0


def cmd_roundtrip(args) -> int:
    """emit(parse(file)) against the file's bytes, line ends (CR LF, lone CR) included."""
    from rr.ptx import emit

    module, source = load_ptx(args.file)
    original = read_bytes(source)
    out = emit(module).encode("utf-8")
    lines = original.count(b"\n") + (not original.endswith(b"\n") and bool(original))
    if out == original:
        print(f"{args.file}: round trip exact ({len(original)} bytes, {lines} lines)")
        return 0
    at = next((i for i, (x, y) in enumerate(zip(original, out)) if x != y), min(len(original), len(out)))
    line = original.count(b"\n", 0, at) + 1

    def line_of(data: bytes) -> str:
        if at >= len(data):
            return "<end of file>"
        start = data.rfind(b"\n", 0, at) + 1
        end = data.find(b"\n", at)
        return repr(data[start:end + 1 if end >= 0 else len(data)][:300].decode("utf-8", "replace"))

    print(f"{args.file}:{line}: round trip differs at byte {at}\n  file:    {line_of(original)}\n"
          f"  emitted: {line_of(out)}")
    return 1


def cmd_linearise(args) -> int:
    from rr.io import write_parquet
    from rr.ptx import linearise, statements_table

    module, source = load_ptx(args.file, args.entry)
    f = function_of(module, args.entry)
    statements = linearise(f)
    write_parquet(args.output, statements_table(statements, f.name, source))
    print(f"{args.output}: {len(statements)} statements of {f.name} "
          f"(lines {f.line}-{f.last_line})")
    return 0


def add_parsers(sub) -> None:
    s = sub.add_parser("entries", help="list the entries and functions of a PTX file")
    s.add_argument("file", help="a PTX file")
    s.set_defaults(func=cmd_entries)

    s = sub.add_parser("roundtrip", help="check that parse + emit reproduces a PTX file exactly (exit 0 iff so)")
    s.add_argument("file", help="a PTX file")
    s.set_defaults(func=cmd_roundtrip)

    s = sub.add_parser("linearise", help="write an entry's statements (sNNNN, lines, defs, uses)")
    s.add_argument("file", help="a PTX file, or a corpus directory made by `rr extract`")
    s.add_argument("--entry", required=True, help="the kernel entry (or .func) to linearise")
    s.add_argument("-o", "--output", required=True, help="OUT.parquet")
    s.set_defaults(func=cmd_linearise, reads=("file",))
