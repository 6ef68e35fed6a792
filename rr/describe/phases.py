"""Phases and epilogues of an entry, and each phase's GEMM geometry from its mma chain (DESIGN §3).

A phase is a maximal run of consecutive `mma` statements. Its geometry is read off the chain, not
guessed from operand counts: with |A| distinct A fragments, |B| distinct B fragments and
accumulator chains (maximal C←D dataflow runs) all of length k,

    m = |A| / k,  n = |B| / k,  chains = m·n,  M = 16m, N = 8n, K = 32k  (for m16n8k32)

and the identity mma = m·n·k is checked. (M = 16·|A| is wrong whenever k > 1: the reference
document's §2.2.) A phase whose chains have unequal lengths, or whose counts admit no integer
m, n, k, is reported as such with its numbers — never forced into a shape.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from rr.ptx.linearise import Statement
from rr.ptx.model import register_names
from rr.ptx.operands import parse_instruction

_SHAPE = re.compile(r"\.m(\d+)n(\d+)k(\d+)\b")


@dataclass(frozen=True)
class Phase:
    phase: int
    first_stmt: int
    last_stmt: int
    mma: int
    opcode: str
    a_quads: int
    b_pairs: int
    chains: int
    chain_lengths: tuple  # every chain's length, in the order chains start
    m: int | None
    n: int | None
    k: int | None
    M: int | None
    N: int | None
    K: int | None
    identity: bool
    problem: str | None  # why no geometry could be derived

    @property
    def chain_len(self) -> int | None:
        return self.k

    @property
    def tiles(self) -> int | None:
        return None if self.m is None else self.m * self.n


@dataclass(frozen=True)
class Epilogue:
    epilogue: int  # i: between phase i and phase i+1; 0 is the prologue; len(phases) the tail
    first_stmt: int | None
    last_stmt: int | None
    stmts: int
    ops: dict = field(default_factory=dict)  # full opcode -> count


def _geometry(a: int, b: int, lengths: list[int], mma: int, tile: tuple) -> tuple:
    """(m, n, k, problem) from the distinct fragment counts and chain lengths."""
    if len(set(lengths)) != 1:
        spread = Counter(lengths)
        return None, None, None, ("chains of unequal length: " +
                                  ", ".join(f"{c}×{l}" for l, c in sorted(spread.items())))
    k = lengths[0]
    if a % k or b % k:
        return None, None, None, f"|A|={a} or |B|={b} is not a multiple of the chain length k={k}"
    m, n = a // k, b // k
    if m * n != len(lengths):
        return None, None, None, (f"m·n = {m}·{n} = {m * n} output tiles but {len(lengths)} chains "
                                  f"(|A|={a}, |B|={b}, k={k})")
    return m, n, k, None


def _phase(index: int, run: list[Statement]) -> Phase:
    opcode = run[0].opcode
    shape = _SHAPE.search(opcode)
    tile = tuple(int(x) for x in shape.groups()) if shape else (16, 8, 32)
    a_seen, b_seen = {}, {}
    chain_of_d: dict[tuple, int] = {}  # D registers -> chain index (the latest writer)
    lengths: list[int] = []
    for s in run:
        _, _, ops = parse_instruction(s.text)
        d, a, b, c = (register_names(op) for op in ops[:4])
        a_seen.setdefault(a, None)
        b_seen.setdefault(b, None)
        chain = chain_of_d.get(c)
        if chain is None:
            chain = len(lengths)
            lengths.append(0)
        lengths[chain] += 1
        chain_of_d[d] = chain
    m, n, k, problem = _geometry(len(a_seen), len(b_seen), lengths, len(run), tile)
    ok = problem is None
    return Phase(
        phase=index, first_stmt=run[0].stmt, last_stmt=run[-1].stmt, mma=len(run), opcode=opcode,
        a_quads=len(a_seen), b_pairs=len(b_seen), chains=len(lengths), chain_lengths=tuple(lengths),
        m=m, n=n, k=k, M=tile[0] * m if ok else None, N=tile[1] * n if ok else None,
        K=tile[2] * k if ok else None, identity=ok and m * n * k == len(run), problem=problem,
    )


def find_phases(statements: list[Statement]) -> list[Phase]:
    """The phases of a linearised entry, numbered from 1 in textual order."""
    phases, run = [], []
    for s in statements:
        if s.opcode.startswith("mma."):
            run.append(s)
        elif run:
            phases.append(_phase(len(phases) + 1, run))
            run = []
    if run:
        phases.append(_phase(len(phases) + 1, run))
    return phases


def find_epilogues(statements: list[Statement], phases: list[Phase]) -> list[Epilogue]:
    """The prologue (0), the epilogue after each phase but the last (1 … P−1), and the tail (P)."""
    bounds = [0] + [b for p in phases for b in (p.first_stmt, p.last_stmt)] + [len(statements) + 1]
    out = []
    for i in range(0, len(bounds), 2):
        lo, hi = bounds[i] + 1, bounds[i + 1] - 1  # statements strictly between
        body = statements[lo - 1:hi] if hi >= lo else []
        out.append(Epilogue(i // 2, lo if body else None, hi if body else None, len(body),
                            dict(Counter(s.opcode for s in body))))
    return out
