"""The PTX syntax tree: a module, its functions, their bodies, instructions and operands.

Every node keeps the exact source text it was parsed from (`text`) and the whitespace and comments
in front of it (`lead`), so emitting a parsed module reproduces the file byte for byte. A node built
in code (by a template or the synthetic engine) has no source text and is rendered from its fields.

The tree sits above the operands (`rr.ptx.operands`: their types, defined there with the parser of
one instruction's text, are named from here too) and the opcode table (`rr.ptx.opcodes`), and
below everything that reads bodies: the scan of a large body (`rr.ptx.scan`) builds its nodes
when asked (`Function.body`), and the scopes (`rr.ptx.scopes`) name the registers of built ones.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Iterator, Union

from rr.ptx.opcodes import Opcode, parse_opcode
from rr.ptx.operands import (  # noqa: F401 — the operands are part of the tree: rr imports them from here
    SPECIAL_REGISTERS,
    Addr,
    Imm,
    Offset,
    Operand,
    Pair,
    Plist,
    Reg,
    Sink,
    Sym,
    Vec,
    is_special_register,
    parse_instruction,
    register_names,
    registers_in,
)


# --------------------------------------------------------------------------------------------------
# Statements of a body
# --------------------------------------------------------------------------------------------------


@dataclass(slots=True, eq=False)
class Instruction:
    """One instruction, however many physical lines it spans.

    `text` is the source from the (optional) guard to the closing `;`. Operands are parsed on first
    access, so scanning a module for its entries does not pay for them. `names` holds the
    registers that `.reg` declares in the instruction's scope without a `%` (`.reg .pred p;`),
    each mapped to itself, so that `p` in the operands is a `Reg` and not a `Sym`
    (`rr.ptx.scopes` sets it when the body's nodes are built); None when there are none.
    """

    text: str | None
    lead: str = ""
    line: int = 0
    _parsed: tuple | None = field(default=None, repr=False)
    _head: tuple | None = field(default=None, repr=False)  # defuse.head(), set by the parser
    names: dict | None = field(default=None, repr=False)

    @classmethod
    def build(cls, opcode: str, operands: list | tuple = (), guard: str | None = None,
              lead: str = "\n\t") -> "Instruction":
        ins = cls(text=None, lead=lead)
        ins._parsed = (guard, opcode, tuple(operands))
        return ins

    def _parse(self) -> tuple:
        if self._parsed is None:
            self._parsed = parse_instruction(self.text, self.names)
        return self._parsed

    @property
    def guard(self) -> str | None:
        return self._parse()[0]

    @property
    def opcode(self) -> str:
        return self._parse()[1]

    @property
    def operands(self) -> tuple:
        return self._parse()[2]

    @property
    def code(self) -> Opcode:
        """The opcode parsed (`rr.ptx.opcodes`): its family, modifiers and types."""
        return parse_opcode(self._parse()[1])

    def render(self) -> str:
        if self.text is not None:
            return self.text
        guard, opcode, operands = self._parsed
        head = f"@{guard} {opcode}" if guard else opcode
        return head + ("\t" + ", ".join(map(str, operands)) if operands else "") + ";"

    def emit(self, out: list) -> None:
        out.append(self.lead)
        out.append(self.render())


class _Verbatim:
    """A node emitted exactly as it was read: its lead, then its text."""

    __slots__ = ()

    def emit(self, out: list) -> None:
        out.append(self.lead)
        out.append(self.text)


@dataclass(slots=True, eq=False)
class Label(_Verbatim):
    name: str
    text: str
    lead: str = ""
    line: int = 0


@dataclass(slots=True, eq=False)
class Directive(_Verbatim):
    """A directive statement: `.reg`, `.shared`, `.local`, `.param`, `.pragma`, `.loc`, …

    `kind` is the leading directive (`reg`, `loc`, …); the text is kept verbatim.
    """

    kind: str
    text: str
    lead: str = ""
    line: int = 0

    def register_names(self) -> list[str]:
        """For a `.reg` declaration: the register names it declares (`%r<3>` → %r0, %r1, %r2)."""
        if self.kind != "reg":
            return []
        return declared_names(self.text)


_REG_HEAD = re.compile(r"\s*\.reg\s+(?:\.v\d+\s+)?(?:\.align\s+\d+\s+)?\.\w+\s+")
_REG_DECL = re.compile(r"\s*(%?[A-Za-z_$%][\w$]*)\s*(?:<\s*(\d+)\s*>)?\s*(?:\[\s*\d*\s*\])?\s*")


@functools.lru_cache(maxsize=4096)
def declared(text: str) -> tuple:
    """(names, ranges) of one `.reg` declaration: `%r<3>` is the range ('%r', 3) = %r0…%r2."""
    m = _REG_HEAD.match(text)
    body = text[m.end():] if m else text
    body = body.rstrip().rstrip(";")
    names, ranges = [], []
    for part in body.split(","):
        d = _REG_DECL.fullmatch(part)
        if d is None:
            continue
        if d.group(2) is not None:
            ranges.append((d.group(1), int(d.group(2))))
        else:
            names.append(d.group(1))
    return tuple(names), tuple(ranges)


def declared_names(text: str) -> list[str]:
    """Names declared by `.reg .b32 %r<3>, %x;` → ['%r0', '%r1', '%r2', '%x']."""
    names, ranges = declared(text)
    out = list(names)
    for prefix, count in ranges:
        out.extend(f"{prefix}{i}" for i in range(count))
    return out


@dataclass(slots=True, eq=False)
class Block:
    """A `{ … }` scope block inside a body (inline asm, call sequences)."""

    items: list
    lead: str = ""
    tail: str = ""
    line: int = 0

    def emit(self, out: list) -> None:
        emit_items((self,), out)


BodyItem = Union[Instruction, Label, Directive, Block]


def emit_items(items, out: list) -> None:
    """Emit body items, scope blocks included, with a stack instead of recursion: a body may nest
    its blocks thousands deep (issue 14 item 11)."""
    stack = [(iter(items), None)]
    while stack:
        it, block = stack[-1]
        for item in it:
            if type(item) is Block:
                out.append(item.lead)
                out.append("{")
                stack.append((iter(item.items), item))
                break
            item.emit(out)
        else:
            stack.pop()
            if block is not None:
                out.append(block.tail)
                out.append("}")


# --------------------------------------------------------------------------------------------------
# Module level
# --------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Param:
    """One kernel or function parameter: `.param .align 8 .b8 name[136]`."""

    name: str
    space: str  # param or reg
    type: str  # b8, u64, …
    align: int | None = None
    dims: tuple = ()
    ptr: tuple = ()  # .ptr attributes: ('global', 'align 1')

    @property
    def size(self) -> int:
        width = int("".join(c for c in self.type if c.isdigit()) or 0) // 8
        if self.type == "pred":
            width = 1
        n = 1
        for d in self.dims:
            n *= d
        return width * n


@dataclass(slots=True, eq=False)
class Function:
    """A `.entry` or `.func`: header text kept verbatim, body parsed (None for a prototype).

    A large body arrives as a scan (`rr.ptx.scan.BodyScan`) and its nodes are built on first
    access to `body`; until then emit copies the scanned text and linearisation reads the scan.
    """

    kind: str  # entry or func
    name: str
    header: str  # from the first linkage directive up to, not including, '{' or ';'
    params: list
    returns: list
    directives: dict  # performance directives: {'maxntid': (32, 1, 4), 'noreturn': ()}
    nodes: list | None = None  # the body's items, once built
    lead: str = ""
    tail: str = ""  # trivia before the closing '}' (or before ';' of a prototype)
    line: int = 0
    last_line: int = 0
    scan: object | None = None  # rr.ptx.scan.BodyScan, until its `materialise()` builds the nodes
    semicolon: bool = True  # a prototype may end without ';' where the next directive begins

    @property
    def body(self) -> list | None:
        if self.nodes is None and self.scan is not None:
            self.nodes, self.tail = self.scan.materialise()
            self.scan = None
        return self.nodes

    @body.setter
    def body(self, items: list | None) -> None:
        """The body's items, built (whoever builds them names their registers:
        `rr.ptx.scopes.name_registers`)."""
        self.nodes = items
        self.scan = None

    @property
    def has_body(self) -> bool:
        return self.nodes is not None or self.scan is not None

    def emit(self, out: list) -> None:
        out.append(self.lead)
        out.append(self.header)
        if not self.has_body:
            out.append(self.tail)
            if self.semicolon:
                out.append(";")
            return
        out.append("{")
        if self.scan is not None:
            out.append(self.scan.raw)  # not built, so not edited: the scanned text as it was
        else:
            emit_items(self.nodes, out)
            out.append(self.tail)
        out.append("}")

    def instructions(self) -> Iterator[Instruction]:
        """The statements of the body in textual order, scope blocks flattened (DESIGN §3)."""
        stack = [iter(self.body or ())]
        while stack:
            for item in stack[-1]:
                if type(item) is Instruction:
                    yield item
                elif type(item) is Block:
                    stack.append(iter(item.items))
                    break
            else:
                stack.pop()


@dataclass(slots=True, eq=False)
class TopLevel(_Verbatim):
    """Any other module-level item (`.version`, `.global …;`, `.section … { }`), verbatim."""

    kind: str
    text: str
    lead: str = ""
    line: int = 0


@dataclass(slots=True, eq=False)
class Module:
    items: list
    tail: str = ""
    source: str = "<string>"

    def emit(self) -> str:
        out: list = []
        for item in self.items:
            item.emit(out)
        out.append(self.tail)
        return "".join(out)

    def _directive(self, kind: str) -> str | None:
        for item in self.items:
            if isinstance(item, TopLevel) and item.kind == kind:
                return item.text.split(None, 1)[1].strip() if " " in item.text or "\t" in item.text else ""
        return None

    @property
    def version(self) -> str | None:
        return self._directive("version")

    @property
    def target(self) -> str | None:
        return self._directive("target")

    @property
    def functions(self) -> list[Function]:
        return [i for i in self.items if isinstance(i, Function)]

    @property
    def entries(self) -> list[Function]:
        return [f for f in self.functions if f.kind == "entry" and f.has_body]

    def function(self, name: str) -> Function:
        """The function or entry of that name with a body; KeyError names those that exist."""
        for f in self.functions:
            if f.name == name and f.has_body:
                return f
        known = ", ".join(f.name for f in self.functions if f.has_body) or "none"
        raise KeyError(f"{self.source}: no entry or function named {name!r} (defined: {known})")
