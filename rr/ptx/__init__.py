"""The PTX front end: lossless parse and emit, statement linearisation, defs and uses."""

from rr.ptx.errors import ParseError
from rr.ptx.linearise import Statement, linearise, statements_table
from rr.ptx.model import Module
from rr.ptx.parser import emit, parse, parse_file

__all__ = ["ParseError", "Module", "Statement", "emit", "linearise", "parse", "parse_file",
           "statements_table"]
