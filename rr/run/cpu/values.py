"""Operand access for the CPU interpreter's compiled statements: the type an opcode names, raw
register bits viewed as a PTX type, f16x2/bf16x2 halves, and `Ctx`, which turns an operand into a
reader `m -> value` once at decode (registers, immediates, symbols, addresses).
"""

from __future__ import annotations

import numpy as np

from rr.numerics.half import f16_as_f32
from rr.ptx.model import Addr, Imm, Pair, Reg, Sink, Sym, Vec
from rr.ptx.opcodes import Opcode
from rr.run.cpu.machine import BITS, GLOBALS_BASE, PARAM_BASE, SPECIAL_REGISTERS, TYPES


class Unsupported(ValueError):
    """An instruction the interpreter does not implement."""


ROUNDING = {"rn", "rz", "rm", "rp", "rna", "rni", "rzi", "rmi", "rpi"}


def op_type(code: Opcode) -> str:
    """The instruction type: the last of the opcode's types that the interpreter holds."""
    for t in reversed(code.types):
        if t in TYPES:
            return t
    raise Unsupported("no operand type in the opcode")


def type_bits(typ: str) -> int:
    return np.dtype(TYPES[typ]).itemsize * 8


def view(bits, typ: str):
    """Raw register bits as `typ` (same width, or an integer resized)."""
    dt = np.dtype(TYPES[typ])
    if typ == "pred":
        return np.asarray(bits).astype(bool)
    bits = np.asarray(bits)
    if bits.dtype == np.bool_:
        return bits.astype(dt)
    if bits.dtype.itemsize == dt.itemsize:
        return bits.view(dt)
    return bits.astype(BITS[dt.itemsize * 8]).view(dt)  # narrower or wider integer view


def f16_lanes(read, m) -> np.ndarray:
    """An f16, f16x2 (or any 16- or 32-bit) operand of every lane, its register's bits viewed as
    f16: a word's low then high half."""
    return np.ascontiguousarray(np.broadcast_to(read(m), (m.n,))).view(np.float16)


def f16x2_join(lo, hi):
    lo = np.asarray(lo, np.float16).view(np.uint16).astype(np.uint32)
    hi = np.asarray(hi, np.float16).view(np.uint16).astype(np.uint32)
    return lo | (hi << np.uint32(16))


def halves(u):
    """A 32-bit word's low and high 16 bits (uint16)."""
    u = np.asarray(u).astype(np.uint32, copy=False)
    return (u & np.uint32(0xFFFF)).astype(np.uint16), (u >> np.uint32(16)).astype(np.uint16)


def join_halves(lo, hi):
    return np.asarray(lo).astype(np.uint32) | (np.asarray(hi).astype(np.uint32) << np.uint32(16))


def dests(operand) -> list:
    """The register names a destination operand writes (None for a sink `_`)."""
    if isinstance(operand, Vec):
        return [None if isinstance(x, Sink) else x.name for x in operand.items]
    if isinstance(operand, Pair):
        return [None if isinstance(operand.first, Sink) else operand.first.name,
                None if isinstance(operand.second, Sink) else operand.second.name]
    if isinstance(operand, Sink):
        return [None]
    return [operand.name]


