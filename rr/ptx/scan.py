"""The fast path through a function body: one `re.split` call cuts it into items.

Large NVVM kernels have tens of thousands of statements, and building a syntax-tree object for each
costs more than reading them. So a body is first *scanned*: a single `re.split` over its text gives,
per item, the trivia in front of it, the item, and for a well-formed instruction its guard, opcode
and first operand (the operand grammar of `rr.ptx.operands` is part of the pattern, so a match
validates the instruction). The scan is kept on the `Function`; the tree (`Function.body`) is built
from it only when something needs nodes (emit after an edit, typed operands, splicing), and
linearisation reads the scan directly.

Anything the scan cannot vouch for — text between items, a comment inside an instruction, braces
that do not close exactly at the candidate end — makes `scan_body` return None, and the parser
falls back to its item-by-item loop, which reports errors with file, line and column.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rr.ptx.defuse import _REGISTER, defs_uses_text, head, scoped_defs_uses, split_registers
from rr.ptx.model import Block, Directive, Instruction, Label
from rr.ptx.errors import ParseError
from rr.ptx.forms import check_operands, quick_form
from rr.ptx.opcodes import parse_opcode
from rr.ptx.operands import INSTRUCTION_PATTERN, parse_instruction
from rr.ptx.scopes import name_registers, own_names, visible

# Whitespace and comments, possessive: no item starts with either, so a failed match never needs
# it to give back, and nested repeats of blanks would backtrack exponentially if it could (it is
# also cheaper to match than a plain or atomic-group repeat).
LEAD = r"(?:\s+|//[^\n]*|/\*.*?\*/)*+"
LABEL = r"[A-Za-z_$][\w$]*+[ \t]*+:(?!:)"
# `.loc` / `.file` end at the end of their line, without trailing blanks or a comment.
LINE_DIRECTIVE = r"\.(?:loc|file)\b(?:[ \t]*+(?:[^\s/]|/(?![/*])))*+"
DIRECTIVE = r'\.[A-Za-z_]\w*+(?:[^;"]++|"[^"\n]*+")*+;'
OTHER_INSTRUCTION = r"[@A-Za-z][^;]*+;"

# groups: 1 lead, 2 item, 3 well-formed instruction, 4 guard, 5 opcode, 6 first operand, 7 rest
_SPLIT = re.compile(
    rf"({LEAD})(\}}|\{{|{LABEL}|{LINE_DIRECTIVE}|{DIRECTIVE}|({INSTRUCTION_PATTERN})|{OTHER_INSTRUCTION})",
    re.S,
)
_STRIDE = 8  # re.split yields the text before each match, then the 7 groups
_DIRECTIVE_NAME = re.compile(r"\.([A-Za-z_]\w*)")


@dataclass(slots=True, eq=False)
class BodyScan:
    """A scanned body: `parts` from `_SPLIT.split` (8 entries per item, the last item being the
    function's closing '}'), `line` the physical line of the opening '{', `raw` the text between
    the braces, `decls` its `.reg` declarations as (scope, text) (`rr.ptx.scopes`)."""

    parts: list
    line: int
    raw: str
    decls: list
    start: int = 0  # offset of `raw` in the file
    others: bool = True  # some instruction did not match the operand grammar

    @property
    def tail(self) -> str:
        return self.parts[-_STRIDE + 1]  # the lead of the closing '}'

    def materialise(self) -> tuple[list, str]:
        """The body's items as syntax-tree nodes, and the trivia before its closing '}'."""
        nodes = _nodes(self)
        if self.decls and own_names(self.decls)[0]:
            name_registers(nodes[0])
        return nodes


