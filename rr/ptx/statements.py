"""Linearisation of an entry (DESIGN §3): one row per statement, numbered s1… in textual order.

Only instructions are statements; declarations, labels, braces, comments and directives are not.
An instruction counts once however many lines it spans, and instructions inside `{ … }` scope
blocks count one each. `line` is the physical line of the instruction's first character: lines
end at LF (a CR LF pair is one line end); a lone CR does not end a line, as for ptxas, which
reads it as blank space.

Registers in `defs`, `uses` and `guard` are named by their identity (`rr.ptx.scopes`): as written,
except that bare names `.reg` declares are registers, and a block's register whose name another
scope also declares is `name@scope`. `names` carries the scope's map from written names to
identities (None where every register is its `%`-name), so `operands(statement)` gives typed
operands that name registers the same way. `code` is the opcode parsed (`rr.ptx.opcodes`): what
every later stage asks of an opcode (its family, state space, types), never its text.
"""

from __future__ import annotations

from typing import NamedTuple

from rr.ptx._bulk import no_gc
from rr.ptx.defuse import defs_uses_text, registers, split_registers
from rr.ptx.model import Function
from rr.ptx.opcodes import Opcode, parse_opcode
from rr.ptx.operands import parse_instruction
from rr.ptx.scan import statement_rows
from rr.ptx.scopes import scope_maps


class Statement(NamedTuple):
    stmt: int
    line: int
    last_line: int
    opcode: str
    text: str
    guard: str | None
    defs: tuple
    uses: tuple
    scope: int  # 0 for the body, then 1, 2, … for each scope block in textual order
    names: dict | None  # written name -> register identity in this scope (rr.ptx.scopes)
    code: Opcode  # the opcode parsed


def operands(statement: Statement) -> tuple:
    """The statement's typed operands, registers named as in its defs and uses."""
    return parse_instruction(statement.text, statement.names)[2]


def linearise(function: Function) -> list[Statement]:
    with no_gc():
        if function.scan is not None:
            return statement_rows(function.scan, Statement)
        return _linearise(function)


def _linearise(function: Function) -> list[Statement]:
    instructions, maps, find = scope_maps(function.body or [])
    out: list[Statement] = []
    for n, (ins, scope) in enumerate(instructions, start=1):
        text = ins.text
        h = ins._head
        names = maps.get(scope, maps[0])
        if names is None and h is not None and text is not None:
            # matched by the operand grammar: no comments, the head says what the dest is
            defs, uses = split_registers(h, registers(text))
            guard, opcode = h[0], h[1]
        else:
            text = ins.render()
            guard, opcode, defs, uses = defs_uses_text(text, names, find)
        out.append(Statement(n, ins.line, ins.line + text.count("\n"), opcode, text, guard, defs,
                             uses, scope, names, parse_opcode(opcode)))
    return out


def statement_schema():
    """The pyarrow schema of `statements.parquet` (pyarrow is imported here, not at start-up:
    `rr spec` and the parser do not need it)."""
    import pyarrow as pa

    return pa.schema([
        pa.field("stmt", pa.int32(), nullable=False),
        pa.field("line", pa.int32(), nullable=False),
        pa.field("last_line", pa.int32(), nullable=False),
        pa.field("opcode", pa.string(), nullable=False),
        pa.field("text", pa.string(), nullable=False),
        pa.field("guard", pa.string()),
        pa.field("defs", pa.list_(pa.string()), nullable=False),
        pa.field("uses", pa.list_(pa.string()), nullable=False),
        pa.field("scope", pa.int32(), nullable=False),
    ], metadata={b"rr.stage": b"linearise"})


def statements_table(statements: list[Statement], entry: str, source: str):
    """The statements as a pyarrow Table with the entry and source in its metadata."""
    import pyarrow as pa

    schema = statement_schema()
    cols = {name: [getattr(s, name) for s in statements] for name in schema.names}
    cols["defs"] = [list(s.defs) for s in statements]
    cols["uses"] = [list(s.uses) for s in statements]
    table = pa.Table.from_pydict(cols, schema=schema)
    meta = dict(schema.metadata)
    meta[b"rr.entry"] = entry.encode()
    meta[b"rr.source"] = source.encode()
    return table.replace_schema_metadata(meta)
