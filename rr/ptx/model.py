"""The PTX syntax tree: a module, its functions, their bodies, instructions and operands.

Every node keeps the exact source text it was parsed from (`text`) and the whitespace and comments
in front of it (`lead`), so emitting a parsed module reproduces the file byte for byte. A node built
in code (by a template or the synthetic engine) has no source text and is rendered from its fields.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Iterator, Union


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
            from rr.ptx.operands import eval_constant

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
            from rr.ptx.operands import parse_instruction

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
        from rr.ptx.scopes import declared_names

        return declared_names(self.text)


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
    scan: object | None = None  # BodyScan, until the nodes are built
    semicolon: bool = True  # a prototype may end without ';' where the next directive begins

    @property
    def body(self) -> list | None:
        if self.nodes is None and self.scan is not None:
            from rr.ptx.scan import materialise

            self.nodes, self.tail = materialise(self.scan)
            self.scan = None
        return self.nodes

    @body.setter
    def body(self, items: list | None) -> None:
        self.nodes = items
        self.scan = None
        if items is not None:
            from rr.ptx.scopes import name_registers

            name_registers(items)

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
