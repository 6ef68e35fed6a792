"""Operand sources as values: where an mma operand's registers come from, as the structured value
the descriptor holds (docs/formats.md, Descriptions), and the one function that spells a source for
people (`source_text`: `weight(param+40)`, `pack(D of phase 5)`, `shared(global(param+0))`, …) — `rr spec`'s table, the
report's phase tables and the templates' records all show what it derives. Nothing reads a source
back from its text: a stage that needs the base pointer or the phase reads the value.

The values, by `kind`:
`{"kind": "weight", "base": B}` — global loads at a `c·laneid` lane stride through base pointer B;
`{"kind": "table", "base": B}` — global loads with any other lane part; B is
`{"space": "param", "offset": N}` (a pointer loaded from byte N of the parameter space),
`{"space": S, "symbol": NAME}` (the address of variable NAME, accessed in state space S) or null;
`{"kind": "shared", "stored": [source, …]}` — shared-memory loads, with the sources of what the
shared stores they read had stored (`{"kind": "shared", "descriptor_of": [NAME, …]}`: a wgmma
matrix descriptor of those shared variables); `{"kind": "shared", "stored": [{"kind": "global",
"base": B}], "widened": T}` — an operand every element of which came through shared memory from
global memory through pointer B (`cp.async`, or a global load and `st.shared`, then `ldmatrix` or
`ld.shared`: rr.describe.staging, whose per-element offsets and shared layout the operand's
`staged` data holds), T the fp8 type widened to the mma's f16 on the way (absent when none);
`{"kind": "D", "phase": p}` — a chained C; `{"kind": "pack", "phase": p}` — requantised packs of
phase p's D; `{"kind": "transpose", "phase": p}` — its `movmatrix` transposes;
`{"kind": "zero"}`; `{"kind": "input"}` — a register no statement writes (or a parameter's value);
`{"kind": "computed", "epilogue": e}` — anything else, computed in epilogue e (null: by statements
inside a phase); `{"kind": "computed"}` — what a shared store writes that is no register;
`{"kind": "merge", "of": [source, …]}` — where definitions of different sources reach.
"""

from __future__ import annotations


def base_text(base: dict | None) -> str:
    """A base pointer for people: `param+40`, `shared:<symbol>`; `?` for none."""
    if base is None:
        return "?"
    return f"param+{base['offset']}" if "offset" in base else f"{base['space']}:{base['symbol']}"


def source_text(value: dict) -> str:
    """A source's structured value for people: `weight(param+40)`, `shared(pack(D of phase 8))`,
    `D(phase 7)`, `computed(epilogue 12)`, `merge(… | …)`."""
    kind = value["kind"]
    if kind in ("weight", "table", "global"):
        detail = base_text(value["base"])
    elif kind == "shared":
        detail = ("descriptor of " + ", ".join(value["descriptor_of"]) if "descriptor_of" in value
                  else " + ".join(map(source_text, value["stored"])))
        if "widened" in value:
            detail += f" from {value['widened']}"
    elif kind == "D":
        detail = f"phase {value['phase']}"
    elif kind in ("pack", "transpose"):
        detail = f"D of phase {value['phase']}"
    elif kind == "computed" and "epilogue" in value:
        detail = "?" if value["epilogue"] is None else f"epilogue {value['epilogue']}"
    elif kind == "merge":
        detail = " | ".join(map(source_text, value["of"]))
    else:
        detail = ""
    return f"{kind}({detail})" if detail else kind


def sources_text(values: list[dict]) -> str:
    """A role's sources over a phase (most common first) for people: joined by ` + `."""
    return " + ".join(map(source_text, values))


class Source:
    """Where an operand comes from: its structured value (`value`, the module docstring's) and what
    the tracing found with it — the loads (`accesses`), a merge's `alternatives` (Sources), the
    definitions reaching the operand it comes from (`defs`; 0 is the value on entry), and for an
    operand staged in shared memory element by element its `staged` (rr.describe.staging.Staged)."""

    __slots__ = ("kind", "fields", "accesses", "alternatives", "defs", "staged", "_text")

    def __init__(self, kind: str, accesses: list | None = None, alternatives: list | None = None,
                 defs: tuple = (), staged=None, **fields):
        self.kind = kind
        self.fields = fields  # the value's other keys; a `stored` is a tuple of Sources
        self.accesses = [] if accesses is None else accesses
        self.alternatives = [] if alternatives is None else alternatives
        self.defs = defs
        self.staged = staged
        self._text: str | None = None

    @property
    def phase(self) -> int | None:
        """The phase whose D a D, pack or transpose is."""
        return self.fields.get("phase")

    @property
    def value(self) -> dict:
        """The structured value (plain data: the descriptor's)."""
        out = {"kind": self.kind}
        for key, v in self.fields.items():
            out[key] = [s.value for s in v] if key == "stored" else list(v) if key == "descriptor_of" else v
        if self.kind == "merge":
            out["of"] = [a.value for a in self.alternatives]
        return out

    def __str__(self) -> str:
        if self._text is None:
            self._text = source_text(self.value)
        return self._text

    @property
    def key(self) -> str:
        """What tells sources apart: their text (which names everything in the value)."""
        return str(self)

    def copy(self, accesses: list, defs: tuple) -> Source:
        """This source with other accesses and reaching definitions (its alternatives shared)."""
        out = Source(self.kind, accesses, self.alternatives, defs, self.staged, **self.fields)
        out._text = self._text
        return out

    def reached_by(self, defs: tuple) -> Source:
        """This source as the definitions `defs` give it (its lists shared, as a shallow copy's)."""
        return self.copy(self.accesses, defs)


def combine(found: list[Source]) -> Source:
    """One source for several registers or reaching definitions: the same source (accesses
    joined), or a merge of the different ones."""
    if not found:
        return Source("input")
    if len(found) == 1:
        return found[0]
    first = found[0]
    if first.kind != "merge" and all(s.key == first.key for s in found):
        # one source (an A quad's four registers from one load, say): its accesses and definitions joined
        return first.copy([a for s in found for a in s.accesses], tuple(sorted({d for s in found for d in s.defs})))
    distinct: dict[str, Source] = {}
    for s in found:
        for a in (s.alternatives if s.kind == "merge" else (s,)):
            into = distinct.get(a.key)
            if into is None:
                into = distinct[a.key] = Source(a.kind, **a.fields)
                into._text = a._text
            into.accesses.extend(a.accesses)
            into.defs = tuple(sorted(set(into.defs) | set(a.defs)))
    if len(distinct) == 1:
        return next(iter(distinct.values()))
    alts = sorted(distinct.values(), key=str)
    defs = tuple(sorted({d for a in alts for d in a.defs}))
    return Source("merge", [a for s in alts for a in s.accesses], alts, defs)


def most_common(found: list[Source]) -> list[Source]:
    """The distinct sources of `found` (one per text), the most frequent first (ties: first seen)."""
    counts: dict[str, int] = {}
    first: dict[str, Source] = {}
    for s in found:
        counts[s.key] = counts.get(s.key, 0) + 1
        first.setdefault(s.key, s)
    return [first[k] for k in sorted(counts, key=lambda k: -counts[k])]
