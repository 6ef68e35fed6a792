"""The splice command: a recipe applied to one phase (the workflow's splice stage)."""

from __future__ import annotations

from rr.cli.common import grouping_option, phase_number, recorded, resolve_ptx
from rr.records import SPLICE, Status, record_text, status_of


def cmd_splice(args) -> int:
    from rr.splice.assemble import SpliceError
    from rr.splice.recipe import RecipeError, load_recipe
    from rr.splice.splice import splice

    ptx = resolve_ptx(args.file, args.entry)
    recipe = args.recipe  # a file, or a name (rr.splice.recipe.recipe_path: config/recipes, then rr's own)
    try:
        record = splice(ptx, args.entry, load_recipe(recipe), args.phase, args.output, args.grouping,
                        args.descriptor)
    except (RecipeError, SpliceError) as e:
        def write(failed: dict) -> None:
            # for pipelines: the refusal is the record, the module an empty file the later stages fail on
            from rr.io import atomic_paths

            with atomic_paths(args.output, SPLICE.next_to(args.output)) as (module, record):
                module.write_text("")
                record.write_text(record_text({**failed, "entry": args.entry, "phase": args.phase, "recipe": recipe}))

        refused = "the recipe does not apply" if status_of(e) == Status.NOT_APPLICABLE else "splice refused"
        return recorded(args, e, write, refused)
    print(f"{args.output}: phase {record['phase']} by {record['template']}: cut s{record['cut']['first_stmt']}–"
          f"s{record['cut']['last_stmt']}, {len(record['live_in'])} live-in, {len(record['live_out'])} live-out, "
          f"{record['outside_statements_checked']} statements outside unchanged")
    return 0


def add_parsers(sub) -> None:
    s = sub.add_parser("splice", help="apply a recipe to one phase: cut it, splice in the template's code")
    s.add_argument("file", help="a PTX file, or a corpus directory made by `rr extract`")
    s.add_argument("--entry", required=True, help="the kernel entry to splice")
    s.add_argument("--recipe", required=True,
                   help="a recipe YAML file, or a name: config/recipes/NAME.yaml where that exists, else the recipe "
                        "rr ships (isolate, regen, f32acc, probe)")
    s.add_argument("--phase", type=phase_number, help="the phase to cut (default: the recipe's)")
    grouping_option(s)
    s.add_argument("--descriptor", metavar="JSON",
                   help="the entry's descriptor.json (rr describe): cut the phase it describes instead of finding "
                        "the phases again; refused unless it describes this entry of this module, numbered by "
                        "--grouping")
    s.add_argument("-o", "--output", required=True, help="OUT.ptx (and OUT.ptx.splice.json)")
    s.add_argument("--record", action="store_true",
                   help="on refusal write the reason as OUT.ptx.splice.json (and an empty OUT.ptx) and exit 0")
    s.set_defaults(func=cmd_splice, reads=("file", "recipe", "descriptor"))
