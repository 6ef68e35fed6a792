"""The launch a user brings for a layer (the workflow's `corpus.launches`): `DIR/<layer>/` when it
holds a launch.json (written by hand after docs/formats.md, or a copy of a captured launch), else
— DIR being a capture — the first replayable launch whose entry is the layer's."""

from __future__ import annotations

from pathlib import Path

from rr.capture.index import CAPTURE_FILE, read_capture
from rr.records import Status
from rr.synth.inputs import NoLaunch


def user_launch(directory: str | Path, layer: str, entry: str) -> Path:
    """The launch directory for `layer` (entry `entry`) in `directory`; NoLaunch naming what there is."""
    d = Path(directory)
    if (d / layer / "launch.json").is_file():
        return d / layer
    if not (d / CAPTURE_FILE).is_file():
        raise NoLaunch(f"{d}: no {layer}/launch.json, and not a capture (no {CAPTURE_FILE})")
    launches = read_capture(d)["launches"]
    for e in launches:
        if e["entry"] == entry and e["status"] == Status.OK:
            return d / e["dir"]
    mine = [e for e in launches if e["entry"] == entry]
    if mine:
        raise NoLaunch(f"{d / CAPTURE_FILE}: no launch of {entry} can be replayed ({mine[0]['message']})")
    entries = sorted({e["entry"] for e in launches})
    raise NoLaunch(f"{d / CAPTURE_FILE}: no launch of {entry} (the capture has {', '.join(entries) or 'none'})")
