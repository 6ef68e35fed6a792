"""A lossless PTX parser: text → `Module`, with `emit(parse(text)) == text` byte for byte.

The parser works at statement granularity: it splits the module into items and each body into
instructions, labels, directives and scope blocks with a handful of compiled regular expressions,
keeping every byte (whitespace and comments go into the `lead` of the node that follows).
Instruction operands are parsed lazily by `rr.ptx.operands`; `validate=True` (the default) checks
them all now — the operand grammar, the opcode table (an instruction PTX does not have is refused)
and the operand forms of the families the analyses read (`rr.ptx.forms`) — so that bad
instructions are a `ParseError` at parse time.

Files are read as bytes and decoded without newline translation, so CR LF and lone CR survive the
round trip. Line numbers count LF: a CR LF pair is one line end, and a lone CR is not one — ptxas
reads it as blank space (it reports a lone-CR file's errors on line 1), though it ends a line
directive (`.version 8.7\r.target sm_90`) as blank space ends a token. A function prototype may
omit its ';': as for ptxas, it ends where the next module-level directive begins.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from rr.ptx.errors import ParseError
from rr.ptx._bulk import no_gc
from rr.ptx.defuse import head
from rr.ptx.forms import check_operands, check_text
from rr.ptx.operands import INSTRUCTION_PATTERN, is_well_formed, well_formed
from rr.ptx.scan import LEAD, LINE_DIRECTIVE, malformed, scan_body
from rr.ptx.scopes import name_registers
from rr.ptx.model import Block, Directive, Function, Instruction, Label, Module, Param, TopLevel
from rr.validation import read_bytes

_T = LEAD  # whitespace and comments
_TRIVIA = re.compile(_T, re.S)
_DIRECTIVE = re.compile(r"\.([A-Za-z_]\w*)")
# Directives that end at the end of their line rather than at ';'.
_LINE_DIRECTIVES = frozenset({"version", "target", "address_size", "file", "loc"})
# A line directive ends at the end of its line; a lone CR ends it too (ptxas reads CR as a blank,
# and `.version 8.7\r.target sm_90` is two directives to it).
_LINE_TEXT = re.compile(r"[^\r\n/]*(?:/(?![/*])[^\r\n/]*)*")
# Up to ';' — comments and strings may hold ';' and are skipped as units.
_TO_SEMI = re.compile(r'(?:[^;/"]|/(?![/*])|//[^\n]*|/\*.*?\*/|"[^"\n]*")*;', re.S)
# A function or declaration header: up to the first '{' or ';' outside parentheses.
_HEADER = re.compile(r'(?:[^{};()/"]|/(?![/*])|//[^\n]*|/\*.*?\*/|"[^"\n]*"|\([^()]*\))*', re.S)
_PERF_NAMES = (r"maxntid|reqntid|minnctapersm|maxnctapersm|maxnreg|noreturn|maxclusterrank"
               r"|reqnctapercluster|explicitcluster|blocksareclusters|abi_preserve\w*")
# A function's head as ptxas reads it: linkage, .entry/.func, return list, name, parameters and
# performance directives; what follows is its body '{', a ';', or (for a prototype) nothing.
_FUNC_HEAD = re.compile(
    rf"(?:\.(?:visible|extern|weak|common)\b{_T})*\.(?:entry|func)\b{_T}(?:\([^()]*\){_T})?"
    rf"[A-Za-z_$%][\w$]*(?:{_T}\([^()]*\))?"
    rf"(?:{_T}\.(?:{_PERF_NAMES})\b(?:\s*\d+(?:\s*,\s*\d+)*)?)*",
    re.S,
)
# What can start the module-level item after a prototype that has no ';'.
_NEXT_ITEM = re.compile(
    r"\.(?:visible|extern|weak|common|entry|func|global|const|shared|local|tex|surf|sampler|texref"
    r"|surfref|samplerref|file|section|alias|version|target|address_size|pragma|callprototype)\b"
)
_FUNC_NAME = re.compile(
    r"\.(entry|func)\s*(?:\((?P<ret>[^()]*)\)\s*)?(?P<name>[A-Za-z_$][\w$]*)\s*(?:\((?P<params>[^()]*)\))?",
    re.S,
)
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_PERF = re.compile(rf"\.({_PERF_NAMES})\b([\s\d,]*)")
_PARAM = re.compile(
    r"\.(?P<space>param|reg)\s+(?P<attrs>(?:\.\w+(?:\s+\d+)?\s+)*?)"
    r"\.(?P<type>[busf]\d+|pred|b8|b16|b32|b64|b128)\s+"
    r"(?P<ptr>(?:\.ptr(?:\s+\.\w+)*(?:\s+\.align\s+\d+)?\s+)?)"
    r"(?P<name>[A-Za-z_$][\w$]*)\s*(?P<dims>(?:\[\s*\d*\s*\]\s*)*)",
)


def read_text(path: str | Path) -> str:
    """A PTX file's text exactly as its bytes are, line ends included (no newline translation:
    CR LF and lone CR come back as they were, so emit reproduces the file). Only a regular file
    is read (rr.validation.read_bytes: a FIFO would block, /dev/zero never end)."""
    return decode_text(read_bytes(path), path)


def decode_text(data: bytes, path: str | Path) -> str:
    """PTX bytes (of the file `path`) as text; ParseError where they are not UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ParseError(f"not a text file (byte {e.start} is not UTF-8)", str(path)) from None


