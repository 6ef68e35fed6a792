"""The `regen` template: the phase re-emitted from its description alone.

Every A and B fragment and every C seed that the description traces to global memory is loaded
again from its derived address — base parameter, lane term, `%tid.z` slab and byte offset —
instead of reusing the registers the engine loaded. Operands the epilogue before computed in
registers (packs, transposes, shared-memory reads, a C chained from an earlier phase's D, a zero)
are read from those registers (live-ins): they are the epilogue's work, not the phase's. The chains are emitted in canonical order (m-tile, n-tile, then k) and
each chain's last step writes the register the rest of the kernel reads. If the spliced kernel's
output is byte-identical to the engine's, the description is complete.
"""

from __future__ import annotations

import re

from rr.describe.provenance import Access, Dataflow
from rr.ptx.linearise import Statement
from rr.ptx.model import register_names
from rr.templates import TemplateError



class _Emitter:
    def __init__(self):
        self.param_at = None  # byte offset in the parameter space -> (parameter, offset in it)
        self.lines: list[str] = []
        self.counts = {"b32": 0, "b64": 0}
        self.bases: dict[tuple, str] = {}

    def reg(self, cls: str) -> str:
        self.counts[cls] += 1
        return f"%rrg{'d' if cls == 'b64' else ''}{self.counts[cls] - 1}"

    def base(self, acc: Access) -> str:
        """A register holding param pointer + lane term + slab term (computed once per kind)."""
        key = (acc.base, acc.lane, acc.slab_stride)
        if key in self.bases:
            return self.bases[key]
        m = re.fullmatch(r"param\+(\d+)", acc.base or "")
        if m is None:
            raise TemplateError(f"regen loads only through parameter pointers, not {acc.base!r}")
        ptr = self.reg("b64")
        name, inner = self.param_at(int(m.group(1)))
        self.lines += [f"ld.param.u64 \t{ptr}, [{name}+{inner}];", f"cvta.to.global.u64 \t{ptr}, {ptr};"]
        lane = self.reg("b32")
        self.lines.append(f"mov.u32 \t{lane}, %laneid;")
        for term in (acc.lane or "").split(" + ") if acc.lane else []:
            t = self.reg("b32")
            if "&" in term:  # ((laneid<<s)&mask)
                s, mask = re.fullmatch(r"\(\(laneid<<(\d+)\)&(\d+)\)", term).groups()
                self.lines += [f"shl.b32 \t{t}, {lane}, {s};", f"and.b32 \t{t}, {t}, {mask};"]
            else:
                c, name = term.split("·")
                if name not in ("laneid", "tid.x"):
                    raise TemplateError(f"lane term {term!r} is not one regen can rebuild")
                self.lines.append(f"mul.lo.u32 \t{t}, {lane}, {c};")
            wide = self.reg("b64")
            self.lines += [f"cvt.u64.u32 \t{wide}, {t};", f"add.s64 \t{ptr}, {ptr}, {wide};"]
        if acc.slab_stride:
            z, wide = self.reg("b32"), self.reg("b64")
            self.lines += [f"mov.u32 \t{z}, %tid.z;", f"mul.wide.u32 \t{wide}, {z}, {acc.slab_stride};",
                           f"add.s64 \t{ptr}, {ptr}, {wide};"]
        self.bases[key] = ptr
        return ptr


def _memory_operand(flow: Dataflow, regs: tuple, at: int):
    """(access, byte offset of regs[0], n) when the registers are consecutive elements of one load."""
    defs = {flow.definition(r, at) for r in regs}
    if len(defs) != 1 or None in defs:
        return None
    stmt = defs.pop()
    s = flow.statements[stmt - 1]
    if not s.opcode.startswith("ld.") or ".param" in s.opcode or ".shared" in s.opcode:
        return None
    acc = flow.access(stmt)
    if acc is None:
        return None
    loaded = list(s.defs)
    per = acc.width // max(len(loaded), 1)
    first = loaded.index(regs[0])
    return acc, acc.offset + first * per, per