class Ctx:
    """Operand readers for one program: symbols resolve to shared, const and module-global
    addresses and to parameter addresses."""

    def __init__(self, program, param_offsets: dict):
        self.program = program
        self.param_offsets = param_offsets

    def reader(self, operand, typ: str, op):
        """A function m -> the operand's value as `typ` (an array or a numpy scalar)."""
        dt = TYPES[typ]
        if isinstance(operand, Reg):
            name, neg = operand.name, operand.negated
            if operand.special:
                if name not in SPECIAL_REGISTERS:
                    raise Unsupported(f"special register {name}")
                return lambda m: view(m.special[name], typ) if typ != "pred" else m.special[name]
            if typ == "pred":
                return (lambda m: ~m.get(name, op).astype(bool)) if neg else (lambda m: m.get(name, op).astype(bool))
            return lambda m: view(m.get(name, op), typ)
        if isinstance(operand, Imm):
            text = operand.text.rstrip("Uu")
            if text[:2].lower() in ("0f", "0d"):
                raw = int(text[2:], 16)
                value = np.array(raw, np.uint32 if text[1] in "fF" else np.uint64).view(
                    np.float32 if text[1] in "fF" else np.float64)
                value = value.astype(dt) if typ in ("f16", "f32", "f64") else value.view(BITS[value.dtype.itemsize * 8]).astype(dt)
            elif np.dtype(dt).kind == "f":
                value = np.array(operand.value, dt)
            else:
                bits = np.dtype(dt).itemsize * 8
                value = np.array(int(operand.value) & ((1 << bits) - 1), BITS[bits]).view(dt)
            return lambda m: value
        if isinstance(operand, Sym):
            v = self.symbol(operand.name, op)
            value = np.array(v, np.uint64).astype(dt) if np.dtype(dt).kind in "ui" else np.array(v, dt)
            return lambda m: value
        raise Unsupported(f"operand {operand} as a {typ} value")

    def f16_reader(self, operand, typ: str, op):
        """A function m -> an f16 or f16x2 operand's halves as their f32 values, `n` or `2n` of them
        (a word's low half first; a scalar for an f16 immediate): a register's as the machine holds
        them (Machine.values)."""
        count = 1 if typ == "f16" else 2
        if isinstance(operand, Reg) and not operand.special:
            name = operand.name
            return lambda m: m.values(name, op, count)
        bits = self.reader(operand, "b16" if count == 1 else "f16x2", op)
        if count == 1 and not isinstance(operand, Reg):  # an immediate: one value
            value = f16_as_f32(np.asarray(bits(None)).view(np.float16))
            return lambda m: value
        return lambda m: f16_as_f32(f16_lanes(bits, m))

    def immediate(self, operand, what: str) -> int:
        """An operand that must be an integer constant (lop3's immLut, say)."""
        if not isinstance(operand, Imm) or operand.text[:2].lower() in ("0f", "0d"):
            raise Unsupported(f"{what} {operand} is not an integer immediate")
        return int(operand.value)

    def symbol(self, name: str, op) -> int:
        p = self.program
        if name in p.shared:
            return p.shared[name]
        if name in p.local:
            return p.local[name]
        if name in p.const:
            return p.const[name]
        if name in p.globals:
            return GLOBALS_BASE + p.globals[name]
        if name in self.param_offsets:
            return PARAM_BASE + self.param_offsets[name]
        if name == "WARP_SZ":
            return 32
        raise Unsupported(f"symbol {name!r} (not a shared, const or global variable or a kernel parameter)")

    def address(self, a: Addr, op):
        """A function m -> per-lane address (uint64), and the param-memory name if any."""
        if isinstance(a.base, Sym) and a.base.name in self.program.param_sizes:
            off = a.offset
            return (lambda m: np.full(m.n, off, np.uint64)), a.base.name
        if a.base is None:
            c = np.uint64(a.offset & (2 ** 64 - 1))
            return (lambda m: c), None
        base = self.reader(a.base, "u64", op)
        off = np.uint64(a.offset & (2 ** 64 - 1))
        if not a.offset:
            return base, None
        return (lambda m: base(m) + off), None

    def reg_bits(self, name: str | None) -> int | None:
        """The declared width of a register, if the module declares it."""
        return None if name is None else self.program.register_bits(name)


def extend_to_register(ctx: Ctx, name: str | None, typ: str):
    """A function putting a `typ` result into register `name` as the PTX does: a signed integer
    narrower than the register is sign-extended to the register's width (zero-extension, the
    other case, is what storing the narrower bits already means)."""
    reg = ctx.reg_bits(name)
    bits = type_bits(typ)
    if typ[0] != "s" or reg is None or reg <= bits or reg not in BITS:
        return None
    signed = {8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}[reg]
    return lambda v: np.asarray(v).view(TYPES[typ]).astype(signed)


__all__ = ["Ctx", "Unsupported", "ROUNDING", "op_type", "type_bits", "view", "f16_lanes", "f16x2_join",
           "halves", "join_halves", "dests", "extend_to_register"]
