"""The operand forms of the opcode families that rr's analyses read, declared once (DESIGN §8).

A well-formed `mma` has four operands, a load a register and an address, a store an address
first; the parser checks every instruction of these families against this table at parse time,
so that an instruction ptxas would reject for its operands is a `ParseError` there and every later
stage can rely on the shape (issue 14 item 7). Families not in the table are checked only by the
operand grammar.

A form is written one letter per operand: `w` an operand the instruction writes (a register, a
vector of them, a `d|p` pair, `_`, or a bare name — which `.reg` may declare), `r` one it reads
(anything but an address or a parenthesised list), `a` an address `[…]`, `l` a label; an
upper-case letter is an optional trailing operand. The forms follow the PTX ISA 9.0 syntax of
each instruction, optional operands included (a load's cache policy, `tex`'s offset and depth
compare, `wgmma`'s scale and transpose immediates).
"""

from __future__ import annotations

import functools
import re

from rr.ptx.model import Addr, Imm, Offset, Pair, Plist, Reg, Sink, Sym, Vec

# family -> (the operands as the ISA names them, the forms)
FORMS: dict[str, tuple[str, tuple[str, ...]]] = {
    "mma": ("d, a, b, c", ("wrrr",)),
    "mma.sp": ("d, a, b, c, e (metadata), f (selector)", ("wrrrrr",)),
    "mma.block_scale": ("d, a, b, c, scale-a, {byte-id-a, thread-id-a}, scale-b, {byte-id-b, thread-id-b}",
                        ("wrrrrrrr",)),
    "mma.sp.block_scale": ("d, a, b, c, e, f, scale-a, {…}, scale-b, {…}", ("wrrrrrrrrr",)),
    "wmma.load": ("r, [p] {, stride}", ("waR",)),
    "wmma.store": ("[p], r {, stride}", ("arR",)),
    "wmma.mma": ("d, a, b, c", ("wrrr",)),
    "wgmma.mma_async": ("d, a(-desc), b-desc {, sp-meta, sp-sel}, scale-d {, imm-scale-a, imm-scale-b"
                        "{, imm-trans-a}, imm-trans-b}", ("wrrrRRRRRR",)),
    "wgmma.fence": ("no operands", ("",)),
    "wgmma.commit_group": ("no operands", ("",)),
    "wgmma.wait_group": ("N", ("r",)),
    "ld": ("d, [a] {, cache-policy}", ("waR",)),
    "ldu": ("d, [a]", ("wa",)),
    "st": ("[a], b {, cache-policy}", ("arR", "ara")),
    "mov": ("d, a", ("wr",)),
    "cvt": ("d, a {, b} {, rbits}", ("wrRR",)),
    "cvta": ("d, a", ("wr",)),
    "add": ("d, a, b", ("wrr",)),
    "sub": ("d, a, b", ("wrr",)),
    "mul": ("d, a, b", ("wrr",)),
    "mad": ("d, a, b, c", ("wrrr",)),
    "shl": ("d, a, b", ("wrr",)),
    "shr": ("d, a, b", ("wrr",)),
    "and": ("d, a, b", ("wrr",)),
    "or": ("d, a, b", ("wrr",)),
    "xor": ("d, a, b", ("wrr",)),
    "bfi": ("f, a, b, c, d", ("wrrrr",)),
    "bfe": ("d, a, b, c", ("wrrr",)),
    "prmt": ("d, a, b, c", ("wrrr",)),
    "setp": ("p[|q], a, b", ("wrr",)),
    "setp.bool": ("p[|q], a, b, {!}c", ("wrrr",)),
    "selp": ("d, a, b, c", ("wrrr",)),
    "bra": ("target label", ("l",)),
    "movmatrix": ("d, a", ("wr",)),
    "shfl": ("d[|p], a, b, c", ("wrrr",)),
    "shfl.sync": ("d[|p], a, b, c, membermask", ("wrrrr",)),
    "tex": ("d[|p], [a, {b,} c] {, lod | dPdx, dPdy} {, e} {, f}", ("waRRRR",)),
    "sust": ("[a, b], c", ("ar",)),
}


@functools.lru_cache(maxsize=4096)
def family(opcode: str) -> str | None:
    """The FORMS key of an opcode, or None if the table does not cover it."""
    parts = opcode.split(".")
    base = parts[0]
    mods = parts[1:]
    if base == "mma":
        sp = any(m == "sp" or m.startswith("sp::") for m in mods)
        scaled = "block_scale" in mods
        return "mma" + (".sp" if sp else "") + (".block_scale" if scaled else "")
    if base in ("wmma", "wgmma"):
        key = f"{base}.{mods[0]}" if mods else base
        return key if key in FORMS else None
    if base == "setp":
        return "setp.bool" if len(mods) > 1 and mods[1] in ("and", "or", "xor") else "setp"
    if base == "shfl":
        return "shfl.sync" if "sync" in mods else "shfl"
    return base if base in FORMS else None


def _expand(form: str) -> list[str]:
    """A form with optional trailing operands as every operand-kind string it allows."""
    required = form.rstrip("WRAL")
    out = [required]
    for c in form[len(required):]:
        out.append(out[-1] + c.lower())
    return out


def _counts(key: str) -> list[int]:
    return sorted({len(k) for form in FORMS[key][1] for k in _expand(form)})


def _message(opcode: str, key: str, got: int | str) -> str:
    names, _ = FORMS[key]
    counts = _counts(key)
    n = str(counts[0]) if len(counts) == 1 else f"{counts[0]} to {counts[-1]}"
    return f"{opcode} takes {n} operand{'s' * (counts[-1] != 1)} ({names}), {got}"


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
    """Why the typed operands do not fit the opcode's family, or None when they do (or the
    family is not in the table)."""
    key = family(opcode)
    if key is None:
        return None
    best = None
    for form in FORMS[key][1]:
        for kinds in _expand(form):
            if len(kinds) != len(operands):
                continue
            bad = next((i for i, (k, op) in enumerate(zip(kinds, operands)) if not _kind_ok(k, op)), None)
            if bad is None:
                return None
            best = best or (bad, kinds[bad])
    if best is None:
        return _message(opcode, key, f"got {len(operands)}")
    i, kind = best
    what = {"a": "an address [...]", "l": "a label", "w": "a register it can write",
            "r": "a value (not an address)"}[kind]
    return _message(opcode, key, f"but operand {i + 1} ({operands[i]}) is not {what}")


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
    match (from its first operand to the last, without the ';'), or None if the table does not
    cover the opcode."""
    key = family(opcode)
    if key is None:
        return None
    return re.compile("(?:" + "|".join(_form_text(f) for f in FORMS[key][1]) + r")\s*\Z")


def check_text(opcode: str, operands: str) -> str | None:
    """Like `check_operands`, on a well-formed instruction's operand text."""
    rx = text_pattern(opcode)
    if rx is None or rx.match(operands):
        return None
    from rr.ptx.operands import parse_instruction

    # the typed operands say which operand is wrong (and settle a text the pattern misjudged)
    return check_operands(opcode, parse_instruction(f"{opcode} {operands};")[2])


_BAD_FIRST = {"w": "[(0123456789-+!", "r": "[(", "l": "[({%!0123456789-+", "a": ""}


@functools.lru_cache(maxsize=None)
def quick_form(opcode: str) -> tuple | None:
    """What the body scan checks a well-formed instruction of this opcode against (see `fits`), or
    None if the table does not cover the opcode."""
    key = family(opcode)
    if key is None:
        return None
    kinds = [k for form in FORMS[key][1] for k in _expand(form)]
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
