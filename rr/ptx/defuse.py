"""Which registers an instruction defines and which it reads, per opcode family.

The rule of PTX is "destination first": the first operand is written, the rest are read. The
exceptions are what this module knows: instructions whose first operand is an address (stores,
`sust`, `red`, `cp.async`, …) write no register; control and synchronisation instructions write
none; `wgmma.mma_async` reads its accumulator as well as writing it; `call` writes the registers of
its return list (its first, parenthesised operand). A guard predicate is a use. Special registers
(`%tid.x`, `%laneid`) are neither.

This runs on every statement of every kernel, so it works on the instruction text with a few
compiled regular expressions instead of walking the typed operands; `tests/test_linearise.py`
checks it against the operand model on nvcc's kernels.
"""

from __future__ import annotations

import re

# Opcode bases (text before the first '.') that never write a register operand.
_NO_DEF = frozenset({
    "bar", "barrier", "membar", "fence", "bra", "brx", "ret", "exit", "trap", "nanosleep",
    "pmevent", "setmaxnreg", "griddepcontrol", "st", "sust", "sured", "red", "prefetch",
    "prefetchu", "stmatrix", "discard", "applypriority", "cp", "multimem", "brkpt",
})

# guard, opcode, first operand, the rest (up to the closing ';').
_SHAPE = re.compile(
    r"\s*(?:@(!?%[\w$.]+)\s+)?([A-Za-z][\w.:]*)\s*"
    r"(\{[^{}]*\}(?:\s*\|\s*[^,;]*)?|\[[^\]]*\]|\([^()]*\)|[^,;]*)"
    r"(.*);",
    re.S,
)
# A virtual register. PTX identifiers have no '.', so the dotted special registers (%tid.x, …) are
# skipped by the lookahead and the dot-free ones are removed with _SPECIAL below.
_REGISTER = re.compile(r"%[\w$]+(?![\w$.])")
_SPECIAL = frozenset(
    """%laneid %warpid %nwarpid %smid %nsmid %gridid %lanemask_eq %lanemask_le %lanemask_lt
    %lanemask_ge %lanemask_gt %clock %clock_hi %clock64 %globaltimer %globaltimer_lo
    %globaltimer_hi %total_smem_size %dynamic_smem_size %aggr_smem_size %is_explicit_cluster
    %cluster_ctarank %cluster_nctarank %current_graph_exec %reserved_smem_offset_begin
    %reserved_smem_offset_end %reserved_smem_offset_cap %reserved_smem_offset_0
    %reserved_smem_offset_1""".split()
    + [f"%envreg{i}" for i in range(32)] + [f"%pm{i}" for i in range(8)]
    + [f"%pm{i}_64" for i in range(8)]
)
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def defs_uses_parts(guard: str | None, opcode: str, dest: str | None, rest: str | None
                    ) -> tuple[tuple, tuple]:
    """(defs, uses) from an instruction split into guard, opcode, first operand and the rest;
    register names in operand order without repeats, the guard's register first among the uses."""
    base = opcode.partition(".")[0]
    if not dest:
        defs, uses = (), []
    elif dest[0] == "[" or base in _NO_DEF:
        defs, uses = (), _REGISTER.findall(dest + rest)
    else:
        defs = tuple(_REGISTER.findall(dest))
        uses = _REGISTER.findall(dest + rest if base == "wgmma" else rest)
    if guard:
        uses.insert(0, guard.lstrip("!"))
    uses = dict.fromkeys(uses)
    if not _SPECIAL.isdisjoint(uses):
        return defs, tuple(u for u in uses if u not in _SPECIAL)
    return defs, tuple(uses)


def defs_uses_text(text: str) -> tuple[str | None, str, tuple, tuple]:
    """(guard, opcode, defs, uses) of one instruction's text. The guard keeps its '!'."""
    if "/" in text:
        text = _COMMENT.sub(" ", text)
    m = _SHAPE.match(text)
    if m is None:
        raise ValueError(f"not an instruction: {text!r}")
    guard, opcode, dest, rest = m.groups()
    return (guard, opcode) + defs_uses_parts(guard, opcode, dest, rest)
