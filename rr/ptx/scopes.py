"""Which names are registers, and which register each name is, scope by scope.

**Reg or Sym.** A name written with `%` is a register (or a special register) wherever it
appears. A name written without `%` is a register exactly when a `.reg` declaration of the
function body, or of a `{ }` block that encloses the instruction, declares it (CUTLASS's inline asm
writes `{ .reg .pred p; setp.ne.b32 p, %r1, 0; @p bra L; }`, cuda_fp16 writes
`{ .reg .f16 low; cvt.rn.f16.f32 low, %f1; mov.b32 %r2, {low, low}; }`); any other bare name
is a symbol (a parameter, variable, label or function). A guard is always a predicate register,
with or without `%`. A declaration counts for its whole scope, wherever in the scope it stands.

**Identity.** Registers are named in defs and uses as they are written, with one exception: a
register that a `{ }` block declares under a name that some other scope of the function also
declares (the function body, an enclosing block, or a sibling block, as cuda_fp16 re-declares
`low` in every block) is a different register, named `name@N` where N is the declaring block's
scope number (`Statement.scope`: 1, 2, … in textual order of the blocks' `{`). So NVVM's
function-level `%r12` stays `%r12`, a name declared once in one block stays as written, and two
blocks' `low` are `low@3` and `low@7`. Statement text is never changed.

`own_names` turns a function's declarations into, per scope, the names whose identity is not
just "the `%`-name as written"; the body walkers (linearisation, the typed operands of built
nodes) merge them down the block nesting.
"""

from __future__ import annotations

import functools
import re
from collections import Counter

from rr.ptx.model import Block, Directive, Instruction, declared, declared_names

_NUMBERED = re.compile(r"(.*?)(0|[1-9]\d*)")


def _in_ranges(name: str, ranges: dict[str, int]) -> bool:
    m = _NUMBERED.fullmatch(name)
    return m is not None and int(m.group(2)) < ranges.get(m.group(1), 0)


def own_names(decls: list[tuple[int, str]]) -> tuple[dict[int, dict[str, str]], re.Pattern]:
    """From the `.reg` declarations of a function, (scope, text) in textual order: per scope, the
    names written in that scope's instructions whose register identity differs from a plain
    `%`-name — bare names (mapped to their identity) and block names that another scope also
    declares (mapped to `name@scope`); scopes with no such names are left out. And the pattern
    that finds the function's registers in an operand text (`finder`)."""
    per_scope: dict[int, tuple] = {}
    ranges0: dict[str, int] = {}  # NVVM's function-level %r<N>: never expanded, only tested against
    seen: dict[str, tuple] = {}  # declaration text -> names (cuda_fp16 repeats one in every block)
    for scope, text in decls:
        names = seen.get(text)
        if names is None:
            names, ranges = declared(text)
            if ranges and scope == 0 and all(p[0] == "%" for p, _ in ranges):
                for prefix, n in ranges:
                    ranges0[prefix] = max(n, ranges0.get(prefix, 0))
            elif ranges:
                names = tuple(declared_names(text))
            if scope:
                seen[text] = names
        if names:
            before = per_scope.get(scope)
            per_scope[scope] = names if before is None else before + names
    if not any(scope or any(n[0] != "%" for n in names) for scope, names in per_scope.items()):
        return {}, _PERCENT  # only function-level %-names: every register is its written name
    count: dict[str, int] = {}
    for names, n in Counter(per_scope.values()).items():
        for name in names:
            count[name] = count.get(name, 0) + n
    elsewhere = {name: n > 1 or _in_ranges(name, ranges0) for name, n in count.items()}
    bare = frozenset(name for name in count if name[0] != "%")
    out: dict[int, dict[str, str]] = {}
    for scope, names in per_scope.items():
        own = Names()
        words = 0
        for name in names:  # a loop, not a comprehension: this runs for each of thousands of blocks
            if scope and elsewhere[name]:
                own[name] = f"{name}@{scope}"
            elif name[0] != "%":
                own[name] = name
            words += name[0] != "%"
        if own:
            own.complete = words == len(bare)
            out[scope] = own
    return out, finder(bare)


class Names(dict):
    """A scope's names (written name → identity). `complete`: it holds every bare name the
    function declares, so every bare word `finder` finds in its instructions is one of them
    (set by whoever makes one)."""

    __slots__ = ("complete",)


_PERCENT = re.compile(r"%[\w$]+(?![\w$.])")


@functools.lru_cache(maxsize=256)
def finder(bare: frozenset) -> re.Pattern:
    """The registers in an operand text of a function whose `.reg` declarations include these bare
    names: every %-name (not the dotted special registers), and each of the names where it stands
    as a word of its own (not part of a dotted or longer name, or a number)."""
    if not bare:
        return _PERCENT
    # each name before the look-behind that it stands alone, so the search can skip to the
    # characters a register can start with
    words = "|".join(rf"{re.escape(w)}(?<![\w$.%]{re.escape(w)})"
                     for w in sorted(bare, key=len, reverse=True))
    return re.compile(rf"%[\w$]+(?![\w$.])|(?:{words})(?![\w$.])")


def visible(parent: dict | None, own: dict | None) -> dict | None:
    """The names visible in a block: its parent's, overridden by its own."""
    if own is None:
        return parent
    if not parent:
        return own
    merged = Names(parent)
    merged.update(own)
    merged.complete = parent.complete or own.complete
    return merged


def walk(items: list):
    """(instruction, scope) for every instruction of a body in textual order, and the `.reg`
    declarations as (scope, text), the way `Statement.scope` numbers the blocks. A stack, not
    recursion."""
    instructions: list[tuple[Instruction, int]] = []
    decls: list[tuple[int, str]] = []
    blocks = 0
    stack = [(iter(items), 0)]
    while stack:
        it, scope = stack[-1]
        for item in it:
            t = type(item)
            if t is Instruction:
                instructions.append((item, scope))
            elif t is Block:
                blocks += 1
                stack.append((iter(item.items), blocks))
                break
            elif t is Directive and item.kind == "reg":
                decls.append((scope, item.text))
        else:
            stack.pop()
    return instructions, decls


def scope_maps(items: list) -> tuple[list, dict[int, dict | None], re.Pattern]:
    """The instructions with their scopes, per scope the visible names (identity maps), and the
    function's `finder`."""
    instructions, decls = walk(items)
    own, find = own_names(decls)
    maps: dict[int, dict | None] = {0: own.get(0)}
    if own and (len(own) > 1 or 0 not in own):
        # parents follow the nesting: walk the blocks once more, only for their numbers
        blocks = 0
        stack = [(iter(items), 0)]
        while stack:
            it, scope = stack[-1]
            for item in it:
                if type(item) is Block:
                    blocks += 1
                    maps[blocks] = visible(maps[scope], own.get(blocks))
                    stack.append((iter(item.items), blocks))
                    break
            else:
                stack.pop()
    return instructions, maps, find


def name_registers(items: list) -> None:
    """Give each instruction of a body the bare register names visible in its scope (written
    name → itself), so that its typed operands read them as registers."""
    instructions, maps, _ = scope_maps(items)
    written: dict[int, dict | None] = {}
    for ins, scope in instructions:
        names = maps.get(scope, maps[0])
        if names is None:
            ins.names = None
            continue
        w = written.get(id(names))
        if w is None:
            w = written[id(names)] = {k: k for k in names if k[0] != "%"} or None
        ins.names = w
        ins._parsed = None if ins.text is not None else ins._parsed