def scan_body(text: str, start: int, line: int, check: bool = True) -> tuple[BodyScan, int] | None:
    """Scan the body whose '{' is just before `start`. Returns (scan, position after its '}') or
    None when the fast path cannot vouch for the text (the caller then parses item by item). With
    `check`, an instruction matched by the operand grammar must also fit its family's operand
    forms (`rr.ptx.forms`) — an opcode the table does not have fits none — and one that does not is
    left to the item parser too, which reports it."""
    # The body ends at a '}' that starts a line (NVVM's layout). Scope blocks may close that way
    # too — cuda_fp16's inline asm closes thousands of them — so the text is split up to the next
    # such line, then up to twice as many, and so on, until the braces balance: a few `re.split`
    # calls instead of one per scope block. What follows the closing '}' is not looked at.
    parts: list = [""]
    depth = 0
    scopes = [0]  # the scope numbers of the open blocks, as Statement.scope counts them
    opened = 0
    decls: list = []
    others = False  # instructions the grammar did not match (their operands need the typed parser)
    forms = _FORMS if check else {}
    chunk_start = start
    lines_per_chunk = 1
    while True:
        end = chunk_start
        for _ in range(lines_per_chunk):
            found = text.find("\n}", end)
            if found < 0:
                break
            end = found + 2
        if end == chunk_start:
            return None
        more = _SPLIT.split(text[chunk_start:end])
        for k in range(2, len(more), _STRIDE):
            if more[k - 2]:
                return None  # text between items
            if more[k + 1] is not None:  # an instruction the operand grammar matched
                form = forms.get(more[k + 3], False)
                if form is None:
                    continue  # a family the forms do not cover
                if form is False:
                    if not check:
                        continue
                    form = _FORMS[more[k + 3]] = quick_form(more[k + 3])
                    if form is None:
                        continue
                # forms.fits, inline: this runs for most statements of every kernel
                counts, need, bad, simple, rx = form
                dest, rest = more[k + 4], more[k + 5]
                if dest is None:
                    if 0 not in counts:
                        return None
                elif dest[0] in bad or (need is not None and dest[0] != need):
                    return None
                elif rest is None:
                    if 1 not in counts:
                        return None
                elif simple and "[" not in rest and "{" not in rest and "(" not in rest:
                    if rest.count(",") + 1 not in counts:
                        return None
                elif rx.match(dest + rest) is None:
                    return None
                continue
            item = more[k]
            c = item[0]
            if c == "{":
                depth += 1
                opened += 1
                scopes.append(opened)
            elif c == "}":
                depth -= 1
                if depth < 0:
                    close = chunk_start + sum(map(len, more[0:k + 1:_STRIDE])) + \
                        sum(map(len, more[1:k + 1:_STRIDE])) + sum(map(len, more[2:k + 1:_STRIDE]))
                    if text[close - 2] != "\n":
                        return None  # the function does not close at the start of a line
                    parts[-1:] = more[:k + 6]
                    parts.append("")
                    return BodyScan(parts, line, text[start:close - 1], decls, start, others), close
                scopes.pop()
            else:
                if "//" in item or "/*" in item:
                    return None  # a comment inside an instruction or directive may hide a ';'
                if c == ".":
                    if item.startswith(".reg") and item[4] in " \t\r\n":
                        decls.append((scopes[-1], item))
                elif item[-1] != ":":
                    others = True
        if more[-1]:
            return None  # text after the last item
        parts[-1:] = more
        chunk_start = end
        lines_per_chunk *= 2


def _nodes(scan: BodyScan) -> tuple[list, str]:
    parts = scan.parts
    top: list = []
    stack: list = []
    items = top
    line = scan.line
    for k in range(0, len(parts) - 1, _STRIDE):
        lead, item, ins, guard, opcode, dest = parts[k + 1:k + 7]
        line += lead.count("\n")
        c = item[0]
        if ins is not None:
            items.append(Instruction(item, lead, line, None, head(guard, opcode, dest)))
        elif c == "}":
            if not stack:
                return top, lead
            block = stack.pop()
            block.tail = lead
            items = stack[-1].items if stack else top
        elif c == "{":
            block = Block([], lead, line=line)
            items.append(block)
            stack.append(block)
            items = block.items
        elif c == ".":
            items.append(Directive(_DIRECTIVE_NAME.match(item).group(1), item, lead, line))
        elif item[-1] == ":":
            items.append(Label(item[:-1].rstrip(), item, lead, line))
        else:
            items.append(Instruction(item, lead, line))
        line += item.count("\n")
    raise AssertionError("a BodyScan always ends with the function's closing '}'")


_FORMS: dict = {}  # opcode -> forms.quick_form (None: its family has no forms); a memo of a pure function


