"""The `f32acc` template: the phase's chains accumulated in f32, rounded to f16 once at the end.

Each accumulator chain of an f16-accumulating mma — fp8 (`mma…f16.e4m3.e4m3.f16`) or f16
(`mma.m16n8k16…f16.f16.f16.f16`) inputs — becomes a chain of the same mma's `.f32` form on four
f32 registers (rr.numerics.forms: the forms share the C/D fragment layout). Its seed is the
original f16 C pair widened (fragment layout: f16 reg0 = row g, columns 2t and 2t+1, reg1 = row
g+8; f32 regs 0,1 = row g, regs 2,3 = row g+8), and every D the rest of the kernel reads is
narrowed back with `cvt.rn.f16x2.f32` into the register it had. An mma that accumulates in f32
(or s32) already is kept as it is, and the other statements of a grouped phase (operand loads)
keep their place. A phase none of whose mma accumulates in f16 — bf16 and tf32 have only the f32
form, integers s32, Triton's f16 GEMMs ask for f32 — is no phase for the recipe (NotApplicable,
saying what its mma accumulate in). A numerics variant: judged by PSNR, not identity.
"""

from __future__ import annotations

from rr.numerics.forms import mma_form
from rr.ptx.model import register_names
from rr.ptx.statements import operands as statement_operands
from rr.splice.recipe import Check
from rr.templates import NotApplicable, TemplateError
from rr.templates.base import Cut, Entry, Spliced


def f32acc(entry: Entry, at: Cut) -> Spliced:
    """The phase's cut `at` with its chains accumulated in f32."""
    cut = entry.statements[at.first - 1:at.last]
    mmas = [s for s in cut if s.code.base == "mma"]
    forms = {s.stmt: mma_form(s.code.shape, s.code.types, s.code.mods) for s in mmas}
    unknown = next((s for s in mmas if forms[s.stmt] is None), None)
    if unknown is not None:
        raise TemplateError(f"s{unknown.stmt}: {unknown.opcode} is no mma form f32acc knows (rr.numerics.forms)")
    if mmas and all(f.acc != "f16" for f in forms.values()):
        raise NotApplicable(f"its {len(mmas)} mma accumulate in "
                            f"{' and '.join(sorted({f.acc for f in forms.values()}))} already: there is no f16 "
                            "accumulation to widen")
    own = set(forms)
    flow = entry.flow
    bad = next((s for s in cut if s.stmt not in own and any(set(flow.reaching(u, s.stmt)) & own for u in s.uses)),
               None)
    if bad is not None:  # what an mma of the cut wrote, read inside it
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
        if s.stmt not in own:
            out.append(s.text)  # a grouped phase's operand loads, kept in their place
            continue
        code, ops = s.code, statement_operands(s)
        if forms[s.stmt].acc != "f16":
            out.append(s.text)  # accumulates in f32 (or s32) already: that is the phase itself
            kept += 1
            continue
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
