"""Reaching definitions over the basic blocks of a function (DESIGN §3, "Dataflow").

For a register read at a statement, `ReachingDefinitions.of(register, stmt)` gives every
statement whose write of it can reach that read along some path of the control-flow graph —
through branches, merges and loop back edges — never just the last write above it in the text.
A guarded write (`@%p mov …`) does not kill: when its guard is false the older value survives,
so both reach. `UNDEFINED` (0) stands for "no write on some path from the entry": the register's
value there is whatever it held on entry.

Classic forward dataflow with bit sets (Python ints) of definition sites per block:
OUT[b] = GEN[b] ∪ (IN[b] − KILL[b]), IN[b] = ∪ OUT[predecessors]; within a block, a query walks
back from the read to the last unguarded write.
"""

from __future__ import annotations

import bisect

from rr.ptx.cfg import EXIT, ControlFlow

UNDEFINED = 0


class ReachingDefinitions:
    def __init__(self, cfg: ControlFlow):
        self.cfg = cfg
        statements = cfg.statements
        self.defs_at: dict[str, list[int]] = {}  # register -> statements that write it, ascending
        for s in statements:
            for d in s.defs:
                at = self.defs_at.setdefault(d, [])
                if not at or at[-1] != s.stmt:
                    at.append(s.stmt)
        self.guarded = {s.stmt for s in statements if s.guard is not None and s.defs}
        # Most registers of NVVM code are written once: which of "that write" and "the value on
        # entry" reach a read follows from dominance and reachability alone. The bit sets are
        # solved only for the others (written several times, or under a guard).
        self._single = {reg: at[0] for reg, at in self.defs_at.items() if len(at) == 1 and at[0] not in self.guarded}
        self._reachable: dict[int, set] = {}
        # definition sites: (register, statement); statement 0 is the register's value on entry
        self._site: dict[tuple[str, int], int] = {}
        self._sites_of: dict[str, list[int]] = {}
        for reg, stmts in self.defs_at.items():
            if reg in self._single:
                continue
            for st in (UNDEFINED, *stmts):
                self._sites_of.setdefault(reg, []).append(len(self._site))
                self._site[(reg, st)] = len(self._site)
        self._stmt_of_site = [st for (_, st) in self._site]
        self._in = self._solve()

    def _transfers(self) -> list[tuple[int, int]]:
        """(GEN, KILL) bit sets of every block, from the definition sites of the registers
        written several times (the other statements change no bit): in a block, a write reaches
        its end unless an unguarded write of the register follows it there."""
        block_of = self.cfg.block_of
        gen = [0] * len(self.cfg.blocks)
        kill = [0] * len(self.cfg.blocks)
        for reg, sites in self._sites_of.items():
            written: set[int] = set()  # blocks with an unguarded write of reg after the one at hand
            for stmt in reversed(self.defs_at[reg]):
                b = block_of(stmt)
                if b in written:
                    continue
                gen[b] |= 1 << self._site[(reg, stmt)]
                if stmt not in self.guarded:
                    written.add(b)
            every = sum(1 << site for site in sites)
            for b in written:
                kill[b] |= every
        return [(g, k & ~g) for g, k in zip(gen, kill)]

    def _solve(self) -> list[int]:
        blocks = self.cfg.blocks
        if not blocks:
            return []
        transfer = self._transfers()
        entry = 0
        for reg in self._sites_of:
            entry |= 1 << self._site[(reg, UNDEFINED)]
        ins = [0] * len(blocks)
        outs = [0] * len(blocks)
        ins[0] = entry
        work = list(range(len(blocks) - 1, -1, -1))
        queued = [True] * len(blocks)
        while work:
            b = work.pop()
            queued[b] = False
            new_in = entry if b == 0 else 0
            for p in blocks[b].pred:
                new_in |= outs[p]
            ins[b] = new_in
            gen, kill = transfer[b]
            new_out = gen | (new_in & ~kill)
            if new_out != outs[b]:
                outs[b] = new_out
                for t in blocks[b].succ:
                    if t != EXIT and not queued[t]:
                        queued[t] = True
                        work.append(t)
        return ins

    def of(self, register: str, stmt: int) -> tuple[int, ...]:
        """The statements whose writes of `register` reach a read of it at `stmt` (ascending;
        UNDEFINED first when some path from the entry has none)."""
        at = self.defs_at.get(register)
        if not at:
            return (UNDEFINED,)
        b = self.cfg.block_of(stmt)
        d = self._single.get(register)
        if d is not None:
            return self._single_write(d, b, stmt)
        first = self.cfg.blocks[b].first
        found: list[int] = []
        i = bisect.bisect_left(at, stmt) - 1
        while i >= 0 and at[i] >= first:
            found.append(at[i])
            if at[i] not in self.guarded:
                return tuple(sorted(found))
            i -= 1
        bits = self._in[b]
        for site in self._sites_of[register]:
            if bits >> site & 1:
                found.append(self._stmt_of_site[site])
        return tuple(sorted(set(found)))

    def _single_write(self, d: int, b: int, stmt: int) -> tuple[int, ...]:
        """Reaching set of a register written only at statement d, read at `stmt` in block b."""
        db = self.cfg.block_of(d)
        if db == b and d < stmt:
            return (d,)  # the write is above the read in the same block
        if db != b and self.cfg.dominates(db, b):
            return (d,)
        # some path from the entry avoids the write; the write reaches if the read is reachable
        # from it (round a loop, for a read above it in its own block)
        reach = self._reachable.get(db)
        if reach is None:
            reach = self._reachable[db] = self._successors_closure(db)
        return (UNDEFINED, d) if b in reach else (UNDEFINED,)

    def _successors_closure(self, block: int) -> set:
        """Blocks reachable from the end of `block` (itself only round a cycle)."""
        seen: set = set()
        work = [t for t in self.cfg.blocks[block].succ if t != EXIT]
        while work:
            x = work.pop()
            if x not in seen:
                seen.add(x)
                work.extend(t for t in self.cfg.blocks[x].succ if t != EXIT)
        return seen

    def single(self, register: str, stmt: int) -> int | None:
        """The one statement whose write reaches, or None when none or several do."""
        reach = self.of(register, stmt)
        return reach[0] if len(reach) == 1 and reach[0] != UNDEFINED else None
