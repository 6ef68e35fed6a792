"""capture.json, a capture's index, as every reader of it reads it: `read_capture` checks it
against rr/data/capture.schema.json (types, required keys; its status words from rr.records) and
then what a schema cannot say — a launch's `dir` is a relative path that stays inside the
capture, through links too — so a hand-edited or hostile index is refused naming the file and the
key, never followed out of the capture nor met later as a traceback."""

from __future__ import annotations

import functools
import os
from pathlib import Path, PurePosixPath

from rr.records import Status, with_statuses
from rr.validation import InvalidInput, cut, read_json, schema, validate

CAPTURE_FILE = "capture.json"


def read_capture(directory: str | Path) -> dict:
    """The checked capture.json of the capture `directory`; InvalidInput (`PATH: KEY: reason`)
    when it is not one rr capture could have written."""
    directory = Path(directory)
    path = directory / CAPTURE_FILE
    index = read_json(path)
    validate(index, _schema(), str(path))
    inside = os.path.realpath(directory)
    for i, launch in enumerate(index["launches"]):
        why = _why_outside(launch["dir"], inside)
        if why is not None:
            raise InvalidInput(f"{path}: launches[{i}].dir: {cut(repr(launch['dir']))} {why}; a launch's dir is a "
                               "relative path inside the capture (launches/NNNNNN)")
    return index


@functools.cache
def _schema() -> dict:
    return with_statuses(schema("capture.schema.json"), replayable=(Status.OK, Status.UNSUPPORTED))


def _why_outside(name: str, inside: str) -> str | None:
    """Why the launch directory `name` is not a path inside the capture (real path `inside`), or None."""
    if "\0" in name:
        return "holds a NUL character"
    parts = PurePosixPath(name).parts
    if PurePosixPath(name).is_absolute():
        return "is an absolute path"
    if ".." in parts:
        return "goes up out of its directory (..)"
    real = os.path.realpath(os.path.join(inside, name))
    if real == inside:
        return "is the capture itself, not a launch directory in it"
    if os.path.commonpath([real, inside]) != inside:
        return f"resolves to {cut(real)} (through a symbolic link), outside the capture"
    return None
