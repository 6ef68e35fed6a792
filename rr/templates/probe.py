"""The `probe` template: the computation left alone, chosen registers copied out.

After the cut (by default the phase itself, unchanged) every thread stores the chosen 32-bit
registers — the phase's `mma` operands by role (`A`, `B`, `C`, `D`), or registers named in the
recipe — into an extra probe buffer, one row of words per thread: word `i` of thread `t` (linear
in the block) of block `b` (linear in the grid) is at `4·(W·(b·threads + t) + i)`. The buffer
arrives as an extra kernel parameter after the entry's own; `rr relaunch` adds it to a launch when
the module's `splice.json` carries a `probe` record. The record lists the words and, per `mma`,
which words are its D, A, B and C, so the hardware's `mma` can be replayed on the same operands.
"""

from __future__ import annotations

from rr.ptx.linearise import Statement
from rr.ptx.model import register_names
from rr.templates import TemplateError

ROLES = ("D", "A", "B", "C")


def probe_words(statements: list[Statement], first: int, last: int, chosen: list[str],
                operands) -> tuple[list[str], list[dict]]:
    """(the registers to store, in order; per mma of the cut its D, A, B, C as word indices)."""
    words: list[str] = []
    index: dict[str, int] = {}

    def word(r: str) -> int:
        if r not in index:
            index[r] = len(words)
            words.append(r)
        return index[r]

    roles = [c for c in chosen if c in ROLES]
    named = [c for c in chosen if c not in ROLES]
    mmas = []
    for s in statements[first - 1:last]:
        if not s.opcode.startswith("mma."):
            continue
        groups = dict(zip(ROLES, (register_names(op) for op in operands(s.stmt)[:4])))
        mmas.append({"stmt": s.stmt, **{role: [word(r) for r in groups[role]] for role in roles}})
    if roles and not mmas:
        raise TemplateError(f"the cut s{first}–s{last} has no mma whose {', '.join(roles)} to probe")
    for r in named:
        if not r.startswith("%"):
            raise TemplateError(f"probe register {r!r}: expected a role ({', '.join(ROLES)}) or a register name")
        word(r)
    return words, mmas


def probe_block(words: list[str], param: str, types: dict[str, str]) -> str:
    """A `{ … }` block that stores `words` at this thread's row of the probe buffer."""
    for r in words:
        if types.get(r, ".b32") not in (".b32", ".u32", ".s32", ".f32"):
            raise TemplateError(f"probe register {r} is {types[r]}: only 32-bit registers are probed")
    n = len(words)
    lines = [
        ".reg .b32 %rrp<12>;", ".reg .b64 %rrpd<3>;",
        f"ld.param.u64 %rrpd0, [{param}];", "cvta.to.global.u64 %rrpd0, %rrpd0;",
        "mov.u32 %rrp0, %tid.x;", "mov.u32 %rrp1, %tid.y;", "mov.u32 %rrp2, %tid.z;",
        "mov.u32 %rrp3, %ntid.x;", "mov.u32 %rrp4, %ntid.y;", "mov.u32 %rrp5, %ntid.z;",
        "mad.lo.u32 %rrp6, %rrp2, %rrp4, %rrp1;", "mad.lo.u32 %rrp6, %rrp6, %rrp3, %rrp0;",  # thread
        "mul.lo.u32 %rrp7, %rrp3, %rrp4;", "mul.lo.u32 %rrp7, %rrp7, %rrp5;",  # threads per block
        "mov.u32 %rrp8, %ctaid.z;", "mov.u32 %rrp9, %nctaid.y;", "mov.u32 %rrp10, %ctaid.y;",
        "mad.lo.u32 %rrp8, %rrp8, %rrp9, %rrp10;", "mov.u32 %rrp9, %nctaid.x;", "mov.u32 %rrp10, %ctaid.x;",
        "mad.lo.u32 %rrp8, %rrp8, %rrp9, %rrp10;",  # block
        "mad.lo.u32 %rrp11, %rrp8, %rrp7, %rrp6;",
        f"mul.wide.u32 %rrpd1, %rrp11, {4 * n};", "add.s64 %rrpd0, %rrpd0, %rrpd1;",
    ]
    lines += [f"st.global.u32 [%rrpd0+{4 * i}], {r};" for i, r in enumerate(words)]
    return "{\n\t" + "\n\t".join(lines) + "\n\t}"
