"""The PTX front end: lossless parse and emit, statement linearisation, defs and uses.

Its names load on first use (PEP 562): `from rr.ptx.errors import ParseError`, which every `rr`
command's error handling does, costs no parser — importing the front end took 0.11 s of each
command that does not parse PTX (`rr measure`, `rr collect`, `rr run`)."""

from importlib import import_module

_WHERE = {"ParseError": "rr.ptx.errors", "Statement": "rr.ptx.statements", "linearise": "rr.ptx.statements",
          "statements_table": "rr.ptx.statements", "Module": "rr.ptx.model", "emit": "rr.ptx.parser",
          "parse": "rr.ptx.parser", "parse_file": "rr.ptx.parser"}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module 'rr.ptx' has no attribute {name!r}")
    value = getattr(import_module(_WHERE[name]), name)
    globals()[name] = value  # found directly from now on
    return value
