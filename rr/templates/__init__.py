"""Native phase emitters ("wave templates") for splicing: each turns a cut into replacement code
that reads exactly the cut's live-ins and defines exactly its live-outs. The interface they share
is rr.templates.base, the list of them rr.templates.registry."""


class TemplateError(ValueError):
    """A cut a template cannot produce code for; says which statement and why."""


class NotApplicable(TemplateError):
    """A phase the template is not for — it has none of what the template rewrites (a direct
    splice's pack or transpose operand): the sweep's row says the recipe does not apply there,
    which is no failure of the splice."""
