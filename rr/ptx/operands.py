"""Operands: their types, and parsing one instruction's text into guard, opcode and typed operands.

The syntax tree (`rr.ptx.model`) holds them; it names these types too, and parses an
instruction's operands with `parse_instruction` on first access.

Reg or Sym: a `%`-name is a register; a bare name is a register exactly when `.reg` declares it
in the instruction's scope, which the caller passes as `names` (`rr.ptx.scopes` says how scopes
are read and how registers of different blocks are told apart); without `names`, a bare operand
is a `Sym`. A guard is a predicate register either way. `sym+const` and `reg+const` outside
brackets are `Offset`s, as ptxas accepts them (only with '+').
"""

from __future__ import annotations

import functools
import re
import struct
from dataclasses import dataclass
from typing import Iterator, Union

from rr.ptx.errors import ParseError

# --------------------------------------------------------------------------------------------------
# Operands
# --------------------------------------------------------------------------------------------------

# Read-only special registers, by the name before any '.' (%tid.x is %tid): they are not virtual
# registers, so they are never defined and are left out of def/use sets.
SPECIAL_REGISTERS = frozenset(
    """%tid %ntid %laneid %warpid %nwarpid %ctaid %nctaid %smid %nsmid %gridid %lanemask_eq
    %lanemask_le %lanemask_lt %lanemask_ge %lanemask_gt %clock %clock_hi %clock64 %globaltimer
    %globaltimer_lo %globaltimer_hi %total_smem_size %dynamic_smem_size %aggr_smem_size
    %is_explicit_cluster %clusterid %nclusterid %cluster_ctaid %cluster_nctaid %cluster_ctarank
    %cluster_nctarank %current_graph_exec %reserved_smem_offset_begin %reserved_smem_offset_end
    %reserved_smem_offset_cap %reserved_smem_offset_0 %reserved_smem_offset_1""".split()
    + [f"%envreg{i}" for i in range(32)] + [f"%pm{i}" for i in range(8)] + [f"%pm{i}_64" for i in range(8)]
)


# their first three characters: most names (`%r12`, `%rd3`, `%f7`) are told apart by these alone
_SPECIAL_HEADS = frozenset(name[:3] for name in SPECIAL_REGISTERS)


def is_special_register(name: str) -> bool:
    return name[:3] in _SPECIAL_HEADS and name.split(".", 1)[0] in SPECIAL_REGISTERS


@dataclass(frozen=True, slots=True)
class Reg:
    """A register operand, `%r12`, `%tid.z`, or a negated predicate `!%p3`."""

    name: str
    negated: bool = False

    def __str__(self) -> str:
        return ("!" if self.negated else "") + self.name

    @property
    def special(self) -> bool:
        return is_special_register(self.name)


@dataclass(frozen=True, slots=True)
class Imm:
    """An immediate as written: decimal, hex, binary, `0f…` (f32 bits) or `0d…` (f64 bits)."""

    text: str

    def __str__(self) -> str:
        return self.text

    @property
    def value(self) -> int | float:
        t = self.text.rstrip("Uu")
        if t[:2] in ("0f", "0F"):
            return struct.unpack("<f", int(t[2:], 16).to_bytes(4, "little"))[0]
        if t[:2] in ("0d", "0D"):
            return struct.unpack("<d", int(t[2:], 16).to_bytes(8, "little"))[0]
        if len(t) > 1 and t[0] == "0" and t.isdigit():
            return int(t, 8)  # PTX octal, as in C
        try:
            return int(t, 0)
        except ValueError:
            pass
        try:
            return float(t)
        except ValueError:
            return eval_constant(self.text)  # a constant expression


