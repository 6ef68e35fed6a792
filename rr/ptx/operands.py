"""Parsing one instruction's text into guard, opcode and typed operands (see `model`)."""

from __future__ import annotations

import ast
import functools
import operator
import re

from rr.ptx.errors import ParseError
from rr.ptx.model import Addr, Imm, Pair, Plist, Reg, Sink, Sym, Vec

_HEAD = re.compile(r"\s*(?:@(!?%[\w$.]+)\s+)?([A-Za-z][\w.:]*)")

# One alternative per literal form, none a prefix of another's backtracking (regex speed matters:
# this runs inside the body scan for every operand).
_NUMBER = (
    r"0[fF][0-9a-fA-F]{8}|0[dD][0-9a-fA-F]{16}"
    r"|(?:0[xX][0-9a-fA-F]+|0[bB][01]+|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)[Uu]?"
)
# Operand tokens. Whitespace and comments are skipped; anything else is an error.
_TOKEN = re.compile(
    r"\s+|//[^\n]*|/\*.*?\*/"
    rf"|(?P<num>{_NUMBER})"
    r"|(?P<reg>%[\w$.]+)"
    r"|(?P<id>[A-Za-z_$][\w$]*(?:\.[\w$]+)*)"
    r"|(?P<op><<|>>|[-+*/&^~{}\[\](),|!;<>])",
    re.S,
)


def _tokens(text: str, base: int, full: str) -> list:
    toks = []
    pos, end = 0, len(text)
    match = _TOKEN.match
    while pos < end:
        m = match(text, pos)
        if m is None:
            raise _error(full, base + pos, f"unexpected character {text[pos]!r} in operands")
        kind = m.lastgroup
        if kind is not None:
            toks.append((kind, m.group(kind), base + pos))
        pos = m.end()
    return toks


def _error(full: str, pos: int, message: str) -> ParseError:
    # Instruction-relative position; the parser re-anchors it to file:line:column.
    err = ParseError.at(full, pos, message)
    err.offset = pos
    return err


class _Operands:
    """A small recursive-descent parser over the token list of one instruction."""

    __slots__ = ("toks", "i", "full")

    def __init__(self, toks: list, full: str):
        self.toks = toks
        self.i = 0
        self.full = full

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else (None, None, len(self.full))

    def fail(self, message: str) -> ParseError:
        kind, value, pos = self.peek()
        got = repr(value) if value is not None else "end of instruction"
        return _error(self.full, pos, f"{message}, got {got}")

    def expect(self, value: str) -> None:
        if self.peek()[1] != value:
            raise self.fail(f"expected {value!r}")
        self.i += 1

    def operand_list(self, close: str | None) -> tuple:
        items = []
        if self.peek()[1] == close:
            return ()
        while True:
            items.append(self.operand())
            kind, value, _ = self.peek()
            if value == ",":
                self.i += 1
                continue
            if value == close:
                return tuple(items)
            raise self.fail("expected ',' or " + (repr(close) if close else "';'"))

    def operand(self):
        first = self.single()
        if self.peek()[1] == "|":
            self.i += 1
            return Pair(first, self.single())
        return first

    def single(self):
        kind, value, _ = self.peek()
        if kind == "reg":
            self.i += 1
            return Reg(value)
        if value == "!":
            self.i += 1
            kind, value, _ = self.peek()
            if kind != "reg":
                raise self.fail("expected a predicate register after '!'")
            self.i += 1
            return Reg(value, negated=True)
        if value == "{":
            self.i += 1
            items = self.operand_list("}")
            self.expect("}")
            return Vec(items)
        if value == "(":
            if self._is_expression():
                return self.immediate()
            self.i += 1
            items = self.operand_list(")")
            self.expect(")")
            return Plist(items)
        if value == "[":
            return self.address()
        if kind == "id":
            self.i += 1
            return Sink() if value == "_" else Sym(value)
        if kind == "num" or value in ("-", "+", "~"):
            return self.immediate()
        raise self.fail("expected an operand")

    def _is_expression(self) -> bool:
        # '(' opens a constant expression when what follows is a number or an operator.
        kind, value, _ = self.toks[self.i + 1] if self.i + 1 < len(self.toks) else (None, None, 0)
        return kind == "num" or value in ("-", "+", "~", "(")

    def immediate(self) -> Imm:
        """A number, or a constant expression of numbers and operators (kept as written)."""
        start = self.i
        depth = 0
        while True:
            kind, value, _ = self.peek()
            if kind == "num":
                self.i += 1
            elif value == "(":
                depth += 1
                self.i += 1
                continue
            elif value in ("-", "+", "~", "!") and kind == "op":
                self.i += 1
                continue
            else:
                raise self.fail("expected a number")
            while self.peek()[1] == ")" and depth:
                depth -= 1
                self.i += 1
            kind, value, _ = self.peek()
            if kind == "op" and value in ("+", "-", "*", "/", "<<", ">>", "&", "|", "^") and not (
                value == "|" and depth == 0
            ):
                self.i += 1
                continue
            if depth:
                raise self.fail("expected ')'")
            break
        text = "".join(t[1] for t in self.toks[start:self.i])
        return Imm(text)

    def address(self) -> Addr:
        self.expect("[")
        kind, value, _ = self.peek()
        base = None
        offset = 0
        if kind == "reg":
            base = Reg(value)
            self.i += 1
        elif kind == "id":
            base = Sym(value)
            self.i += 1
        while True:
            kind, value, _ = self.peek()
            if value in ("+", "-") or (base is None and offset == 0 and kind == "num"):
                sign = 1
                while self.peek()[1] in ("+", "-"):
                    if self.peek()[1] == "-":
                        sign = -sign
                    self.i += 1
                imm = self.immediate()
                offset += sign * _int_value(imm, self)
                continue
            break
        extra = ()
        if self.peek()[1] == ",":
            self.i += 1
            extra = self.operand_list("]")
        self.expect("]")
        return Addr(base, offset, extra)


