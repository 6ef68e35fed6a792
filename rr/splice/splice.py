"""`rr splice`: a recipe applied to one phase of an entry — the cut chosen, its liveness computed,
the template's code assembled in its place, the result checked — written as OUT.ptx and
OUT.splice.json, or refused with the phase, registers and reason and no output file."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import NamedTuple

from rr.describe import find_epilogues, find_phases
from rr.describe.provenance import Dataflow
from rr.io import atomic_paths
from rr.ptx import linearise, parse
from rr.ptx.parser import read_text
from rr.records import SPLICE, Status, record_text
from rr.splice.assemble import SpliceError, assemble
from rr.templates import NotApplicable
from rr.splice.liveness import cut_liveness
from rr.splice.recipe import Recipe


def cut_range(recipe: Recipe, phase: int, phases, epilogues) -> tuple[int, int]:
    """The statements to cut: the phase, widened into its neighbouring epilogues as the recipe says."""
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
    return first, last


def _probe(recipe: Recipe, flow, first: int, last: int) -> tuple[list[str], list[str], str, dict]:
    """The cut unchanged, with the probe stores placed in it; (replacement, declarations, the new
    parameter's name, record)."""
    from rr.templates.isolate import register_types
    from rr.templates.probe import probe_code, probe_words, word_names

    chosen = recipe.params.get("registers", ["A", "B", "C", "D"])
    function = flow.function
    words, mmas = probe_words(flow.statements, first, last, list(chosen), flow.operands)
    param = f"{function.name}_param_probe"
    replacement, declarations = probe_code(flow.statements, first, last, words, param, register_types(function))
    record = {"param": param, "words_per_thread": len(words), "registers": word_names(words), "mma": mmas,
              "after_stmt": last, "layout": "[block][thread][word] uint32, block and thread linear"}
    return replacement, declarations, param, record


def _template(name: str, flow, phases, epilogues, first: int, last: int, live, func_name: str):
    """(replacement statements, new register declarations, new functions, the template's record)."""
    function, statements = flow.function, flow.statements
    if name == "isolate":
        from rr.templates.isolate import isolate

        iso = isolate(function, statements, first, last, live.live_in, live.live_out, func_name)
        return [iso.call_site], [], [iso.function], {}
    if name == "regen":
        from rr.templates.regen import regen

        replacement, declarations, record = regen(flow, phases, epilogues, first, last, live.live_out,
                                                  function.params)
        return replacement, declarations, [], {"regen": record}
    from rr.templates.f32acc import f32acc

    replacement, declarations, record = f32acc(statements, first, last, live.live_out)
    return replacement, declarations, [], {"f32acc": record}


def _outlined(text: str, entry: str, built, outline: str, source: str, name: str, original, original_statements):
    """The direct splice with its phase (`outline: phase`) or its construction and all that
    follows it in the cut (`construction`) moved into a `.func`: the isolate template on the
    spliced entry; (the assembled splice, its record). The statements outside the direct cut are
    checked against the original by the first assembly, those outside the outlined range against
    the direct splice by the second. `original`, `original_statements`: the entry as parsed from
    `text` and linearised (the description's), so that neither assembly parses again."""
    from rr.templates.isolate import isolate

    spliced = assemble(text, entry, built.first, built.last, built.replacement, built.declarations, source,
                       function=original, statements=original_statements)
    function = parse(spliced.text, source).function(entry)
    statements = linearise(function)
    last = built.first + spliced.inserted - 1  # the phase's last mma ends the replacement
    first = built.first + (built.phase_lead if outline == "phase" else built.lead)
    live = cut_liveness(function, statements, first, last)
    iso = isolate(function, statements, first, last, live.live_in, live.live_out, name)
    result = assemble(spliced.text, entry, first, last, [iso.call_site], [], source, [iso.function],
                      function=function, statements=statements)
    # as the record counts them against the original: the direct cut's statements and what stands there now
    result.cut, result.outside_checked = spliced.cut, spliced.outside_checked
    result.inserted = spliced.inserted - (last - first + 1) + result.inserted
    return result, {"what": outline, "function": name, "statements": last - first + 1, "live_in": len(live.live_in),
                    "live_out": len(live.live_out), "predicates_in": len(live.predicates_in),
                    "predicates_out": len(live.predicates_out)}


class Entry(NamedTuple):
    """An entry of a PTX file read and described once: what every template works from."""

    text: str
    function: object
    flow: Dataflow
    phases: list
    epilogues: list


def described_entry(ptx: str | Path, entry: str, grouping: str = "run") -> Entry:
    """`entry` of the PTX file `ptx`: its text as it is (a CR LF file stays one), its dataflow, its
    phases numbered by `grouping` and their epilogues."""
    text = read_text(Path(ptx))
    module = parse(text, str(ptx))
    try:
        function = module.function(entry)
    except KeyError as e:
        raise SpliceError(e.args[0]) from None
    flow = Dataflow(function, module=module)
    phases = find_phases(flow.statements, grouping, flow.cfg)
    return Entry(text, function, flow, phases, find_epilogues(flow.statements, phases))


def splice(ptx: str | Path, entry: str, recipe: Recipe, phase: int | None, output: str | Path,
           grouping: str = "run") -> dict:
    """Apply `recipe` to `phase` (default: the recipe's; numbered by `grouping`) and write output
    and output.splice.json."""
    ptx = Path(ptx)
    text, function, flow, phases, epilogues = described_entry(ptx, entry, grouping)
    statements = flow.statements
    phase = recipe.phase if phase is None else phase
    first, last = cut_range(recipe, phase, phases, epilogues)
    built = None
    if recipe.template == "direct":  # it finds its own cut: the operand's staging and the phase
        from rr.templates.direct import direct
        from rr.templates.isolate import register_types

        try:
            built = direct(flow, phases, epilogues, phase, recipe.params,
                           bool(recipe.with_epilogue_before or recipe.with_epilogue_after), register_types(function))
        except ValueError as e:
            raise SpliceError(f"phase {phase}: {e}", Status.NOT_APPLICABLE if isinstance(e, NotApplicable)
                              else Status.ERROR) from None
        first, last = built.first, built.last
    live = cut_liveness(function, statements, first, last)
    probe, extra_params, extra, result = None, [], {}, None
    try:
        if built is not None and recipe.params.get("outline", "none") != "none":
            result, outlined = _outlined(text, entry, built, recipe.params["outline"], str(ptx),
                                         f"rr_{entry}_phase{phase}_direct", function, statements)
            extra = {"direct": {**built.record, "outline": outlined}}
        elif built is not None:
            replacement, declarations, functions, extra = built.replacement, built.declarations, [], {"direct": built.record}
        elif recipe.template == "probe":
            replacement, declarations, param, probe = _probe(recipe, flow, first, last)
            functions, extra_params = [], [f".param .u64 {param}"]
        else:
            replacement, declarations, functions, extra = _template(
                recipe.template, flow, phases, epilogues, first, last, live, f"rr_{entry}_phase{phase}_isolated")
    except ValueError as e:
        raise SpliceError(f"phase {phase}: {e}") from None
    if result is None:
        result = assemble(text, entry, first, last, replacement, declarations, str(ptx), functions, extra_params,
                          function=function, statements=statements)
    record = {
        "status": Status.OK, "recipe": recipe.name, "template": recipe.template, "entry": entry, "phase": phase,
        "cut": {"first_stmt": first, "last_stmt": last, "statements": last - first + 1},
        "inserted_statements": result.inserted, "outside_statements_checked": result.outside_checked,
        "live_in": live.live_in, "live_out": live.live_out, "predicates_in": live.predicates_in,
        "predicates_out": live.predicates_out, "source_sha1": hashlib.sha1(text.encode()).hexdigest(),
        "spliced_sha1": hashlib.sha1(result.text.encode()).hexdigest(),
    }
    if grouping != "run":
        record["grouping"] = grouping
    record.update(extra)
    if probe:
        record["probe"] = probe
    # the module and its record appear together (the record last: it says the module is complete)
    with atomic_paths(output, SPLICE.next_to(output)) as (module_tmp, record_tmp):
        module_tmp.write_bytes(result.text.encode("utf-8"))
        record_tmp.write_bytes(record_text(record).encode("utf-8"))
    return record