def parse_file(path: str | Path, validate: bool = True) -> Module:
    return parse(read_text(path), source=str(path), validate=validate)


def parse(text: str, source: str = "<string>", validate: bool = True) -> Module:
    """The module of a PTX text. With `validate`, every instruction's operands are checked now —
    the operand grammar, and the operand forms of the families rr reads (`rr.ptx.forms`) — so
    that bad instructions are a ParseError here and never reach a later stage."""
    with no_gc():
        module = _Parser(text, source, validate).module()
    if validate:
        for f in module.functions:
            if f.scan is not None:
                bad = malformed(f.scan)
                if bad is not None:
                    offset, message = bad
                    raise ParseError.at(text, f.scan.start + offset, message, source)
            elif f.has_body:
                for ins in f.instructions():
                    check_instruction(ins, text, source)
    return module


def check_instruction(ins: Instruction, text: str, source: str) -> None:
    """Check an instruction's operands now (grammar and form), reporting errors against the
    whole file."""
    if ins.text is None:
        return  # built in code
    try:
        if ins._head is not None or is_well_formed(ins.text):
            message = check_text(*_operand_text(ins.text))
            offset = 0
        else:
            message = check_operands(ins.opcode, ins.operands)
            offset = 0
    except ParseError as e:
        message, offset = e.message, getattr(e, "offset", 0)
    if message is not None:
        raise ParseError.at(text, _instruction_pos(ins, text) + offset, message, source)


def _operand_text(text: str) -> tuple[str, str]:
    m = well_formed().match(text)
    return m.group("op"), (m.group("dest") or "") + (m.group("rest") or "")


def _instruction_pos(ins: Instruction, text: str) -> int:
    # Offset of the instruction's first character: start of its line plus the lead's last line.
    start = 0
    for _ in range(ins.line - 1):
        start = text.index("\n", start) + 1
    return text.index(ins.text, start)


def emit(module: Module) -> str:
    return module.emit()


