"""The records the stages leave for each other, in one place: the words a record's status says
(`Status`), the kinds of record and their files' names (`Kind`), each kind's shape (its definition
in rr/data/records.schema.json, the status words filled in from `Status`), the one reader, which
checks a record against its definition, the one writer, and the record of a failure, made from
its exception.

A record is what one stage leaves for the next (and for `rr collect`, which makes a results row
of a cell's records): a JSON object with a `status` and, unless it is ok, a `message` saying why —
rr compare's record is a list, of the buffers compared. A stage that fails in a pipeline
(`--record`) leaves the record of its failure, never a crash, so the sweep goes on and the row
says what happened. The words are those of `Status`, a str enum: JSON and Parquet hold the word
itself, and `Status.OK == "ok"`, so a record read back compares with the members.
"""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass
from pathlib import Path

from rr.validation import InvalidInput, read_json, schema, validate


class Status(enum.StrEnum):
    """What a record (or a results row) says of its stage: ok, or why not; each word's `meaning`
    is the line docs/formats.md gives it."""

    def __new__(cls, word: str, meaning: str):
        member = str.__new__(cls, word)
        member._value_ = word
        member.meaning = meaning
        return member

    OK = "ok", "the stage did what it was asked"
    NOT_RUN = "not_run", "(a row's) the stage left no record: an earlier stage failed, or it has not run"
    # rr describe, rr splice
    NO_PHASES = "no_phases", "the layer's entry has no mma: its descriptor has no phases"
    ERROR = "error", "the splice was refused: the recipe cannot be applied to the phase, or cannot be read"
    NOT_APPLICABLE = "not_applicable", "the recipe's template is not for this phase (direct on a phase without a " \
                                       "pack or transpose operand)"
    # rr compile
    COMPILE_ERROR = "compile_error", "ptxas refused the module or did not finish"
    NO_PTXAS = "no_ptxas", "no ptxas to compile with"
    # rr launch, rr relaunch: a launch directory that stands for a launch that could not be made
    NO_LAUNCH = "no_launch", "rr has no launch for the layer"
    NO_MODULE = "no_module", "the module file is empty: a refused splice or a failed compile left it"
    BAD_LAUNCH = "bad_launch", "a launch, frame or module that cannot be used as it is"
    UNSUPPORTED = "unsupported", "what this backend cannot do: a kernel the cpu backend does not interpret, " \
                                 "timing on the cpu backend, a captured launch rr cannot replay"
    # rr run, rr time
    FAULT = "fault", "the kernel faulted (an illegal address, a failed launch), or its process died"
    TIMEOUT = "timeout", "the run or timing did not finish in its time; its process was killed"
    IO_ERROR = "io_error", "a file could not be read or written (a full disk)"
    NO_DEVICE = "no_device", "no GPU for the cuda backend"
    RESOURCE = "resource", "the kernel asks more memory than the cpu backend allocates"
    THROTTLED = "throttled", "every timing sample ran on a throttled GPU"


def status_of(error: BaseException) -> Status:
    """The status a failure records: the exception's own (`status`: SpliceError, LaunchError,
    NoLaunch, NoPhases carry one), else error."""
    return Status(getattr(error, "status", Status.ERROR))


def failure(error: BaseException | Status, message: str | None = None, **fields) -> dict:
    """The record of a failed stage: the status (an exception's, `status_of`; or the one given),
    `fields` (what the record says before its message: a run's backend) and the message (the
    exception's text unless given). Callers add what the record says after it."""
    status = error if isinstance(error, Status) else status_of(error)
    return {"status": status, **fields, "message": str(error) if message is None else message}


@dataclass(frozen=True)
class Kind:
    """A kind of record: its definition in records.schema.json (`schema`) and the name of its file
    (`file`) — in the directory it is of (a run's run.json, a launch directory's
    launch.error.json, a layer's descriptor.json) or, in a cell, after the recipe's name
    (`<recipe>.<file>`); the records of a module beside it (`beside`: rr splice -o OUT writes
    OUT.splice.json, rr compile -o X.cubin X.cubin.json)."""

    name: str  # what messages and the workflow's rules (rr measure's outputs) call it
    file: str
    schema: str
    beside: str | None = None

    def within(self, directory: str | Path) -> Path:
        return Path(directory) / self.file

    def in_cell(self, cell: str | Path, recipe: str) -> Path:
        return Path(cell) / f"{recipe}.{self.file}"

    def next_to(self, path: str | Path) -> Path:
        return Path(f"{path}{self.beside}")


