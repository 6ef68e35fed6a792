"""Liveness of a cut: which registers the cut code must read (live-in) and which it must define
(live-out), across loops and branches, plus the predicates, shared memory and parameters it touches.

Backward dataflow over the statement CFG (`rr.ptx.cfg`): live_in[s] = uses[s] ∪ (live_out[s] −
kills[s]), live_out[s] = ∪ live_in[successors]. A guarded instruction's definitions do not kill:
when the guard is false the old value survives. For a cut of consecutive statements [a, b]:

    live-in  = live_in[a] ∩ registers read in [a, b] (a guarded definition counts as a read)
    live-out = registers written in [a, b] ∩ live_out of the cut (what the statements leaving the
               cut lead to, including the way back round a loop)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rr.ptx.cfg import successors
from rr.ptx.statements import Statement
from rr.ptx.model import Function


@dataclass
class CutLiveness:
    first: int
    last: int
    live_in: list = field(default_factory=list)  # in order of first use
    live_out: list = field(default_factory=list)  # in order of definition
    predicates_in: list = field(default_factory=list)
    predicates_out: list = field(default_factory=list)
    shared: list = field(default_factory=list)  # statement texts that touch shared memory
    params: list = field(default_factory=list)  # ld.param statement texts


def live_sets(statements: list[Statement], succ: list[list[int]]) -> tuple[list[int], list[int], dict[str, int]]:
    """(live_in, live_out, bit) per statement (0-based lists), iterated to a fixed point: each
    set a Python int whose bit `bit[r]` stands for register r (an engine kernel's sets hold
    hundreds of registers; as sets of names they cost seconds to copy and compare, as ints
    microseconds)."""
    n = len(statements)
    bit: dict[str, int] = {}

    def mask(registers) -> int:
        m = 0
        for r in registers:
            m |= 1 << bit.setdefault(r, len(bit))
        return m

    uses = [mask(s.uses) for s in statements]
    defs = [mask(s.defs) for s in statements]
    kills = [0 if s.guard else d for s, d in zip(statements, defs)]
    live_in = [0] * n
    live_out = [0] * n
    preds: list[list[int]] = [[] for _ in range(n)]
    for i, targets in enumerate(succ):
        for t in targets:
            if t <= n:
                preds[t - 1].append(i)
    # the last statement first (work.pop() takes it): in code that runs straight, one pass
    # backwards settles each statement (the first statement first would redo all that follows
    # it as each later one changes: quadratic); the fixed point is the same in any order
    work = list(range(n))
    queued = [True] * n
    while work:
        i = work.pop()
        queued[i] = False
        out = 0
        for t in succ[i]:
            if t <= n:
                out |= live_in[t - 1]
        new_in = uses[i] | (out & ~kills[i])
        live_out[i] = out
        if new_in != live_in[i]:
            live_in[i] = new_in
            for p in preds[i]:
                if not queued[p]:
                    queued[p] = True
                    work.append(p)
    return live_in, live_out, bit


def cut_liveness(function: Function, statements: list[Statement], first: int, last: int) -> CutLiveness:
    """Live-in and live-out of the statements first..last (1-based, inclusive)."""
    if not 1 <= first <= last <= len(statements):
        raise ValueError(f"cut s{first}–s{last} is outside {function.name}'s {len(statements)} statements")
    succ = successors(function, statements)
    live_in, _, bit = live_sets(statements, succ)
    cut = statements[first - 1:last]
    # A guarded definition may leave the old value in place, so the cut reads it too.
    read = list(dict.fromkeys(r for s in cut for r in s.uses + (s.defs if s.guard else ())))
    written = list(dict.fromkeys(d for s in cut for d in s.defs))
    leaving = 0
    for s in cut:  # edges that leave the cut, including the fall-through after its last statement
        for t in succ[s.stmt - 1]:
            if not first <= t <= last and t <= len(statements):
                leaving |= live_in[t - 1]
    result = CutLiveness(first, last)
    result.live_in = [r for r in read if live_in[first - 1] >> bit[r] & 1]
    result.live_out = [r for r in written if leaving >> bit[r] & 1]
    result.predicates_in = [r for r in result.live_in if r.startswith("%p")]
    result.predicates_out = [r for r in result.live_out if r.startswith("%p")]
    result.shared = [s.text for s in cut if "shared" in s.code.spaces]
    result.params = [s.text for s in cut if s.code.base == "ld" and s.code.space == "param"]
    return result


__all__ = ["CutLiveness", "cut_liveness", "live_sets"]