@dataclass(frozen=True, slots=True)
class Sym:
    """A symbol: a parameter, global, label or function name, or `WARP_SZ`."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class Offset:
    """A symbol or register plus a constant, outside brackets: `mov.u64 %rd1, arr+16;` (the
    address of `arr` plus 16 bytes), or `st.u64 [x], temp+1;` (the value of `temp` plus 1), both
    of which ptxas accepts. ptxas takes only '+': a negative offset is spelt `arr+-4`."""

    base: "Reg | Sym"
    offset: int

    def __str__(self) -> str:
        return f"{self.base}+{self.offset}"


@dataclass(frozen=True, slots=True)
class Sink:
    """The `_` operand (a result that is discarded)."""

    def __str__(self) -> str:
        return "_"


@dataclass(frozen=True, slots=True)
class Vec:
    """A vector operand `{a, b, c, d}`."""

    items: tuple

    def __str__(self) -> str:
        return "{" + ", ".join(map(str, self.items)) + "}"


@dataclass(frozen=True, slots=True)
class Pair:
    """Two destinations written `d|p` (setp, shfl.sync, tex with a predicate)."""

    first: "Operand"
    second: "Operand"

    def __str__(self) -> str:
        return f"{self.first}|{self.second}"


@dataclass(frozen=True, slots=True)
class Addr:
    """An address `[base+offset]`; `extra` holds what follows a comma (tex/sust coordinates)."""

    base: "Reg | Sym | None"
    offset: int = 0
    extra: tuple = ()

    def __str__(self) -> str:
        if self.base is None:
            inner = str(self.offset)
        elif self.offset:
            inner = f"{self.base}+{self.offset}"
        else:
            inner = str(self.base)
        if self.extra:
            inner += ", " + ", ".join(map(str, self.extra))
        return f"[{inner}]"


@dataclass(frozen=True, slots=True)
class Plist:
    """A parenthesised list, as in `call (retval0), f, (param0, param1)`."""

    items: tuple

    def __str__(self) -> str:
        return "(" + ", ".join(map(str, self.items)) + ")"


Operand = Union[Reg, Imm, Sym, Offset, Sink, Vec, Pair, Addr, Plist]


def register_names(op: Operand) -> tuple:
    """The names written in a vector operand (`{%r1, %r2}` → ('%r1', '%r2')), or the operand's own."""
    return tuple(map(str, op.items)) if isinstance(op, Vec) else (str(op),)


def registers_in(op: Operand) -> Iterator[Reg]:
    """Every register mentioned in an operand, including address bases and vector elements, in
    textual order. A work list, not recursion: an operand built in code may nest deeper than the
    grammar allows."""
    todo = [op]
    while todo:
        op = todo.pop()
        if isinstance(op, Reg):
            yield op
        elif isinstance(op, (Vec, Plist)):
            todo.extend(reversed(op.items))
        elif isinstance(op, Pair):
            todo += (op.second, op.first)
        elif isinstance(op, Addr):
            todo.extend(reversed(op.extra))
            if isinstance(op.base, Reg):
                yield op.base
        elif isinstance(op, Offset) and isinstance(op.base, Reg):
            yield op.base



# guard (`@%p1`, `@!p`, `@ !p`: negation and name apart) and opcode
_HEAD = re.compile(r"\s*(?:@\s*(!?)\s*([%A-Za-z_$][\w$.]*)\s+)?([A-Za-z][\w.:]*)")

