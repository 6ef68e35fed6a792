"""The compose commands (the workflow's compose stage): `rr compose-plan` chooses a layer's winning
splices from its cells' rows, `rr compose-measure` captures and times the network with every
layer's composition in place and writes results/composed.parquet (docs/compose.md)."""

from __future__ import annotations

from pathlib import Path

from rr.cli.common import UserError, positive_seconds, relative_noise, resolve_ptx


def cmd_compose_plan(args) -> int:
    import json

    from rr.compose.select import select
    from rr.io import atomic_paths
    from rr.results.report import read_results

    rows = [r for cell in args.cells for r in read_results(cell).to_pylist()]
    plan = select(rows, args.layer, args.noise_multiple, args.recipes.split(",") if args.recipes else None)
    if not plan.entry:
        raise UserError(f"{args.layer}: no row of this layer in {', '.join(args.cells)}")
    with atomic_paths(args.output, args.spec) as (plan_tmp, spec_tmp):
        plan_tmp.write_text(json.dumps(plan.as_dict(), indent=2) + "\n")
        spec_tmp.write_text(json.dumps({str(p): r for p, r in plan.spec.items()}, indent=2) + "\n")
    chosen = ", ".join(f"{c.phase} ({c.recipe}" + (f" {c.ratio:.4f})" if c.ratio is not None else ")")
                       for c in plan.chosen) or "none"
    print(f"{args.output}: {args.layer}: phases chosen {chosen}; {len(plan.unspliced)} stay unspliced"
          + (f"; predicted ratio {plan.predicted_ratio:.4f}" if plan.predicted_ratio is not None else ""))
    return 0


def _plan(path: str):
    from rr.compose.select import Choice, Plan
    from rr.validation import InvalidInput, read_json

    raw = read_json(path)
    try:
        return Plan(raw["layer"], raw["entry"], raw["timed"], raw["noise_multiple"],
                    [Choice(**c) for c in raw["chosen"]], {int(p): r for p, r in raw["unspliced"].items()})
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise InvalidInput(f"{path}: not a plan of rr compose-plan ({type(e).__name__}: {e})") from None


def _refused(plan, record: Path, module: Path) -> None:
    """A layer whose composition was refused (overlap, interference: its splice record says why)
    or did not compile (an empty module) is measured unspliced, each chosen phase saying why."""
    from rr.records import SPLICE, Status, read_record

    splice = read_record(record, SPLICE)
    why = None
    if splice["status"] != Status.OK:
        why = f"the composition was refused: {splice.get('message', '')}"
    elif module.stat().st_size == 0:
        why = f"the composition did not compile ({module}.json says why)"
    if why is not None:
        plan.unspliced.update({c.phase: why for c in plan.chosen})
        plan.chosen = []


def cmd_compose_measure(args) -> int:
    import json

    from rr.compose.network import Layer, Network
    from rr.compose.table import composed_page, composed_rows, composed_table
    from rr.fingerprint import fingerprint
    from rr.io import atomic_paths, scratch_dir
    from rr.run.gpus import resolve_backend
    from rr.run.frame import read_frame

    counts = {len(v) for v in (args.plan, args.module, args.splice_record)}
    if len(counts) != 1 or (args.alone and len(args.alone) != len(args.plan)):
        raise UserError("give one --plan, --module and --splice-record (and, on cuda, --alone) per layer, in one order")
    backend = resolve_backend(args.backend)
    plans = [_plan(p) for p in args.plan]
    layers = {}
    for i, plan in enumerate(plans):
        _refused(plan, Path(args.splice_record[i]), Path(args.module[i]))
        layers[plan.layer] = Layer(plan, Path(args.module[i]), Path(args.splice_record[i]),
                                   resolve_ptx(args.corpus, plan.entry),
                                   Path(args.alone[i]) if args.alone else None, args.grouping)
    frame = read_frame(args.layout)
    with scratch_dir(args.output) as work:
        network = Network(Path(args.layout), Path(args.reference), layers, work, backend, args.noise,
                          args.time_limit, args.timeout, args.noise_multiple, args.arch,
                          say=lambda line: print(line, flush=True))
        measured = network.measure()
    rows = composed_rows(plans, measured, backend, f"{frame.frame[0]}x{frame.frame[1]}", fingerprint("all"))
    record = {"status": measured.status, "message": measured.message, "steps": measured.steps,
              "layers": [p.as_dict() for p in plans]}
    import pyarrow.parquet as pq

    with atomic_paths(args.output, args.html, args.json) as (table_tmp, html_tmp, json_tmp):
        pq.write_table(composed_table(rows), table_tmp)
        html_tmp.write_text(composed_page(rows), encoding="utf-8")
        json_tmp.write_text(json.dumps(record, indent=2, default=str) + "\n")
    network_row = rows[-1]
    print(f"{args.output}: {len(rows) - 1} layers composed; final frame "
          + ("identical" if network_row["identical"] else "differs" if network_row["identical"] is False
             else "not compared")
          + (f"; frame ratio {network_row['ratio']:.4f} ± {network_row['noise']:.2%}" if network_row["ratio"] else ""))
    return 0


