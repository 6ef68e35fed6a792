"""The `f32acc` template: the phase's chains accumulated in f32, rounded to f16 once at the end.

Each accumulator chain becomes a chain of `mma…f32.e4m3.e4m3.f32` on four f32 registers. Its seed
is the original f16 C pair widened (fragment layout: f16 reg0 = row g, columns 2t and 2t+1, reg1 =
row g+8; f32 regs 0,1 = row g, regs 2,3 = row g+8), and every D the rest of the kernel reads is
narrowed back with `cvt.rn.f16x2.f32` into the register it had. An mma that accumulates in f32
already is kept as it is (f32 accumulation is then the phase itself), and the other statements of
a grouped phase (operand loads) keep their place. A numerics variant: judged by PSNR, not identity.
"""

from __future__ import annotations

from rr.ptx.model import register_names
from rr.ptx.opcodes import Opcode
from rr.ptx.statements import operands as statement_operands
from rr.splice.recipe import Check
from rr.templates import TemplateError
from rr.templates.base import Cut, Entry, Spliced

_FP8 = ("e4m3", "e5m2")


def _accumulates_in(code: Opcode, acc: str) -> bool:
    """An fp8 mma whose D and C are `acc` (its types D, A, B, C: `acc`, fp8, fp8, `acc`)."""
    t = code.types
    return len(t) == 4 and t[0] == t[3] == acc and t[1] in _FP8 and t[2] in _FP8


def f32acc(entry: Entry, at: Cut) -> Spliced:
    """The phase's cut `at` with its chains accumulated in f32."""
    cut = entry.statements[at.first - 1:at.last]
    others = [s for s in cut if s.code.base != "mma"]
    chains = {d for s in cut if s.code.base == "mma" for d in s.defs}
    if any(chains & set(s.uses) for s in others):
        bad = next(s for s in others if chains & set(s.uses))
        raise TemplateError(f"f32acc replaces the mma of a phase; s{bad.stmt} ({bad.opcode}) in the cut reads "
                            "an accumulator")
    out: list[str] = []
    wide: dict[tuple, list[str]] = {}  # f16 D pair of this cut -> the f32 quad holding it
    n_f32 = n_b16 = kept = 0

    def f32() -> str:
        nonlocal n_f32
        n_f32 += 1
        return f"%rrf{n_f32 - 1}"

    def b16() -> str:
        nonlocal n_b16
        n_b16 += 1
        return f"%rrh{n_b16 - 1}"

    needed = set(at.live.live_out)
    for s in cut:
        if s.code.base != "mma":
            out.append(s.text)  # a grouped phase's operand loads, kept in their place
            continue
        code, ops = s.code, statement_operands(s)
        if _accumulates_in(code, "f32"):
            out.append(s.text)  # accumulates in f32 already: f32 accumulation is the phase itself
            kept += 1
            continue
        if not _accumulates_in(code, "f16"):
            raise TemplateError(f"s{s.stmt}: {code.text} is neither an f16- nor an f32-accumulating fp8 mma")
        d, a, b, c = (register_names(op) for op in ops[:4])
        acc = wide.get(c)
        if acc is None:  # a chain's seed: widen the f16 pair
            acc = [f32() for _ in range(4)]
            for reg, (lo, hi) in zip(c, ((acc[0], acc[1]), (acc[2], acc[3]))):
                h_lo, h_hi = b16(), b16()
                out += [f"mov.b32 \t{{{h_lo}, {h_hi}}}, {reg};", f"cvt.f32.f16 \t{lo}, {h_lo};",
                        f"cvt.f32.f16 \t{hi}, {h_hi};"]
        new = [f32() for _ in range(4)]
        _, a_type, b_type, _ = code.types
        out.append(f"{code.with_types('f32', a_type, b_type, 'f32')}\n\t{{{', '.join(new)}}},\n"
                   f"\t{{{', '.join(a)}}},\n\t{{{', '.join(b)}}}, {{{', '.join(acc)}}};")
        wide[d] = new
        if needed & set(d):
            # cvt.rn.f16x2.f32 d, hi, lo: the first source goes to the upper half
            out += [f"cvt.rn.f16x2.f32 \t{d[0]}, {new[1]}, {new[0]};",
                    f"cvt.rn.f16x2.f32 \t{d[1]}, {new[3]}, {new[2]};"]
    declarations = ([f".reg .f32 \t%rrf<{n_f32}>;"] if n_f32 else []) + ([f".reg .b16 \t%rrh<{n_b16}>;"] if n_b16 else [])
    converted = sum(1 for s in cut if s.code.base == "mma") - kept
    return Spliced(out, declarations, record={"mma_converted": converted, "mma_already_f32": kept})


class F32acc:
    """The template (no params)."""

    checks = (Check.PSNR,)

    def apply(self, entry: Entry, cut: Cut, params: dict) -> Spliced:
        return f32acc(entry, cut)
