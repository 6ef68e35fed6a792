"""Composition: one module with several phases spliced, each by its own recipe
(`rr splice … --compose SPEC`).

Every phase's splice is made against the original entry, as `rr splice` makes it alone (the same
template, cut and liveness), so each is checked as it would be on its own; then they are put in
place together, the last cut first, so that the statement numbers of the cuts before it still
hold in the text being changed. Each placement is the single splice's assembly, with its own
check that every statement outside its cut stays as it was — so, step by step, every statement
outside all the cuts is the original's.

What the whole must satisfy, and what is refused (naming both phases):

* cuts that overlap (a recipe widened into an epilogue another cut holds, a direct splice whose
  cut reaches into the next phase);
* splices that interfere: every register (and predicate) a cut leaves for later statements — its
  live-out, computed on the original — must still be defined by its replacement, or the phase
  that reads it (another cut, or a statement outside them) would read what the splice no longer
  writes;
* two splices adding the same entry parameter or `.func` (two probes: a launch passes one probe
  buffer).

Registers a template declares are its own, but two templates may choose the same names (two
f32acc splices both declare `%rrf<N>`): a later splice's new registers are renamed `NAME_pP`
(P its phase) where an earlier one declared that name, so the composition of one splice is
byte-identical to the splice alone.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from rr.io import atomic_paths
from rr.ptx import linearise, parse
from rr.records import SPLICE, Status, record_text
from rr.splice.assemble import SpliceError, assemble
from rr.splice.recipe import Recipe, load_recipe
from rr.splice.splice import applied, described_entry
from rr.templates.base import Spliced
from rr.validation import InvalidInput, load_yaml

_REG_DECL = re.compile(r"\.reg\s+(?:\.v[248]\s+)?\.\w+\s+(.+?);")
_PARAM_NAME = re.compile(r"([A-Za-z_$%][\w$]*)\s*(?:\[[^\]]*\])?\s*$")
_FUNC_NAME = re.compile(r"\.func\s*(?:\([^)]*\))?\s*([A-Za-z_$%][\w$]*)\s*\(")


@dataclass
class Part:
    """One phase's splice in a composition."""

    phase: int
    recipe: Recipe
    spliced: Spliced

    @property
    def first(self) -> int:
        return self.spliced.cut.first

    @property
    def last(self) -> int:
        return self.spliced.cut.last


def read_spec(text_or_path: str) -> dict[int, str]:
    """`--compose SPEC`: a YAML or JSON map {phase: recipe} given inline (`{8: isolate, 24: regen}`)
    or as a file; InvalidInput naming what is wrong with it."""
    import yaml

    where = text_or_path
    if Path(text_or_path).is_file():
        raw = load_yaml(text_or_path)
    else:
        where = "--compose"
        try:
            raw = yaml.safe_load(text_or_path)
        except yaml.YAMLError as e:
            raise InvalidInput(f"--compose {text_or_path!r}: neither a file nor a YAML/JSON map ({e})") from None
    if raw is None:
        raw = {}  # an empty file: no phase spliced (a plan that chose none)
    if not isinstance(raw, dict):
        raise InvalidInput(f"{where}: expected a map of phase numbers to recipes ({{8: isolate, 24: regen}}; {{}}: "
                           "none, the module as it is)")
    spec = {}
    for phase, recipe in raw.items():
        number = int(phase) if isinstance(phase, str) and phase.isdigit() else phase
        if not isinstance(number, int) or isinstance(number, bool) or number < 1:
            raise InvalidInput(f"{where}: {phase!r}: not a phase number (1, 2, …)")
        if not isinstance(recipe, str) or not recipe:
            raise InvalidInput(f"{where}: phase {number}: {recipe!r} is not a recipe (a name or a file)")
        if number in spec:
            raise InvalidInput(f"{where}: phase {number} is given twice")
        spec[number] = recipe
    return dict(sorted(spec.items()))


