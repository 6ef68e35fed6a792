"""Bulk construction of syntax-tree objects without the cyclic garbage collector.

Parsing a large kernel allocates hundreds of thousands of small objects that form no reference
cycles; the collector's repeated passes over them cost a third of the parse time. `no_gc` pauses
it for the duration of a bulk step and restores the previous state.
"""

from __future__ import annotations

import contextlib
import gc


@contextlib.contextmanager
def no_gc():
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