def malformed(scan: BodyScan) -> tuple[int, str] | None:
    """The first instruction the operand grammar did not match whose operands are bad — (its
    offset in `raw`, why) — or None. They are parsed into typed operands with the names of their
    scope and checked against the operand forms (`rr.ptx.forms`); the matched ones were checked
    on their text while scanning."""
    if not scan.others:
        return None
    parts = scan.parts
    own, _ = own_names(scan.decls) if scan.decls else ({}, None)
    names = own.get(0)
    maps = [names]
    blocks = 0
    for k in range(0, len(parts) - 1, _STRIDE):
        if parts[k + 3] is not None:
            continue
        item = parts[k + 2]
        c = item[0]
        if c == "{":
            blocks += 1
            names = visible(names, own.get(blocks)) if own else None
            maps.append(names)
        elif c == "}":
            if len(maps) > 1:
                maps.pop()
                names = maps[-1]
        elif c != "." and item[-1] != ":":
            try:
                _, opcode, operands = parse_instruction(item, names and {w: w for w in names if w[0] != "%"})
            except ParseError as e:
                return _offset(parts, k) + getattr(e, "offset", 0), e.message
            message = check_operands(opcode, operands)
            if message is not None:
                return _offset(parts, k), message
    return None


def _offset(parts: list, k: int) -> int:
    """Offset in the body's text of the item at parts[k + 2] (the groups after 2 lie inside it)."""
    return sum(len(parts[j]) for j in range(k + 2) if j % _STRIDE < 3)


def statement_rows(scan: BodyScan, record) -> list:
    """`record(stmt, line, last_line, opcode, text, guard, defs, uses, scope, names, code)` for
    every statement, read straight off the scan (the hot path of linearisation); `code` is the
    parsed opcode (`rr.ptx.opcodes`), one object for every statement of one opcode."""
    parts = scan.parts
    out: list = []
    append = out.append
    split, findall, new = split_registers, _REGISTER.findall, tuple.__new__  # the hot loop's callees
    codes = {}  # opcode -> its parsed value, whose def/use rule defuse.head reads (inline here)
    own, find = own_names(scan.decls) if scan.decls else ({}, None)
    names = own.get(0)  # the names of the current scope (rr.ptx.scopes), None where all are %-names
    get, complete = (names.get, names.complete) if names else (None, False)
    ffind = find.findall if find is not None else None
    maps = []  # the names of the enclosing scopes
    scopes = [0]
    blocks = 0
    line = scan.line
    n = 0
    for lead, item, ins, guard, opcode, dest in zip(parts[1::_STRIDE], parts[2::_STRIDE],
                                                    parts[3::_STRIDE], parts[4::_STRIDE],
                                                    parts[5::_STRIDE], parts[6::_STRIDE]):
        line += lead.count("\n")
        lines = item.count("\n")
        if ins is not None:
            n += 1
            code = codes.get(opcode)
            if code is None:
                code = codes[opcode] = parse_opcode(opcode)
            if names is None:  # defuse.head, inline
                written = dest.count("%") if code.writes and dest and dest[0] != "[" else 0
                defs, uses = split((guard, opcode, written, code.accumulates), findall(item))
            elif guard is None and complete and (not code.writes or not dest or dest[0] == "[" or dest in names
                                                 or (dest[0] == "%" and "|" not in dest)):
                # defuse.scoped_defs_uses, inline for its common case: no guard, every word found
                # a register, a first operand of at most one register
                found = ffind(item, len(opcode))
                written = 1 if code.writes and dest and dest[0] != "[" else 0
                defs, uses = split((None, opcode, written, code.accumulates), list(map(get, found, found)))
            else:
                guard, _, defs, uses = scoped_defs_uses(guard, opcode, dest, item, names, find)
            append(new(record, (n, line, line + lines, opcode, item, guard, defs, uses, scopes[-1], names, code)))
        else:
            c = item[0]
            if c == "{":
                blocks += 1
                scopes.append(blocks)
                maps.append(names)
                if own:
                    block = own.get(blocks)
                    if block is not None:
                        names = visible(names, block)
                        get, complete = names.get, names.complete
            elif c == "}":
                scopes.pop()
                if not scopes:
                    break
                names = maps.pop()
                get, complete = (names.get, names.complete) if names else (None, False)
            elif c != "." and item[-1] != ":":
                n += 1
                guard, opcode, defs, uses = defs_uses_text(item, names, find)
                append(new(record, (n, line, line + lines, opcode, item, guard, defs, uses, scopes[-1], names,
                                    parse_opcode(opcode))))
        line += lines
    return out