def _int_value(imm: Imm, p: _Operands) -> int:
    try:
        return int(eval_constant(imm.text))
    except (ValueError, SyntaxError, ZeroDivisionError):
        raise p.fail(f"bad address offset {imm.text!r}") from None


_BINOPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
    ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor,
}
_UNOPS = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert}


def eval_constant(text: str) -> int | float:
    """Value of a PTX constant expression: numbers combined with C integer operators."""
    if re.fullmatch(_NUMBER, text):
        return Imm(text).value
    numbers = re.sub(_NUMBER, lambda m: str(Imm(m.group()).value), text).replace("/", "//")

    def value(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return _BINOPS[type(node.op)](value(node.left), value(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNOPS:
            return _UNOPS[type(node.op)](value(node.operand))
        raise ValueError(f"not a constant expression: {text!r}")

    return value(ast.parse(numbers, mode="eval").body)


# The operand syntax NVVM writes, as one regular expression: an instruction that matches it is
# well formed (the typed parser accepts everything it accepts), and its groups give the guard, the
# opcode, the first operand and the rest. The parser matches it for every instruction as it scans
# a body, so a whole module is validated and its defs/uses found without building operand objects.
_R = r"%[\w$]+(?:\.[\w$]+)*"
_N = r"[-+]?(?:" + _NUMBER + ")"
_S = r"[A-Za-z_$][\w$]*(?:\.[\w$]+)*"
_ATOM = rf"(?:!?{_R}|{_N}|{_S})"
_VEC = rf"\{{\s*{_ATOM}(?:\s*,\s*{_ATOM})*\s*\}}"
_ADDRESS = rf"\[\s*(?:{_R}|{_S})\s*(?:\+\s*-?(?:{_NUMBER}))?\s*(?:,\s*(?:{_VEC}|{_ATOM})\s*)*\]"
_PLIST = rf"\(\s*(?:{_ATOM}(?:\s*,\s*{_ATOM})*)?\s*\)"
_ONE = rf"(?:{_VEC}|{_ADDRESS}|{_PLIST}|{_ATOM})(?:\s*\|\s*{_ATOM})?"
INSTRUCTION_PATTERN = (
    rf"(?:@(?P<guard>!?{_R})\s+)?(?P<op>[A-Za-z][\w.:]*)"
    rf"(?:\s+(?P<dest>{_ONE})(?P<rest>(?:\s*,\s*{_ONE})*))?\s*;"
)
_WELL_FORMED = re.compile(r"\s*" + INSTRUCTION_PATTERN)


def is_well_formed(text: str) -> bool:
    """True if the instruction text is in the common NVVM operand syntax (INSTRUCTION_PATTERN)."""
    return _WELL_FORMED.fullmatch(text) is not None


def parse_instruction(text: str) -> tuple:
    """(guard, opcode, operands) of an instruction's source text, which ends with ';'."""
    m = _HEAD.match(text)
    if m is None:
        raise _error(text, 0, "expected an instruction opcode")
    guard, opcode = m.group(1), m.group(2)
    body_start = m.end()
    end = text.rindex(";")
    body = text[body_start:end]
    operands = _fast_operands(body)
    if operands is None:
        toks = _tokens(body, body_start, text)
        p = _Operands(toks, text)
        operands = p.operand_list(None) if toks else ()
        if p.i != len(toks):
            raise p.fail("expected ',' or ';'")
    return guard, opcode, operands


# The fast path: NVVM's operands split at top-level commas and classified by their first character.
# Anything it does not recognise exactly returns None, and the tokenising parser above (which
# reports errors with positions) handles the instruction instead.
_SPLIT = re.compile(r"(?:\{[^{}\[\]()]*\}|\[[^\[\]()]*\]|\([^()]*\)|[^,{}\[\]()])+")
_REG = re.compile(r"%[\w$.]+")
_SYM = re.compile(r"[A-Za-z_$][\w$]*(?:\.[\w$]+)*")
_NUM = re.compile(_NUMBER)
_SIGNED = re.compile(r"-?(?:" + _NUMBER + ")")
_ADDR = re.compile(r"\s*(%[\w$.]+|[A-Za-z_$][\w$]*)?\s*(?:\+\s*(-?(?:" + _NUMBER + r")))?\s*")


def _fast_operands(body: str) -> tuple | None:
    body = body.strip()
    if not body:
        return ()
    if "/" in body:
        return None
    if "{" in body or "[" in body or "(" in body:
        parts = _SPLIT.findall(body)
        if sum(map(len, parts)) + len(parts) - 1 != len(body):
            return None
    else:
        parts = body.split(",")
    out = []
    for part in parts:
        op = _fast_operand(part)
        if op is None:
            return None
        out.append(op)
    return tuple(out)


@functools.lru_cache(maxsize=1 << 16)
def _fast_operand(part: str):
    # Operands are immutable, so equal operand texts (a register read many times, an A quad
    # shared by several mma) share one parsed object.
    part = part.strip()
    if not part:
        return None
    c = part[0]
    if c == "%":
        if _REG.fullmatch(part):
            return Reg(part)
        if "|" in part:
            a, _, b = part.partition("|")
            a, b = a.strip(), b.strip()
            if _REG.fullmatch(a) and _REG.fullmatch(b):
                return Pair(Reg(a), Reg(b))
        return None
    if c == "{":
        if part[-1] != "}":
            return None
        items = []
        for item in part[1:-1].split(","):
            item = item.strip()
            if _REG.fullmatch(item):
                items.append(Reg(item))
            elif item == "_":
                items.append(Sink())
            elif _SIGNED.fullmatch(item):
                items.append(Imm(item))
            else:
                return None
        return Vec(tuple(items))
    if c == "[":
        if part[-1] != "]":
            return None
        inner = part[1:-1]
        extra = ()
        if "," in inner:
            inner, _, rest = inner.partition(",")
            extra = _fast_operands(rest)
            if extra is None:
                return None
        m = _ADDR.fullmatch(inner)
        if m is None or (m.group(1) is None and m.group(2) is None):
            return None
        base = m.group(1)
        if base is not None:
            base = Reg(base) if base[0] == "%" else Sym(base)
        offset = int(Imm(m.group(2)).value) if m.group(2) else 0
        if base is None:
            return None
        return Addr(base, offset, extra)
    if c.isdigit() or c == "-":
        if _SIGNED.fullmatch(part):
            return Imm(part)
        return None
    if c == "!":
        name = part[1:].strip()
        return Reg(name, negated=True) if _REG.fullmatch(name) else None
    if part == "_":
        return Sink()
    if _SYM.fullmatch(part):
        return Sym(part)
    return None


_REG_DECL = re.compile(r"(%?[\w$]+)\s*(?:<\s*(\d+)\s*>)?")


def reg_decl_names(text: str) -> list[str]:
    """Names declared by `.reg .b32 %r<3>, %x;` → ['%r0', '%r1', '%r2', '%x']."""
    body = re.sub(r"^\s*\.reg\s+(?:\.v\d\s+)?(?:\.align\s+\d+\s+)?\.\w+\s+", "", text).rstrip("; \t\n")
    names = []
    for part in body.split(","):
        m = _REG_DECL.match(part.strip())
        if m is None:
            continue
        if m.group(2) is not None:
            names.extend(f"{m.group(1)}{i}" for i in range(int(m.group(2))))
        else:
            names.append(m.group(1))
    return names