def regen(flow: Dataflow, statements: list[Statement], first: int, last: int, live_out: list[str],
          params: list) -> tuple[list[str], list[str]]:
    """(replacement, declarations) for a cut that is exactly one phase; `params` are the entry's."""
    cut = statements[first - 1:last]
    if any(not s.opcode.startswith("mma.") for s in cut):
        raise TemplateError(f"regen re-emits a phase; the cut s{first}–s{last} has other statements")
    em = _Emitter()
    offsets = flow.params

    def param_at(offset: int) -> tuple[str, int]:
        for p in params:
            if offsets[p.name] <= offset < offsets[p.name] + p.size:
                return p.name, offset - offsets[p.name]
        raise TemplateError(f"no kernel parameter holds byte {offset} of the parameter space")

    em.param_at = param_at
    chain_of_d: dict[tuple, int] = {}
    chains: list[list[tuple]] = []  # per chain: (statement, d, a, b, c)
    for s in cut:
        d, a, b, c = (register_names(op) for op in flow.operands(s.stmt)[:4])
        idx = chain_of_d.get(c)
        if idx is None:
            idx = len(chains)
            chains.append([])
        chains[idx].append((s, d, a, b, c))
        chain_of_d[d] = idx
    a_ids = {}
    b_ids = {}
    for chain in chains:
        for step, (_, _, a, b, _) in enumerate(chain):
            a_ids.setdefault(a, (len(a_ids), step))
            b_ids.setdefault(b, (len(b_ids), step))
    loaded: dict[tuple, tuple] = {}  # original operand registers -> freshly loaded registers
    register_operands: set[str] = set()  # operands read from the registers the epilogue left

    def load(regs: tuple, at: int, what: str) -> tuple:
        if regs in loaded:
            return loaded[regs]
        distinct = tuple(dict.fromkeys(regs))
        found = _memory_operand(flow, distinct, at)
        if found is None:  # computed in an epilogue (a pack, a shared read, a constant): a live-in
            register_operands.add(what)
            loaded[regs] = regs
            return regs
        acc, offset, width = found
        base = em.base(acc)
        fresh = tuple(em.reg("b32") for _ in distinct)
        vec = f".v{len(fresh)}" if len(fresh) > 1 else ""
        dest = "{" + ", ".join(fresh) + "}" if len(fresh) > 1 else fresh[0]
        em.lines.append(f"ld.global{vec}.b{8 * width} \t{dest}, [{base}+{offset}];")
        mapping = dict(zip(distinct, fresh))
        loaded[regs] = tuple(mapping[r] for r in regs)
        return loaded[regs]

    # canonical order: chains sorted by (m-tile, n-tile) = the order their first A and B appeared
    order = sorted(range(len(chains)), key=lambda i: (a_ids[chains[i][0][2]][0], b_ids[chains[i][0][3]][0]))
    mma_lines = []
    for i in order:
        chain = chains[i]
        head, seed = chain[0][0], chain[0][4]
        seeded_by = flow.definition(seed[0], head.stmt)
        chained = seeded_by is not None and flow.statements[seeded_by - 1].opcode.startswith("mma.")
        acc = seed if chained else load(seed, head.stmt, "C")  # an earlier phase's D is a live-in
        for step, (s, d, a, b, _) in enumerate(chain):
            fa, fb = load(a, s.stmt, "A"), load(b, s.stmt, "B")
            out = d if step == len(chain) - 1 else tuple(em.reg("b32") for _ in d)
            mma_lines.append(f"{s.opcode}\n\t{{{', '.join(out)}}},\n\t{{{', '.join(fa)}}},\n"
                             f"\t{{{', '.join(fb)}}}, {{{', '.join(acc)}}};")
            acc = out
    missing = [r for r in live_out if not any(r in chain[-1][1] for chain in chains)]
    if missing:
        raise TemplateError(f"live-out {', '.join(missing)} is not a chain's final D: an intermediate D "
                            "is read after the phase")
    declarations = [f".reg .b32 \t%rrg<{em.counts['b32']}>;", f".reg .b64 \t%rrgd<{em.counts['b64']}>;"]
    return em.lines + mma_lines, declarations
