"""The analysed kernel: one linearised entry with what every analysis of it reads — its control-flow
graph and reaching definitions, each statement's operands (and an mma's fragments), the layout of
its parameter space, the block it declares and the variables declared in the module and body.
Symbolic values (`rr.describe.evaluation`) and memory accesses (`rr.describe.memory`) are computed
over it; `rr.describe.dataflow.Dataflow` puts the three together."""

from __future__ import annotations

import re

from rr.describe.phases import statement_fragments
from rr.ptx.cfg import body_directives, control_flow
from rr.ptx.reaching import ReachingDefinitions
from rr.ptx.statements import Statement, linearise
from rr.ptx.statements import operands as statement_operands


class Kernel:
    """One linearised entry: statements, control flow, reaching definitions, operands."""

    def __init__(self, function, statements: list[Statement] | None = None, module=None):
        self.function = function
        self.statements = linearise(function) if statements is None else statements
        self.params = param_offsets(function.params)
        self.block = block_dims(function)
        self.block_z = self.block[2] if self.block else 4
        self.symbols = declared_variables(function, module)
        self.cfg = control_flow(function, self.statements)
        self.reach = ReachingDefinitions(self.cfg)
        self._ops: dict[int, tuple] = {}
        self._fragments: dict[int, tuple | None] = {}

    def operands(self, stmt: int) -> tuple:
        ops = self._ops.get(stmt)
        if ops is None:
            # registers named as in defs and uses (a block's re-declared `p` is `p@3`)
            ops = self._ops[stmt] = statement_operands(self.statements[stmt - 1])
        return ops

    def fragments(self, stmt: int) -> tuple | None:
        """An mma statement's (D, A, B, C) register names (`rr.describe.phases.mma_operands`)."""
        found = self._fragments.get(stmt, False)
        if found is False:
            found = self._fragments[stmt] = statement_fragments(self.statements[stmt - 1],
                                                                lambda s: self.operands(s.stmt))
        return found

    def reaching(self, register: str, stmt: int) -> tuple[int, ...]:
        return self.reach.of(register, stmt)

    def definition(self, register: str, before: int) -> int | None:
        """The one statement whose write of `register` reaches statement `before`, or None."""
        return self.reach.single(register, before)


_DECLARATION = re.compile(r"\.(shared|global|const|local)\b(?:.*?\.align\s+(\d+))?.*?([A-Za-z_$][\w$]*)\s*(?:\[|;|=)", re.S)


def declared_variables(function, module) -> dict:
    """symbol -> (state space, alignment in bytes) of every variable declared at module level or
    in the body."""
    texts = [item.text for item in (module.items if module is not None else ())
             if getattr(item, "kind", None) in ("shared", "global", "const", "local", "extern", "visible")]
    out = {}
    for text in texts + body_directives(function):
        m = _DECLARATION.search(text)
        if m:
            out[m.group(3)] = (m.group(1), int(m.group(2) or 1))
    return out


def block_dims(function) -> tuple | None:
    """The block's extents the entry declares (`.reqntid`, else `.maxntid`), padded to 3."""
    for key in ("reqntid", "maxntid"):
        dims = function.directives.get(key)
        if dims:
            return tuple(dims) + (1,) * (3 - len(dims))
    return None


def param_offsets(params) -> dict[str, int]:
    """Byte offset of each parameter in the parameter space, laid out in order with alignment."""
    out, at = {}, 0
    for p in params:
        align = p.align or max(1, min(p.size, 8))
        at = -(-at // align) * align
        out[p.name] = at
        at += p.size
    return out
