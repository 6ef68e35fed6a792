"""The control-flow graph of an entry: statement successors, basic blocks, dominators and loops.

A statement falls through to the next one unless it is an unguarded `bra`/`ret`/`exit`/`trap`;
a `bra` also goes to its label, which is placed at the first statement after it (labels are not
statements). `brx.idx` goes to every label of its target list. Liveness works on the statement
successors; reaching definitions (`rr.ptx.reaching`) and the loop description work on the basic
blocks. Loops are natural loops: a back edge is an edge to a block that dominates its source, and
the loop is every block that reaches the back edge's source without passing its header. A
retreating edge to a block that does not dominate its source makes the graph irreducible there;
such a cycle is reported (`ControlFlow.irreducible`) and described as no loop.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from rr.ptx.model import Block, Directive, Function, Instruction, Label, Sym

EXIT = -1  # the successor block of a return


def label_positions(function: Function) -> dict[str, int]:
    """label -> the statement number it precedes (len+1 for a label after the last statement)."""
    if function.scan is not None:
        return _scanned_label_positions(function.scan)
    out: dict[str, int] = {}
    pending: list[str] = []
    n = 0
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
        else:
            stack.pop()
    for name in pending:
        out[name] = n + 1
    return out


def _scanned_label_positions(scan) -> dict[str, int]:
    """The same from a body that is still a scan (`rr.ptx.scan`), without building its nodes."""
    from rr.ptx.scan import _STRIDE

    parts = scan.parts
    out: dict[str, int] = {}
    pending: list[str] = []
    n = 0
    for k in range(0, len(parts) - 1, _STRIDE):
        item, ins = parts[k + 2], parts[k + 3]
        c = item[0]
        if ins is None and (c in "{}." or item[-1] == ":"):
            if item[-1] == ":" and c not in "{}.":
                pending.append(item[:-1].rstrip())
            continue
        n += 1
        for name in pending:
            out[name] = n
        pending.clear()
    for name in pending:
        out[name] = n + 1
    return out


def body_directives(function: Function) -> list[str]:
    """The text of every directive in the body (`.shared …;`, `.reg …;`), scope blocks included,
    read off the scan when the body has not been built."""
    if function.scan is not None:
        from rr.ptx.scan import _STRIDE

        parts = function.scan.parts
        return [parts[k + 2] for k in range(0, len(parts) - 1, _STRIDE)
                if parts[k + 3] is None and parts[k + 2][0] == "."]
    out, stack = [], [iter(function.body or ())]
    while stack:
        for item in stack[-1]:
            if isinstance(item, Block):
                stack.append(iter(item.items))
                break
            if isinstance(item, Directive):
                out.append(item.text)
        else:
            stack.pop()
    return out


def successors(function: Function, statements: list, labels: dict[str, int] | None = None) -> list[list[int]]:
    """succ[i] (0-based, for statement i+1): the statement numbers control can go to next;
    len(statements)+1 stands for the exit. `brx.idx` is taken to reach every label of its list."""
    labels = label_positions(function) if labels is None else labels
    n = len(statements)
    out: list[list[int]] = []
    for s in statements:
        base = s.code.base
        if base not in _TRANSFERS:
            out.append([s.stmt + 1])  # most statements: on to the next (the last one to the exit)
            continue
        guarded = s.guard is not None
        if base == "bra":
            nexts = [labels[t] for t in _targets(s.text) if t in labels]
            if guarded:
                nexts.append(s.stmt + 1)
        elif base == "brx":
            targets = [labels[t] for t in _brx_targets(function, s.text) if t in labels]
            nexts = (targets or list(labels.values())) + ([s.stmt + 1] if guarded else [])
        elif base in ("ret", "exit", "trap"):
            nexts = [s.stmt + 1 if guarded else n + 1]
        out.append(sorted({min(t, n + 1) for t in nexts}))
    return out


_TRANSFERS = frozenset(("bra", "brx", "ret", "exit", "trap"))


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


def _brx_targets(function: Function, text: str) -> list[str]:
    """The labels of the `.branchtargets` list a `brx.idx` names (`brx.idx %r, $L_list;`)."""
    import re

    names = _targets(text)
    lists: dict[str, list[str]] = {}
    last = None
    stack = [iter(function.body or ())]
    while stack:
        for item in stack[-1]:
            if isinstance(item, Label):
                last = item.name
            elif isinstance(item, Block):
                stack.append(iter(item.items))
                break
            elif getattr(item, "kind", None) == "branchtargets":
                lists[last] = re.findall(r"[A-Za-z_$][\w$]*", item.text.split(None, 1)[1])
        else:
            stack.pop()
    return [t for name in names for t in lists.get(name, ())]


@dataclass(frozen=True)
class BasicBlock:
    index: int
    first: int  # statement numbers, inclusive
    last: int
    succ: tuple  # block indices (EXIT for a return or the end of the body)
    pred: tuple


@dataclass(frozen=True)
class Loop:
    """A natural loop; `number` counts loops by the textual order of their headers from 1."""

    number: int
    header: int  # block index
    blocks: frozenset
    latches: tuple  # blocks with a back edge to the header
    exits: tuple  # (block inside, block outside) edges
    parent: int | None  # the number of the innermost loop containing this one

    def first_stmt(self, cfg: "ControlFlow") -> int:
        return min(cfg.blocks[b].first for b in self.blocks)

    def last_stmt(self, cfg: "ControlFlow") -> int:
        return max(cfg.blocks[b].last for b in self.blocks)


@dataclass
class ControlFlow:
    statements: list
    succ: list  # per statement (0-based): successor statement numbers (len+1 = exit)
    blocks: list = field(default_factory=list)
    starts: list = field(default_factory=list)  # first statement of each block, ascending
    block_at: list = field(default_factory=list)  # statement number (1…n) -> its block
    idom: list = field(default_factory=list)  # immediate dominator per block (None for the entry)
    loops: list = field(default_factory=list)
    irreducible: list = field(default_factory=list)  # (source block, target block) retreating edges

    def block_of(self, stmt: int) -> int:
        if 0 < stmt < len(self.block_at):
            return self.block_at[stmt]  # the analyses ask this of tens of thousands of statements
        return bisect.bisect_right(self.starts, stmt) - 1

    def dominates(self, a: int, b: int) -> bool:
        """Block a dominates block b (every path from the entry to b passes a)."""
        while b is not None:
            if a == b:
                return True
            b = self.idom[b]
        return False

    def loops_of(self, stmt: int) -> list[Loop]:
        """The loops containing a statement, innermost first."""
        b = self.block_of(stmt)
        return sorted((lp for lp in self.loops if b in lp.blocks), key=lambda lp: len(lp.blocks))

    def loop(self, number: int) -> Loop:
        return self.loops[number - 1]


def control_flow(function: Function, statements: list) -> ControlFlow:
    """Blocks, dominators and natural loops of a linearised function."""
    labels = label_positions(function)
    succ = successors(function, statements, labels)
    n = len(statements)
    cfg = ControlFlow(statements, succ)
    if n == 0:
        return cfg
    leaders = {1}
    leaders.update(t for t in labels.values() if t <= n)
    for i, targets in enumerate(succ):
        if targets != [i + 2]:
            leaders.update(t for t in targets if t <= n)
            if i + 2 <= n:
                leaders.add(i + 2)
    starts = sorted(leaders)
    cfg.starts = starts
    ends = [s - 1 for s in starts[1:]] + [n]
    block_succ = []
    for first, last in zip(starts, ends):
        out = []
        for t in succ[last - 1]:
            out.append(EXIT if t > n else bisect.bisect_right(starts, t) - 1)
        block_succ.append(tuple(sorted(set(out))))
    preds: list[list[int]] = [[] for _ in starts]
    for b, out in enumerate(block_succ):
        for t in out:
            if t != EXIT:
                preds[t].append(b)
    cfg.blocks = [BasicBlock(i, f, l, block_succ[i], tuple(preds[i])) for i, (f, l) in enumerate(zip(starts, ends))]
    cfg.block_at = [-1]
    for b in cfg.blocks:
        cfg.block_at += [b.index] * (b.last - b.first + 1)
    cfg.idom = _dominators(cfg.blocks)
    cfg.loops, cfg.irreducible = _loops(cfg)
    return cfg


def _reverse_postorder(blocks: list[BasicBlock]) -> list[int]:
    order, seen = [], {0}
    stack = [(0, iter(blocks[0].succ))]
    while stack:
        b, it = stack[-1]
        for t in it:
            if t != EXIT and t not in seen:
                seen.add(t)
                stack.append((t, iter(blocks[t].succ)))
                break
        else:
            stack.pop()
            order.append(b)
    return order[::-1]


def _dominators(blocks: list[BasicBlock]) -> list:
    """Immediate dominators by the iterative algorithm of Cooper, Harvey and Kennedy."""
    order = _reverse_postorder(blocks)
    rank = {b: i for i, b in enumerate(order)}
    idom: list = [None] * len(blocks)
    idom[0] = 0

    def intersect(a: int, b: int) -> int:
        while a != b:
            while rank[a] > rank[b]:
                a = idom[a]
            while rank[b] > rank[a]:
                b = idom[b]
        return a

    changed = True
    while changed:
        changed = False
        for b in order[1:]:
            done = [p for p in blocks[b].pred if idom[p] is not None and p in rank]
            if not done:
                continue
            new = done[0]
            for p in done[1:]:
                new = intersect(p, new)
            if idom[b] != new:
                idom[b] = new
                changed = True
    idom[0] = None
    return idom  # unreachable blocks keep None


def _loops(cfg: ControlFlow) -> tuple[list[Loop], list[tuple]]:
    order = _reverse_postorder(cfg.blocks)
    rank = {b: i for i, b in enumerate(order)}
    back: dict[int, list[int]] = {}
    irreducible = []
    for b in order:
        for t in cfg.blocks[b].succ:
            if t == EXIT or t not in rank or rank[t] > rank[b]:
                continue
            if cfg.dominates(t, b):
                back.setdefault(t, []).append(b)
            else:
                irreducible.append((b, t))
    found = []
    for header in sorted(back, key=lambda h: cfg.blocks[h].first):
        body = {header}
        work = list(back[header])
        while work:
            x = work.pop()
            if x not in body:
                body.add(x)
                work.extend(p for p in cfg.blocks[x].pred if p in rank)
        exits = tuple(sorted((x, t) for x in body for t in cfg.blocks[x].succ if t not in body))
        found.append((header, frozenset(body), tuple(sorted(back[header])), exits))
    loops = []
    for number, (header, body, latches, exits) in enumerate(found, start=1):
        parents = [i for i, (h, b, _, _) in enumerate(found, start=1) if h != header and body < b]
        parent = min(parents, key=lambda i: len(found[i - 1][1])) if parents else None
        loops.append(Loop(number, header, body, latches, exits, parent))
    return loops, irreducible
