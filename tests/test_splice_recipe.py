"""Recipes load from YAML and are validated by their schema; a bad recipe is rejected with a
message naming the file and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from rr.splice.recipe import RecipeError, load_recipe

RECIPES = Path(__file__).resolve().parents[1] / "config" / "recipes"


@pytest.mark.parametrize("name", ["regen", "isolate", "f32acc", "probe"])
def test_shipped_recipes_are_valid(name):
    r = load_recipe(RECIPES / f"{name}.yaml")
    assert r.name == r.template == name and r.phase == 8 and "roundtrip" in r.checks


@pytest.mark.parametrize("edit,message", [
    ("cut:\n  phase: eight\n", "cut.phase: 'eight' is not of type 'integer'"),
    ("cut:\n  phase: 0\n", "cut.phase: 0 is less than the minimum of 1"),
    ("cut:\n  phase: 3\n  with_epilogue_after: some\n", "cut.with_epilogue_after: 'some' is not valid"),
    ("cut:\n  phase: 3\n  cutt: 1\n", "cut: Additional properties are not allowed ('cutt' was unexpected)"),
])
def test_bad_recipes_name_the_file_and_key(tmp_path, edit, message):
    f = tmp_path / "bad.yaml"
    f.write_text("name: bad\ndescription: x\ntemplate:\n  name: regen\n" + edit)
    with pytest.raises(RecipeError) as e:
        load_recipe(f)
    assert str(e.value).startswith(f"{f}: ") and message in str(e.value)


def test_unknown_template_and_broken_yaml(tmp_path):
    f = tmp_path / "t.yaml"
    f.write_text("name: t\ndescription: x\ncut: {phase: 2}\ntemplate: {name: magic}\n")
    with pytest.raises(RecipeError, match="template.name: 'magic' is not one of"):
        load_recipe(f)
    f.write_text("name: t\ndescription: [unclosed\n")
    with pytest.raises(RecipeError, match=r"t.yaml:\d+:\d+: not valid YAML"):
        load_recipe(f)
