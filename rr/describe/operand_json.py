"""The descriptor's plain data for what the operand provenance finds (docs/formats.md,
Descriptions): per role its sources combined — kind, base pointer, phase, byte offsets, lane part
and every other address term (`factor_json`, `term_json`) —, a merge's alternatives with the
definitions that reach for each, the loop a phase runs in, and each operand staged in shared
memory element by element (`staged_json`)."""

from __future__ import annotations

import json

from rr.describe.dataflow import Dataflow
from rr.describe.loops import describe_loop
from rr.describe.phases import Phase
from rr.describe.sources import Source, combine, most_common, sources_text
from rr.describe.staging import Staged
from rr.ptx.reaching import UNDEFINED


def factor_json(f: tuple) -> dict:
    kind = f[0]
    if kind == "sreg":
        return {"kind": f[1]}
    if kind == "param":
        return {"kind": "param", "offset": f[1]}
    if kind == "trip":
        return {"kind": "induction", "loop": f[1]}
    if kind == "sym":
        return {"kind": "symbol", "name": f[1]}
    if kind == "pspace":
        return {"kind": "param_space"}
    if kind == "input":
        return {"kind": "input", "register": f[1]}
    return {"kind": "value", "stmt": f[1], "register": f[2]}


def term_json(factors: tuple, coefficient) -> dict:
    out = {"coefficient": coefficient if isinstance(coefficient, int) else None,
           "factors": [factor_json(x) for x in factors]}
    if not isinstance(coefficient, int):
        out["lane_coefficients"] = list(coefficient)
    return out


def _source_json(src: Source) -> dict:
    accs = src.accesses
    bases = {a.base for a in accs if a.base is not None}
    lane_parts = {a.lane_bytes for a in accs}
    terms = sorted({(f, c) for a in accs for f, c in a.terms}, key=repr)
    return {
        "source": str(src), "kind": src.kind,
        "base": next(iter(bases)).as_json() if len(bases) == 1 else None,
        "phase": src.phase,
        "offsets": sorted({a.offset for a in accs}),
        "lane_bytes": list(next(iter(lane_parts))) if len(lane_parts) == 1 and None not in lane_parts else None,
        "terms": [term_json(f, c) for f, c in terms],
    }


def _definitions_json(flow: Dataflow, defs: tuple) -> list[dict]:
    """Where the definitions of a merge come from: statement, basic block, innermost loop."""
    out = []
    for d in defs:
        if d == UNDEFINED:
            out.append({"stmt": None, "block": None, "loop": None, "entry": True})
            continue
        loops = flow.cfg.loops_of(d)
        out.append({"stmt": d, "block": flow.cfg.block_of(d), "loop": loops[0].number if loops else None})
    return out


def operand_json(found: list[Source], flow: Dataflow) -> dict | None:
    """One role's sources over the phase as plain data (see docs/formats.md)."""
    if not found:
        return None
    merged = combine(found)
    out = _source_json(merged)
    distinct = most_common(found)
    if len(distinct) > 1 and merged.kind != "merge":
        out["source"] = sources_text([s.value for s in distinct])
    if merged.kind == "merge":
        out["alternatives"] = [{**_source_json(a), "definitions": _definitions_json(flow, a.defs)}
                               for a in merged.alternatives]
    staged = [staged_json(s.staged) for s in found if s.staged is not None]
    if staged:
        def common(key):
            return staged[0][key] if len({json.dumps(x[key], sort_keys=True) for x in staged}) == 1 else None
        out["base"], out["terms"] = common("base"), common("terms")
        out["offsets"] = sorted({x["offset"] for x in staged})
        out["staged"] = staged
    return out


def staged_json(st: Staged) -> dict:
    """One operand staged in shared memory (rr.describe.staging.Staged) as plain data: every
    element's byte offset from the pointer — `offset` + `lane_elements[lane][element]` for warp 0 on
    the first trip, plus `warp_bytes[warp]` and `trip_bytes`·trip (`elements[warp][trip]` in full
    where the offsets do not decompose so) — the address's other terms, and per shared-memory read
    its instruction, statements and layout (`Slot.layout`)."""
    warp_bytes, trip_bytes = st.decomposed()
    first = st.offsets[(0, st.trips[0])]
    out = {
        "stmt": st.stmt, "registers": list(st.registers), "base": st.base.as_json(),
        "element_bytes": st.element_bytes, "widened": st.converted, "offset": st.offset,
        "lane_elements": [[x - st.offset for x in row] for row in first],
        "warp_bytes": warp_bytes, "trip_bytes": trip_bytes, "loop": st.loop,
        "trips": len(st.trips) if st.loop is not None else None,
        "terms": [term_json(f, c) for f, c in st.terms], "loads": list(st.loads),
        "reads": [{"opcode": slot.opcode, "stmts": sorted({d for d, _ in slot.reads.values()}),
                   "layout": slot.layout(st.warps, st.trips)} for slot in st.slots],
        "assumed": list(st.assumed),
    }
    if warp_bytes is None or (st.loop is not None and trip_bytes is None):
        out["elements"] = [[[list(row) for row in st.offsets[(w, t)]] for t in st.trips] for w in range(st.warps)]
    return out


def loop_json(flow: Dataflow, phase: Phase) -> dict | None:
    loops = flow.cfg.loops_of(phase.first_stmt)
    return describe_loop(flow, loops[0], phase) if loops else None