class _Parser:
    def __init__(self, text: str, source: str, validate: bool = True):
        self.text = text
        self.source = source
        self.validate = validate  # check operand forms as bodies are read
        self.pos = 0
        self.line = 1
        self._counted = 0  # newlines are counted up to here

    # -- helpers -----------------------------------------------------------------------------

    def error(self, pos: int, message: str) -> ParseError:
        return ParseError.at(self.text, pos, message, self.source)

    def line_at(self, pos: int) -> int:
        self.line += self.text.count("\n", self._counted, pos)
        self._counted = pos
        return self.line

    def trivia(self) -> str:
        m = _TRIVIA.match(self.text, self.pos)
        self.pos = m.end()
        if self.text.startswith("/*", self.pos):
            raise self.error(self.pos, "unterminated /* comment")
        return m.group()

    def take(self, regex: re.Pattern, what: str) -> str:
        m = regex.match(self.text, self.pos)
        if m is None or m.end() == self.pos:
            raise self.error(self.pos, f"expected {what}")
        self.pos = m.end()
        return m.group()

    def line_directive(self) -> str:
        m = _LINE_TEXT.match(self.text, self.pos)
        text = m.group().rstrip(" \t")
        self.pos += len(text)
        return text

    # -- module level --------------------------------------------------------------------------

    def module(self) -> Module:
        items = []
        text = self.text
        while True:
            lead = self.trivia()
            if self.pos >= len(text):
                return Module(items, tail=lead, source=self.source)
            start = self.pos
            line = self.line_at(start)
            d = _DIRECTIVE.match(text, start)
            if d is None:
                raise self.error(start, f"expected a directive at module level, got {text[start:start + 20].split()[0]!r}")
            kind = d.group(1)
            if kind in _LINE_DIRECTIVES:
                items.append(TopLevel(kind, self.line_directive(), lead, line))
            elif kind == "section":
                items.append(TopLevel(kind, self.section(), lead, line))
            else:
                items.append(self.declaration_or_function(lead, line))

    def section(self) -> str:
        start = self.pos
        brace = self.text.find("{", start)
        if brace < 0:
            raise self.error(start, "expected '{' after .section")
        depth, i = 0, brace
        for m in re.compile(r"[{}]|//[^\n]*|/\*.*?\*/", re.S).finditer(self.text, brace):
            if m.group() == "{":
                depth += 1
            elif m.group() == "}":
                depth -= 1
                if depth == 0:
                    i = m.end()
                    break
        else:
            raise self.error(start, "unterminated .section block: no closing '}'")
        self.pos = i
        return self.text[start:i]

    def declaration_or_function(self, lead: str, line: int):
        text = self.text
        start = self.pos
        header = _HEADER.match(text, start).group()
        end = start + len(header)
        words = set(_DIRECTIVE.findall(_COMMENTS.sub(" ", header)))
        is_function = "entry" in words or "func" in words
        if end >= len(text):
            raise self.error(start, "expected ';' or '{' to end this declaration")
        if not is_function:
            self.pos = start
            decl = self.take(_TO_SEMI, "';' to end this declaration")
            kind = next((w for w in _DIRECTIVE.findall(decl) if w not in _LINKAGE), "decl")
            return TopLevel(kind, decl, lead, line)
        head = _FUNC_HEAD.match(text, start)
        if head is not None and head.end() < end:
            after = _TRIVIA.match(text, head.end()).end()
            if after < end and _NEXT_ITEM.match(text, after):
                # A prototype without ';': ptxas ends it where the next module-level item begins.
                f = self.function_header(text[start:head.end()], start, lead, line)
                f.semicolon = False
                self.pos = head.end()
                f.last_line = self.line_at(self.pos)
                return f
        f = self.function_header(header, start, lead, line)
        self.pos = end
        if text[end] == ";":
            # A prototype: keep the header's trailing trivia apart so emit is exact.
            stripped = header.rstrip()
            f.header, f.tail = stripped, header[len(stripped):]
            self.pos = end + 1
            f.last_line = self.line_at(self.pos)
            return f
        if text[end] != "{":
            raise self.error(end, f"expected '{{' to open the body of {f.name}")
        self.pos = end + 1
        scanned = scan_body(text, self.pos, self.line_at(end), self.validate)
        if scanned is not None:
            f.scan, self.pos = scanned
            f.tail = f.scan.tail
        else:
            f.body, f.tail = self.body(f.name)
            name_registers(f.body)
        f.last_line = self.line_at(self.pos)
        return f

    def function_header(self, header: str, start: int, lead: str, line: int) -> Function:
        clean = _COMMENTS.sub(" ", header)
        m = _FUNC_NAME.search(clean)
        if m is None:
            raise self.error(start, "malformed .entry/.func header: no name found")
        params = _params(m.group("params") or "")
        returns = _params(m.group("ret") or "")
        directives = {}
        for name, args in _PERF.findall(clean[m.end():]):
            directives[name] = tuple(int(a) for a in re.findall(r"\d+", args))
        return Function(m.group(1), m.group("name"), header, params, returns, directives, lead=lead,
                        line=line)

    # -- bodies --------------------------------------------------------------------------------

    def body(self, name: str) -> tuple[list, str]:
        """Items of a body up to its closing '}', which is consumed; returns (items, tail)."""
        text = self.text
        top: list = []
        stack: list = []  # open Blocks
        items = top
        line = self.line_at(self.pos)
        pos = self.pos
        match = _body_item().match
        while True:
            m = match(text, pos)
            kind = m.lastgroup
            lead = m.group(1)
            line += lead.count("\n")
            if kind == "ins":
                # Well formed: guard, opcode and what the first operand is, straight from the match.
                item, guard, opcode, dest, rest = m.group("ins", "guard", "op", "dest", "rest")
                if self.validate:
                    message = check_text(opcode, (dest or "") + (rest or ""))
                    if message is not None:
                        raise self.error(m.start("ins"), message)
                items.append(Instruction(item, lead, line, None, head(guard, opcode, dest)))
                pos = m.end()
                line += item.count("\n")
                continue
            if kind == "other":
                item = m.group(kind)
                if "/" in item and ("//" in item or "/*" in item):
                    # A comment inside the instruction may hide a ';': re-take it carefully.
                    careful = _TO_SEMI.match(text, m.start(kind))
                    if careful is None:
                        raise self.error(m.start(kind), "missing ';' at the end of this instruction")
                    item = careful.group()
                items.append(Instruction(item, lead, line))
            elif kind == "close":
                if not stack:
                    self.pos = m.end()
                    self.line, self._counted = line, m.end()
                    return top, lead
                block = stack.pop()
                block.tail = lead
                items = stack[-1].items if stack else top
                item = "}"
            elif kind == "open":
                block = Block([], lead, line=line)
                items.append(block)
                stack.append(block)
                items = block.items
                item = "{"
            elif kind == "label":
                item = m.group(kind)
                items.append(Label(item[:-1].rstrip(), item, lead, line))
            elif kind == "ldir" or kind == "dir":
                item = m.group(kind)
                if kind == "dir" and "/" in item and ("//" in item or "/*" in item):
                    careful = _TO_SEMI.match(text, m.start(kind))
                    if careful is None:
                        raise self.error(m.start(kind), "missing ';' after this directive")
                    item = careful.group()
                items.append(Directive(_DIRECTIVE.match(item).group(1), item, lead, line))
            else:
                self._body_error(m.end(), name)
            pos = m.start(kind) + len(item)
            line += item.count("\n")

    def _body_error(self, pos: int, name: str):
        text = self.text
        if pos >= len(text):
            raise self.error(pos, f"end of file inside the body of {name}: missing '}}'")
        if text.startswith("/*", pos):
            raise self.error(pos, "unterminated /* comment")
        c = text[pos]
        if c == ".":
            raise self.error(pos, "missing ';' after this directive")
        if c == "@" or c.isalpha():
            raise self.error(pos, "missing ';' at the end of this instruction")
        raise self.error(pos, f"unexpected {c!r} in the body of {name}")


