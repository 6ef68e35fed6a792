"""`rr splice`: a recipe applied to one phase of an entry — the cut chosen, its liveness computed,
the template's code assembled in its place, the result checked — written as OUT.ptx and
OUT.splice.json, or refused with the phase, registers and reason and no output file. Given the
entry's descriptor (`rr describe`'s, the one the workflow planned the cell from), the phases and
epilogues are that description's, not found again."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from rr.describe.spec import described_phases, module_sha1
from rr.io import atomic_paths
from rr.ptx.parser import read_text
from rr.records import DESCRIPTOR, SPLICE, Status, read_record, record_text
from rr.splice.assemble import SpliceError, assemble
from rr.splice.recipe import Recipe
from rr.templates import NotApplicable
from rr.templates.base import Cut, Entry, Spliced
from rr.templates.registry import template_of
from rr.validation import InvalidInput


def recipe_cut(entry: Entry, recipe: Recipe, phase: int) -> Cut:
    """The statements to cut: the phase, widened into its neighbouring epilogues as the recipe says."""
    phases, epilogues = entry.phases, entry.epilogues
    if not 1 <= phase <= len(phases):
        raise SpliceError(f"phase {phase} does not exist: the entry has phases 1–{len(phases)}")
    p = phases[phase - 1]
    first, last = p.first_stmt, p.last_stmt
    before, after = epilogues[phase - 1], epilogues[phase]
    if recipe.with_epilogue_before and before.stmts:
        n = before.stmts if recipe.with_epilogue_before == "all" else min(recipe.with_epilogue_before, before.stmts)
        first -= n
    if recipe.with_epilogue_after and after.stmts:
        n = after.stmts if recipe.with_epilogue_after == "all" else min(recipe.with_epilogue_after, after.stmts)
        last += n
    return Cut(entry, first, last, phase, bool(recipe.with_epilogue_before or recipe.with_epilogue_after))


def applied(entry: Entry, recipe: Recipe, phase: int) -> Spliced:
    """What the recipe's template gives for `phase` of `entry`, its `cut` always the one it
    replaces; a RecipeError for a template rr does not have, a SpliceError (status not_applicable
    for a phase the template is not for) saying why there is none."""
    template = template_of(recipe)
    cut = recipe_cut(entry, recipe, phase)
    try:
        spliced = template.apply(entry, cut, recipe.params)
    except ValueError as e:
        status = Status.NOT_APPLICABLE if isinstance(e, NotApplicable) else Status.ERROR
        raise SpliceError(f"phase {phase}: {e}", status) from None
    return spliced if spliced.cut else dataclasses.replace(spliced, cut=cut)


def default_phase(entry: Entry, recipe: Recipe) -> int:
    """The phase a splice without one cuts: the recipe's (phase 8 of the synthetic engine's recipes)
    where the entry has it; the only phase of an entry that has one; otherwise none — a user's
    kernel is not numbered like the synthetic engine, so guessing would splice the wrong phase."""
    count = len(entry.phases)
    if recipe.phase <= count:
        return recipe.phase
    if count == 1:
        return 1
    if count == 0:
        raise SpliceError(f"entry {entry.function.name} has no mma phase to splice", Status.NOT_APPLICABLE)
    raise SpliceError(f"the recipe's default phase {recipe.phase} does not exist: the entry has phases "
                      f"1–{count}; give --phase")


def described_entry(ptx: str | Path, entry: str, grouping: str = "run", descriptor: str | Path | None = None) -> Entry:
    """`entry` of the PTX file `ptx`: its text as it is (a CR LF file stays one), described with its
    phases numbered by `grouping` — or, given `descriptor`, with the phases and epilogues it holds
    (`planned_description`)."""
    text = read_text(Path(ptx))
    try:
        described = Entry(text, entry, str(ptx), grouping)
    except KeyError as e:
        raise SpliceError(e.args[0]) from None
    if descriptor is not None:
        # the Entry's phases and epilogues as already described (they are found only when first asked)
        described.phases, described.epilogues = planned_description(descriptor, text, entry, grouping, ptx)
    return described


def planned_description(descriptor: str | Path, text: str, entry: str, grouping: str, ptx) -> tuple[list, list]:
    """The phases and epilogues of `descriptor`, when it is the description of `entry` of this
    module (`text`, the file `ptx`) with its phases numbered by `grouping`; InvalidInput naming the
    descriptor when it describes another entry, another module (an older version of this one: a
    stale descriptor) or another numbering."""
    spec = read_record(descriptor, DESCRIPTOR)
    if spec["entry"] != entry:
        raise InvalidInput(f"{descriptor}: describes entry {spec['entry']!r}, not {entry!r}")
    digest = module_sha1(text)
    if spec.get("module_sha1") != digest:
        raise InvalidInput(f"{descriptor}: describes another module than {ptx} (its module_sha1 is "
                           f"{spec.get('module_sha1') or 'missing'}, the module's {digest}): a stale or foreign "
                           "descriptor; describe the module again (rr describe)")
    if spec.get("grouping") != grouping:
        raise InvalidInput(f"{descriptor}: numbers the phases by grouping {spec.get('grouping')!r}, not {grouping!r}")
    return described_phases(spec, descriptor)


def splice(ptx: str | Path, entry: str, recipe: Recipe, phase: int | None, output: str | Path,
           grouping: str = "run", descriptor: str | Path | None = None) -> dict:
    """Apply `recipe` to `phase` (default: the recipe's; numbered by `grouping`) and write output
    and output.splice.json; with `descriptor`, the phase's cut is the one it describes."""
    ptx = Path(ptx)
    described = described_entry(ptx, entry, grouping, descriptor)
    text = described.text
    phase = default_phase(described, recipe) if phase is None else phase
    spliced = applied(described, recipe, phase)
    cut, live = spliced.cut, spliced.cut.live
    result = assemble(text, entry, cut.first, cut.last, spliced.replacement, spliced.declarations, str(ptx),
                      spliced.functions, spliced.params, function=described.function,
                      statements=described.statements)
    record = {
        "status": Status.OK, "recipe": recipe.name, "template": recipe.template, "entry": entry, "phase": phase,
        "cut": {"first_stmt": cut.first, "last_stmt": cut.last, "statements": cut.last - cut.first + 1},
        "inserted_statements": result.inserted, "outside_statements_checked": result.outside_checked,
        "live_in": live.live_in, "live_out": live.live_out, "predicates_in": live.predicates_in,
        "predicates_out": live.predicates_out, "source_sha1": module_sha1(text),
        "spliced_sha1": module_sha1(result.text),
    }
    if grouping != "run":
        record["grouping"] = grouping
    if spliced.record:
        record[recipe.template] = spliced.record  # the template's part, under its name
    # the module and its record appear together (the record last: it says the module is complete)
    with atomic_paths(output, SPLICE.next_to(output)) as (module_tmp, record_tmp):
        module_tmp.write_bytes(result.text.encode("utf-8"))
        record_tmp.write_bytes(record_text(record).encode("utf-8"))
    return record
