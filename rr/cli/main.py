"""The `rr` command line: one subcommand per stage, each runnable alone on the files of the stage
before it (a module of rr.cli per stage, its parsers next to its handlers). Errors in the input are
reported as `rr: error: …` with exit status 2, no traceback, and no output file."""

from __future__ import annotations

import argparse
import sys

from rr import __version__
from rr.cli import capture, collect, compile, compose, corpus, describe, inject, launch, ptx, report, run, splice, synth
from rr.cli.common import NoPhases, UserError, note, os_error_text

# the stages in the order `rr --help` lists their commands
STAGES = (ptx, corpus, describe, splice, compile, run, synth, launch, collect, report, compose, capture, inject)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rr", description="PTX splice experiments on fp8 mma kernels: one subcommand "
                                "per pipeline stage, each runnable alone on the files of the stage before it.",
                                epilog="`rr COMMAND --help` describes a command; docs/design.md the pipeline, "
                                "docs/formats.md every file it writes.")
    p.add_argument("--version", action="version", version=f"rr {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    for stage in STAGES:
        stage.add_parsers(sub)
    for choice in sub._choices_actions:  # `rr COMMAND --help` opens with the line `rr --help` lists
        sub.choices[choice.dest].description = sub.choices[choice.dest].description or f"{choice.help}."
    return p


def _check_output(args) -> None:
    """Refuse, before any work, an output that would destroy data (rr.io.check_output): what a
    command reads (its `reads` arguments) and how it writes `-o` (`writes`: a file, a directory it
    writes whole, or a directory it writes named files into) are declared with its parser."""
    from rr.io import check_output

    if getattr(args, "output", None) is None:
        return
    writes = getattr(args, "writes", "file")
    kind = writes(args) if callable(writes) else writes
    inputs = []
    for name in getattr(args, "reads", ()):
        value = getattr(args, name, None)
        inputs += value if isinstance(value, list) else [value]
    check_output(args.output, inputs, kind)


def main(argv: list[str] | None = None) -> int:
    """The command: its exit status. SIGTERM, SIGHUP and SIGINT (Ctrl-C) end the processes it
    started and then the command itself, its temporaries removed, with 128 + the signal and no
    traceback (rr.children)."""
    from rr.children import ending_children_on_signals

    with ending_children_on_signals():
        try:
            return _main(argv)
        except KeyboardInterrupt as e:  # rr.children.Interrupted, or a Ctrl-C before its handler
            return getattr(e, "status", 130)  # 128 + SIGINT


def _main(argv: list[str] | None) -> int:
    from rr.io import OutputRefused
    from rr.ptx.errors import ParseError
    from rr.validation import InvalidInput

    args = build_parser().parse_args(argv)
    try:
        _check_output(args)
        return args.func(args)
    except NoPhases as e:
        note(f"rr: {e}")
        return 1
    except (UserError, ParseError, InvalidInput, OutputRefused) as e:
        note(f"rr: error: {e}")
        return 2
    except BrokenPipeError:
        # the reader went away (`rr spec --json | head`): end quietly, as a unix tool killed by
        # SIGPIPE does, and keep the interpreter's last flush of stdout from failing again
        import os
        import signal

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except OSError as e:  # ENOSPC, EROFS, EACCES, ENOTDIR, EISDIR, …
        note(f"rr: error: {os_error_text(e)}")
        return 2


# The commands whose code (rr.ptx, rr.describe, rr.corpus's extraction, rr.io) uses no numpy:
# pyarrow, which they write Parquet with, imports it when it can (0.1–0.14 s of each command).
_PANDAS = (["report"], ["compose-measure"])  # the commands that write the report's pages (with pandas)
_NUMPY_FREE = (["spec"], ["describe"], ["linearise"], ["extract"], ["entries"], ["roundtrip"])


def entry() -> int:
    """The `rr` command (console script, `python -m rr`): main() in a process of its own. pyarrow
    imports pandas — 0.5–1 s, half of a small command's time — the first time it builds an array
    whenever pandas is installed (rr's own `report` needs it), to ask whether the data is a
    pandas object. No rr command but the report's pages (_PANDAS) gives pyarrow pandas objects or uses pandas, so for
    the others the process says pandas is absent. Likewise numpy for the commands that use none
    (_NUMPY_FREE), which pyarrow imports when it can (0.1 s, an eighth of `rr spec`'s time on the
    widest layer, a tenth of `rr linearise` on a large kernel). (Not in main(): tests call that
    in-process.)"""
    for stream in (sys.stdout, sys.stderr):
        # what the stream's encoding cannot say — a character past ASCII under PYTHONIOENCODING=ascii,
        # a file name that is not UTF-8 (its bytes are surrogates in argv) — is written as an escape
        stream.reconfigure(errors="backslashreplace")
    argv = sys.argv[1:]
    absent = tuple(name for name, unused in (("pandas", argv[:1] not in _PANDAS), ("numpy", argv[:1] in _NUMPY_FREE))
                   if unused and name not in sys.modules)
    if absent:
        sys.meta_path.insert(0, _Without(absent))
    status = main(argv)
    # The process ends here: the objects left (an analysis's cyclic garbage, the caches) are
    # handed to the operating system whole instead of being collected and freed one by one at
    # exit, 0.06 s of `rr spec` on the widest layer. Output files are closed by then; stdout and
    # stderr are flushed by the interpreter as ever.
    import gc

    gc.freeze()
    return status


class _Without:
    """A meta path finder for which the named packages are not installed (pyarrow takes the
    ImportError as that). Not `sys.modules["pandas"] = None`: Cython's import finds that None
    and uses it."""

    def __init__(self, names: tuple):
        self.names = names

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {name!r} (not used by this rr command)", name=name)
        return None


if __name__ == "__main__":
    sys.exit(entry())
