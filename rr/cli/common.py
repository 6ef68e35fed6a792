"""What every command shares: its errors, argument types and the reading of its PTX inputs."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from rr.records import Status, failure
from rr.validation import cut, open_regular, printable


class UserError(Exception):
    """Bad input or arguments: printed without a traceback, exit status 2."""


class NoPhases(UserError):
    """An entry without mma statements: reported with exit status 1 (its record: no_phases)."""

    status = Status.NO_PHASES


def recorded(args, error: Exception, write, what: str | None = None) -> int:
    """A stage's failure: with --record its record (rr.records.failure of `error`, handed to
    `write`, which writes it where the stage's record goes), a note on stderr saying `what` failed,
    and exit status 0 — for pipelines, whose next stages read the record; without, the error."""
    if not args.record:
        raise error if isinstance(error, UserError) else UserError(str(error)) from None
    write(failure(error))
    note(f"rr: {what}: {error}" if what else f"rr: {error}")
    return 0


def bounded(parse, ok, what: str):
    """An argparse type: `parse` of the text, refused as "TEXT is not WHAT" unless `ok` of it."""
    def check(text: str):
        try:
            value = parse(text)
        except ValueError:
            value = None
        if value is None or not ok(value):
            raise argparse.ArgumentTypeError(f"{text} is not {what}")
        return value
    return check


phase_number = bounded(int, lambda v: v >= 1, "a phase number (1, 2, …)")  # 0 is not "not given"


positive_seconds = bounded(float, lambda v: 0 < v < float("inf"), "a positive number of seconds")


relative_noise = bounded(float, lambda v: 0 < v < 1, "a relative noise between 0 and 1 (0.005 is 0.5 %)")


def resolve_ptx(path: str, entry: str | None = None) -> Path:
    """A PTX file as given, or — for a corpus directory made by `rr extract` — the module that
    defines `entry`."""
    p = Path(path)
    if p.is_dir() and (p / "index.parquet").is_file() and entry:
        from rr.corpus import find_entry

        hits = [m for m, e in find_entry(p, f"^{re.escape(entry)}$")]
        if not hits:
            raise UserError(f"{path}: no module in this corpus defines entry {entry!r}")
        return hits[0]
    if p.is_dir():
        raise UserError(f"{path}: a directory, not a PTX file or a corpus made by `rr extract` (no index.parquet)"
                        if entry else f"{path}: is a directory")
    try:
        open_regular(p).close()  # InvalidInput for a FIFO (it would block the read) or a device
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    return p


def load_ptx(path: str, entry: str | None = None):
    """Parse a PTX file, or the module of `entry` in a corpus directory."""
    from rr.ptx import parse_file

    p = resolve_ptx(path, entry)
    return parse_file(p), str(p)


def function_of(module, name: str):
    try:
        return module.function(name)
    except KeyError as e:
        raise UserError(e.args[0]) from None


def byte_count(text: str) -> int:
    """A positive size in bytes, with an optional K, M or G (binary) suffix: 256M."""
    m = re.fullmatch(r"([0-9]+)([KMG]?)", text.strip(), re.I)
    if not m or int(m.group(1)) == 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive byte count (such as 65536 or 256M)")
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2).upper()]


def dimensions(text: str) -> tuple:
    """`X[,Y[,Z]]`: a grid or block, Y and Z 1 when left out."""
    parts = text.split(",")
    try:
        dims = tuple(int(p) for p in parts) + (1,) * (3 - len(parts))
    except ValueError:
        dims = ()
    if len(dims) != 3 or min(dims) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not X[,Y[,Z]] of positive integers (such as 256 or 16,16,1)")
    return dims


def name_value(text: str) -> tuple[str, str]:
    name, eq, value = text.partition("=")
    if not name or not eq or not value:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE")
    return name, value


def unique_names(option: str, items: list[tuple]) -> dict:
    out = {}
    for name, value in items:
        if name in out:
            raise UserError(f"{option} {name}: given twice")
        out[name] = value
    return out


def layer_modules(option: str, metavar: str, items: list[str]) -> list[tuple[str, Path]]:
    """(layer, module file) of each `LAYER=PATH` an option was given (rr frame --replace, rr launch
    --module), in order; a malformed one is refused naming the option."""
    out = []
    for item in items:
        layer, _, module = item.partition("=")
        if not layer or not module:
            raise UserError(f"{option} {cut(item)!r}: expected {metavar}")
        out.append((layer, Path(module)))
    return out


def grouping_option(s) -> None:
    s.add_argument("--grouping", choices=("run", "gemm"), default="run",
                   help="run: a phase is a maximal run of consecutive mma (the reference numbering); "
                        "gemm: runs joined across statements that only load or compute later mma operands "
                        "(default: %(default)s)")


def message_text(e: BaseException | str) -> str:
    """The error's text, each line's control characters escaped (an input's ESC or BEL echoed in a
    message stays off the terminal) and each line cut (a 200 MB bad line is not echoed whole)."""
    lines = str(e).splitlines() or [""]
    return "\n".join(cut(printable(line), 800) for line in lines[:50])


def note(text: str) -> None:
    """A note or refusal on stderr, as message_text writes a message: control characters escaped, cut."""
    print(message_text(text), file=sys.stderr)


def os_error_text(e: OSError) -> str:
    """`PATH: reason` of an operating-system error."""
    reason = e.strerror or str(e)
    return f"{e.filename}: {reason}" if e.filename is not None else reason
