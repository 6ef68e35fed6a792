"""The template interface: one registry names the templates (the recipe schema lists none of them,
and its check names come from rr.splice.recipe.Check), `rr splice` refuses a template it does not
have naming the ones it has, every template gives the one `Spliced`, and a template that is not
rr's own works through a recipe like the shipped ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from rr.cli.main import main
from rr.ptx import linearise, parse_file
from rr.splice.assemble import SpliceError
from rr.splice.recipe import Check, Recipe, RecipeError, load_recipe, recipe_schema, shipped_recipes
from rr.splice.splice import applied, described_entry, splice
from rr.synth.inputs import write_enc2
from rr.synth.layout import ENTRY as ENC2
from rr.templates.base import Cut, Entry, Spliced
from rr.templates.registry import TEMPLATES

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "rr" / "data" / "sample_swin.ptx"
ENTRY = "cuda_dldn_engine_swin_sample_kernel"
SHIPPED_TEMPLATES = ["regen", "isolate", "f32acc", "probe", "direct"]


def test_the_registry_lists_the_shipped_templates_and_every_shipped_recipe_uses_one_of_them():
    assert list(TEMPLATES) == SHIPPED_TEMPLATES
    used = {load_recipe(r).template for r in shipped_recipes()}
    assert used == set(TEMPLATES)


def test_every_shipped_recipe_asks_the_checks_its_template_implies():
    implied = {name: set(t.checks) for name, t in TEMPLATES.items()}
    assert implied["f32acc"] == {Check.PSNR}  # a numerics variant: judged by PSNR, not identity
    assert all(implied[t] == {Check.IDENTICAL_OUTPUT} for t in ("regen", "isolate", "probe", "direct"))
    for name in shipped_recipes():
        recipe = load_recipe(name)
        assert implied[recipe.template] <= set(recipe.checks), name


def test_the_recipe_schema_names_no_template_and_takes_its_check_names_from_check():
    raw = yaml.safe_load((ROOT / "rr" / "data" / "recipe.schema.yaml").read_text())
    name = raw["properties"]["template"]["properties"]["name"]
    assert "enum" not in name and name["type"] == "string"  # the registry is the one list
    assert "enum" not in raw["$defs"]["check"]
    assert recipe_schema()["$defs"]["check"]["enum"] == [c.value for c in Check] == [
        "roundtrip", "outside_unchanged", "ptxas", "identical_output", "psnr"]
    # the check that takes a parameter is one of them
    parameterised = raw["properties"]["checks"]["items"]["oneOf"][1]["properties"]
    assert set(parameterised) <= set(Check)


def test_a_check_name_that_check_does_not_list_is_refused_when_the_recipe_is_read(tmp_path):
    f = tmp_path / "r.yaml"
    f.write_text("name: r\ndescription: x\ncut: {phase: 1}\ntemplate: {name: regen}\nchecks: [identical]\n")
    with pytest.raises(RecipeError, match=r"r.yaml: checks\[0\]: 'identical' is not valid"):
        load_recipe(f)


def test_every_shipped_recipe_gives_one_spliced_with_the_cut_it_replaces(enc2):
    entry = described_entry(enc2, ENC2)
    for name in shipped_recipes():
        recipe = load_recipe(name)
        spliced = applied(entry, recipe, 8)
        assert type(spliced) is Spliced and type(spliced.cut) is Cut, name
        assert spliced.replacement and all(isinstance(s, str) for s in spliced.replacement), name
        assert spliced.cut.phase == 8 and spliced.cut.first <= entry.phases[7].first_stmt, name
    # and what it adds is said, not done to the module behind the splicer's back
    probe = applied(entry, load_recipe("probe"), 8)
    assert probe.params == [f".param .u64 {ENC2}_param_probe"] and not probe.functions
    isolated = applied(entry, load_recipe("isolate"), 8)
    assert len(isolated.functions) == 1 and isolated.functions[0].startswith(f".func  (.param .align 8 .b8 rr_{ENC2}")


@pytest.fixture(scope="module")
def enc2(tmp_path_factory) -> Path:
    return write_enc2(tmp_path_factory.mktemp("enc2") / "e", (10, 6)) / "enc2.ptx"


def _recipe(path: Path, template: str, params: dict | None = None) -> Path:
    path.write_text(f"name: {path.stem}\ndescription: x\ncut: {{phase: 1}}\n"
                    f"template: {{name: {template}, params: {json.dumps(params or {})}}}\n")
    return path


def test_an_unknown_template_is_a_clear_error_of_rr_splice_naming_the_templates_it_has(tmp_path, capsys):
    recipe, out = _recipe(tmp_path / "magic.yaml", "magic"), tmp_path / "s.ptx"
    assert main(["splice", str(SAMPLE), "--entry", ENTRY, "--recipe", str(recipe), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == (f"rr: error: {recipe}: template.name: 'magic' is not one of the templates "
                   "(regen, isolate, f32acc, probe, direct)\n")
    assert not out.exists() and not Path(f"{out}.splice.json").exists()
    # in a pipeline the refusal is the record
    assert main(["splice", str(SAMPLE), "--entry", ENTRY, "--recipe", str(recipe), "-o", str(out), "--record"]) == 0
    record = json.loads(Path(f"{out}.splice.json").read_text())
    assert record["status"] == "error" and "'magic' is not one of the templates" in record["message"]


def test_a_recipe_made_in_code_with_an_unknown_template_is_refused_not_run_as_another(tmp_path):
    """Before the registry, any name the splicer did not know ran f32acc."""
    recipe = Recipe(name="r", description="x", phase=1, template="f32")
    with pytest.raises(RecipeError, match=r"'f32' is not one of the templates \(regen, isolate, f32acc"):
        splice(SAMPLE, ENTRY, recipe, 1, tmp_path / "s.ptx")
    assert not (tmp_path / "s.ptx").exists()


class Unchanged:
    """A template of the test's own: the cut as it was, and a record part saying how long it was."""

    checks = (Check.IDENTICAL_OUTPUT,)

    def apply(self, entry: Entry, cut: Cut, params: dict) -> Spliced:
        kept = entry.statements[cut.first - 1:cut.last]
        return Spliced([s.text for s in kept], record={"statements": len(kept), "note": params["note"]})