DESCRIPTOR = Kind("descriptor", "descriptor.json", "descriptor")
SPLICE = Kind("splice", "ptx.splice.json", "splice", ".splice.json")  # a cell's spliced module is <recipe>.ptx
COMPILE = Kind("compile", "cubin.json", "compile", ".json")  # and its cubin <recipe>.cubin
RUN = Kind("run", "run.json", "run")
COMPARE = Kind("compare", "compare.json", "compare")
TIMING = Kind("timing", "timing.json", "timing")  # of the launch, or of a frame's cell the whole frame
LAYER_TIMING = Kind("layer_timing", "layer_timing.json", "timing")  # a frame's cell: the layer alone
LAUNCH_ERROR = Kind("launch_error", "launch.error.json", "launch_error")

KINDS = (DESCRIPTOR, SPLICE, COMPILE, RUN, COMPARE, TIMING, LAYER_TIMING, LAUNCH_ERROR)


def with_statuses(shipped: dict, **words) -> dict:
    """A shipped schema with the status words of its definitions put in (`name=(Status, …)`: the
    definition's enum): the schema files leave the words to this module, so that they are spelled
    once."""
    defs = {**shipped["$defs"], **{name: {**shipped["$defs"][name], "enum": [s.value for s in members]}
                                   for name, members in words.items()}}
    return {**shipped, "$defs": defs}


@functools.cache
def _schema() -> dict:
    return with_statuses(schema("records.schema.json"), status=tuple(Status), is_ok=(Status.OK,))


def _definition(kind: Kind) -> dict:
    """The JSON schema a record of `kind` is checked against."""
    return {**_schema(), "$ref": f"#/$defs/{kind.schema}"}


def read_record(path: str | Path, kind: Kind, error=InvalidInput):
    """The record of `kind` at `path`, checked against its definition: `error` (InvalidInput, or
    the caller's subclass) naming the file and the key — `PATH: KEY: reason` — for one of the wrong
    JSON type, without a key its kind has, with a status word that is not a `Status`, or with a
    value of another type; a file that is not JSON, not UTF-8 or not a regular file likewise."""
    try:
        record = read_json(path)
    except InvalidInput as e:
        raise error(str(e)) from None
    validate(record, _definition(kind), str(path), error)
    return record


def read_own_record(path: str | Path, kind: Kind) -> dict:
    """The record of `kind` that a child of this process wrote at `path`, in a temporary directory
    of this process's own, checked against its definition as the child wrote it (`record_text`
    with its kind): read here without the schema, whose checker (jsonschema) would be most of a
    `rr run`'s own start-up. Still refused (InvalidInput naming the file) when it is not a JSON
    object or its status is no `Status`."""
    record = read_json(path)
    if not isinstance(record, dict) or record.get("status") not in tuple(Status):
        raise InvalidInput(f"{path}: not a {kind.name} record (no status rr knows)")
    return record


def record_text(record, kind: Kind | None = None) -> str:
    """A record as every record file holds it: JSON indented by two, a newline at its end; a value
    JSON has no word for (a path, a numpy number) as its text. ValueError for a status that is no
    `Status` (a mistake in rr, refused before any reader sees it); with `kind`, InvalidInput for a
    record its definition refuses (what rr.records.read_record would refuse, found by its
    writer)."""
    import json

    if isinstance(record, dict) and "status" in record:
        Status(record["status"])
    text = json.dumps(record, indent=2, default=str) + "\n"
    if kind is not None:
        validate(json.loads(text), _definition(kind), f"the {kind.name} record being written")
    return text


def write_record(path: str | Path, record) -> None:
    """The record at `path`, whole or not at all (rr.io.atomic_path)."""
    from rr.io import write_text

    write_text(path, record_text(record))
