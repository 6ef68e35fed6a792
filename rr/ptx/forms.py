"""The operand forms of the opcode families that rr's analyses read, checked (DESIGN §8).

A well-formed `mma` has four operands, a load a register and an address, a store an address
first; the parser checks every instruction of these families against its forms in the opcode
table (`rr.ptx.opcodes`) at parse time, so that an instruction ptxas would reject for its operands
is a `ParseError` there and every later stage can rely on the shape (issue 14 item 7); an
instruction whose family the table does not have is refused the same way. Families without forms
are checked only by the operand grammar.

A form is written one letter per operand: `w` an operand the instruction writes (a register, a
vector of them, a `d|p` pair, `_`, or a bare name — which `.reg` may declare), `r` one it reads
(anything but an address or a parenthesised list), `a` an address `[…]`, `l` a label; an
upper-case letter is an optional trailing operand.
"""

from __future__ import annotations

import functools
import re

from rr.ptx.opcodes import Family, parse_opcode, unknown_message
from rr.ptx.operands import Addr, Imm, Offset, Pair, Plist, Reg, Sink, Sym, Vec, parse_instruction


def _expand(form: str) -> list[str]:
    """A form with optional trailing operands as every operand-kind string it allows."""
    required = form.rstrip("WRAL")
    out = [required]
    for c in form[len(required):]:
        out.append(out[-1] + c.lower())
    return out


def _message(opcode: str, family: Family, got: int | str) -> str:
    counts = sorted({len(k) for form in family.forms for k in _expand(form)})
    n = str(counts[0]) if len(counts) == 1 else f"{counts[0]} to {counts[-1]}"
    return f"{opcode} takes {n} operand{'s' * (counts[-1] != 1)} ({family.operands}), {got}"


# -- typed operands -------------------------------------------------------------------------------


def _kind_ok(kind: str, op) -> bool:
    if kind == "a":
        return isinstance(op, Addr)
    if kind == "l":
        return type(op) is Sym
    if isinstance(op, (Addr, Plist)):
        return False
    if kind == "w":
        return isinstance(op, (Reg, Vec, Pair, Sink, Sym))
    return isinstance(op, (Reg, Imm, Sym, Offset, Vec, Sink, Pair))  # r


def check_operands(opcode: str, operands: tuple) -> str | None:
    """Why the typed operands do not fit the opcode's family (or the table has no such family),
    or None when they do (or the family has no forms)."""
    code = parse_opcode(opcode)
    if not code.known:
        return unknown_message(code)
    family = code.family
    if not family.forms:
        return None
    best = None
    for form in family.forms:
        for kinds in _expand(form):
            if len(kinds) != len(operands):
                continue
            bad = next((i for i, (k, op) in enumerate(zip(kinds, operands)) if not _kind_ok(k, op)), None)
            if bad is None:
                return None
            best = best or (bad, kinds[bad])
    if best is None:
        return _message(opcode, family, f"got {len(operands)}")
    i, kind = best
    what = {"a": "an address [...]", "l": "a label", "w": "a register it can write",
            "r": "a value (not an address)"}[kind]
    return _message(opcode, family, f"but operand {i + 1} ({operands[i]}) is not {what}")


# -- scanned text ---------------------------------------------------------------------------------
# What the body scan has of a well-formed instruction (rr.ptx.operands.INSTRUCTION_PATTERN): the
# text of its operands. Each operand there is already known to be one operand of the grammar, so
# its kind shows in its first character, and one regular expression per family checks them all.

# atomic: an operand runs to the next comma and never gives back (no exponential backtracking)
_KIND_TEXT = {
    "a": r"(?>\[[^\]]*\][ \t\r\n]*)",
    "l": r"(?>[A-Za-z_$][\w$]*[ \t\r\n]*)",
    "r": r"(?>\{[^}]*\}[^,]*|[^\s,\[{(][^,]*)",
    "w": r"(?>\{[^}]*\}[^,]*|[%_A-Za-z$][^,]*)",
}


def _form_text(form: str) -> str:
    required = form.rstrip("WRAL")
    text = r"\s*,\s*".join(_KIND_TEXT[k] for k in required)
    optional = ""
    for k in reversed(form[len(required):]):
        optional = rf"(?:\s*,\s*{_KIND_TEXT[k.lower()]}{optional})?"
    return text + optional


@functools.lru_cache(maxsize=None)
def text_pattern(opcode: str) -> re.Pattern | None:
    """The regular expression the operand text of a well-formed instruction of this opcode must
    match (from its first operand to the last, without the ';'), or None if its family has no
    forms."""
    forms = parse_opcode(opcode).family.forms
    if not forms:
        return None
    return re.compile("(?:" + "|".join(_form_text(f) for f in forms) + r")\s*\Z")


def check_text(opcode: str, operands: str) -> str | None:
    """Like `check_operands`, on a well-formed instruction's operand text."""
    rx = text_pattern(opcode)
    if (rx is None and parse_opcode(opcode).known) or (rx is not None and rx.match(operands)):
        return None
    # the typed operands say which operand is wrong (and settle a text the pattern misjudged)
    return check_operands(opcode, parse_instruction(f"{opcode} {operands};")[2])


_BAD_FIRST = {"w": "[(0123456789-+!", "r": "[(", "l": "[({%!0123456789-+", "a": ""}
# the quick form of an opcode the table does not have: nothing fits it, so the scan leaves the
# instruction to the item parser, which refuses it with its line (`check_text`)
_NOTHING_FITS = (frozenset(), "\0", "", True, None)


@functools.lru_cache(maxsize=None)
def quick_form(opcode: str) -> tuple | None:
    """What the body scan checks a well-formed instruction of this opcode against (see `fits`), or
    None if its family has no forms."""
    code = parse_opcode(opcode)
    if not code.known:
        return _NOTHING_FITS
    if not code.family.forms:
        return None
    kinds = [k for form in code.family.forms for k in _expand(form)]
    counts = frozenset(len(k) for k in kinds)
    first = {k[0] for k in kinds if k}
    (dest,) = first or {"r"}  # every family's forms agree on the first operand's kind
    simple = all(c == "r" for k in kinds for c in k[1:])
    return counts, "[" if dest == "a" else None, _BAD_FIRST[dest], simple, text_pattern(opcode)


def fits(form: tuple, dest: str | None, rest: str | None) -> bool:
    """Whether a well-formed instruction's first operand and the rest (", op, op") fit a
    `quick_form`: by counting commas where no operand can hide one (no brackets, and every later
    operand a value), else by the family's pattern."""
    counts, need, bad, simple, rx = form
    if dest is None:
        return 0 in counts
    c = dest[0]
    if c in bad or (need is not None and c != need):
        return False
    if rest is None:
        return 1 in counts
    if simple and "[" not in rest and "{" not in rest and "(" not in rest:
        return rest.count(",") + 1 in counts
    return rx.match(dest + rest) is not None