# One body item with the trivia in front of it. Instructions and directives end at the first ';'
# (the rare comment inside one is re-taken with _TO_SEMI); `.loc`/`.file` end at the line's end.
# A well-formed instruction (`ins`) is matched by the operand grammar itself; `other` instructions
# (comments inside, constant expressions, syntax errors) are checked by the typed operand parser.
@functools.cache
def _body_item() -> re.Pattern:
    """The pattern, compiled on first use (15 ms): a body the scan's fast path reads never needs it."""
    return re.compile(
        rf"(?P<lead>{LEAD})"
        r"(?:(?P<close>\})|(?P<open>\{)"
        r"|(?P<label>[A-Za-z_$][\w$]*[ \t]*:(?!:))"
        rf"|(?P<ldir>{LINE_DIRECTIVE})"
        r'|(?P<dir>\.[A-Za-z_]\w*(?:[^;"]|"[^"\n]*")*;)'
        rf"|(?P<ins>{INSTRUCTION_PATTERN})"
        r"|(?P<other>[@A-Za-z][^;]*;)"
        r"|(?P<bad>))",
        re.S,
    )


_LINKAGE = frozenset({"visible", "extern", "weak", "common", "align"})


def _params(text: str) -> list[Param]:
    params = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        m = _PARAM.match(part)
        if m is None:
            params.append(Param(name=part.split()[-1], space="param", type="b8"))
            continue
        align = re.search(r"\.align\s+(\d+)", m.group("attrs") or "")
        dims = tuple(int(d or 0) for d in re.findall(r"\[\s*(\d*)\s*\]", m.group("dims") or ""))
        ptr = tuple(p for p in re.findall(r"\.(global|shared|const|local|align\s+\d+)", m.group("ptr") or ""))
        params.append(Param(m.group("name"), m.group("space"), m.group("type"),
                            int(align.group(1)) if align else None, dims, ptr))
    return params