def compose(ptx: str | Path, entry: str, spec: dict[int, str | Recipe], output: str | Path,
            grouping: str = "run", descriptor: str | Path | None = None) -> dict:
    """Splice every phase of `spec` ({phase: recipe}) into one module, checked as a whole (the
    module's doc), and write `output` and its record (OUTPUT.splice.json); SpliceError naming the
    phases at fault where the composition is refused. `descriptor`: the cuts are the phases it
    describes (rr.splice.splice.described_entry)."""
    described = described_entry(ptx, entry, grouping, descriptor)
    recipes = {p: r if isinstance(r, Recipe) else load_recipe(r) for p, r in sorted(spec.items())}
    parts = [Part(phase, recipe, applied(described, recipe, phase)) for phase, recipe in recipes.items()]
    _check_overlaps(parts)
    _check_additions(parts)
    _fresh_registers(parts)
    text, steps = described.text, {}
    function, statements = described.function, described.statements
    for part in sorted(parts, key=lambda p: p.first, reverse=True):  # the last cut first: earlier numbers hold
        s = part.spliced
        try:
            result = assemble(text, entry, part.first, part.last, s.replacement, s.declarations, str(ptx),
                              s.functions, s.params, function=function, statements=statements)
        except SpliceError as e:
            raise SpliceError(f"phase {part.phase} ({part.recipe.name}): {e}", e.status) from None
        steps[part.phase] = result
        text, function, statements = result.text, None, None
    _check_live_outs(parts, steps, text, entry, str(ptx), described.statements)
    record = _record(described, parts, steps, text, entry, grouping)
    with atomic_paths(output, SPLICE.next_to(output)) as (module_tmp, record_tmp):
        module_tmp.write_bytes(text.encode("utf-8"))
        record_tmp.write_bytes(record_text(record).encode("utf-8"))
    return record


def _check_overlaps(parts: list[Part]) -> None:
    ordered = sorted(parts, key=lambda p: p.first)
    for a, b in zip(ordered, ordered[1:]):
        if b.first <= a.last:
            raise SpliceError(f"phase {a.phase} ({a.recipe.name}) cuts s{a.first}–s{a.last} and phase {b.phase} "
                              f"({b.recipe.name}) s{b.first}–s{b.last}: the cuts overlap; one module cannot hold "
                              "both splices")


def _names(lines, pattern: re.Pattern) -> list[str]:
    return [m.group(1) for line in lines if (m := pattern.search(line))]


def _check_additions(parts: list[Part]) -> None:
    """Two splices may not add the same entry parameter or `.func`."""
    for what, of, pattern in (("entry parameter", lambda s: s.params, _PARAM_NAME),
                              (".func", lambda s: s.functions, _FUNC_NAME)):
        owner: dict[str, Part] = {}
        for part in parts:
            for name in _names(of(part.spliced), pattern):
                if name in owner:
                    first = owner[name]
                    raise SpliceError(f"phase {first.phase} ({first.recipe.name}) and phase {part.phase} "
                                      f"({part.recipe.name}) both add the {what} {name}: one composition holds one")
                owner[name] = part


def _declared(declarations: list[str]) -> list[str]:
    """The register names (or `%name` of a `%name<N>` range) a template's `.reg` lines declare."""
    names = []
    for line in declarations:
        m = _REG_DECL.search(line)
        if m:
            names += [n.strip().split("<")[0] for n in m.group(1).split(",")]
    return names


def _fresh_registers(parts: list[Part]) -> None:
    """Rename a later splice's new registers where an earlier splice declared the same names."""
    taken: set[str] = set()
    for part in sorted(parts, key=lambda p: p.first):
        s = part.spliced
        clash = [n for n in _declared(s.declarations) if n in taken]
        for name in clash:
            fresh = f"{name}_p{part.phase}"
            if _is_range(name, s.declarations):
                # NAME<N> declares NAME0…NAME{N-1}: each becomes FRESH_0… (the `_` keeps the phase's
                # digits apart from the register's)
                pattern, new = re.compile(re.escape(name) + r"(?=\d)"), fresh + "_"
            else:
                pattern, new = re.compile(re.escape(name) + r"(?![\w$])"), fresh
            s.replacement = [pattern.sub(new, r) for r in s.replacement]
            s.declarations = [_rename_declaration(d, name, fresh) for d in s.declarations]
        taken.update(_declared(s.declarations))


