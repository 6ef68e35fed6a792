"""Assembling a spliced module: the cut's text replaced, new registers declared, nothing else moved.

The splice works on the module text: the characters from the first cut statement's first
character to the last cut statement's `;` are replaced by the template's statements, and the
template's new registers get `.reg` declarations after the entry's own. Every other byte of the
file is kept, so everything outside the cut is unchanged by construction — and then checked: the
spliced module is parsed again, round-trips, and its statements outside the cut are compared with
the original's one by one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import re

from rr.ptx import emit, linearise, parse
from rr.ptx.model import Directive, Function
from rr.records import Status


class SpliceError(ValueError):
    """A splice that cannot be assembled; names the entry, the cut and the reason. `status`, as the
    splice record gives it: error, or not_applicable for a phase the recipe is not for
    (rr.templates.NotApplicable)."""

    def __init__(self, message: str, status: Status = Status.ERROR):
        super().__init__(message)
        self.status = status


@dataclass
class Splice:
    text: str  # the spliced module
    cut: tuple  # (first, last) statements of the original
    inserted: int  # statements the replacement has
    declared: list = field(default_factory=list)  # new .reg declaration lines
    outside_checked: int = 0  # statements outside the cut compared and found identical


def _offsets(text: str, function: Function) -> list[tuple[int, int]]:
    """(start, end) character offsets of every statement of the entry in the module text."""
    out = []
    # lines as the parser numbers them: a '\n' ends one (CR LF is one line end, a lone CR none)
    line_starts = [0, *(m.end() for m in re.finditer("\n", text))]
    for ins in function.instructions():
        body = ins.render()
        start = text.index(body, line_starts[ins.line - 1])
        out.append((start, start + len(body)))
    return out


def assemble(text: str, entry: str, first: int, last: int, replacement: list[str],
             declarations: list[str] = (), source: str = "<module>", functions: list[str] = (),
             params: list[str] = (), *, function=None, statements: list | None = None) -> Splice:
    """Replace statements first..last (1-based) of `entry` by the `replacement` texts (complete
    instructions, or `{ … }` blocks of them), adding `declarations` (e.g. '.reg .b32 %rr<4>;') to
    the entry, `functions` (whole `.func` texts) to the module just before the entry, and
    `params` (e.g. '.param .u64 probe') after the entry's own parameters. `function` and
    `statements`: the entry as parsed from `text` and linearised already, where the caller has them
    (a splice job parsed and linearised the original to describe it: doing it again was a sixth of
    the job)."""
    if function is None:
        try:
            function = parse(text, source).function(entry)
        except KeyError as e:
            raise SpliceError(e.args[0]) from None
    before = linearise(function) if statements is None else statements
    if not 1 <= first <= last <= len(before):
        raise SpliceError(f"{entry}: cut s{first}–s{last} is outside its {len(before)} statements")
    scopes = {s.scope for s in before[first - 1:last]}
    # a cut that begins with a block's first statement takes the block's `{` with it, so a cut
    # from there (or from a body-level statement) to a body-level statement holds whole blocks
    opens = before[first - 1].scope and (first == 1 or before[first - 2].scope != before[first - 1].scope)
    if len(scopes) != 1 and (before[first - 1].scope and not opens or before[last - 1].scope):
        raise SpliceError(f"{entry}: cut s{first}–s{last} would split a {{ … }} scope block "
                          f"(its statements lie in scopes {sorted(scopes)})")
    spans = _offsets(text, function)
    start, end = spans[first - 1][0], spans[last - 1][1]
    if len(scopes) != 1 and opens:
        start = text.rindex("{", 0, start)
    eol = "\r\n" if text[:text.find("\n") + 1].endswith("\r\n") else "\n"  # the file's line end

    def ends(piece: str) -> str:  # what a template wrote, with the file's line ends
        return piece.replace("\r\n", "\n").replace("\n", eol)

    new_body = ends("\n\t".join(r.strip() for r in replacement))
    spliced = text[:start] + new_body + text[end:]
    declared = [d.strip() for d in declarations]
    if declared:
        spliced = _declare(spliced, entry, declared, source)
    if params:
        spliced = _add_params(spliced, entry, params, eol)
    if functions:
        at = _line_start(spliced, function.line)
        spliced = spliced[:at] + ends("\n\n".join(f.strip() for f in functions) + "\n\n") + spliced[at:]
    checked, inserted = check_outside(text, spliced, entry, first, last, source, before)
    return Splice(spliced, (first, last), inserted, declared, checked)


def _line_start(text: str, line: int) -> int:
    """The offset of the first character of 1-based `line` ('\n'-separated, as the parser counts)."""
    at = 0
    for _ in range(line - 1):
        at = text.index("\n", at) + 1
    return at


def _add_params(text: str, entry: str, params: list[str], eol: str = "\n") -> str:
    """Append kernel parameters to the entry's parameter list (which has no parentheses inside)."""
    head = text.find(f".entry {entry}(")
    if head < 0:
        raise SpliceError(f"{entry}: no '.entry {entry}(' header to add parameters {params} to")
    close = text.index(")", head + len(entry) + 8)
    inside = text[head + len(entry) + 8:close]
    lines = f",{eol}".join(f"\t{p}" for p in params)
    if inside.strip():
        new = inside.rstrip() + f",{eol}" + lines + eol
    else:
        new = eol + lines + eol
    return text[:head + len(entry) + 8] + new + text[close:]


def _declare(text: str, entry: str, declarations: list[str], source: str) -> str:
    """Insert `.reg` declarations after the entry's last top-level `.reg`."""
    module = parse(text, source)
    function = module.function(entry)
    regs = [item for item in function.body if isinstance(item, Directive) and item.kind == "reg"]
    if not regs:
        raise SpliceError(f"{entry}: no .reg declarations to add the template's registers after")
    anchor = regs[-1]
    lines = text.split("\n")
    at = anchor.line - 1 + anchor.text.count("\n")
    end = "\r" if lines[at].endswith("\r") else ""  # a CR LF line keeps its CR at its end
    lines[at] = lines[at][:len(lines[at]) - len(end)] + end + "".join(f"\n\t{d}{end}" for d in declarations)
    return "\n".join(lines)


def check_outside(original: str, spliced: str, entry: str, first: int, last: int,
                  source: str = "<module>", statements: list | None = None) -> tuple[int, int]:
    """Every statement outside the cut is textually the same, in the same order, and the spliced
    module round-trips. Returns (statements compared, statements the replacement has); raises
    SpliceError naming the first statement that differs. `statements`: the original entry's,
    linearised already (else they are parsed from `original`)."""
    new = parse(spliced, f"{source} (spliced)")
    if emit(new) != spliced:
        raise SpliceError(f"{entry}: the spliced module does not round-trip through the front end")
    a = statements if statements is not None else linearise(parse(original, source).function(entry))
    b = linearise(new.function(entry))
    inserted = len(b) - (len(a) - (last - first + 1))
    if inserted < 0:
        raise SpliceError(f"{entry}: the spliced entry has {len(b)} statements, fewer than the "
                          f"{len(a) - (last - first + 1)} outside the cut")
    outside_a = a[:first - 1] + a[last:]
    outside_b = b[:first - 1] + b[first - 1 + inserted:]
    for x, y in zip(outside_a, outside_b):
        if x.text != y.text:
            raise SpliceError(f"{entry}: statement s{x.stmt} (line {x.line}) changed outside the cut: "
                              f"{x.text!r} became {y.text!r}")
    return len(outside_a), inserted
