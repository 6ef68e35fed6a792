"""The inject command: a CUDA program run with kernels' code replaced, and timed (rr.capture.inject)."""

from __future__ import annotations

import argparse

from rr.cli.common import UserError, bounded, note


def module_pair(text: str):
    """`--module ENTRY=FILE` (and `rr capture --inject`): the entry and the file."""
    from rr.capture.replacement import module_option
    from rr.validation import InvalidInput

    try:
        return module_option(text)
    except InvalidInput as e:
        raise argparse.ArgumentTypeError(str(e)) from None


class ModuleFiles(argparse.Action):
    """Collects the (ENTRY, FILE) pairs, and the files alone in `module_files` (what the command
    reads: rr.cli.main checks -o against them)."""

    def __call__(self, parser, namespace, value, option_string=None):
        setattr(namespace, self.dest, [*(getattr(namespace, self.dest) or []), value])
        namespace.module_files = [*(getattr(namespace, "module_files", None) or []), str(value[1])]


def add_module_option(s, flag: str, help: str) -> None:
    s.add_argument(flag, dest="module", metavar="ENTRY=FILE", type=module_pair, action=ModuleFiles, default=[],
                   help=help)


def checked_replacements(args, program: list[str]) -> list:
    """The replacements of --module (--inject), read and checked before the program starts, and
    checked against the PTX the program's executable carries (notes say what was)."""
    from rr.capture.replacement import check_program, replacements

    found = replacements(args.module)
    for line in check_program(found, program):
        note(f"rr inject: {line}")
    return found


def program_of(args, usage: str) -> list[str]:
    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    if not program:
        raise UserError(f"no command given ({usage})")
    return program


def cmd_inject(args) -> int:
    """`rr inject --module ENTRY=FILE [--module …] [--time [--repeat N]] [-o RECORD.json] -- COMMAND
    [ARGS…]`: the program run with each ENTRY's code replaced by FILE's (PTX, which the driver
    compiles, or a cubin) where it loads a module defining ENTRY; the rest of every module is the
    program's. With --time each ENTRY's launches are timed with CUDA events on the program's own
    streams, in N runs with the replacements and N without, interleaved. The exit status is the
    program's; 2 when a replacement was not in place wherever the program ran its entry."""
    from rr.capture.inject import run_once, time_runs
    from rr.io import write_json

    program = program_of(args, "rr inject --module ENTRY=FILE -- COMMAND [ARGS…]")
    if not args.module:
        raise UserError("rr inject: no --module ENTRY=FILE given: nothing to replace")
    if args.repeat is not None and not args.time:
        raise UserError("--repeat N: only with --time (it is the number of timed runs)")
    found = checked_replacements(args, program)
    record = {"command": program, "modules": [r.record() for r in found]}
    if args.time:
        timed = time_runs(program, found, args.repeat or 1, say=lambda line: note(f"rr inject: {line}"))
        runs = timed.replaced
        shown = {r.entry: str(r.path) for r in found}
        for t in timed.timings:
            print("\n".join(t.lines(shown[t.entry])))
        record["timing"] = [t.record() for t in timed.timings]
        record["runs_original"] = [o.record() for o in timed.original]
        failed = timed.failed
    else:
        runs, failed = [run_once(program, found)], None
    last = runs[-1]
    for line in last.summary():
        print(line)
    if (failed or last).killed_by:
        note(f"rr inject: {program[0]} was killed by {(failed or last).killed_by}")
    problems = list(dict.fromkeys(p for o in runs for p in o.problems()))
    record.update(runs=[o.record() for o in runs], problems=problems, exit_status=(failed or last).exit_status)
    if args.output:
        write_json(args.output, record)
    for line in problems:
        note(f"rr inject: {line}")
    if failed is not None:
        note(f"rr: error: {program[0]} exited with status {failed.exit_status} in a timed run: the timing stopped "
             "there")
        return failed.exit_status
    if last.exit_status:
        return last.exit_status
    if problems:
        note("rr: error: the replacements were not all in place (above): the program ran its own code there")
        return 2
    return 0


def add_parsers(sub) -> None:
    s = sub.add_parser("inject", help="run a CUDA program with kernels' code replaced by a module of yours (and time "
                       "them)", description=" ".join(cmd_inject.__doc__.split()))
    add_module_option(s, "--module", "replace ENTRY's code by FILE's (PTX or a cubin) in every module of the program "
                      "that defines ENTRY; repeatable")
    s.add_argument("--time", action="store_true", help="time every launch of each ENTRY with CUDA events on the "
                   "program's stream, with the replacements and without (the program's own code), and print per "
                   "kernel the launches, median/min/max ms and the ratio")
    s.add_argument("--repeat", type=bounded(int, lambda v: 1 <= v <= 1000, "a number of runs (1 to 1000)"),
                   metavar="N", help="with --time: run the program N "
                   "times with the replacements and N without, interleaved; the medians' spread over the runs is the "
                   "noise (default 1)")
    s.add_argument("-o", "--output", metavar="RECORD.json", help="write what happened (the replacements, each "
                   "binding's decision, launch counts, times) as JSON")
    s.add_argument("program", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS…]")
    s.set_defaults(func=cmd_inject, writes="file", reads=("module_files",))
