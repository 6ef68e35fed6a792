"""regen's operands that came through shared memory: each re-read at the cut from its shared
address, as the description gives it (rr.describe.staging), not taken from the registers the
kernel read it into.

Per shared-memory read feeding the operand (a `Slot`), the address is rebuilt from its layout —
the symbol, the offset, the ring of stages by the loop's trip index at the cut (from an induction
register, as regen's other addresses), and the swizzle as the XOR of one basis vector per set bit
of the lane and of the warp — and the read (`ldmatrix`, `ld.shared`) is issued again into fresh
registers; the operand's registers are then put together from the bytes the description says
they hold (`prmt`), an fp8 pair widened to f16x2 again where the kernel widened it.

It cannot when the reads feeding the operand differ from lane to lane, warp to warp or trip to
trip, when an address is no such map, when the stages do not repeat within the trips described,
or when shared memory may have changed between the kernel's read and the cut (another stage
written into the bytes): `reread` raises TemplateError saying which, and regen reads that operand
as the kernel left it, with the reason in its record.
"""

from __future__ import annotations

from rr.describe.staging import Staged, Staging
from rr.ptx.model import Vec
from rr.templates import TemplateError


def reread(em, staging: Staging, staged: Staged, first: int, what: str) -> tuple[tuple, list]:
    """Code (through regen's emitter `em`) that reads `staged`'s operand again at the cut's first
    statement `first`: (its registers, the kernel's read statements it replaces)."""
    if staged.pattern is None:
        raise TemplateError(f"{what}: the shared-memory reads feeding it differ from lane to lane, warp to warp "
                            "or trip to trip")
    changed = staging.intact(staged, first)
    if changed is not None:
        raise TemplateError(f"{what}: {changed}")
    fresh = [_read(em, staging, staged, slot, what) for slot in staged.slots]
    out = []
    for j in range(0, len(staged.pattern), 4):
        out.append(_register(em, [(fresh[s][r], b, fmt, half) for s, r, b, fmt, half in staged.pattern[j:j + 4]], what))
    reads = sorted({d for slot in staged.slots for d, _ in slot.reads.values()})
    return tuple(out), reads


def _read(em, staging: Staging, staged: Staged, slot, what: str) -> list[str]:
    """The slot's read issued again into fresh registers."""
    layout = slot.layout(staged.warps, staged.trips)
    d, _ = slot.reads[(0, staged.trips[0])]
    if layout is None:
        raise TemplateError(f"{what}: the addresses s{d} reads are no XOR-linear map of the lane's and the "
                            "warp's bits over a ring of stages")
    if layout["period"] is None:
        raise TemplateError(f"{what}: the stages s{d} reads do not repeat within the {len(staged.trips)} trips "
                            "described")
    if slot.symbol is None:
        raise TemplateError(f"{what}: s{d} reads shared memory through no variable regen can name")
    flow = staging.flow
    code = flow.statements[d - 1].code
    bits = code.bits or 32
    if code.base not in ("ldmatrix", "ld") or (code.base == "ld" and bits > 32):
        raise TemplateError(f"{what}: read by s{d} ({code.text}), which regen does not issue again")
    dest = flow.operands(d)[0]
    count = len(dest.items) if isinstance(dest, Vec) else 1
    address = _address(em, layout, staged.loop, what)
    narrow = code.base == "ld" and bits < 32  # a byte or a half, into a 16-bit register as NVVM does
    regs = [em.reg("b16" if narrow else "b32") for _ in range(count)]
    names = "{" + ", ".join(regs) + "}" if count > 1 else regs[0]
    em.lines.append(f"{slot.opcode} \t{names}, [{address}];")
    if not narrow:
        return regs
    wide = [em.reg("b32") for _ in regs]
    for w, r in zip(wide, regs):
        em.lines.append(f"cvt.u32.u16 \t{w}, {r};")
    return wide


