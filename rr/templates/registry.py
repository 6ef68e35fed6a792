"""The templates rr has, by the name a recipe's `template.name` gives: the one list of template
names. rr.splice.splice applies whichever a recipe names through `template_of`; a template of
one's own is one more entry (anything with `checks` and `apply`, rr.templates.base.Template)."""

from __future__ import annotations

from rr.splice.recipe import Recipe, RecipeError
from rr.templates.base import Template
from rr.templates.direct import Direct
from rr.templates.f32acc import F32acc
from rr.templates.isolate import Isolate
from rr.templates.probe import Probe
from rr.templates.regen import Regen

TEMPLATES: dict[str, Template] = {
    "regen": Regen(),
    "isolate": Isolate(),
    "f32acc": F32acc(),
    "probe": Probe(),
    "direct": Direct(),
}


def template_of(recipe: Recipe) -> Template:
    """The template `recipe` names; a RecipeError naming the recipe's file and the templates there
    are when it names none of them."""
    try:
        return TEMPLATES[recipe.template]
    except KeyError:
        raise RecipeError(f"{recipe.source}: template.name: {recipe.template!r} is not one of the templates "
                          f"({', '.join(TEMPLATES)})") from None
