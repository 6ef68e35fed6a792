"""The template interface. A template is given the described entry (`Entry`), the cut (`Cut`) and
the recipe's params, and gives back one `Spliced`: the statements that replace the cut and all it
adds to the module — registers, entry parameters, `.func`s — with its part of the splice record,
and, where it finds the statements it replaces itself (direct), that cut. rr.templates.registry
names the templates; rr.splice.splice looks a recipe's up there and assembles what it gives, with
no code of its own per template.

An `Entry` is a module's text as it stands, described on demand: the original, or a module other
splices have changed already (the direct template's outlining isolates a range of its own splice;
a composition of several phases' splices does the same), so a template never assumes it sees the
original. Because a `Spliced` says everything it adds, the splicer — and a composer after it — can
check the whole without knowing which template made it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Protocol

from rr.describe import find_epilogues, find_phases
from rr.describe.dataflow import Dataflow
from rr.ptx import linearise, parse
from rr.splice.liveness import CutLiveness, cut_liveness


class Entry:
    """Entry `name` of the PTX module `text`, parsed at once and described when first asked: its
    statements, dataflow, phases (numbered by `grouping`) and epilogues. A KeyError naming the
    entry when the module has none of that name."""

    def __init__(self, text: str, name: str, source: str = "<module>", grouping: str = "run"):
        self.text, self.source, self.grouping = text, source, grouping
        self.module = parse(text, source)
        self.function = self.module.function(name)

    @cached_property
    def statements(self) -> list:
        return linearise(self.function)

    @cached_property
    def flow(self) -> Dataflow:
        return Dataflow(self.function, self.statements, module=self.module)

    @cached_property
    def phases(self) -> list:
        return find_phases(self.flow.statements, self.grouping, self.flow.cfg)

    @cached_property
    def epilogues(self) -> list:
        return find_epilogues(self.flow.statements, self.phases)


@dataclass(frozen=True)
class Cut:
    """Statements `first`..`last` (1-based, inclusive) of `entry`, cut for phase `phase`;
    `widened`: the recipe took statements of the neighbouring epilogues too."""

    entry: Entry = field(repr=False, compare=False)
    first: int
    last: int
    phase: int
    widened: bool = False

    @cached_property
    def live(self) -> CutLiveness:
        """The registers the cut reads from before it and writes for after it (found when asked:
        a template that chooses its own cut never needs the recipe's)."""
        return cut_liveness(self.entry.function, self.entry.statements, self.first, self.last)


@dataclass
class Spliced:
    """What a template puts in a cut's place and adds to the module."""

    replacement: list  # complete instructions, or `{ … }` blocks of them, in order
    declarations: list = field(default_factory=list)  # new `.reg` lines of the entry
    params: list = field(default_factory=list)  # new entry parameters ('.param .u64 NAME'), after its own
    functions: list = field(default_factory=list)  # whole `.func` texts, placed before the entry
    record: dict = field(default_factory=dict)  # the template's part of splice.json (under its name there)
    cut: Cut | None = None  # the cut it chose itself, where that is not the one it was given


class Template(Protocol):
    """A template: `apply` turns a cut into a `Spliced` (a TemplateError, or NotApplicable, saying
    why where it cannot); `checks` are the recipe checks (rr.splice.recipe.Check) that judge what
    it claims — the identity of the output for a rewrite, its PSNR for a numerics variant."""

    checks: tuple

    def apply(self, entry: Entry, cut: Cut, params: dict) -> Spliced: ...