def _address(em, layout: dict, loop: int | None, what: str) -> str:
    """A 32-bit register holding symbol + stage(trip) + (offset ⊕ swizzle) (or + offset + swizzle)."""
    x = em.reg("b32")
    em.lines.append(f"mov.u32 \t{x}, {layout['offset'] if layout['combine'] == 'xor' else 0};")
    for bits, basis in ((em.lane(), layout["lane"]), (_warp(em), layout["warp"])):
        for i, v in enumerate(basis):
            if v:
                t = em.reg("b32")
                em.lines.append(f"bfe.u32 \t{t}, {bits}, {i}, 1;")
                em.lines.append(f"mul.lo.u32 \t{t}, {t}, {v};")
                em.lines.append(f"xor.b32 \t{x}, {x}, {t};")
    if layout["combine"] == "add":
        em.lines.append(f"add.u32 \t{x}, {x}, {layout['offset']};")
    stages = layout["stages"]  # stages[0] is 0: the offset is the first trip's
    if len(stages) > 1:  # the ring: + stages[trip mod period]
        trip = em.reg("b32")
        em.lines.append(f"cvt.u32.u64 \t{trip}, {em.trip(loop, what)};")
        em.lines.append(f"rem.u32 \t{trip}, {trip}, {len(stages)};")
        step = stages[1]
        if all(v == r * step for r, v in enumerate(stages)):
            em.lines.append(f"mad.lo.u32 \t{x}, {trip}, {step}, {x};")
        else:  # Σ (trip mod period = r ? all ones : 0) & stages[r]
            for r, v in enumerate(stages[1:], 1):
                t = em.reg("b32")
                em.lines.append(f"set.eq.u32.u32 \t{t}, {trip}, {r};")
                em.lines.append(f"and.b32 \t{t}, {t}, {v};")
                em.lines.append(f"add.u32 \t{x}, {x}, {t};")
    base = em.reg("b32")
    em.lines.append(f"mov.u32 \t{base}, {layout['symbol']};")
    em.lines.append(f"add.u32 \t{x}, {x}, {base};")
    return x


def _warp(em) -> str:
    def build():
        r = em.reg("b32")
        em.lines.append(f"mov.u32 \t{r}, %tid.x;")
        em.lines.append(f"shr.u32 \t{r}, {r}, 5;")
        return r
    return em._once("warp", build)


def _register(em, parts: list, what: str) -> str:
    """One 32-bit operand register from (fresh register, byte, widened type, half) per byte."""
    if all(fmt is None for _, _, fmt, _ in parts):
        return _bytes(em, [(r, b) for r, b, _, _ in parts])
    elements = [parts[0:2], parts[2:4]]
    fmt = parts[0][2]
    if not all(e[0][:3] == e[1][:3] and (e[0][3], e[1][3]) == (0, 1) and e[0][2] == fmt for e in elements):
        raise TemplateError(f"{what}: its widened halves do not come one fp8 byte each")
    pair = _bytes(em, [elements[0][0][:2], elements[1][0][:2], elements[0][0][:2], elements[0][0][:2]])
    h = em.reg("b16")
    out = em.reg("b32")
    em.lines.append(f"cvt.u16.u32 \t{h}, {pair};")
    em.lines.append(f"cvt.rn.f16x2.{fmt}x2 \t{out}, {h};")
    return out


def _bytes(em, wanted: list) -> str:
    """A 32-bit register whose byte i is byte wanted[i][1] of register wanted[i][0] (prmt)."""
    sources = list(dict.fromkeys(r for r, _ in wanted))
    if len(sources) == 1 and [b for _, b in wanted] == [0, 1, 2, 3]:
        return sources[0]
    out = em.reg("b32")
    first, rest = sources[0], sources[1:]
    second = rest.pop(0) if rest else first
    sel = sum(((b if r == first else 4 + b if r == second else 0) << (4 * i)) for i, (r, b) in enumerate(wanted))
    em.lines.append(f"prmt.b32 \t{out}, {first}, {second}, 0x{sel:04x};")
    for r in rest:  # the bytes of a third register and on: keep what is there, take its own
        sel = sum(((4 + b if src == r else i) << (4 * i)) for i, (src, b) in enumerate(wanted))
        em.lines.append(f"prmt.b32 \t{out}, {out}, {r}, 0x{sel:04x};")
    return out
