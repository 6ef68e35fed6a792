"""The control-flow graph of an entry at statement granularity: each statement's successors.

A statement falls through to the next one unless it is an unguarded `bra`/`ret`/`exit`/`trap`;
a `bra` also goes to its label, which is placed at the first statement after it (labels are not
statements). `brx.idx` goes to every label of its target list. Used for liveness across loops and
branches.
"""

from __future__ import annotations

from rr.ptx.model import Block, Directive, Function, Instruction, Label, Sym


def label_positions(function: Function) -> dict[str, int]:
    """label -> the statement number it precedes (len+1 for a label after the last statement)."""
    out: dict[str, int] = {}
    pending: list[str] = []
    n = 0
    # callprototype labels and .loc lines are not branch targets but are harmless here
    stack = [iter(function.body or ())]
    while stack:
        for item in stack[-1]:
            if isinstance(item, Label):
                pending.append(item.name)
            elif isinstance(item, Instruction):
                n += 1
                for name in pending:
                    out[name] = n
                pending.clear()
            elif isinstance(item, Block):
                stack.append(iter(item.items))
                break
            elif isinstance(item, Directive):
                continue
        else:
            stack.pop()
    for name in pending:
        out[name] = n + 1
    return out


def successors(function: Function, statements: list) -> list[list[int]]:
    """succ[i] (0-based, for statement i+1): the statement numbers control can go to next;
    len(statements)+1 stands for the exit. `brx.idx` is taken to reach every label."""
    labels = label_positions(function)
    n = len(statements)
    out: list[list[int]] = []
    for s in statements:
        base = s.opcode.split(".", 1)[0]
        guarded = s.guard is not None
        if base == "bra":
            nexts = [labels[t] for t in _targets(s.text) if t in labels]
            if guarded:
                nexts.append(s.stmt + 1)
        elif base == "brx":
            nexts = list(labels.values()) + ([s.stmt + 1] if guarded else [])
        elif base in ("ret", "exit", "trap"):
            nexts = [s.stmt + 1 if guarded else n + 1]
        else:
            nexts = [s.stmt + 1]
        out.append(sorted({min(t, n + 1) for t in nexts}))
    return out


def _targets(text: str) -> list[str]:
    from rr.ptx.operands import parse_instruction

    _, _, ops = parse_instruction(text)
    found = []
    for op in ops:
        if isinstance(op, Sym):
            found.append(op.name)
        elif hasattr(op, "items"):
            found.extend(x.name for x in op.items if isinstance(x, Sym))
    return found
