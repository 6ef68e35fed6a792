"""The dataflow of one linearised entry, as every analysis and template reads it: the analysed
kernel (`rr.describe.kernel`: statements, control flow, reaching definitions, operands), its
symbolic values (`values`, rr.describe.evaluation) and its memory accesses (`memory`,
rr.describe.memory)."""

from __future__ import annotations

from rr.describe.evaluation import SymbolicValues
from rr.describe.kernel import Kernel
from rr.describe.memory import Accesses
from rr.ptx.statements import Statement


class Dataflow(Kernel):
    """Reaching definitions, symbolic values and memory accesses of one linearised entry."""

    def __init__(self, function, statements: list[Statement] | None = None, module=None):
        super().__init__(function, statements, module)
        self.values = SymbolicValues(self)
        self.memory = Accesses(self, self.values)
