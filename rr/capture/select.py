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
        raise NoLaunch(f"{d}: no {layer}/launch.json, and not a capture (no {CAPTURE_FILE}): write one for the layer "
                       f"(`rr launch-template`, docs/formats.md), or make DIR a capture of your program "
                       f"(`rr capture -o DIR -- PROGRAM`)")
    launches = read_capture(d)["launches"]
    for e in launches:
        if e["entry"] == entry and e["status"] == Status.OK:
            return d / e["dir"]
    mine = [e for e in launches if e["entry"] == entry]
    if mine:
        raise NoLaunch(f"{d / CAPTURE_FILE}: no launch of {entry} can be replayed ({mine[0]['message']})")
    entries = sorted({e["entry"] for e in launches})
    raise NoLaunch(f"{d / CAPTURE_FILE}: no launch of {entry} (the capture has {', '.join(entries) or 'none'})")


def launch_entry(directory: str | Path, layer: str) -> str | None:
    """The entry `layer`'s launch in `directory` is of, where the directory says it without an entry
    pattern: the entry of `DIR/<layer>/launch.json`, or in a capture an entry named as the layer
    is; else None (the entry pattern must name it)."""
    from rr.run.launch import read_launch

    d = Path(directory)
    if (d / layer / "launch.json").is_file():
        return read_launch(d / layer).entry
    if (d / CAPTURE_FILE).is_file() and any(e["entry"] == layer for e in read_capture(d)["launches"]):
        return layer
    return None