def test_a_template_registered_by_the_test_is_used_by_rr_splice_through_a_recipe(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(TEMPLATES, "unchanged", Unchanged())
    recipe, out = _recipe(tmp_path / "same.yaml", "unchanged", {"note": "mine"}), tmp_path / "s.ptx"
    assert main(["splice", str(SAMPLE), "--entry", ENTRY, "--recipe", str(recipe), "--phase", "2",
                 "-o", str(out)]) == 0, capsys.readouterr().err
    # the cut given back unchanged: every statement as it was (the comments between the cut's go)
    assert [s.text for s in linearise(parse_file(out).function(ENTRY))] == \
        [s.text for s in linearise(parse_file(SAMPLE).function(ENTRY))]
    record = json.loads(Path(f"{out}.splice.json").read_text())
    assert record["template"] == "unchanged" and record["phase"] == 2
    assert record["unchanged"] == {"statements": 16, "note": "mine"}  # its record part, under its name
    assert record["cut"]["statements"] == 16 and record["outside_statements_checked"] == 115 - 16


def test_a_template_works_on_an_entry_another_splice_has_changed(tmp_path):
    """What composition stands on: phase 1 isolated in a module whose phase 2 is isolated already."""
    first = tmp_path / "one.ptx"
    splice(SAMPLE, ENTRY, load_recipe("isolate"), 2, first)
    again = described_entry(first, ENTRY)
    assert [p.mma for p in again.phases] == [32]  # phase 2's mma run in their function now
    second = tmp_path / "two.ptx"
    record = splice(first, ENTRY, load_recipe("isolate"), 1, second)
    kernel = parse_file(second)
    calls = [s.text for s in linearise(kernel.function(ENTRY)) if s.opcode.startswith("call")]
    assert [c.split(",")[1].strip() for c in calls] == [f"rr_{ENTRY}_phase1_isolated", f"rr_{ENTRY}_phase2_isolated"]
    assert record["cut"]["statements"] == 32
    assert len(linearise(kernel.function(f"rr_{ENTRY}_phase2_isolated"))) > 16


def test_a_template_that_refuses_says_which_phase_and_why_and_the_status(enc2):
    entry = described_entry(enc2, ENC2)
    with pytest.raises(SpliceError) as e:
        applied(entry, load_recipe("direct"), 1)
    assert e.value.status == "not_applicable"
    assert str(e.value).startswith("phase 1: A is shared(computed(epilogue 0)) and B is weight(param+40): neither "
                                   "operand is a pack or transpose")