# One alternative per literal form, none a prefix of another's backtracking (regex speed matters:
# this runs inside the body scan for every operand). Repeats here and in the operand grammar below
# are possessive: every token of PTX ends where the next cannot continue it, so giving characters
# back never finds another match, and not trying saves a third of the scan.
_NUMBER = (
    r"0[fF][0-9a-fA-F]{8}|0[dD][0-9a-fA-F]{16}"
    r"|(?:0[xX][0-9a-fA-F]++|0[bB][01]++|\d++(?:\.\d*+)?+(?:[eE][-+]?\d++)?+)[Uu]?+"
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
    """A small descent parser over the token list of one instruction. The grammar nests at most
    three deep (an address holding a vector, a vector holding atoms), so no input can drive it
    deeper: `{{…}}`, `[[…]]` and `((…))` lists are errors (constant expressions are parsed
    without recursion)."""

    __slots__ = ("toks", "i", "full", "names")

    def __init__(self, toks: list, full: str, names: dict | None = None):
        self.toks = toks
        self.i = 0
        self.full = full
        self.names = names

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

    def items(self, close: str | None, item) -> tuple:
        """`item (, item)*` up to `close` (not consumed); `close` None: up to the end."""
        out = []
        if self.peek()[1] == close:
            return ()
        while True:
            out.append(item())
            kind, value, _ = self.peek()
            if value == ",":
                self.i += 1
                continue
            if value == close:
                return tuple(out)
            raise self.fail("expected ',' or " + (repr(close) if close else "';'"))

    def operand(self):
        """A top-level operand: an atom, vector, parenthesised list or address; `d|p` pairs."""
        kind, value, _ = self.peek()
        if value == "[":
            return self.address()
        if value == "(" and not self._is_expression():
            self.i += 1
            items = self.items(")", self.atom)
            self.expect(")")
            return Plist(items)
        first = self.vector() if value == "{" else self.atom()
        if self.peek()[1] == "|":
            self.i += 1
            return Pair(first, self.atom())
        return first

    def vector(self) -> Vec:
        self.expect("{")
        items = self.items("}", self.atom)
        self.expect("}")
        return Vec(items)

    def _register(self, name: str, negated: bool = False) -> Reg:
        names = self.names
        return Reg(names.get(name, name) if names else name, negated)

    def _offset(self, base):
        """`base+constant` outside brackets (ptxas accepts only '+'), or the base alone."""
        if self.peek()[1] != "+":
            return base
        self.i += 1
        return Offset(base, _int_value(self.immediate(), self))

    def atom(self):
        """A register (`%r1`, `!%p1`, or a name `.reg` declared) or a symbol, either plus a
        constant; `_`; or an immediate (a number or constant expression)."""
        kind, value, _ = self.peek()
        if kind == "reg":
            self.i += 1
            return self._offset(self._register(value))
        if value == "!":
            self.i += 1
            kind, value, _ = self.peek()
            if kind == "reg" or (kind == "id" and self.names and value in self.names):
                self.i += 1
                return self._register(value, negated=True)
            raise self.fail("expected a predicate register after '!'")
        if kind == "id":
            self.i += 1
            if value == "_":
                return Sink()
            if self.names and value in self.names:
                return self._offset(self._register(value))
            return self._offset(Sym(value))
        if kind == "num" or value in ("-", "+", "~", "("):
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
            base = self._register(value)
            self.i += 1
        elif kind == "id":
            base = self._register(value) if self.names and value in self.names else Sym(value)
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
            extra = self.items("]", self._coordinate)
        self.expect("]")
        return Addr(base, offset, extra)

    def _coordinate(self):
        # what follows the base in a texture or surface address: a sampler, a vector of coordinates
        return self.vector() if self.peek()[1] == "{" else self.atom()


def _int_value(imm: Imm, p: _Operands) -> int:
    try:
        value = eval_constant(imm.text)
    except ValueError:
        raise p.fail(f"bad constant {imm.text!r}") from None
    if not isinstance(value, int):
        raise p.fail(f"an offset must be an integer, not {imm.text!r}")
    return value


_EXPRESSION_TOKEN = re.compile(rf"\s*(?:({_NUMBER})|(<<|>>|[-+*/%&|^~!()]))")
_PRECEDENCE = {"*": 5, "/": 5, "%": 5, "+": 4, "-": 4, "<<": 3, ">>": 3, "&": 2, "^": 1, "|": 0}
_UNARY = 9
_WRAP = 1 << 64


def _c_div(a, b):
    if isinstance(a, float) or isinstance(b, float):
        return a / b
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _binary(op: str, a, b):
    if op in ("<<", ">>", "&", "|", "^", "%") and (isinstance(a, float) or isinstance(b, float)):
        raise ValueError(f"{op} of a floating-point value")
    if op == "+":
        r = a + b
    elif op == "-":
        r = a - b
    elif op == "*":
        r = a * b
    elif op == "/":
        r = _c_div(a, b)
    elif op == "%":
        r = a - b * _c_div(a, b)
    elif op == "<<":
        r = a << b if 0 <= b < 64 else 0
    elif op == ">>":
        r = a >> b if 0 <= b < 64 else (-1 if a < 0 else 0)
    elif op == "&":
        r = a & b
    elif op == "^":
        r = a ^ b
    else:
        r = a | b
    return r if isinstance(r, float) else (r + (1 << 63)) % _WRAP - (1 << 63)  # 64-bit, as ptxas


def _unary(op: str, a):
    if op == "-":
        return -a
    if op == "+":
        return a
    if isinstance(a, float):
        raise ValueError(f"{op} of a floating-point value")
    return ~a if op == "~" else int(not a)


def eval_constant(text: str) -> int | float:
    """Value of a PTX constant expression: numbers combined with C's integer operators and
    precedence, in 64-bit arithmetic. Operator-precedence parsing with two stacks, so parentheses
    nested any depth cost no recursion. ValueError if it is not one."""
    values: list = []
    ops: list = []

    def reduce() -> None:
        op = ops.pop()
        if op[0] == "u":
            values.append(_unary(op[1], values.pop()))
        else:
            b, a = values.pop(), values.pop()
            try:
                values.append(_binary(op, a, b))
            except ZeroDivisionError:
                raise ValueError(f"division by zero in {text!r}") from None

    pos, end = 0, len(text.rstrip())
    expect_value = True
    while pos < end:
        m = _EXPRESSION_TOKEN.match(text, pos)
        if m is None:
            raise ValueError(f"not a constant expression: {text!r}")
        pos = m.end()
        number, op = m.groups()
        if number is not None:
            if not expect_value:
                raise ValueError(f"not a constant expression: {text!r}")
            values.append(Imm(number).value)
            expect_value = False
        elif op == "(":
            if not expect_value:
                raise ValueError(f"not a constant expression: {text!r}")
            ops.append("(")
        elif op == ")":
            if expect_value:
                raise ValueError(f"not a constant expression: {text!r}")
            while ops and ops[-1] != "(":
                reduce()
            if not ops:
                raise ValueError(f"unbalanced ')' in {text!r}")
            ops.pop()
        elif expect_value:
            if op not in ("-", "+", "~", "!"):
                raise ValueError(f"not a constant expression: {text!r}")
            ops.append("u" + op)
        else:
            if op not in _PRECEDENCE:
                raise ValueError(f"not a constant expression: {text!r}")
            while ops and ops[-1] != "(" and (_UNARY if ops[-1][0] == "u" else _PRECEDENCE[ops[-1]]) >= _PRECEDENCE[op]:
                reduce()
            ops.append(op)
            expect_value = True
    if expect_value:
        raise ValueError(f"not a constant expression: {text!r}")
    while ops:
        if ops[-1] == "(":
            raise ValueError(f"unbalanced '(' in {text!r}")
        reduce()
    return values[0]


# The operand syntax NVVM writes, as one regular expression: an instruction that matches it is
# well formed (the typed parser accepts everything it accepts), and its groups give the guard, the
# opcode, the first operand and the rest. The parser matches it for every instruction as it scans
# a body, so a whole module is validated and its defs/uses found without building operand objects.
_R = r"%[\w$]++(?:\.[\w$]++)*+"
_N = r"[-+]?(?:" + _NUMBER + ")"
_S = r"[A-Za-z_$][\w$]*+(?:\.[\w$]++)*+"
_ATOM = rf"(?:!?{_R}|{_N}|{_S})"
_VEC = rf"\{{\s*+{_ATOM}(?:\s*+,\s*+{_ATOM})*+\s*+\}}"
_ADDRESS = rf"\[\s*+(?:{_R}|{_S})\s*+(?:\+\s*+-?(?:{_NUMBER}))?+\s*+(?:,\s*+(?:{_VEC}|{_ATOM})\s*+)*+\]"
_NAME = rf"(?:!?{_R}|{_S})"
_PLIST = rf"\(\s*+(?:{_NAME}(?:\s*+,\s*+{_NAME})*+)?+\s*+\)"  # a number after '(' is an expression
_PAIRED = rf"(?:\s*+\|\s*+{_ATOM})?+"  # d|p: only after a value
_ONE = rf"(?:{_VEC}{_PAIRED}|{_ADDRESS}|{_PLIST}|{_ATOM}{_PAIRED})"
INSTRUCTION_PATTERN = (
    rf"(?:@(?P<guard>!?{_R})\s++)?(?P<op>[A-Za-z][\w.:]*+)"
    rf"(?:\s++(?P<dest>{_ONE})(?P<rest>(?:\s*+,\s*+{_ONE})*+))?+\s*+;"
)


@functools.cache
def well_formed() -> re.Pattern:
    """INSTRUCTION_PATTERN after optional blanks, compiled on first use: the item-by-item parser
    and its checks need it, the body scan's fast path (which compiles the pattern into its own)
    never does, and compiling it takes 15 ms of every command's start."""
    return re.compile(r"\s*" + INSTRUCTION_PATTERN)


def is_well_formed(text: str) -> bool:
    """True if the instruction text is in the common NVVM operand syntax (INSTRUCTION_PATTERN)."""
    return well_formed().fullmatch(text) is not None


def parse_instruction(text: str, names: dict | None = None) -> tuple:
    """(guard, opcode, operands) of an instruction's source text, which ends with ';'.

    `names` maps the register names of the instruction's scope that the text alone does not show
    (`rr.ptx.scopes`): a bare name in it is a `Reg`, not a `Sym`, and every register takes the
    name it maps to (its identity, or itself for nodes that are printed back)."""
    m = _HEAD.match(text)
    if m is None:
        raise _error(text, 0, "expected an instruction opcode")
    negated, guard, opcode = m.groups()
    if guard is not None:
        guard = negated + (names.get(guard, guard) if names else guard)
    body_start = m.end()
    end = text.rindex(";")
    body = text[body_start:end]
    operands = _fast_operands(body)
    if operands is None:
        toks = _tokens(body, body_start, text)
        p = _Operands(toks, text, names)
        operands = p.items(None, p.operand) if toks else ()
        if p.i != len(toks):
            raise p.fail("expected ',' or ';'")
    elif names:
        operands = tuple(_resolve(op, names) for op in operands)
    return guard, opcode, operands


def _resolve(op, names: dict):
    """An operand of the fast path with the scope's names applied (bare registers were Syms)."""
    if isinstance(op, Reg):
        return Reg(names.get(op.name, op.name), op.negated)
    if isinstance(op, Sym):
        return Reg(names[op.name]) if op.name in names else op
    if isinstance(op, Vec):
        return Vec(tuple(_resolve(x, names) for x in op.items))
    if isinstance(op, Pair):
        return Pair(_resolve(op.first, names), _resolve(op.second, names))
    if isinstance(op, Addr):
        base = _resolve(op.base, names) if op.base is not None else None
        return Addr(base, op.offset, tuple(_resolve(x, names) for x in op.extra))
    if isinstance(op, Plist):
        return Plist(tuple(_resolve(x, names) for x in op.items))
    return op


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
