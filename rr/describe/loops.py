"""Loops as the description reports them: statements, induction variables, trip register, trips.

A loop's induction variables are the registers it advances by a constant on every trip
(`SymbolicValues.induction`). Its trip count is found by running the exit test forward: the guard of
each exit branch is a `setp` comparing values that are, at that point, `init + step·trip` or
constants; the first trip at which a branch leaves the loop ends it. A phase before the exit test
in the loop body runs once more than one after it. Anything that depends on data (a `break` on a
loaded value, bounds from a parameter) leaves the count unknown (null).
"""

from __future__ import annotations

from rr.ptx.model import Reg

MAX_TRIPS = 1 << 16
_ORDERS = frozenset({"eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs"})  # setp's integer comparisons
_INTEGERS = frozenset(f"{k}{n}" for k in "bsu" for n in (8, 16, 32, 64))


def induction_variables(flow, loop) -> list:
    """Every induction variable of `loop`: the registers carried round it (written inside, read
    at its top) that advance by a constant each trip, in the order of their updates."""
    header = flow.cfg.blocks[loop.header].first
    out = []
    carried = sorted({d for b in loop.blocks for st in range(flow.cfg.blocks[b].first, flow.cfg.blocks[b].last + 1)
                      for d in flow.statements[st - 1].defs})
    for reg in carried:
        reach = flow.reaching(reg, header)
        if len(reach) < 2:
            continue
        iv = flow.values.induction(reg, reach)
        if iv is not None and iv.loop == loop.number:
            out.append(iv)
    return sorted(out, key=lambda iv: iv.update)


def _compare(cmp: str, kind: str, bits: int, x: int, y: int) -> bool:
    mask = (1 << bits) - 1
    x, y = x & mask, y & mask
    if kind == "s" and cmp in ("lt", "le", "gt", "ge"):
        x = x - (1 << bits) if x >> (bits - 1) else x
        y = y - (1 << bits) if y >> (bits - 1) else y
    return {"eq": x == y, "ne": x != y, "lt": x < y, "le": x <= y, "gt": x > y, "ge": x >= y,
            "lo": x < y, "ls": x <= y, "hi": x > y, "hs": x >= y}[cmp]


def _assignments(flow, values: list, loop_number: int):
    """Every assignment of the small factors the values depend on besides the trip index
    (`%tid.*` of a declared block, the lane), as (factor values, lane); None when a value
    depends on anything else (data, parameters, the block index)."""
    import itertools

    factors = set()
    lane_dependent = False
    for v in values:
        for f, c in v.terms:
            lane_dependent |= isinstance(c, tuple)
            for x in f:
                if x != ("trip", loop_number):
                    factors.add(x)
    domains = []
    for x in sorted(factors):
        if x[0] != "sreg" or not x[1].startswith("tid.") or flow.block is None:
            return None
        lo, hi = flow.values.ranges.factor(x)
        domains.append([(x, v) for v in range(lo, hi + 1)])
    combos = [dict(c) for c in itertools.product(*domains)]
    lanes = range(32) if lane_dependent else (0,)
    if len(combos) * len(lanes) > 4096:
        return None
    return [(c, lane) for c in combos for lane in lanes]


def _evaluate(value, assignment: dict, lane: int, trip: int, loop_number: int) -> int:
    total = 0
    for f, c in value.terms:
        term = c[lane] if isinstance(c, tuple) else c
        for x in f:
            term *= trip if x == ("trip", loop_number) else assignment[x]
        total += term
    return total


def _exit_test(flow, loop, block: int):
    """(the trip at which the loop leaves from `block`, the register compared) or None."""
    last = flow.cfg.blocks[block].last
    s = flow.statements[last - 1]
    if s.code.base != "bra" or s.guard is None:
        return None
    negated = s.guard.startswith("!")
    pred = s.guard.lstrip("!")
    fall = last + 1
    taken = [t for t in flow.cfg.succ[last - 1] if t != fall]
    if not taken:
        return None
    inside = taken[0] <= len(flow.statements) and flow.cfg.block_of(taken[0]) in loop.blocks
    leave_when_guard = not inside  # the branch leaves, or (a back edge) its fall-through does
    d = flow.definition(pred, last)
    if d is None:
        return None
    setp = flow.statements[d - 1]
    code = setp.code
    ops = flow.operands(d)
    # setp.cmp.type with an integer comparison and type, and nothing else
    if code.base != "setp" or code.mods != (code.compare, code.type) or code.compare not in _ORDERS \
            or code.type not in _INTEGERS or len(ops) != 3:
        return None
    cmp, kind, bits = code.compare, code.type[0], code.bits
    x, y = (flow.values.value(o, d) for o in ops[1:])
    cases = _assignments(flow, [x, y], loop.number)
    if cases is None:
        return None
    register = next((o.name for o in ops[1:] if isinstance(o, Reg) and
                     any(("trip", loop.number) in f for f, _ in flow.values.value(o, d).terms)), None)
    found = set()
    for assignment, lane in cases:
        for t in range(MAX_TRIPS):
            vx, vy = (_evaluate(v, assignment, lane, t, loop.number) for v in (x, y))
            if (_compare(cmp, kind, bits, vx, vy) != negated) == leave_when_guard:
                found.add(t)
                break
        else:
            return None
    return (found.pop(), register) if len(found) == 1 else None


def describe_loop(flow, loop, phase=None) -> dict:
    """The loop as plain data; `trips` counts how often `phase` (if given) runs per entry."""
    cfg = flow.cfg
    ivs = induction_variables(flow, loop)
    trips = None
    register = None
    at = cfg.block_of(phase.first_stmt) if phase is not None else loop.header
    counts = []
    for inside in sorted({x for x, _ in loop.exits}):
        found = _exit_test(flow, loop, inside)
        if found is None:
            counts = None
            break
        t, reg = found
        register = register or reg
        counts.append(t + 1 if cfg.dominates(at, inside) else t)
    if counts:
        trips = min(counts)
    return {
        "loop": loop.number,
        "header_stmt": cfg.blocks[loop.header].first,
        "first_stmt": loop.first_stmt(cfg),
        "last_stmt": loop.last_stmt(cfg),
        "parent": loop.parent,
        "trip_register": register,
        "trips": trips,
        "induction": [{"register": iv.register, "update_stmt": iv.update, "step": iv.step,
                       "init": iv.init.constant if iv.init.lane_only and isinstance(iv.init.constant, int) else None}
                      for iv in ivs],
    }
