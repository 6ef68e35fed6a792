"""`rr spec`: the phase table of an entry, for people (like the reference document's §2.2) and as
JSON (DESIGN §3)."""

from __future__ import annotations

from rr.describe.phases import Epilogue, Phase, find_epilogues, find_phases
from rr.describe.provenance import Dataflow, operand_sources
from rr.ptx.linearise import Statement

# DESIGN §3 fields this version does not derive yet; listed in the JSON so nobody reads absence as zero.
MISSING = ["params", "weight_extent"]


class NothingToDescribe(ValueError):
    pass


def describe(statements: list[Statement], entry: str) -> tuple[list[Phase], list[Epilogue]]:
    phases = find_phases(statements)
    if not phases:
        raise NothingToDescribe(f"{entry}: no mma statements in its {len(statements)} statements, "
                                "so it has no phases to describe")
    return phases, find_epilogues(statements, phases)


def spec_json(entry: str, statements: list[Statement], params: dict[str, int]) -> dict:
    phases, epilogues = describe(statements, entry)
    sources = operand_sources(Dataflow(statements, params), phases, epilogues)
    return {
        "entry": entry,
        "statements": len(statements),
        "phases": [{
            "phase": p.phase, "first_stmt": p.first_stmt, "last_stmt": p.last_stmt, "mma": p.mma,
            "opcode": p.opcode, "a_quads": p.a_quads, "b_pairs": p.b_pairs, "chains": p.chains,
            "chain_len": p.chain_len, "chain_lengths": list(p.chain_lengths), "m": p.m, "n": p.n,
            "k": p.k, "M": p.M, "N": p.N, "K": p.K, "tiles": p.tiles, "identity": p.identity,
            "problem": p.problem, **src,
        } for p, src in zip(phases, sources)],
        "epilogues": [{"epilogue": e.epilogue, "first_stmt": e.first_stmt, "last_stmt": e.last_stmt,
                       "stmts": e.stmts, "ops": e.ops} for e in epilogues],
        "missing": MISSING,
    }


def spec_table(entry: str, statements: list[Statement], params: dict[str, int]) -> str:
    phases, epilogues = describe(statements, entry)
    sources = operand_sources(Dataflow(statements, params), phases, epilogues)
    lines = [f"{entry}: {len(statements)} statements, {len(phases)} phases, "
             f"{sum(p.mma for p in phases)} mma", "",
             f"{'#':>3}  {'statements':<15} {'mma':>4} {'A':>3} {'B':>3} {'chains×len':>11} "
             f"{'m':>3} {'n':>3} {'k':>3} {'M':>5} {'N':>5} {'K':>5}  identity"]
    for p in phases:
        span = f"s{p.first_stmt}–s{p.last_stmt}"
        chains = f"{p.chains}×{p.k}" if p.k else f"{p.chains}×?"
        if p.problem:
            lines.append(f"{p.phase:>3}  {span:<15} {p.mma:>4} {p.a_quads:>3} {p.b_pairs:>3} {chains:>11} "
                         f"{'-':>3} {'-':>3} {'-':>3} {'-':>5} {'-':>5} {'-':>5}  ✘ {p.problem}")
            continue
        mark = "✔" if p.identity else "✘"
        lines.append(f"{p.phase:>3}  {span:<15} {p.mma:>4} {p.a_quads:>3} {p.b_pairs:>3} {chains:>11} "
                     f"{p.m:>3} {p.n:>3} {p.k:>3} {p.M:>5} {p.N:>5} {p.K:>5}  "
                     f"{mark} {p.m}·{p.n}·{p.k} = {p.m * p.n * p.k}")
    lines += ["", f"{'#':>3}  {'A from':<22} {'B from':<22} {'C from':<22} B offsets"]
    for p, src in zip(phases, sources):
        offs = src["b_offsets"]
        shown = ", ".join(map(str, offs[:6])) + (f", … ({len(offs)})" if len(offs) > 6 else "")
        slab = f"  slab {src['slab_stride']}·tid.z" if src["slab_stride"] else ""
        lines.append(f"{p.phase:>3}  {src['a_source']:<22} {src['b_source']:<22} {src['c_source']:<22} "
                     f"{shown}{slab}")
    lines += ["", "epilogues (0 = prologue, last = tail):"]
    for e in epilogues:
        span = f"s{e.first_stmt}–s{e.last_stmt}" if e.stmts else "—"
        top = ", ".join(f"{op} ×{n}" for op, n in sorted(e.ops.items(), key=lambda kv: -kv[1])[:4])
        lines.append(f"  E{e.epilogue:<3} {span:<15} {e.stmts:>5} stmts  {top}")
    return "\n".join(lines)
