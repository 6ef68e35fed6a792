"""The compile command: ptxas on a module, its figures as a record (the workflow's compile stage)."""

from __future__ import annotations

from rr.cli.common import note, resolve_ptx
from rr.records import COMPILE, Status, record_text, write_record


class _NoCubin(Exception):
    """A failed compile without --record: its cubin is not written (the report alone says why)."""


def cmd_compile(args) -> int:
    from rr.io import atomic_paths
    from rr.run.compile import compile_ptx

    ptx = resolve_ptx(args.ptx, args.entry)
    report = COMPILE.next_to(args.output)
    try:
        # the cubin and its report appear together, the report last (it says what the cubin is);
        # for pipelines (--record) a failed compile's cubin is the empty file it starts as, as a
        # refused splice's module is
        with atomic_paths(args.output, report, inputs=(ptx,)) as (cubin, record):
            result = compile_ptx(ptx, cubin, args.arch)
            if result.status != Status.OK:
                if not args.record:
                    raise _NoCubin
                cubin.write_bytes(b"")  # emptied of what a failed ptxas left there
            record.write_text(record_text(result.as_dict()))
    except _NoCubin:
        write_record(report, result.as_dict())
    if result.status != Status.OK:
        note(f"rr: {result.status}: {args.ptx}: {result.message}")
        # PTX ptxas refuses is bad input, as every other command's (2); no ptxas to run is not (1)
        return 0 if args.record else (2 if result.status == Status.COMPILE_ERROR else 1)
    for f in result.functions.values():
        regs = f"{f.registers} registers, " if f.registers is not None else ""
        shared = f", {f.shared_bytes} bytes shared" if f.shared_bytes is not None else ""
        print(f"{f.name}: {regs}{f.spill_stores}/{f.spill_loads} bytes spill stores/loads, "
              f"{f.stack_frame} bytes stack{shared}")
    print(f"{args.output}: {result.arch}, ptxas {result.compile_ms:.0f} ms; report {report}")
    return 0


def add_parsers(sub) -> None:
    s = sub.add_parser("compile", help="compile PTX with ptxas and report registers, spills, stack and shared memory")
    s.add_argument("ptx", help="a PTX file, or a corpus directory made by `rr extract` (with --entry)")
    s.add_argument("--entry", help="in a corpus: compile the module that defines this entry")
    s.add_argument("--arch", default="sm_90", help="the GPU architecture ptxas compiles for (default: %(default)s)")
    s.add_argument("-o", "--output", required=True, help="X.cubin (the report goes to X.cubin.json)")
    s.add_argument("--record", action="store_true",
                   help="exit 0 once the record is written, whatever it says, leaving an empty X.cubin "
                        "when ptxas fails (for pipelines)")
    s.set_defaults(func=cmd_compile, reads=("ptx",))
