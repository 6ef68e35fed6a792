"""results/composed.parquet: one row per layer and one for the whole network (layer `network`), a
fixed schema (docs/formats.md, "Composed engine"); and the report's page of it."""

from __future__ import annotations

import datetime

import pyarrow as pa

from rr import __version__
from rr.compose.network import Measured
from rr.compose.select import Plan
from rr.records import Status

NETWORK = "network"

COMPOSED_SCHEMA = pa.schema([
    ("layer", pa.string()), ("entry", pa.string()),
    # what was composed: the phases and their recipes, their own layer-alone ratios, and why the
    # other phases stayed unspliced
    ("phases", pa.list_(pa.int32())), ("recipes", pa.list_(pa.string())), ("part_ratios", pa.list_(pa.float64())),
    ("unspliced", pa.list_(pa.struct([("phase", pa.int32()), ("reason", pa.string())]))),
    ("selected_by", pa.string()),
    ("status", pa.string()), ("message", pa.string()),
    # identity: the final frame's (network row), the layer's outputs in the composed frame (layer rows)
    ("identical", pa.bool_()), ("first_differing_layer", pa.string()), ("first_differing_buffer", pa.string()),
    # time: the network's frame, a layer alone; predicted = the product of its parts' ratios
    ("timing_status", pa.string()), ("timing_message", pa.string()),
    ("ratio", pa.float64()), ("noise", pa.float64()), ("predicted_ratio", pa.float64()),
    # bisection: the phases at fault, and for what (identity, time)
    ("at_fault_phases", pa.list_(pa.int32())), ("at_fault", pa.string()), ("at_fault_because", pa.string()),
    ("backend", pa.string()), ("frame", pa.string()), ("gpu", pa.string()),
    ("rr_version", pa.string()), ("code_fingerprint", pa.string()), ("created_at", pa.timestamp("ms", tz="UTC")),
], metadata={b"rr.stage": b"compose"})


def composed_rows(plans: list[Plan], m: Measured, backend: str, frame: str, fingerprint: str) -> list[dict]:
    now = datetime.datetime.now(datetime.timezone.utc)
    common = {"backend": backend, "frame": frame, "gpu": m.gpu, "rr_version": __version__,
              "code_fingerprint": fingerprint, "created_at": now, "status": m.status, "message": m.message}
    rows = []
    for plan in plans:
        ratio, noise = m.layer_ratio.get(plan.layer, (None, None))
        status, message = m.layer_timing.get(plan.layer, (m.timing_status, m.timing_message))
        if not plan.chosen and m.timing_status == Status.OK:
            status, message = Status.NOT_RUN, "no phase of this layer is spliced: it is the unspliced layer"
        faulty = m.culprits.get(plan.layer)
        rows.append({
            **common, "layer": plan.layer, "entry": plan.entry,
            "phases": [c.phase for c in plan.chosen], "recipes": [c.recipe for c in plan.chosen],
            "part_ratios": [c.ratio for c in plan.chosen] if plan.timed else [],
            "unspliced": [{"phase": p, "reason": r} for p, r in sorted(plan.unspliced.items())],
            "selected_by": _selected_by(plan),
            "identical": m.layers_identical.get(plan.layer), "first_differing_layer": None,
            "first_differing_buffer": None, "timing_status": status, "timing_message": message,
            "ratio": ratio, "noise": noise, "predicted_ratio": plan.predicted_ratio,
            "at_fault_phases": faulty[0] if faulty else [], "at_fault": faulty[2] if faulty else None,
            "at_fault_because": faulty[1] if faulty else None,
        })
    predicted = None
    rows.append({
        **common, "layer": NETWORK, "entry": None,
        "phases": [], "recipes": [], "part_ratios": [], "unspliced": [],
        "selected_by": None, "identical": m.frame_identical, "first_differing_layer": m.first_differing_layer,
        "first_differing_buffer": m.first_differing_buffer, "timing_status": m.timing_status,
        "timing_message": m.timing_message, "ratio": m.frame_ratio, "noise": m.frame_noise,
        "predicted_ratio": predicted, "at_fault_phases": [], "at_fault": None, "at_fault_because": None,
    })
    return rows


def _selected_by(plan: Plan) -> str:
    if plan.timed:
        return (f"per phase the fastest byte-identical recipe whose layer-alone ratio is below "
                f"1 − {plan.noise_multiple:g}·noise")
    return "untimed (no GPU): per phase the first byte-identical recipe, in the config's order"


def composed_table(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=COMPOSED_SCHEMA)


def composed_page(rows: list[dict]) -> str:
    """The report's page: per layer the chosen phases and recipes, the predicted and measured ratios."""
    import pandas as pd

    from rr.results.report import html_page

    def num(x, pct=False):
        return "" if x is None else (f"{x:.2%}" if pct else f"{x:.4f}")

    frame = pd.DataFrame([{
        "layer": r["layer"],
        "phases (recipe)": ", ".join(f"{p} ({rc})" for p, rc in zip(r["phases"], r["recipes"])) or
                           ("—" if r["layer"] != NETWORK else "every layer's composition"),
        "identical": "" if r["identical"] is None else ("=" if r["identical"] else "differs"),
        "predicted ratio": num(r["predicted_ratio"]), "measured ratio": num(r["ratio"]),
        "noise": num(r["noise"], pct=True),
        "timing": r["timing_status"] if r["timing_status"] == Status.OK else f"{r['timing_status']}: {r['timing_message']}",
        "at fault": (f"{r['at_fault']}: phases {r['at_fault_phases']} ({r['at_fault_because']})"
                     if r["at_fault"] else ""),
    } for r in rows])
    network = rows[-1]
    intro = ("The composed engine: per layer, the splices the sweep found faster and byte-identical, in one "
             "module; the network's frame with every layer's composition in place. "
             + ("Final frame byte-identical to the unspliced one. " if network["identical"]
                else f"Final frame differs, first in {network['first_differing_layer']}. "
                if network["identical"] is False else "")
             + (f"Frame ratio {network['ratio']:.4f} ± {network['noise']:.2%}." if network["ratio"] is not None
                else f"Timing: {network['timing_message']}"))
    return html_page("The composed engine", intro, frame)
