"""Phases and epilogues of an entry, and each phase's GEMM geometry from its mma chain (DESIGN §3).

A phase is a maximal run of consecutive matrix-multiply statements — `mma.sync`, `wmma.mma` or
`wgmma.mma_async`. Its geometry is read off the chain, not guessed from operand counts: with |A|
distinct A fragments, |B| distinct B fragments and accumulator chains (maximal C←D dataflow runs)
all of length k, and the instruction's tile m0×n0×k0 (m16n8k32 for the engine's mma),

    m = |A| / k,  n = |B| / k,  chains = m·n,  M = m0·m, N = n0·n, K = k0·k

and the identity mma = m·n·k is checked. (M = 16·|A| is wrong whenever k > 1: the reference
document's §2.2.) A phase whose chains have unequal lengths, or whose counts admit no integer
m, n, k, is reported as such with its numbers — never forced into a shape.

Grouping. The default (`run`) is DESIGN's numbering, the reference document's: one phase per
run — except where a run is no GEMM by itself. A generator that seeds each accumulator chain just
before its first mma (Triton's `mov.b32 %r187, %r221` between the mma of a K-looped GEMM) cuts
one GEMM into runs that only make sense together: seven one-mma runs, then a run whose chains
are the first seven's continued (unequal lengths). The chains tell: a run without a GEMM shape of
its own (`_geometry`'s problem) is joined with its neighbours, across gaps of operand set-up only
(`_feeds_later_mma`), into the smallest group that has one, and the phase says why (`joined`).
Where every run has a shape — the engine's 38 phases, whose runs are separate GEMMs even where
only weight loads lie between them — nothing is joined, so the reference numbering stays.
NVVM often interleaves a GEMM's operand loads between its mma statements, which cuts one GEMM into
many runs that each have a shape; `gemm` grouping joins runs separated only by statements that
feed later mma: loads and address arithmetic whose results only later mma (or other such
statements) read, with no store, barrier, branch or read of an accumulator among them.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from rr.ptx.statements import Statement
from rr.ptx.model import Imm, Reg, Vec, register_names
from rr.ptx.opcodes import Opcode, by_family
from rr.ptx.statements import operands as statement_operands

MMA_FAMILIES = by_family(frozenset({"mma", "mma.sp", "mma.block_scale", "mma.sp.block_scale", "wmma.mma",
                                    "wgmma.mma_async"}))
GROUPINGS = ("run", "gemm")


def is_mma(code: Opcode) -> bool:
    """A matrix multiply: `mma`, `wmma.mma` or `wgmma.mma_async`."""
    return code.family.name in MMA_FAMILIES


def mma_operands(code: Opcode, ops: tuple) -> tuple | None:
    """(D, A, B, C) register-name tuples of a matrix-multiply statement; C is None when the
    instruction does not read an accumulator (wgmma with scale-d 0). None when malformed."""
    if len(ops) < 4 or not all(isinstance(o, (Vec, Reg)) for o in ops[:3]):
        return None
    d, a, b = (register_names(o) for o in ops[:3])
    if code.base == "wgmma":
        scale_d = ops[3]
        c = None if isinstance(scale_d, Imm) and scale_d.value == 0 else d  # accumulates in place
        return d, a, b, c
    if not isinstance(ops[3], (Vec, Reg)):
        return None
    return d, a, b, register_names(ops[3])


# NVVM's mma: four register vectors, `{%r1, %r2}, {%r3, …}, {…}, {…};`
_FOUR_VECTORS = re.compile(r"\s*\{([^{}]*)\}\s*,\s*\{([^{}]*)\}\s*,\s*\{([^{}]*)\}\s*,\s*\{([^{}]*)\}\s*;\s*")
_REGISTER = re.compile(r"%[\w$.]+")


def statement_fragments(s: Statement, operands=statement_operands) -> tuple | None:
    """`mma_operands` of a matrix-multiply statement. In NVVM's plain form — no guard, comment or
    scope renaming, four vectors of registers — its registers are read off the text; any other
    statement is given to the typed operand parser (`operands(s)`), which gives the same names
    for the plain form at a few times the cost (1 740 mma on dec5: 0.03 s, a twentieth of its `rr spec`)."""
    text, opcode = s.text, s.opcode
    if s.names is None and text.startswith(opcode) and "/" not in text and s.code.base != "wgmma":
        m = _FOUR_VECTORS.fullmatch(text, len(opcode))
        if m is not None:
            found = tuple(tuple(r.strip() for r in group.split(",")) for group in m.groups())
            if all(_REGISTER.fullmatch(r) for regs in found for r in regs):
                return found
    return mma_operands(s.code, operands(s))


def tile_of(code: Opcode) -> tuple:
    return code.shape or (16, 8, 32)


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
    runs: tuple = ()  # the (first, last) statements of each run of mma joined (`gemm`, or a run with no shape)
    joined: str | None = None  # why the runs are one phase (None: one run)

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


def _geometry(a: int, b: int, lengths: list[int]) -> tuple:
    """(m, n, k, problem) from the distinct fragment counts and chain lengths."""
    if not lengths:
        return None, None, None, "no well-formed mma statement"
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


def _phase(index: int, mmas: list[Statement], first: int, last: int, fragments, runs: tuple = (),
           joined: str | None = None) -> Phase:
    opcode = mmas[0].opcode
    tile = tile_of(mmas[0].code)
    a_seen, b_seen = {}, {}
    chain_of_d: dict[tuple, int] = {}  # D registers -> chain index (the latest writer)
    lengths: list[int] = []
    malformed = 0
    for s in mmas:
        ops = fragments(s.stmt)
        if ops is None:
            malformed += 1
            continue
        d, a, b, c = ops
        a_seen.setdefault(a, None)
        b_seen.setdefault(b, None)
        chain = chain_of_d.get(c) if c is not None else None
        if chain is None:
            chain = len(lengths)
            lengths.append(0)
        lengths[chain] += 1
        chain_of_d[d] = chain
    m, n, k, problem = _geometry(len(a_seen), len(b_seen), lengths)
    if malformed and problem is None:
        problem = f"{malformed} mma statements without D, A, B and C operands"
    ok = problem is None
    return Phase(
        phase=index, first_stmt=first, last_stmt=last, mma=len(mmas), opcode=opcode,
        a_quads=len(a_seen), b_pairs=len(b_seen), chains=len(lengths), chain_lengths=tuple(lengths),
        m=m, n=n, k=k, M=tile[0] * m if ok else None, N=tile[1] * n if ok else None,
        K=tile[2] * k if ok else None, identity=ok and m * n * k == len(mmas), problem=problem, runs=runs,
        joined=joined,
    )


def mma_runs(statements: list[Statement]) -> list[list[Statement]]:
    """The maximal runs of consecutive matrix-multiply statements, in textual order."""
    runs, run = [], []
    for s in statements:
        if is_mma(s.code):
            run.append(s)
        elif run:
            runs.append(run)
            run = []
    if run:
        runs.append(run)
    return runs


def find_phases(statements: list[Statement], grouping: str = "run", cfg=None, fragments=None) -> list[Phase]:
    """The phases of a linearised entry, numbered from 1 in textual order. `grouping` is `run`
    (maximal runs of mma, DESIGN §3) or `gemm` (runs joined across statements that only feed
    later mma; `cfg`, the entry's control flow, keeps a group inside one basic block).
    `fragments(stmt)` gives an mma's `mma_operands`: a `Dataflow`'s, which the operand provenance
    then reads again, or by default each mma parsed here."""
    if grouping not in GROUPINGS:
        raise ValueError(f"grouping {grouping!r}: expected one of {', '.join(GROUPINGS)}")
    if fragments is None:
        def fragments(stmt: int) -> tuple | None:
            return statement_fragments(statements[stmt - 1])
    runs = mma_runs(statements)
    if grouping == "run":
        groups, why = _shapeless_runs_joined(statements, runs, cfg, fragments)
    else:
        groups, why = [], {}
        for run in runs:
            if groups and _feeds_later_mma(statements, groups[-1], run, cfg):
                groups[-1].append(run)
            else:
                groups.append([run])
        why = {i: "--grouping gemm joins runs separated only by statements that set up later mma's operands"
               for i, g in enumerate(groups) if len(g) > 1}
    return [_group_phase(i + 1, g, fragments, why.get(i)) for i, g in enumerate(groups)]


def _group_phase(index: int, group: list[list[Statement]], fragments, joined: str | None = None) -> Phase:
    """The phase of a group of runs (one run: no `runs`)."""
    return _phase(index, [s for run in group for s in run], group[0][0].stmt, group[-1][-1].stmt, fragments,
                  tuple((run[0].stmt, run[-1].stmt) for run in group) if len(group) > 1 else (), joined)


_MAX_JOINED = 64  # runs one phase may join (the search for the smallest group is quadratic in it)


def _shapeless_runs_joined(statements: list[Statement], runs: list[list[Statement]], cfg,
                           fragments) -> tuple[list, dict]:
    """`run` grouping: every run its own phase, but a run with no GEMM shape of its own joined
    with neighbours (across gaps of operand set-up, `_feeds_later_mma`) into the smallest group
    that has one — the fewest runs, then the earliest. (groups of runs, group index → why)."""
    alone = [_group_phase(0, [run], fragments) for run in runs]
    if all(p.problem is None for p in alone):  # the engine's kernels: nothing to look for
        return [[run] for run in runs], {}
    taken: dict[int, tuple[int, int, str]] = {}  # first run of a chosen group -> (first, last, why)
    used: set[int] = set()
    for i, p in enumerate(alone):
        if p.problem is None or i in used:
            continue
        found = _smallest_group(statements, runs, cfg, fragments, i, used)
        if found is None:
            continue  # no group has a shape: the run stays alone, with its problem
        lo, hi = found
        span = f"s{runs[i][0].stmt}–s{runs[i][-1].stmt}"
        taken[lo] = (lo, hi, f"{hi - lo + 1} runs of mma are one GEMM: the run {span} alone has no GEMM shape "
                             f"({p.problem}), and only statements that set up later mma's operands lie between them")
        used.update(range(lo, hi + 1))
    groups, why, i = [], {}, 0
    while i < len(runs):
        if i in taken:
            lo, hi, reason = taken[i]
            why[len(groups)] = reason
            groups.append(runs[lo:hi + 1])
            i = hi + 1
        else:
            groups.append([runs[i]])
            i += 1
    return groups, why


def _smallest_group(statements, runs, cfg, fragments, i: int, used: set) -> tuple[int, int] | None:
    """(first, last) of the fewest consecutive runs around run i, none of them in `used`, with
    only operand set-up between them, whose mma together have a GEMM shape."""
    def joins(j: int, lo: int) -> bool:  # run j + 1 joins the group runs[lo..j]
        return _feeds_later_mma(statements, runs[lo:j + 1], runs[j + 1], cfg)

    left = i  # how far the joinable span reaches (each gap tested for the group from i on)
    while left > 0 and left - 1 not in used and i - left + 1 < _MAX_JOINED and joins(left - 1, left - 1):
        left -= 1
    right = i
    while right + 1 < len(runs) and right + 1 not in used and right - left + 1 < _MAX_JOINED and joins(right, left):
        right += 1
    for size in range(2, right - left + 2):
        for lo in range(max(left, i - size + 1), min(i, right - size + 1) + 1):
            hi = lo + size - 1
            if not all(joins(j, lo) for j in range(lo, hi)):
                continue
            p = _group_phase(0, runs[lo:hi + 1], fragments)
            if p.problem is None and p.identity:
                return lo, hi
    return None


_SIDE_EFFECTS = by_family(frozenset({
    "st", "red", "atom", "bar", "bar.red", "barrier", "barrier.red", "bra", "brx", "call", "ret", "exit", "trap",
    "membar", "fence", "sust", "suld", "tex", "shfl", "shfl.sync", "vote", "cp", "wgmma.fence", "wgmma.commit_group",
    "wgmma.wait_group", "mbarrier", "stmatrix", "match", "redux", "activemask"}))


def _feeds_later_mma(statements: list[Statement], group: list[list[Statement]], run: list[Statement], cfg) -> bool:
    """The statements between the group's last run and `run` only compute operands of later mma."""
    lo, hi = group[-1][-1].stmt + 1, run[0].stmt - 1
    gap = statements[lo - 1:hi]
    if not gap or (cfg is not None and cfg.block_of(group[0][0].stmt) != cfg.block_of(run[-1].stmt)):
        return False
    accumulators = {d for r in group for s in r for d in s.defs}
    for s in gap:
        if s.code.family.name in _SIDE_EFFECTS or accumulators.intersection(s.uses) or not _operand_work(s.code):
            return False
    # every value the gap computes flows into a later mma (directly or through other statements)
    return all(_feeds_mma(statements, lo + i, d) for i, s in enumerate(gap) for d in s.defs)


_LOADS = by_family(frozenset({"ld", "ldmatrix", "wmma.load", "ldu"}))
_FLOATS = frozenset({"f16", "f32", "f64", "bf16", "tf32", "e4m3", "e5m2", "f16x2", "bf16x2", "e4m3x2", "e5m2x2"})


def _operand_work(code: Opcode) -> bool:
    """A load, or integer and address arithmetic (what NVVM puts between a GEMM's mma) — not the
    float work of an epilogue (packs, activations, norms)."""
    if code.family.name in _LOADS:
        return True
    return (_FLOATS.isdisjoint(code.types) and not (code.base == "cvt" and code.rounding)
            and code.base not in ("tex", "shfl"))


def _feeds_mma(statements: list[Statement], stmt: int, register: str, horizon: int = 4096) -> bool:
    """Whether the value `register` gets at statement `stmt` reaches an mma operand."""
    tainted = {register}
    for s in statements[stmt:stmt + horizon]:
        if tainted.intersection(s.uses):
            if is_mma(s.code):
                return True
            tainted.update(s.defs)
        elif s.guard is None:
            tainted.difference_update(s.defs)
        if not tainted:
            return False
    return False


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