def _is_range(name: str, declarations: list[str]) -> bool:
    return any(re.search(re.escape(name) + r"<\d+>", d) for d in declarations)


def _rename_declaration(line: str, name: str, fresh: str) -> str:
    line = re.sub(re.escape(name) + r"<", fresh + "_<", line)
    return re.sub(re.escape(name) + r"(?![\w$<])", fresh, line)


def _check_live_outs(parts: list[Part], steps: dict, text: str, entry: str, source: str, original: list) -> None:
    """Every register and predicate a cut leaves for later statements is still written by its
    replacement; else the reader — another cut, or a statement outside them — is named."""
    composed = linearise(parse(text, f"{source} (composed)").function(entry))
    # where each replacement stands in the composed entry: the cuts before it, each its inserted length
    at, ordered = {}, sorted(parts, key=lambda p: p.first)
    shift = 0
    for part in ordered:
        start = part.first + shift
        at[part.phase] = (start, start + steps[part.phase].inserted - 1)
        shift += steps[part.phase].inserted - (part.last - part.first + 1)
    for part in ordered:
        live = part.spliced.cut.live
        first, last = at[part.phase]
        written = {d for s in composed[first - 1:last] for d in s.defs}
        missing = [r for r in live.live_out + live.predicates_out if r not in written]
        if missing:
            reader = _reader(missing[0], part, ordered, original)
            raise SpliceError(f"phase {part.phase} ({part.recipe.name}): its splice no longer writes "
                              f"{', '.join(missing)}, which {reader} reads: the splices interfere")


def _reader(register: str, part: Part, parts: list[Part], statements: list) -> str:
    """What reads `register` after `part`'s cut in the original: another cut's phase, or a statement."""
    for s in statements[part.last:]:
        if register in s.uses:
            other = next((p for p in parts if p is not part and p.first <= s.stmt <= p.last), None)
            return (f"phase {other.phase}'s cut ({other.recipe.name}, s{s.stmt})" if other
                    else f"s{s.stmt} (line {s.line})")
    return "a later statement"


def _record(described, parts: list[Part], steps: dict, text: str, entry: str, grouping: str) -> dict:
    phases = []
    for part in parts:
        cut, live, result = part.spliced.cut, part.spliced.cut.live, steps[part.phase]
        item = {"phase": part.phase, "recipe": part.recipe.name, "template": part.recipe.template,
                "cut": {"first_stmt": cut.first, "last_stmt": cut.last, "statements": cut.last - cut.first + 1},
                "inserted_statements": result.inserted, "live_in": live.live_in, "live_out": live.live_out,
                "predicates_in": live.predicates_in, "predicates_out": live.predicates_out,
                "checks": [str(c) for c in part.recipe.checks]}
        if part.spliced.record:
            item[part.recipe.template] = part.spliced.record
        phases.append(item)
    cut_statements = sum(p.last - p.first + 1 for p in parts)
    record = {
        "status": Status.OK, "template": "composition", "entry": entry,
        "recipes": {str(p.phase): p.recipe.name for p in parts},
        "cut": {"statements": cut_statements},
        "inserted_statements": sum(steps[p.phase].inserted for p in parts),
        "live_in": sorted({r for p in parts for r in p.spliced.cut.live.live_in}),
        "live_out": sorted({r for p in parts for r in p.spliced.cut.live.live_out}),
        "outside_statements_checked": len(described.statements) - cut_statements,
        "source_sha1": hashlib.sha1(described.text.encode()).hexdigest(),
        "spliced_sha1": hashlib.sha1(text.encode()).hexdigest(),
        "phases": phases,
    }
    if grouping != "run":
        record["grouping"] = grouping
    probes = [p for p in parts if p.recipe.template == "probe"]
    if probes:  # what rr relaunch --splice-record passes the module: its probe buffer
        record["probe"] = probes[0].spliced.record
    return record
