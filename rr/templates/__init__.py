"""Native phase emitters ("wave templates") for splicing: each turns a cut into replacement code
that reads exactly the cut's live-ins and defines exactly its live-outs."""


class TemplateError(ValueError):
    """A cut a template cannot produce code for; says which statement and why."""
