"""Recipes load from YAML and are validated by their schema; a bad recipe is rejected with a
message naming the file and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from rr.splice.recipe import RecipeError, load_recipe
from rr.templates.registry import template_of

RECIPES = Path(__file__).resolve().parents[1] / "config" / "recipes"


@pytest.mark.parametrize("name,template", [("regen", "regen"), ("isolate", "isolate"), ("f32acc", "f32acc"),
                                           ("probe", "probe"), ("direct", "direct"), ("direct_outlined", "direct")])
def test_shipped_recipes_are_valid(name, template):
    r = load_recipe(RECIPES / f"{name}.yaml")
    assert r.name == name and r.template == template and r.phase == 8 and "roundtrip" in r.checks
    assert r.params.get("outline", "none") == ("phase" if name == "direct_outlined" else "none")


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
    # the registry is the list of templates, asked where a recipe's template is applied
    with pytest.raises(RecipeError, match=f"{f}: template.name: 'magic' is not one of the templates \\(regen, "):
        template_of(load_recipe(f))
    f.write_text("name: t\ndescription: [unclosed\n")
    with pytest.raises(RecipeError, match=r"t.yaml:\d+:\d+: not valid YAML"):
        load_recipe(f)


def test_a_recipe_name_resolves_from_any_directory_to_the_recipe_rr_ships(tmp_path, monkeypatch):
    from rr.splice.recipe import SHIPPED, recipe_path

    monkeypatch.chdir(tmp_path)  # no config/recipes here
    assert recipe_path("regen") == SHIPPED / "regen.yaml"
    assert load_recipe("isolate").template == "isolate"


def test_the_workflows_config_recipes_come_before_the_shipped_ones(tmp_path, monkeypatch):
    (tmp_path / "config/recipes").mkdir(parents=True)
    (tmp_path / "config/recipes/regen.yaml").write_text(
        "name: regen\ndescription: the workflow's own\ncut: {phase: 3}\ntemplate: {name: regen}\n")
    monkeypatch.chdir(tmp_path)
    recipe = load_recipe("regen")
    assert (recipe.description, recipe.phase) == ("the workflow's own", 3)


def test_an_unknown_recipe_name_is_refused_naming_the_shipped_ones(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RecipeError, match=r"nothere: no such recipe: .*\(direct, direct_outlined, direct_transposed, f32acc, isolate, probe, regen\)"):
        load_recipe("nothere")


def test_a_recipe_may_set_the_psnr_threshold_of_its_check(tmp_path):
    from rr.splice.recipe import DEFAULT_PSNR_DB

    f = tmp_path / "r.yaml"
    head = "name: r\ndescription: x\ncut: {phase: 1}\ntemplate: {name: f32acc}\n"
    f.write_text(head + "checks: [ptxas, {psnr: {min_db: 55.5}}]\n")
    assert (load_recipe(f).checks, load_recipe(f).psnr_min_db) == (("ptxas", "psnr"), 55.5)
    f.write_text(head + "checks: [psnr]\n")
    assert load_recipe(f).psnr_min_db == DEFAULT_PSNR_DB == load_recipe("f32acc").psnr_min_db
    f.write_text(head + "checks: [psnr, {psnr: {min_db: 50}}]\n")
    with pytest.raises(RecipeError, match="checks: psnr is given twice"):
        load_recipe(f)
    f.write_text(head + "checks: [{psnr: {min_db: high}}]\n")
    with pytest.raises(RecipeError, match="checks\\[0\\]"):
        load_recipe(f)
