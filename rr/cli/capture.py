"""The capture commands: a running CUDA program's launches as launch directories (with kernels
replaced: --inject), and two captures of one program compared launch by launch."""

from __future__ import annotations

import argparse
import sys

from rr.cli.inject import add_module_option


def cmd_capture(args) -> int:
    """`rr capture -o DIR [--kernels REGEX] [--launches RANGE] [--inject ENTRY=FILE …] -- COMMAND
    [ARGS…]`: the program's launches as launch directories (rr.capture), with --inject's
    replacements in place (as rr inject runs them); its exit status is the command's, 2 when the
    capture stopped or a replacement was not in place wherever the program ran its entry."""
    from rr.capture import run_capture
    from rr.cli.inject import checked_replacements

    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    found = checked_replacements(args, program) if args.module else []
    result = run_capture(program, args.output, args.kernels, args.launches, inject=found)
    for line in result.notes:
        print(f"rr capture: {line}", file=sys.stderr)
    problems = result.injection.problems() if result.injection else []
    for line in problems:
        print(f"rr inject: {line}", file=sys.stderr)
    if result.output is not None:
        entries = sorted({e["entry"] for e in result.launches})
        print(f"{args.output}: {len(result.launches)} launches captured ({', '.join(entries)}); "
              f"{program[0]} exited with status {result.exit_status}")
    if result.injection:
        for line in result.injection.summary():
            print(line)
    if result.error:  # a program that failed itself keeps its status; else 2, rr's own failure
        print(f"rr: error: {result.error}", file=sys.stderr)
        return result.exit_status or 2
    if problems and not result.exit_status:
        print("rr: error: the replacements were not all in place (above): the program ran its own code there",
              file=sys.stderr)
        return 2
    return result.exit_status


def cmd_compare_captures(args) -> int:
    """`rr compare-captures A B [--json] [-o FILE]`: two captures of one program (as it is, and
    with a replacement in place: rr capture --inject) compared launch by launch, every buffer of
    each launch's after-state; the first launch and buffer that differ named. Exit 0 iff every
    pair is byte-identical and the launches correspond (and none of a replaced entry ran the
    program's own code in a capture made with its replacement), else 1."""
    import json

    from rr.capture.compare import compare_captures, replaced_word
    from rr.io import write_json

    compared = compare_captures(args.a, args.b)
    if args.output:
        write_json(args.output, compared.record())
    if args.json:
        print(json.dumps(compared.record(), indent=2))
    else:
        print(f"{'launch':>6}  {'entry':<32} {'A':<9} {'B':<9} verdict")
        for p in compared.pairs:
            verdict = ("identical" if p.identical else
                       "differs: " + "; ".join(f"{b} ({what})" for b, what in p.differing[:3])
                       + (f"; and {len(p.differing) - 3} more" if len(p.differing) > 3 else ""))
            print(f"{p.index:>6}  {p.entry:<32} {replaced_word(p.replaced[0]):<9} {replaced_word(p.replaced[1]):<9} "
                  f"{verdict}")
    for line in compared.problems:
        print(f"rr: {line}", file=sys.stderr)
    print(compared.verdict(), file=sys.stderr if args.json else sys.stdout)
    return 0 if compared.identical else 1


def add_parsers(sub) -> None:
    s = sub.add_parser("capture", help="run a CUDA program and capture its kernel launches as launch directories",
                       description=" ".join(cmd_capture.__doc__.split()))
    s.add_argument("-o", "--output", required=True, help="the capture directory (capture.json, modules/, launches/)")
    s.add_argument("--kernels", metavar="REGEX", help="capture only launches of entries this POSIX extended regular "
                   "expression finds a match in")
    s.add_argument("--launches", metavar="RANGE", help="of the matching launches, only these: N, A:B, A:, :B, "
                   "comma-separated, 0 the first")
    add_module_option(s, "--inject", "capture with ENTRY's code replaced by FILE's (PTX or a cubin), as rr inject "
                      "--module does; repeatable")
    s.add_argument("program", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS…]")
    s.set_defaults(func=cmd_capture, writes="dir", reads=("module_files",))

    s = sub.add_parser("compare-captures", help="compare two captures of one program launch by launch (exit 0 iff "
                       "every buffer is byte-identical)", description=" ".join(cmd_compare_captures.__doc__.split()))
    s.add_argument("a", help="a capture (rr capture -o A): the reference")
    s.add_argument("b", help="another capture of the same program (rr capture --inject … -o B)")
    s.add_argument("--json", action="store_true", help="print the comparison as JSON instead of the table")
    s.add_argument("-o", "--output", help="write the comparison (JSON) to this file")
    s.set_defaults(func=cmd_compare_captures, reads=("a", "b"))
