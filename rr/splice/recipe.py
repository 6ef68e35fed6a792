"""Splice recipes: YAML files validated against the recipe schema (rr/data/recipe.schema.yaml),
with errors that name the file and the key at fault."""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import jsonschema
import yaml


class RecipeError(ValueError):
    pass


def _schema() -> dict:
    return yaml.safe_load(resources.files("rr.data").joinpath("recipe.schema.yaml").read_text())


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
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise RecipeError(f"{path}: no such recipe file") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise RecipeError(f"{where}: not valid YAML: {getattr(e, 'problem', e)}") from None
    validator = jsonschema.Draft202012Validator(_schema())
    errors = sorted(validator.iter_errors(raw), key=lambda e: list(e.absolute_path))
    if errors:
        lines = [f"{path}: {'.'.join(map(str, e.absolute_path)) or '(top level)'}: {e.message}" for e in errors]
        raise RecipeError("\n".join(lines))
    cut, template = raw["cut"], raw["template"]
    return Recipe(raw["name"], raw["description"].strip(), cut["phase"], cut.get("with_epilogue_before", 0),
                  cut.get("with_epilogue_after", 0), template["name"], template.get("params", {}),
                  tuple(raw.get("checks", ("roundtrip", "outside_unchanged", "ptxas"))), str(path))
