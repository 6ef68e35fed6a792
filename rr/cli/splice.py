"""The splice command: a recipe applied to one phase (the workflow's splice stage)."""

from __future__ import annotations

from rr.cli.common import UserError, grouping_option, phase_number, recorded, resolve_ptx
from rr.records import SPLICE, Status, record_text, status_of


def cmd_splice(args) -> int:
    from rr.splice.assemble import SpliceError
    from rr.splice.recipe import RecipeError, load_recipe
    from rr.splice.splice import splice

    ptx = resolve_ptx(args.file, args.entry)
    recipe = args.recipe  # a file, or a name (rr.splice.recipe.recipe_path: config/recipes, then rr's own)
    spec = _composition(args)
    try:
        if spec is not None:
            from rr.splice.compose import compose

            record = compose(ptx, args.entry, spec, args.output, args.grouping, args.descriptor)
        else:
            record = splice(ptx, args.entry, load_recipe(recipe), args.phase and args.phase[0], args.output,
                            args.grouping, args.descriptor)
    except (RecipeError, SpliceError) as e:
        def write(failed: dict) -> None:
            # for pipelines: the refusal is the record, the module an empty file the later stages fail on
            from rr.io import atomic_paths

            with atomic_paths(args.output, SPLICE.next_to(args.output)) as (module, record):
                module.write_text("")
                where = {"recipes": {str(p): r for p, r in spec.items()}} if spec else {"phase": args.phase and args.phase[0],
                                                                                   "recipe": recipe}
                record.write_text(record_text({**failed, "entry": args.entry, **where}))

        refused = "the recipe does not apply" if status_of(e) == Status.NOT_APPLICABLE else "splice refused"
        return recorded(args, e, write, refused)
    if spec is not None:
        for part in record["phases"]:
            print(f"phase {part['phase']} by {part['recipe']}: cut s{part['cut']['first_stmt']}–s{part['cut']['last_stmt']}, "
                  f"{len(part['live_in'])} live-in, {len(part['live_out'])} live-out")
        print(f"{args.output}: {len(record['phases'])} phases spliced, {record['outside_statements_checked']} statements "
              "outside the cuts unchanged")
        return 0
    print(f"{args.output}: phase {record['phase']} by {record['template']}: cut s{record['cut']['first_stmt']}–"
          f"s{record['cut']['last_stmt']}, {len(record['live_in'])} live-in, {len(record['live_out'])} live-out, "
          f"{record['outside_statements_checked']} statements outside unchanged")
    return 0


def _composition(args) -> dict | None:
    """{phase: recipe} of a composition (--compose, or --recipe with several --phase), else None."""
    from rr.splice.compose import read_spec

    if args.compose is not None:
        if args.recipe is not None or args.phase:
            raise UserError("--compose names each phase's recipe: give it without --recipe and --phase")
        return read_spec(args.compose)
    if args.recipe is None:
        raise UserError("give --recipe (with --phase P, or --phase P,Q,… for several phases) or --compose SPEC")
    if args.phase and len(args.phase) > 1:
        if len(set(args.phase)) != len(args.phase):
            raise UserError(f"--phase {','.join(map(str, args.phase))}: a phase is given twice")
        return {p: args.recipe for p in args.phase}
    return None


def _phases(text: str) -> list[int]:
    return [phase_number(p) for p in text.split(",")]


def add_parsers(sub) -> None:
    from rr.splice.recipe import shipped_recipes

    s = sub.add_parser("splice", help="apply a recipe to one phase: cut it, splice in the template's code")
    s.add_argument("file", help="a PTX file, or a corpus directory made by `rr extract`")
    s.add_argument("--entry", required=True, help="the kernel entry to splice")
    s.add_argument("--recipe",
                   help="a recipe YAML file, or a name: config/recipes/NAME.yaml where that exists, else the recipe "
                        f"rr ships ({', '.join(shipped_recipes())})")
    s.add_argument("--phase", type=_phases, metavar="P[,Q,…]",
                   help="the phase to cut (default: the recipe's); several, comma-separated: the recipe on each, "
                        "in one module (a composition)")
    s.add_argument("--compose", metavar="SPEC",
                   help="several phases in one module, each by its own recipe: a YAML/JSON map {phase: recipe}, "
                        "inline ('{8: isolate, 24: regen}') or a file; each cut checked as alone, and the whole: cuts "
                        "that overlap and splices that interfere are refused naming both phases")
    grouping_option(s)
    s.add_argument("--descriptor", metavar="JSON",
                   help="the entry's descriptor.json (rr describe): cut the phase it describes instead of finding "
                        "the phases again; refused unless it describes this entry of this module, numbered by "
                        "--grouping")
    s.add_argument("-o", "--output", required=True, help="OUT.ptx (and OUT.ptx.splice.json)")
    s.add_argument("--record", action="store_true",
                   help="on refusal write the reason as OUT.ptx.splice.json (and an empty OUT.ptx) and exit 0")
    s.set_defaults(func=cmd_splice, reads=("file", "recipe", "descriptor"))
