"""What the templates read of an entry's body besides its statements: its body-level items (the
instructions and `{ … }` blocks a cut's replacement is made of), the registers' declared types, who
reads each register, and statement numbers as the records list them."""

from __future__ import annotations

from rr.ptx.model import Block, Directive, Function, Instruction


def register_types(function: Function) -> dict[str, str]:
    """register name -> its declared type ('.b32', '.pred', …), from the body's `.reg` lines."""
    out = {}
    for item in function.body or ():
        if isinstance(item, Directive) and item.kind == "reg":
            words = item.text.split()
            rtype = next(w for w in words[1:] if w.startswith(".") and w not in (".v2", ".v4"))
            for name in item.register_names():
                out[name] = rtype
    return out


def body_items(function) -> list[tuple[int, int, object]]:
    """(first statement, last statement, item) of every body-level instruction and { … } block
    that holds statements, in order (a block's statements flattened as `linearise` counts them)."""
    out, n = [], 0
    for item in function.body or ():
        if type(item) is Instruction:
            n += 1
            out.append((n, n, item))
        elif type(item) is Block:
            count, stack = 0, [iter(item.items)]
            while stack:
                for x in stack[-1]:
                    if type(x) is Instruction:
                        count += 1
                    elif type(x) is Block:
                        stack.append(iter(x.items))
                        break
                else:
                    stack.pop()
            if count:
                out.append((n + 1, n + count, item))
                n += count
    return out


def register_readers(statements) -> dict[str, list[int]]:
    """register -> the statements that read it."""
    out: dict[str, list[int]] = {}
    for s in statements:
        for u in dict.fromkeys(s.uses):
            out.setdefault(u, []).append(s.stmt)
    return out


def ranges(stmts) -> list[str]:
    """Statement numbers as runs: ['s2370–s2489', 's2500']."""
    runs: list[list[int]] = []
    for s in sorted(stmts):
        if runs and s == runs[-1][-1] + 1:
            runs[-1].append(s)
        else:
            runs.append([s])
    return [f"s{r[0]}" if len(r) == 1 else f"s{r[0]}–s{r[-1]}" for r in runs]
