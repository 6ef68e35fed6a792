"""Which registers an instruction defines and which it reads, per opcode family.

The rule of PTX is "destination first": the first operand is written, the rest are read. The
exceptions are what this module knows: instructions whose first operand is an address (stores,
`sust`, `red`, `cp.async`, …) write no register; control and synchronisation instructions write
none; `wgmma.mma_async` reads its accumulator as well as writing it; `call` writes the registers of
its return list. A guard predicate is a use. Special registers (`%tid.x`, `%laneid`) are neither.
"""

from __future__ import annotations

from rr.ptx.model import Instruction, Pair, Plist, Reg, Vec, registers_in

# Opcode bases (text before the first '.') that never write a register operand.
_NO_DEF = frozenset({
    "bar", "barrier", "membar", "fence", "bra", "brx", "ret", "exit", "trap", "nanosleep",
    "pmevent", "setmaxnreg", "griddepcontrol", "st", "sust", "sured", "red", "prefetch",
    "prefetchu", "stmatrix", "discard", "applypriority", "cp", "multimem", "brkpt",
})


def _names(ops) -> list[str]:
    seen: dict[str, None] = {}
    for op in ops:
        for r in registers_in(op):
            if not r.special:
                seen.setdefault(r.name, None)
    return list(seen)


def defs_uses(ins: Instruction) -> tuple[list[str], list[str]]:
    """(defs, uses) of one instruction as register names in operand order, without repeats."""
    opcode = ins.opcode
    ops = ins.operands
    base = opcode.split(".", 1)[0]
    guard = ins.guard
    guard_uses = [guard.lstrip("!")] if guard else []
    if base == "call":
        # call[.uni] (rets), func, (args) — or call func, (args) with no return list.
        if len(ops) >= 2 and isinstance(ops[0], Plist):
            return _names(ops[:1]), guard_uses + _names(ops[1:])
        return [], guard_uses + _names(ops)
    if not ops or base in _NO_DEF or not isinstance(ops[0], (Reg, Vec, Pair)):
        return [], guard_uses + _names(ops)
    dest = ops[0]
    defs = _names([dest])
    uses = _names(ops[1:])
    if opcode.startswith("wgmma.mma_async"):
        uses = _names([dest]) + uses
    return defs, guard_uses + uses

