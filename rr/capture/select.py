"""The launch a user brings for a layer (the workflow's `corpus.launches`): `DIR/<layer>/` when it
holds a launch.json (written by hand after docs/formats.md, or a copy of a captured launch), else
— DIR being a capture — the first replayable launch whose entry is the layer's."""

from __future__ import annotations

from pathlib import Path

from rr.capture.session import CAPTURE_FILE
from rr.synth.inputs import NoLaunch


def user_launch(directory: str | Path, layer: str, entry: str) -> Path:
    """The launch directory for `layer` (entry `entry`) in `directory`; NoLaunch naming what there is."""
    from rr.validation import read_json

    d = Path(directory)
    if (d / layer / "launch.json").is_file():
        return d / layer
    if not (d / CAPTURE_FILE).is_file():
        raise NoLaunch(f"{d}: no {layer}/launch.json, and not a capture (no {CAPTURE_FILE})")
    launches = read_json(d / CAPTURE_FILE).get("launches", [])
    for e in launches:
        if e.get("entry") == entry and e.get("status") == "ok":
            return d / e["dir"]
    mine = [e for e in launches if e.get("entry") == entry]
    if mine:
        raise NoLaunch(f"{d / CAPTURE_FILE}: no launch of {entry} can be replayed ({mine[0].get('message')})")
    entries = sorted({e.get("entry") for e in launches})
    raise NoLaunch(f"{d / CAPTURE_FILE}: no launch of {entry} (the capture has {', '.join(entries) or 'none'})")
