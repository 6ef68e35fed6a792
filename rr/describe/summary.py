"""What an epilogue does, and what the parameter block holds.

Epilogues: memory traffic by kind, cross-lane reductions (`shfl` kind and deltas), the float
constants they materialise (with the f16 value they round to), and a short name built from what
they contain. Parameters: every `ld.param` offset with its width and role (a pointer read through,
written through — a `cp.async` from global memory reads through its source's —, sampled as a
texture or written as a surface, or a scalar), and per pointer the highest byte any load reads
relative to it (the extent) — the weight image's is `weight_extent`.
"""

from __future__ import annotations

import functools
import struct
from collections import Counter
from dataclasses import dataclass, field

from rr.describe.dataflow import Dataflow
from rr.describe.memory import Base
from rr.describe.phases import Epilogue
from rr.ptx.model import Imm
from rr.ptx.opcodes import Opcode, parse_opcode


@dataclass
class EpilogueSummary:
    traffic: dict = field(default_factory=dict)  # kind -> count
    reductions: list = field(default_factory=list)  # {"stmt", "kind", "delta"}
    constants: list = field(default_factory=list)  # {"stmt", "literal", "value", "f16", "f16_bits"}
    name: str = ""


# the traffic of a load or store by its state space ("global loads" to be told apart by the address)
_TRAFFIC = {("ld", "shared"): "shared loads", ("st", "shared"): "shared stores", ("st", "global"): "global stores",
            ("ld", "global"): "global loads", ("cp", "shared"): "asynchronous copies",
            ("ldmatrix", "shared"): "shared loads", ("stmatrix", "shared"): "shared stores"}


@functools.lru_cache(maxsize=None)
def _opcode_traffic(code: Opcode) -> str | None:
    """The kind of traffic an opcode makes; a memo, as a kernel repeats a few dozen opcodes over
    thousands of statements."""
    if code.base == "tex":
        return "texture reads"
    if code.base == "sust":
        return "surface writes"
    if code.base in ("bar", "barrier"):
        return "barriers"
    return _TRAFFIC.get((code.base, code.space))


def _traffic_kind(flow: Dataflow, stmt: int, code: Opcode, weights: Base | None) -> str | None:
    kind = _opcode_traffic(code)
    if kind == "global loads":
        acc = flow.memory.access(stmt)
        if weights is not None and acc is not None and acc.base is not None and acc.base != weights:
            return "global loads"  # through another pointer than the weight image's (the input image)
        if acc is not None and acc.lane_bytes is not None and not acc.lane_linear:
            return "table loads"
        return "weight loads"
    return kind


def summarise_epilogue(flow: Dataflow, e: Epilogue, weights: Base | None = None) -> EpilogueSummary:
    """What epilogue `e` does; `weights` is the weight image's pointer (`param+40`), which tells
    weight and table loads from other global loads."""
    out = EpilogueSummary()
    if not e.stmts:
        return out
    traffic: Counter = Counter()
    for stmt in range(e.first_stmt, e.last_stmt + 1):
        s = flow.statements[stmt - 1]
        kind = _traffic_kind(flow, stmt, s.code, weights)
        if kind:
            traffic[kind] += 1
        ops = None
        if s.code.base == "shfl":
            ops = flow.operands(stmt)
            delta = flow.values.value(ops[2], stmt) if len(ops) > 2 else None
            uniform = delta is not None and delta.lane_only and isinstance(delta.constant, int)
            out.reductions.append({"stmt": stmt, "kind": s.code.mods[1] if len(s.code.mods) > 1 else "?",
                                   "delta": delta.constant if uniform else None})
        if s.opcode in ("mov.f32", "mov.f64"):
            ops = ops or flow.operands(stmt)
            if isinstance(ops[1], Imm) and ops[1].text[:2].lower() in ("0f", "0d"):
                value = float(ops[1].value)
                half, bits = _f16(value)
                out.constants.append({"stmt": stmt, "literal": ops[1].text, "value": value,
                                      "f16": half, "f16_bits": f"0x{bits:04X}"})
    out.traffic = dict(traffic)
    out.name = _name(e.ops, out)
    return out


def _f16(value: float) -> tuple[float, int]:
    """The f16 a constant rounds to (to nearest, ties to even; past 65504 infinity) and its bits —
    struct's IEEE half, so that `rr spec` starts without numpy."""
    try:
        bits = struct.unpack("<H", struct.pack("<e", value))[0]
    except OverflowError:
        bits = 0x7C00 | (0x8000 if value < 0 else 0)
    return struct.unpack("<e", struct.pack("<H", bits))[0], bits


