"""The capture command: a running CUDA program's launches as launch directories."""

from __future__ import annotations

import argparse
import sys



def cmd_capture(args) -> int:
    """`rr capture -o DIR [--kernels REGEX] [--launches RANGE] -- COMMAND [ARGS…]`: the program's
    launches as launch directories (rr.capture); its exit status is the command's."""
    from rr.capture import run_capture

    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    result = run_capture(program, args.output, args.kernels, args.launches)
    for line in result.notes:
        print(f"rr capture: {line}", file=sys.stderr)
    if result.output is not None:
        entries = sorted({e["entry"] for e in result.launches})
        print(f"{args.output}: {len(result.launches)} launches captured ({', '.join(entries)}); "
              f"{program[0]} exited with status {result.exit_status}")
    if result.error:  # a program that failed itself keeps its status; else 2, rr's own failure
        print(f"rr: error: {result.error}", file=sys.stderr)
        return result.exit_status or 2
    return result.exit_status


def add_parsers(sub) -> None:
    s = sub.add_parser("capture", help="run a CUDA program and capture its kernel launches as launch directories",
                       description=" ".join(cmd_capture.__doc__.split()))
    s.add_argument("-o", "--output", required=True, help="the capture directory (capture.json, modules/, launches/)")
    s.add_argument("--kernels", metavar="REGEX", help="capture only launches of entries this POSIX extended regular "
                   "expression finds a match in")
    s.add_argument("--launches", metavar="RANGE", help="of the matching launches, only these: N, A:B, A:, :B, "
                   "comma-separated, 0 the first")
    s.add_argument("program", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS…]")
    s.set_defaults(func=cmd_capture, writes="dir")
