"""Capture: the kernel launches of a running CUDA program, as rr launch directories.

`rr capture -o DIR -- COMMAND` preloads a small interposer on the CUDA driver API
(`interposer.c`, built with the system C compiler on first use: `build.py`) into COMMAND; for each
selected launch it writes the module, the launch geometry, the raw parameter bytes and every
buffer, texture and surface the parameters refer to, before and after the launch. `convert.py`
turns what it wrote into launch directories (`rr run`) with their after-state (`rr compare`) and
the capture's index, `capture.json`; `session.py` runs the command and puts it together;
`index.py` reads capture.json back, checked, for every reader.
"""

from rr.capture.build import CaptureError, Library, build_interposer, interposer
from rr.capture.index import CAPTURE_FILE, read_capture
from rr.capture.session import CaptureResult, parse_range, run_capture

__all__ = ["CAPTURE_FILE", "CaptureError", "CaptureResult", "Library", "build_interposer", "interposer", "parse_range",
           "read_capture", "run_capture"]
