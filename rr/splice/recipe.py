"""Splice recipes: YAML files validated against the recipe schema (rr/data/recipe.schema.yaml),
with errors that name the file and the key; and where a recipe named on the command line or in
the workflow's config is found.

A recipe given by name resolves the same way for `rr splice`, `rr collect` and the workflow
(`recipe_path`): `config/recipes/NAME.yaml` of the workflow in the current directory when that
file exists (a workflow's own recipes, or its edits of the shipped ones), else the recipe of that
name shipped with rr (rr/data/recipes/), so `rr splice --recipe regen` works from any directory.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from rr.validation import InvalidInput, load_yaml, schema, validate

SHIPPED = Path(__file__).resolve().parents[1] / "data" / "recipes"
WORKFLOW_RECIPES = Path("config") / "recipes"  # relative to the workflow's directory (the current one)


class Check(StrEnum):
    """The checks a recipe can ask of its result (rr.results.checks evaluates them): the one list of
    their names, from which the recipe schema's enum of them is made when a recipe is read."""

    ROUNDTRIP = "roundtrip"
    OUTSIDE_UNCHANGED = "outside_unchanged"
    PTXAS = "ptxas"
    IDENTICAL_OUTPUT = "identical_output"
    PSNR = "psnr"


DEFAULT_CHECKS = (Check.ROUNDTRIP, Check.OUTSIDE_UNCHANGED, Check.PTXAS)
DEFAULT_PSNR_DB = 40.0  # the psnr check's threshold when the recipe gives none


class RecipeError(InvalidInput):
    """A recipe that cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class Recipe:
    name: str
    description: str
    phase: int
    template: str  # a name of rr.templates.registry's
    with_epilogue_before: int | str = 0
    with_epilogue_after: int | str = 0
    params: dict = field(default_factory=dict)
    checks: tuple = DEFAULT_CHECKS  # Check names, in the recipe's order
    psnr_min_db: float = DEFAULT_PSNR_DB  # what the psnr check requires of the worst buffer
    source: str = ""


def shipped_recipes() -> list[str]:
    return sorted(p.stem for p in SHIPPED.glob("*.yaml"))


def recipe_path(recipe: str | Path) -> Path:
    """The file of a recipe given as a path (anything with a suffix or a directory part) or as a
    name: config/recipes/NAME.yaml when it exists, else the shipped recipe NAME."""
    given = Path(recipe)
    if given.suffix or len(given.parts) > 1:
        return given
    local = WORKFLOW_RECIPES / f"{recipe}.yaml"
    if local.is_file():
        return local
    shipped = SHIPPED / f"{recipe}.yaml"
    if shipped.is_file():
        return shipped
    raise RecipeError(f"{recipe}: no such recipe: not a file, not in {WORKFLOW_RECIPES}/ here and not one of "
                      f"the shipped recipes ({', '.join(shipped_recipes())})")


NAME = re.compile(r"^[a-z][a-z0-9_]*$")  # the recipe schema's `name` and the workflow config's `recipes`


def recipe_name(recipe: str | Path) -> str:
    """The name a recipe's records go by (`<name>.run.json`, … in a cell): a recipe given by name is
    that name, one given as a file its stem (`config/recipes/regen.yaml`: regen), as the workflow
    names them. RecipeError unless it is a plain name (NAME): a name is never a path in the cell."""
    given = Path(recipe)
    name = given.stem if given.suffix or len(given.parts) > 1 else str(recipe)
    if not NAME.fullmatch(name):
        raise RecipeError(f"{recipe}: not a recipe name ({NAME.pattern}) or a recipe file named by one")
    return name


@functools.cache
def recipe_schema() -> dict:
    """rr/data/recipe.schema.yaml with the check names (`$defs.check`) made from Check. The template
    names are not in it: rr.templates.registry is their list, and `rr splice`, which applies a
    recipe's template, refuses a name it does not hold (this module, which rr collect and the run
    stage read recipes with, stays apart from the templates' code)."""
    shipped = schema("recipe.schema.yaml")
    check = {**shipped["$defs"]["check"], "enum": [c.value for c in Check]}
    return {**shipped, "$defs": {**shipped["$defs"], "check": check}}


def _checks(raw: list, path: Path) -> tuple[tuple, float]:
    """The check names in order and the PSNR threshold; a check is a name, or `{psnr: {min_db: X}}`."""
    names, threshold = [], DEFAULT_PSNR_DB
    for item in raw:
        name = item if isinstance(item, str) else next(iter(item))
        if name in names:
            raise RecipeError(f"{path}: checks: {name} is given twice")
        names.append(name)
        if isinstance(item, dict):
            threshold = float(item[name].get("min_db", DEFAULT_PSNR_DB))
    return tuple(names), threshold


def load_recipe(recipe: str | Path) -> Recipe:
    """A recipe (a file, or a name resolved by `recipe_path`) read through the one validation layer
    (rr.validation): bounded size, aliases that may not expand past a bound, strict integers,
    messages that name the key and a cut value."""
    path = recipe_path(recipe)
    if not path.exists():
        raise RecipeError(f"{path}: no such recipe file")
    try:
        raw = load_yaml(path)
    except InvalidInput as e:
        raise RecipeError(str(e)) from None
    validate(raw, recipe_schema(), str(path), RecipeError)
    cut, template = raw["cut"], raw["template"]
    checks, psnr_min_db = _checks(raw.get("checks", list(DEFAULT_CHECKS)), path)
    return Recipe(raw["name"], raw["description"].strip(), cut["phase"], template["name"],
                  cut.get("with_epilogue_before", 0), cut.get("with_epilogue_after", 0), template.get("params", {}),
                  checks, psnr_min_db, str(path))
