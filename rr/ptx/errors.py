"""The one error the PTX front end raises for bad input."""

from __future__ import annotations

from rr.validation import printable

_SHOWN = 160  # characters of the offending line in a message

class ParseError(ValueError):
    """Bad PTX: names file:line:column, the message and the offending source line."""

    def __init__(self, message: str, source: str = "<string>", line: int = 0, column: int = 0,
                 line_text: str = "", caret: int | None = None):
        self.message = message
        self.source = source
        self.line = line
        self.column = column
        self.line_text = line_text  # the line, or the part of a long one around the column
        self.caret = column if caret is None else caret  # the column within line_text
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}:{self.column}: " if self.line else f"{self.source}: "
        s = where + self.message
        if self.line_text:
            # control characters escaped (a raw ESC or BEL of the input would reach the terminal),
            # the caret under the same character of the escaped line
            text = self.line_text.replace("\r", " ").expandtabs(1)
            at = max(self.caret - 1, 0)
            before = printable(text[:at])
            s += f"\n    {before}{printable(text[at:])}\n    {' ' * len(before)}^"
        return s

    @classmethod
    def at(cls, text: str, pos: int, message: str, source: str = "<string>") -> "ParseError":
        """The error at offset `pos` of `text`. Lines end at LF (a CR before it belongs to the line
        end; a lone CR does not end a line, as for ptxas), and the line shown is cut to the
        `_SHOWN` characters around the column, so that no file echoes itself whole."""
        line = text.count("\n", 0, pos) + 1
        start = text.rfind("\n", 0, pos) + 1
        end = text.find("\n", pos)
        if end < 0:
            end = len(text)
        if end > start and text[end - 1] == "\r":
            end -= 1
        column = pos - start + 1
        cut = max(0, min(column - 1 - _SHOWN // 2, end - start - _SHOWN))
        return cls(message, source, line, column, text[start + cut:min(end, start + cut + _SHOWN)],
                   column - cut)
