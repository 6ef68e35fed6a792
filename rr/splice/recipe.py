"""Splice recipes: YAML files validated against the recipe schema (rr/data/recipe.schema.yaml),
with errors that name the file and the key at fault."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rr.validation import InvalidInput, load_yaml, schema, validate


class RecipeError(InvalidInput):
    """A recipe that cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class Recipe:
    name: str
    description: str
    phase: int
    with_epilogue_before: int | str = 0
    with_epilogue_after: int | str = 0
    template: str = "regen"
    params: dict = field(default_factory=dict)
    checks: tuple = ("roundtrip", "outside_unchanged", "ptxas")
    source: str = ""


def load_recipe(path: str | Path) -> Recipe:
    """A recipe file read through the one validation layer (rr.validation): bounded size, aliases
    that may not expand past a bound, strict integers, messages that name the key and a cut value."""
    path = Path(path)
    if not path.exists():
        raise RecipeError(f"{path}: no such recipe file")
    try:
        raw = load_yaml(path)
    except InvalidInput as e:
        raise RecipeError(str(e)) from None
    validate(raw, schema("recipe.schema.yaml"), str(path), RecipeError)
    cut, template = raw["cut"], raw["template"]
    return Recipe(raw["name"], raw["description"].strip(), cut["phase"], cut.get("with_epilogue_before", 0),
                  cut.get("with_epilogue_after", 0), template["name"], template.get("params", {}),
                  tuple(raw.get("checks", ("roundtrip", "outside_unchanged", "ptxas"))), str(path))