def _name(ops: dict, summary: EpilogueSummary) -> str:
    """A short description from the epilogue's contents, most distinctive parts first."""
    codes = [parse_opcode(op) for op in ops]
    has = lambda *bases: any(c.base in bases for c in codes)  # noqa: E731
    t = summary.traffic
    parts = []
    if t.get("texture reads"):
        parts.append("texture gather")
    if has("rsqrt"):
        parts.append("RMS norm")
    row_sums = any(r["kind"] == "bfly" for r in summary.reductions)
    if has("ex2"):
        parts.append("softmax")
    elif has("rcp") and row_sums and has("min", "max"):
        parts.append("cubic-exponent softmax")  # enc0/enc2 E7: no ex2, no row max
    elif has("min", "max") and has("fma", "mul") and not has("rsqrt"):
        parts.append("clamped cubic")
    if has("movmatrix"):
        parts.append("transpose")
    if any(c.base == "cvt" and c.mods[:2] == ("rn", "satfinite") and c.mods[2:3] in (("e4m3x2",), ("e5m2x2",))
           for c in codes):  # the fp8 packs, cvt.rn.satfinite.{e4m3x2,e5m2x2}.…
        parts.append("packs")
    if t.get("shared stores") or t.get("shared loads") or t.get("asynchronous copies"):
        parts.append("shared staging")
    if t.get("global stores"):
        parts.append("global stores")
    if t.get("surface writes"):
        parts.append("surface writes")
    if t.get("table loads"):
        parts.append("table loads")
    if t.get("weight loads"):
        parts.append("B loads" if not parts else "weight loads")
    return " + ".join(parts) or "address arithmetic"


@dataclass
class ParamUse:
    offset: int
    width: int
    kind: str  # pointer or scalar
    read: bool = False  # loads through it
    written: bool = False  # stores through it (global stores, reductions, atomics or surface writes)
    sampled: bool = False  # texture reads
    surface: bool = False  # surface reads or writes (sust, suld): a surface object, not an address
    stmts: list = field(default_factory=list)  # the ld.param statements
    extent: int | None = None  # highest byte read relative to it, lane terms included

    @property
    def role(self) -> str:
        if self.kind == "scalar":
            return "scalar"
        return ", ".join(r for r, on in (("sampled (texture)", self.sampled), ("read", self.read),
                                         ("written", self.written)) if on) or "pointer, unused"


def summarise_params(flow: Dataflow) -> dict[int, ParamUse]:
    """Every parameter offset the entry reads, and what it does with each."""
    uses: dict[int, ParamUse] = {}
    for s in flow.statements:
        if s.code.base != "ld" or s.code.space != "param" or not s.defs:
            continue
        offset = flow.values.param_address(s.stmt)
        if offset is None:
            continue
        bits = s.code.bits or 32
        pointer = len(s.defs) == 1 and bits == 64
        u = uses.setdefault(offset, ParamUse(offset, bits // 8 * len(s.defs), "pointer" if pointer else "scalar"))
        u.stmts.append(s.stmt)
    for s in flow.statements:
        op = s.code.base
        if op not in ("ld", "st", "atom", "red", "tex", "sust", "suld", "cp") or \
                op in ("ld", "st") and s.code.space == "param":
            continue
        # an asynchronous copy reads through the pointer of its global source (its first address is shared memory)
        acc = flow.memory.copy_source(s.stmt) if op == "cp" else flow.memory.access(s.stmt)
        base = acc.base if acc is not None else None
        if base is None or base.offset is None:  # not a pointer from the parameter space
            continue
        u = uses.get(base.offset)
        if u is None:
            continue
        if op == "tex":
            u.sampled = True
        elif op in ("sust", "suld"):
            u.surface = True
            u.written |= op == "sust"
            u.read |= op == "suld"
        elif op in ("st", "red", "atom"):
            u.written = True
            u.read |= op == "atom"  # an atomic returns what it found
        else:
            u.read = True
            if all(f == (("sreg", "tid.z"),) for f, _ in acc.terms):
                # base + lane part + offset (+ slab, which is reported apart): its extent is known
                u.extent = max(u.extent or 0, acc.offset + max(acc.lane_bytes or (0,)) + acc.width)
    return dict(sorted(uses.items()))