def add_parsers(sub) -> None:
    s = sub.add_parser("compose-plan", help="a layer's composition from its cells' rows: per phase the fastest "
                       "byte-identical recipe faster than 1 - k·noise (docs/compose.md)")
    s.add_argument("cells", nargs="+", help="the layer's cells (results/<layer>_phase<P>.parquet)")
    s.add_argument("--layer", required=True, help="the layer to plan")
    s.add_argument("--noise-multiple", type=float, default=2.0,
                   help="k: a splice is chosen only if its layer-alone ratio is below 1 - k·noise (default: 2)")
    s.add_argument("--recipes", help="the recipes that may be chosen, comma-separated, in the order an untimed "
                   "(cpu) plan prefers them (default: the rows')")
    s.add_argument("-o", "--output", required=True, help="PLAN.json: what was chosen and why the rest was not")
    s.add_argument("--spec", required=True, help="SPEC.json: the {phase: recipe} map rr splice --compose takes")
    s.set_defaults(func=cmd_compose_plan, reads=("cells",))

    s = sub.add_parser("compose-measure", help="the network's frame with every layer's composition in place: "
                       "identity, time, bisection of what is at fault (docs/compose.md)")
    s.add_argument("layout", help="the frame layout (rr launch frame)")
    s.add_argument("--reference", required=True, help="the unspliced frame's capture")
    s.add_argument("--corpus", required=True, help="the corpus the layers' modules come from (for bisection)")
    s.add_argument("--plan", action="append", default=[], help="a layer's plan (rr compose-plan); repeatable")
    s.add_argument("--module", action="append", default=[],
                   help="that layer's composed module the frame runs (a cubin on cuda); one per --plan")
    s.add_argument("--splice-record", action="append", default=[], help="that module's splice record; one per --plan")
    s.add_argument("--alone", action="append", default=[],
                   help="on cuda: that layer alone from the reference frame (rr relaunch --extract); one per --plan")
    s.add_argument("--backend", choices=("auto", "cuda", "cpu"), default="auto")
    s.add_argument("--arch", default="sm_90", help="what bisection's sub-compositions compile for (default: sm_90)")
    s.add_argument("--grouping", choices=("run", "gemm"), default="run")
    s.add_argument("--noise", type=relative_noise, default=0.005, help="each timing's noise target")
    s.add_argument("--noise-multiple", type=float, default=2.0, help="k of 'slower than predicted by k·noise'")
    s.add_argument("--time-limit", type=positive_seconds, default=30.0, help="seconds of sampling per timing")
    s.add_argument("--timeout", type=positive_seconds, default=3600.0, help="seconds a frame's run may take")
    s.add_argument("-o", "--output", required=True, help="results/composed.parquet")
    s.add_argument("--html", required=True, help="the report's page of it")
    s.add_argument("--json", required=True, help="the record: what was measured, in order")
    s.set_defaults(func=cmd_compose_measure, reads=("layout", "reference", "plan", "module", "splice_record"))
