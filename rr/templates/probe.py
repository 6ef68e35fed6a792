"""The `probe` template: the computation left alone, chosen registers copied out.

The cut (by default the phase itself) runs unchanged; every thread stores the chosen 32-bit
registers — the phase's `mma` operands by role (`A`, `B`, `C`, `D`), or registers named in the
recipe — into an extra probe buffer, one row of words per thread: word `i` of thread `t` (linear
in the block) of block `b` (linear in the grid) is at `4·(W·(b·threads + t) + i)`.

A word is a register *as it stands at one point*: an mma's A, B and C as the mma reads them, its D
as it writes it. So each value is stored where it exists — the operands the cut reads from before
it at the cut's start, a value the cut writes right after the statement that writes it — and an
mma that accumulates in place (`{%r176, %r177}` as both D and C, as NVVM writes a loop's
accumulator) gets its true input C and its output D as two words. A named register is stored as it
stands at the end of the cut. The buffer arrives as an extra kernel parameter after the entry's
own; `rr relaunch` adds it to a launch when given the module's splice record (`--splice-record`),
which carries a `probe` record. The record lists the words and, per `mma`, which words are its D,
A, B and C, so the hardware's `mma` can be replayed on the same operands.
"""

from __future__ import annotations

from rr.describe.phases import is_mma, mma_operands
from rr.ptx.statements import Statement
from rr.splice.recipe import Check
from rr.templates import TemplateError
from rr.templates.base import Cut, Entry, Spliced
from rr.templates.body import register_types

ROLES = ("D", "A", "B", "C")
_PROBEABLE = (".b32", ".u32", ".s32", ".f32")


def probe_words(statements: list[Statement], first: int, last: int, chosen: list[str],
                operands) -> tuple[list[tuple], list[dict]]:
    """(the words to store: (register, the statement whose write it is, or None for the value
    the cut starts with), per mma of the cut its D, A, B, C as word indices)."""
    words: list[tuple] = []
    index: dict[tuple, int] = {}
    current: dict[str, int | None] = {}  # register -> the cut statement that last wrote it

    def word(r: str) -> int:
        key = (r, current.get(r))
        if key not in index:
            index[key] = len(words)
            words.append(key)
        return index[key]

    roles = [c for c in chosen if c in ROLES]
    named = [c for c in chosen if c not in ROLES]
    for r in named:
        if not r.startswith("%"):
            raise TemplateError(f"probe register {r!r}: expected a role ({', '.join(ROLES)}) or a register name")
    mmas = []
    for s in statements[first - 1:last]:
        groups = None
        if is_mma(s.code):
            ops = mma_operands(s.code, operands(s.stmt))
            if ops is None:
                raise TemplateError(f"s{s.stmt}: an mma without D, A, B and C operands")
            groups = dict(zip(ROLES, ops))
            entry = {"stmt": s.stmt}
            for role in ("A", "B", "C"):  # as the mma reads them
                if role in roles:
                    entry[role] = [word(r) for r in groups[role] or ()]
        for d in s.defs:
            current[d] = s.stmt
        if groups is not None:
            if "D" in roles:
                entry["D"] = [word(r) for r in groups["D"]]
            mmas.append({"stmt": entry.pop("stmt"), **{role: entry[role] for role in roles}})
    if roles and not mmas:
        raise TemplateError(f"the cut s{first}–s{last} has no mma whose {', '.join(roles)} to probe")
    for r in named:
        word(r)  # as it stands at the end of the cut
    return words, mmas


def probe_code(statements: list[Statement], first: int, last: int, words: list[tuple], param: str,
               types: dict[str, str]) -> tuple[list[str], list[str]]:
    """(the cut with the probe stores placed in it, the registers the stores need declared)."""
    for r, _ in words:
        if types.get(r, ".b32") not in _PROBEABLE:
            raise TemplateError(f"probe register {r} is {types[r]}: only 32-bit registers are probed")
    n = len(words)
    address = [
        f"ld.param.u64 \t%rrpd0, [{param}];", "cvta.to.global.u64 \t%rrpd0, %rrpd0;",
        "mov.u32 \t%rrp0, %tid.x;", "mov.u32 \t%rrp1, %tid.y;", "mov.u32 \t%rrp2, %tid.z;",
        "mov.u32 \t%rrp3, %ntid.x;", "mov.u32 \t%rrp4, %ntid.y;", "mov.u32 \t%rrp5, %ntid.z;",
        "mad.lo.u32 \t%rrp6, %rrp2, %rrp4, %rrp1;", "mad.lo.u32 \t%rrp6, %rrp6, %rrp3, %rrp0;",  # thread
        "mul.lo.u32 \t%rrp7, %rrp3, %rrp4;", "mul.lo.u32 \t%rrp7, %rrp7, %rrp5;",  # threads per block
        "mov.u32 \t%rrp8, %ctaid.z;", "mov.u32 \t%rrp9, %nctaid.y;", "mov.u32 \t%rrp10, %ctaid.y;",
        "mad.lo.u32 \t%rrp8, %rrp8, %rrp9, %rrp10;", "mov.u32 \t%rrp9, %nctaid.x;", "mov.u32 \t%rrp10, %ctaid.x;",
        "mad.lo.u32 \t%rrp8, %rrp8, %rrp9, %rrp10;",  # block
        "mad.lo.u32 \t%rrp11, %rrp8, %rrp7, %rrp6;",
        f"mul.wide.u32 \t%rrpd1, %rrp11, {4 * n};", "add.s64 \t%rrpd0, %rrpd0, %rrpd1;",
    ]

    def stores(after: int | None) -> list[str]:
        # .b32, which takes a register of any 32-bit type (an f32 accumulator as well as a u32)
        return [f"st.global.b32 \t[%rrpd0+{4 * i}], {r};" for i, (r, at) in enumerate(words) if at == after]

    out = address + stores(None)
    for s in statements[first - 1:last]:
        out.append(s.text)
        out += stores(s.stmt)
    return out, [".reg .b32 \t%rrp<12>;", ".reg .b64 \t%rrpd<2>;"]


def word_names(words: list[tuple]) -> list[str]:
    """The words as the record lists them: `%r12`, or `%r12@s340` for the value s340 writes."""
    return [r if at is None else f"{r}@s{at}" for r, at in words]


class Probe:
    """The template: `params.registers` (default A, B, C, D) stored into the buffer of the entry's
    new last parameter `<entry>_param_probe`."""

    checks = (Check.IDENTICAL_OUTPUT,)

    def apply(self, entry: Entry, cut: Cut, params: dict) -> Spliced:
        chosen = params.get("registers", ["A", "B", "C", "D"])
        flow, function = entry.flow, entry.function
        words, mmas = probe_words(flow.statements, cut.first, cut.last, list(chosen), flow.operands)
        param = f"{function.name}_param_probe"
        replacement, declarations = probe_code(flow.statements, cut.first, cut.last, words, param,
                                               register_types(function))
        record = {"param": param, "words_per_thread": len(words), "registers": word_names(words), "mma": mmas,
                  "after_stmt": cut.last, "layout": "[block][thread][word] uint32, block and thread linear"}
        return Spliced(replacement, declarations, params=[f".param .u64 {param}"], record=record)
