"""`rr spec`: the phase table of an entry, for people (like the reference document's §2.2) and as
JSON (DESIGN §3); and the descriptor read back (`described_phases`), which `rr splice --descriptor`
cuts by: the description its cell was planned from."""

from __future__ import annotations

import dataclasses
import hashlib
from collections import Counter

from rr.describe.dataflow import Dataflow
from rr.describe.loops import describe_loop
from rr.describe.memory import Base
from rr.describe.phases import Epilogue, Phase, find_epilogues, find_phases
from rr.describe.provenance import operand_sources
from rr.describe.summary import ParamUse, summarise_epilogue, summarise_params
from rr.ptx._bulk import no_gc
from rr.ptx.statements import Statement
from rr.validation import InvalidInput


class NothingToDescribe(ValueError):
    pass


def describe(statements: list[Statement], entry: str, grouping: str = "run", cfg=None,
             fragments=None) -> tuple[list[Phase], list[Epilogue]]:
    phases = find_phases(statements, grouping, cfg, fragments)
    if not phases:
        raise NothingToDescribe(f"{entry}: no mma statements in its {len(statements)} statements, "
                                "so it has no phases to describe")
    return phases, find_epilogues(statements, phases)


def weight_image(sources: list[dict]) -> Base | None:
    """The pointer (`param+N`) most of the phases' B fragments are loaded through as weights."""
    bases = Counter(Base(**src["operands"]["B"]["base"]) for src in sources
                    if src["operands"]["B"] and src["operands"]["B"]["kind"] == "weight"
                    and src["operands"]["B"]["base"] is not None)
    return bases.most_common(1)[0][0] if bases else None


def weight_extent(weights: Base | None, params: dict[int, ParamUse]) -> int | None:
    """The extent of the weight image pointer: the highest byte any load reads through it."""
    if weights is None or weights.offset is None:  # none, or not a pointer from the parameter space
        return None
    use = params.get(weights.offset)
    return use.extent if use is not None else None


