"""Which registers an instruction defines and which it reads, by its family's def/use rule.

The rule of PTX is "destination first": the first operand is written, the rest are read. The
opcode table (`rr.ptx.opcodes`, `Defs`) has the exceptions: stores, control and synchronisation
instructions write no register; `wgmma.mma_async` reads its accumulator as well as writing it;
`call` writes the registers of its return list (its first, parenthesised operand). Whatever the
family, a first operand that is an address (`st`, `sust`, `red`, `cp.async`, …) is read, not
written. A guard predicate is a use. Special registers (`%tid.x`, `%laneid`) are neither.

This runs on every statement of every kernel, so it works on the instruction text with a few
compiled regular expressions instead of walking the typed operands; `tests/test_linearise.py`
checks it against the operand model on nvcc's kernels.
"""

from __future__ import annotations

import re

from rr.ptx.opcodes import parse_opcode
from rr.ptx.operands import SPECIAL_REGISTERS

# guard, opcode, first operand, the rest (up to the closing ';').
_SHAPE = re.compile(
    r"\s*(?:@\s*(!?\s*[%A-Za-z_$][\w$.]*)\s+)?([A-Za-z][\w.:]*)\s*"
    r"(\{[^{}]*\}(?:\s*\|\s*[^,;]*)?|\[[^\]]*\]|\([^()]*\)|[^,;]*)"
    r"(.*);",
    re.S,
)
# A virtual register. PTX identifiers have no '.', so the dotted special registers (%tid.x, …) are
# skipped by the lookahead and the dot-free ones are removed with _SPECIAL below.
_REGISTER = re.compile(r"%[\w$]+(?![\w$.])")
_SPECIAL = SPECIAL_REGISTERS
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def head(guard: str | None, opcode: str, dest: str | None) -> tuple:
    """(guard, opcode, written, reads_written): how many of the registers in the first operand the
    instruction writes (all, or none when that operand is an address or the opcode writes no
    register), and whether it also reads them (wgmma's accumulator)."""
    code = parse_opcode(opcode)
    writes, reads_written = code.writes, code.accumulates
    if not writes or not dest or dest[0] == "[":
        return guard, opcode, 0, False
    return guard, opcode, dest.count("%"), reads_written


def split_registers(head: tuple, regs: list[str]) -> tuple[tuple, tuple]:
    """(defs, uses) from the instruction's head and every register of its text in order (the
    guard's first); uses without repeats and without special registers."""
    guard, _, written, reads_written = head
    if guard:
        defs = tuple(regs[1:1 + written])
        uses = regs[:1] + regs[1 if reads_written else 1 + written:]
    else:
        defs = tuple(regs[:written])
        uses = regs if reads_written else regs[written:]
    if len(uses) > 1:
        uses = dict.fromkeys(uses)
    if _SPECIAL.isdisjoint(uses):
        return defs, tuple(uses)
    return defs, tuple(u for u in uses if u not in _SPECIAL)


def registers(text: str) -> list[str]:
    """Every virtual register in an instruction's text (no comments in it), in order."""
    return _REGISTER.findall(text)


# A register in a scope that declares names without '%': a %-name, or a bare word that is not
# part of a dotted name or a number (the caller keeps those the scope declares).
_WORD = re.compile(r"%[\w$]+(?![\w$.])|(?<![\w$.%])[A-Za-z_$][\w$]*(?![\w$.])")


def defs_uses_text(text: str, names: dict | None = None,
                   find: re.Pattern | None = None) -> tuple[str | None, str, tuple, tuple]:
    """(guard, opcode, defs, uses) of one instruction's text. The guard keeps its '!'. `names`:
    the scope's register names that the text does not show, `find` the function's
    `scopes.finder` (`rr.ptx.scopes`)."""
    if "/" in text:
        text = _COMMENT.sub(" ", text)
    m = _SHAPE.match(text)
    if m is None:
        raise ValueError(f"not an instruction: {text!r}")
    guard, opcode, dest, _ = m.groups()
    if names is None and (guard is None or "%" in guard):
        h = head(guard, opcode, dest)
        return (guard, opcode) + split_registers(h, _REGISTER.findall(text))
    return scoped_defs_uses(guard, opcode, dest, text, names or {}, find)


def scoped_defs_uses(guard: str | None, opcode: str, dest: str | None, text: str, names: dict,
                     find: re.Pattern | None = None) -> tuple[str | None, str, tuple, tuple]:
    """(guard, opcode, defs, uses) of an instruction's text where the scope declares bare
    register names or renames registers (`rr.ptx.scopes`): every register by its identity, the
    guard too. `find` (`scopes.finder`) finds the function's registers; without it, every word is
    a candidate that `names` must vouch for."""
    get = names.get
    if find is None:
        found = [t for t in _WORD.findall(text) if t[0] == "%" or t in names]
    else:
        # from after the opcode when the text starts with it; else the guard's name comes first
        found = find.findall(text, 0 if guard is not None or not text.startswith(opcode) else len(opcode))
        if not getattr(names, "complete", False):
            found = [t for t in found if t[0] == "%" or t in names]
    if guard is not None:
        negated = guard[0] == "!"
        name = guard.lstrip("! \t\r\n")
        if not found or found[0] != name:
            found.insert(0, name)  # a guard is a predicate register, declared or not
        guard = ("!" if negated else "") + get(name, name)
    code = parse_opcode(opcode)
    writes, reads_written = code.writes, code.accumulates
    if not writes or not dest or dest[0] == "[":
        written = 0
    elif (dest[0] == "%" and "|" not in dest) or dest in names:
        written = 1
    else:  # a vector or a pair
        written = len([t for t in (find or _WORD).findall(dest) if t[0] == "%" or t in names])
    regs = list(map(get, found, found))
    return (guard, opcode) + split_registers((guard, opcode, written, reads_written), regs)
