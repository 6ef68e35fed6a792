"""The one error the PTX front end raises for bad input."""

from __future__ import annotations


class ParseError(ValueError):
    """Bad PTX: names file:line:column, the message and the offending source line."""

    def __init__(self, message: str, source: str = "<string>", line: int = 0, column: int = 0,
                 line_text: str = ""):
        self.message = message
        self.source = source
        self.line = line
        self.column = column
        self.line_text = line_text
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}:{self.column}: " if self.line else f"{self.source}: "
        s = where + self.message
        if self.line_text:
            shown = self.line_text.expandtabs(1)
            s += f"\n    {shown}\n    {' ' * max(self.column - 1, 0)}^"
        return s

    @classmethod
    def at(cls, text: str, pos: int, message: str, source: str = "<string>") -> "ParseError":
        line = text.count("\n", 0, pos) + 1
        start = text.rfind("\n", 0, pos) + 1
        end = text.find("\n", pos)
        if end < 0:
            end = len(text)
        return cls(message, source, line, pos - start + 1, text[start:end])