def module_sha1(text: str) -> str:
    """The descriptor's `module_sha1`: the SHA-1 of the module's text (a splice record's `source_sha1`)."""
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def described_phases(spec: dict, where) -> tuple[list[Phase], list[Epilogue]]:
    """The phases and epilogues a descriptor holds (`spec_json`'s object, read from `where`), as
    `describe` found them; InvalidInput naming the file and the key where one is missing."""
    def build(cls, rows: list, what: str):
        out = []
        for i, row in enumerate(rows):
            missing = [f.name for f in dataclasses.fields(cls) if f.name not in row
                       and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
            if missing:
                raise InvalidInput(f"{where}: {what}[{i}] has no {missing[0]!r}: not a descriptor rr describe wrote")
            out.append(cls(**{f.name: row[f.name] for f in dataclasses.fields(cls) if f.name in row}))
        return out

    phases = [dataclasses.replace(p, chain_lengths=tuple(p.chain_lengths), runs=tuple(map(tuple, p.runs)))
              for p in build(Phase, spec["phases"], "phases")]
    return phases, build(Epilogue, spec.get("epilogues", []), "epilogues")


def spec_json(function, statements: list[Statement] | None = None, grouping: str = "run", module=None) -> dict:
    """DESIGN §3's description of one entry (`grouping`: see `rr.describe.phases`). The analysis
    allocates a few hundred thousand memo entries, sources and values that form no cycles worth
    collecting: without the cyclic collector's passes over them it takes a sixth less time."""
    with no_gc():
        return _spec_json(function, statements, grouping, module)


def _spec_json(function, statements: list[Statement] | None, grouping: str, module) -> dict:
    flow = Dataflow(function, statements, module)
    statements, entry, block_z = flow.statements, function.name, flow.block_z
    phases, epilogues = describe(statements, entry, grouping, flow.cfg, flow.fragments)
    sources = operand_sources(flow, phases, epilogues)
    weights = weight_image(sources)
    summaries = [summarise_epilogue(flow, e, weights) for e in epilogues]
    uses = summarise_params(flow)
    return {
        "entry": entry,
        "statements": len(statements),
        "block_z": block_z,
        "grouping": grouping,
        "phases": [{
            "phase": p.phase, "first_stmt": p.first_stmt, "last_stmt": p.last_stmt, "mma": p.mma,
            "opcode": p.opcode, "a_quads": p.a_quads, "b_pairs": p.b_pairs, "chains": p.chains,
            "chain_len": p.chain_len, "chain_lengths": list(p.chain_lengths), "m": p.m, "n": p.n,
            "k": p.k, "M": p.M, "N": p.N, "K": p.K, "tiles": p.tiles, "identity": p.identity,
            "problem": p.problem, "runs": [list(r) for r in p.runs],
            **({"joined": p.joined} if p.joined is not None else {}), **src,
        } for p, src in zip(phases, sources)],
        "loops": [describe_loop(flow, lp) for lp in flow.cfg.loops],
        "irreducible": [[flow.cfg.blocks[a].last, flow.cfg.blocks[b].first] for a, b in flow.cfg.irreducible],
        "epilogues": [{"epilogue": e.epilogue, "first_stmt": e.first_stmt, "last_stmt": e.last_stmt,
                       "stmts": e.stmts, "name": m.name, "ops": e.ops, "traffic": m.traffic,
                       "reductions": m.reductions, "constants": m.constants}
                      for e, m in zip(epilogues, summaries)],
        "params": [{"offset": u.offset, "width": u.width, "kind": u.kind, "role": u.role, "read": u.read,
                    "written": u.written, "sampled": u.sampled, "extent": u.extent, "stmts": u.stmts}
                   for u in uses.values()],
        "weight_image": weights.as_json() if weights is not None else None,
        "weight_extent": weight_extent(weights, uses),
    }


def spec_table(spec: dict) -> str:
    """The phase table for people, like the reference document's §2.2, from `spec_json`'s object."""
    phases = sources = spec["phases"]
    lines = [f"{spec['entry']}: {spec['statements']} statements, {len(phases)} phase{'' if len(phases) == 1 else 's'}, "
             f"{sum(p['mma'] for p in phases)} mma", "",
             f"{'#':>3}  {'statements':<15} {'mma':>4} {'A':>3} {'B':>3} {'chains×len':>11} "
             f"{'m':>3} {'n':>3} {'k':>3} {'M':>5} {'N':>5} {'K':>5}  identity"]
    for p in phases:
        span = f"s{p['first_stmt']}–s{p['last_stmt']}"
        chains = f"{p['chains']}×{p['k'] or '?'}"
        head = f"{p['phase']:>3}  {span:<15} {p['mma']:>4} {p['a_quads']:>3} {p['b_pairs']:>3} {chains:>11} "
        if p["problem"]:
            lines.append(head + f"{'-':>3} {'-':>3} {'-':>3} {'-':>5} {'-':>5} {'-':>5}  ✘ {p['problem']}")
            continue
        mark = "✔" if p["identity"] else "✘"
        lines.append(head + f"{p['m']:>3} {p['n']:>3} {p['k']:>3} {p['M']:>5} {p['N']:>5} {p['K']:>5}  "
                     f"{mark} {p['m']}·{p['n']}·{p['k']} = {p['m'] * p['n'] * p['k']}")
    lines += _phase_notes(phases)
    lines += ["", f"{'#':>3}  {'A from':<22} {'B from':<22} {'C from':<22} B offsets"]
    for p, src in zip(phases, sources):
        offs = src["b_offsets"]
        shown = ", ".join(map(str, offs[:6])) + (f", … ({len(offs)})" if len(offs) > 6 else "")
        slab = f"  slab {src['slab_stride']}·tid.z" if src["slab_stride"] else ""
        lines.append(f"{p['phase']:>3}  {src['a_source']:<22} {src['b_source']:<22} {src['c_source']:<22} "
                     f"{shown}{slab}")
    lines += ["", "epilogues (0 = prologue, last = tail):"]
    for e in spec["epilogues"]:
        span = f"s{e['first_stmt']}–s{e['last_stmt']}" if e["stmts"] else "—"
        lines.append(f"  E{e['epilogue']:<3} {span:<15} {e['stmts']:>5} stmts  {e['name']}")
    lines += ["", "parameters:"]
    for u in spec["params"]:
        extent = f", extent {u['extent']} bytes" if u["extent"] is not None else ""
        lines.append(f"  +{u['offset']:<4} {u['width']:>2} bytes  {u['kind']:<7} {u['role']}{extent}")
    lines.append(f"weight extent: {spec['weight_extent']} bytes" if spec["weight_extent"] is not None else
                 "weight extent: none (no phase loads its B fragments through a weight pointer)")
    return "\n".join(lines)


def _phase_notes(phases: list[dict]) -> list[str]:
    """Under the phase table, for each phase that joins runs of mma: why, and the loop it runs in
    (its geometry is then per trip: a pipelined K loop's)."""
    out = []
    for p in phases:
        if not p.get("joined"):
            continue
        starts = ", ".join(f"s{a}" for a, _ in p["runs"])
        out.append(f"  phase {p['phase']}: runs at {starts} joined: {p['joined']}")
        loop = p.get("loop")
        if loop is not None:
            trips = f"{loop['trips']} trips" if loop["trips"] is not None else "trips not known from the code"
            shape = f"{p['M']}×{p['N']}×{p['K']} " if not p["problem"] else ""
            out.append(f"  phase {p['phase']}: {shape}per trip of loop {loop['loop']} "
                       f"(s{loop['first_stmt']}–s{loop['last_stmt']}, {trips})")
    return [""] + out if out else []


def write_description(spec: dict, out_dir) -> None:
    """`phases.parquet`, `epilogues.parquet` and `descriptor.json` (the spec) in out_dir, all three
    or none (rr.io.atomic_paths: written beside, then renamed, the descriptor last and removed
    first, so no descriptor is ever beside tables of another description)."""
    import json
    from pathlib import Path

    import pyarrow as pa
    from rr.io import atomic_paths, write_table
    from rr.records import DESCRIPTOR, record_text

    out_dir = Path(out_dir)
    counts = pa.map_(pa.string(), pa.int64())
    rows = [{**e, "ops": list(e["ops"].items()), "traffic": list(e["traffic"].items()),
             "reductions": json.dumps(e["reductions"]), "constants": json.dumps(e["constants"])}
            for e in spec["epilogues"]]
    schema = pa.schema([("epilogue", pa.int32()), ("first_stmt", pa.int32()), ("last_stmt", pa.int32()),
                        ("stmts", pa.int32()), ("name", pa.string()), ("ops", counts), ("traffic", counts),
                        ("reductions", pa.string()), ("constants", pa.string())])
    # the descriptor last: it is what readers take the tables for (rr.results.collect), and rr.io
    # removes it before the first rename, so a set cut short by a kill has none
    names = ("phases.parquet", "epilogues.parquet", DESCRIPTOR.file)
    with atomic_paths(*(out_dir / n for n in names), shown=out_dir) as tmps:
        write_table(pa.Table.from_pylist(spec["phases"]), tmps[0])
        write_table(pa.Table.from_pylist(rows, schema=schema), tmps[1])
        tmps[2].write_text(record_text(spec))
