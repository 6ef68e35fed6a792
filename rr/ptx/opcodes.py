"""The PTX instructions rr knows, in one table, and an opcode parsed once into a typed value.

One entry (`Family`) per instruction of the PTX ISA 9.0, as ZLUDA's ptx_parser defines one
instruction per rule with its modifiers and operands: its semantic class (`Kind`: arithmetic,
memory, tensor core, …), which registers it writes (`Defs`: the first operand, none, or the first
operand read as well), and for the families rr's analyses read, the operand forms the parser
checks (`rr.ptx.forms` reads the letters). Most instructions are one family by their name
(`ld`, `mad`); a few are told apart by a modifier, as the ISA defines them apart: `mma.sp`,
`setp.bool` (a second predicate operand), `shfl.sync` (a member mask), `bar.red` (it writes its
first operand, other barriers write none), the sub-instructions of `wmma`, `wgmma`, `tcgen05` and
`multimem`.

`parse_opcode` reads an opcode's text once (a kernel repeats a few dozen opcodes over thousands of
statements, so each text is read once per process) into an `Opcode`: its family, its modifiers in
order, and the typed fields rr's stages read — the types, the state space, the vector width, the
rounding, the matrix shape, setp's comparison. Every stage asks the parsed value, never the text:
the parser's forms and its refusal of an instruction PTX does not have, the def/use rule of
linearisation, the CPU interpreter's dispatch, the provenance analysis's symbolic arithmetic.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum


class Kind(Enum):
    """What an instruction does, as the ISA's chapters group them."""

    ARITHMETIC = "arithmetic"  # integer and floating-point, bit counts and fields
    LOGIC = "logic"  # bitwise operations and shifts
    COMPARISON = "comparison"  # setp, set, selp, slct, testp
    MOVE = "move"  # mov, prmt
    CONVERSION = "conversion"  # cvt
    ADDRESS = "address"  # cvta, isspacep, mapa, getctarank: addresses and their state spaces
    MEMORY = "memory"  # loads, stores, prefetches, cache policies (the state space: Opcode.space)
    ATOMIC = "atomic"  # atom, red
    ASYNC_COPY = "asynchronous copy"  # cp.async…, cp.reduce.async.bulk…
    TEXTURE = "texture"
    SURFACE = "surface"
    CONTROL = "control"  # branches, calls, returns, traps
    SYNC = "synchronisation"  # barriers, fences, mbarriers
    WARP = "warp collective"  # shfl, vote, match, redux, activemask, elect
    TENSOR_CORE = "tensor core"  # mma, wmma, wgmma, tcgen05, ldmatrix, stmatrix, movmatrix
    VIDEO = "video"
    MISC = "miscellaneous"  # nanosleep, pmevent, setmaxnreg, the stack, …


class Defs(Enum):
    """Which registers an instruction writes ("destination first" is PTX's rule; a first operand
    that is an address `[…]` is read, whatever the family)."""

    FIRST = "the registers of its first operand"  # a `d|p` pair or a vector: all of them
    NONE = "none"  # stores, barriers, branches, reductions into memory, …
    ACCUMULATES = "the registers of its first operand, which it also reads"  # wgmma.mma_async


@dataclass(frozen=True, slots=True)
class Family:
    """One entry of the table. `operands` (the ISA's names) and `forms` (rr.ptx.forms: one letter
    per operand) are given for the families rr's analyses read; the parser checks the operands of
    the others with the operand grammar alone."""

    name: str
    kind: Kind
    defs: Defs = Defs.FIRST
    operands: str | None = None
    forms: tuple[str, ...] = ()
    known: bool = True  # False: a name the table does not have (see `parse_opcode`)


def _formed(name: str, kind: Kind, operands: str, *forms: str, defs: Defs = Defs.FIRST) -> Family:
    """A family whose operands the parser checks against its forms."""
    return Family(name, kind, defs, operands, forms)


def _named(kind: Kind, names: str, defs: Defs = Defs.FIRST) -> list[Family]:
    """Families whose operands the operand grammar alone checks, by name."""
    return [Family(name, kind, defs) for name in names.split()]


# The forms follow the PTX ISA 9.0 syntax of each instruction, optional operands included (a
# load's cache policy, `tex`'s offset and depth compare, `wgmma`'s scale and transpose immediates):
# `w` an operand the instruction writes, `r` one it reads, `a` an address, `l` a label, an
# upper-case letter an optional trailing operand (rr.ptx.forms says which operands fit which).
TABLE: dict[str, Family] = {f.name: f for f in [
    # -- integer and floating-point arithmetic ----------------------------------------------------
    _formed("add", Kind.ARITHMETIC, "d, a, b", "wrr"),
    _formed("sub", Kind.ARITHMETIC, "d, a, b", "wrr"),
    _formed("mul", Kind.ARITHMETIC, "d, a, b", "wrr"),
    _formed("mad", Kind.ARITHMETIC, "d, a, b, c", "wrrr"),
    _formed("bfi", Kind.ARITHMETIC, "f, a, b, c, d", "wrrrr"),
    _formed("bfe", Kind.ARITHMETIC, "d, a, b, c", "wrrr"),
    *_named(Kind.ARITHMETIC, "mul24 mad24 sad div rem abs neg min max popc clz bfind fns brev szext bmsk dp4a dp2a "
                             "addc subc madc fma rcp sqrt rsqrt sin cos lg2 ex2 tanh copysign"),
    # -- logic and shifts -------------------------------------------------------------------------
    _formed("shl", Kind.LOGIC, "d, a, b", "wrr"),
    _formed("shr", Kind.LOGIC, "d, a, b", "wrr"),
    _formed("and", Kind.LOGIC, "d, a, b", "wrr"),
    _formed("or", Kind.LOGIC, "d, a, b", "wrr"),
    _formed("xor", Kind.LOGIC, "d, a, b", "wrr"),
    *_named(Kind.LOGIC, "not cnot lop3 shf"),
    # -- comparison and selection -----------------------------------------------------------------
    _formed("setp", Kind.COMPARISON, "p[|q], a, b", "wrr"),
    _formed("setp.bool", Kind.COMPARISON, "p[|q], a, b, {!}c", "wrrr"),
    _formed("selp", Kind.COMPARISON, "d, a, b, c", "wrrr"),
    *_named(Kind.COMPARISON, "set slct testp"),
    # -- data movement and conversion -------------------------------------------------------------
    _formed("mov", Kind.MOVE, "d, a", "wr"),
    _formed("prmt", Kind.MOVE, "d, a, b, c", "wrrr"),
    _formed("cvt", Kind.CONVERSION, "d, a {, b} {, rbits}", "wrRR"),
    _formed("cvta", Kind.ADDRESS, "d, a", "wr"),
    *_named(Kind.ADDRESS, "isspacep mapa getctarank"),
    _formed("ld", Kind.MEMORY, "d, [a] {, cache-policy}", "waR"),
    _formed("ldu", Kind.MEMORY, "d, [a]", "wa"),
    _formed("st", Kind.MEMORY, "[a], b {, cache-policy}", "arR", "ara", defs=Defs.NONE),
    *_named(Kind.MEMORY, "createpolicy multimem.ld_reduce"),
    *_named(Kind.MEMORY, "prefetch prefetchu applypriority discard multimem.st multimem.red multimem.cp", Defs.NONE),
    *_named(Kind.ASYNC_COPY, "cp tensormap", Defs.NONE),
    *_named(Kind.ATOMIC, "atom"),
    *_named(Kind.ATOMIC, "red", Defs.NONE),
    # -- textures and surfaces --------------------------------------------------------------------
    _formed("tex", Kind.TEXTURE, "d[|p], [a, {b,} c] {, lod | dPdx, dPdy} {, e} {, f}", "waRRRR"),
    *_named(Kind.TEXTURE, "tld4 txq istypep"),
    _formed("sust", Kind.SURFACE, "[a, b], c", "ar", defs=Defs.NONE),
    *_named(Kind.SURFACE, "suld suq"),
    *_named(Kind.SURFACE, "sured", Defs.NONE),
    # -- control flow -----------------------------------------------------------------------------
    _formed("bra", Kind.CONTROL, "target label", "l", defs=Defs.NONE),
    *_named(Kind.CONTROL, "brx ret exit trap brkpt", Defs.NONE),
    *_named(Kind.CONTROL, "call"),  # writes the registers of its return list (its first operand)
    # -- synchronisation --------------------------------------------------------------------------
    *_named(Kind.SYNC, "bar barrier membar fence griddepcontrol", Defs.NONE),
    *_named(Kind.SYNC, "bar.red barrier.red mbarrier clusterlaunchcontrol"),
    # -- warp collectives -------------------------------------------------------------------------
    _formed("shfl", Kind.WARP, "d[|p], a, b, c", "wrrr"),
    _formed("shfl.sync", Kind.WARP, "d[|p], a, b, c, membermask", "wrrrr"),
    *_named(Kind.WARP, "vote match activemask redux elect"),
    # -- tensor cores -----------------------------------------------------------------------------
    _formed("mma", Kind.TENSOR_CORE, "d, a, b, c", "wrrr"),
    _formed("mma.sp", Kind.TENSOR_CORE, "d, a, b, c, e (metadata), f (selector)", "wrrrrr"),
    _formed("mma.block_scale", Kind.TENSOR_CORE,
            "d, a, b, c, scale-a, {byte-id-a, thread-id-a}, scale-b, {byte-id-b, thread-id-b}", "wrrrrrrr"),
    _formed("mma.sp.block_scale", Kind.TENSOR_CORE, "d, a, b, c, e, f, scale-a, {…}, scale-b, {…}",
            "wrrrrrrrrr"),
    _formed("wmma.load", Kind.TENSOR_CORE, "r, [p] {, stride}", "waR"),
    _formed("wmma.store", Kind.TENSOR_CORE, "[p], r {, stride}", "arR", defs=Defs.NONE),
    _formed("wmma.mma", Kind.TENSOR_CORE, "d, a, b, c", "wrrr"),
    _formed("wgmma.mma_async", Kind.TENSOR_CORE, "d, a(-desc), b-desc {, sp-meta, sp-sel}, scale-d "
            "{, imm-scale-a, imm-scale-b{, imm-trans-a}, imm-trans-b}", "wrrrRRRRRR", defs=Defs.ACCUMULATES),
    _formed("wgmma.fence", Kind.TENSOR_CORE, "no operands", "", defs=Defs.NONE),
    _formed("wgmma.commit_group", Kind.TENSOR_CORE, "no operands", "", defs=Defs.NONE),
    _formed("wgmma.wait_group", Kind.TENSOR_CORE, "N", "r", defs=Defs.NONE),
    _formed("movmatrix", Kind.TENSOR_CORE, "d, a", "wr"),
    *_named(Kind.TENSOR_CORE, "ldmatrix tcgen05.ld"),
    *_named(Kind.TENSOR_CORE, "stmatrix tcgen05.alloc tcgen05.dealloc tcgen05.relinquish_alloc_permit tcgen05.st "
                              "tcgen05.wait tcgen05.cp tcgen05.shift tcgen05.mma tcgen05.commit tcgen05.fence",
            Defs.NONE),
    # -- video ------------------------------------------------------------------------------------
    *_named(Kind.VIDEO, "vadd vsub vabsdiff vmin vmax vshl vshr vmad vset vadd2 vsub2 vavrg2 vabsdiff2 vmin2 vmax2 "
                        "vset2 vadd4 vsub4 vavrg4 vabsdiff4 vmin4 vmax4 vset4"),
    # -- miscellaneous ----------------------------------------------------------------------------
    *_named(Kind.MISC, "alloca stacksave"),
    *_named(Kind.MISC, "nanosleep pmevent setmaxnreg stackrestore", Defs.NONE),
]}

# instructions whose family is named by their first modifier (`wmma.load`, `tcgen05.mma`)
_SUB_INSTRUCTIONS = frozenset({"wmma", "wgmma", "tcgen05", "multimem"})


# -- the typed fields ------------------------------------------------------------------------------

# bits per element of each PTX type (a packed type: the whole; .b1 and the 4- and 6-bit floats of
# the block-scaled mma: as stored)
TYPE_BITS: dict[str, int] = {
    "pred": 1, "b1": 1, "u4": 4, "s4": 4, "e2m1": 4,
    "b8": 8, "u8": 8, "s8": 8, "e4m3": 8, "e5m2": 8, "e3m2": 8, "e2m3": 8, "ue8m0": 8, "ue4m3": 8, "e2m1x2": 8,
    "b16": 16, "u16": 16, "s16": 16, "f16": 16, "bf16": 16, "e4m3x2": 16, "e5m2x2": 16, "e3m2x2": 16,
    "e2m3x2": 16, "ue8m0x2": 16, "e2m1x4": 16,
    "b32": 32, "u32": 32, "s32": 32, "f32": 32, "f16x2": 32, "bf16x2": 32, "tf32": 32, "u16x2": 32, "s16x2": 32,
    "e4m3x4": 32, "e5m2x4": 32,
    "b64": 64, "u64": 64, "s64": 64, "f64": 64,
    "b128": 128,
}
# the state spaces, by their modifier (`.shared::cta` and `.shared::cluster` are shared memory)
SPACES = frozenset({"global", "shared", "param", "local", "const", "tex"})
ROUNDINGS = frozenset({"rn", "rz", "rm", "rp", "rna", "rni", "rzi", "rmi", "rpi", "rs"})
_VECTORS = {"v2": 2, "v4": 4, "v8": 8}
_SHAPE = re.compile(r"m(\d+)n(\d+)k(\d+)")


@dataclass(frozen=True, slots=True, eq=False)
class Opcode:
    """An opcode, parsed: `mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16` is the family
    `mma`, its modifiers `sync, aligned, m16n8k32, row, col, f16, e4m3, e4m3, f16`, the types
    `(f16, e4m3, e4m3, f16)` (in the order written: D, A, B, C) and the shape (16, 8, 32). Its
    text determines it: two are equal when their texts are."""

    text: str
    base: str  # the instruction's name, before its first '.'
    mods: tuple[str, ...]  # the modifiers after it, in order
    family: Family
    types: tuple[str, ...] = ()  # the modifiers that are types, in order
    spaces: tuple[str, ...] = ()  # the state spaces named, in order (`cp.async.ca.shared.global`)
    space: str | None = None  # the first of them (`ld.global`, `cvta.to.shared`)
    vector: int = 1  # .v2, .v4, .v8
    rounding: str | None = None
    shape: tuple[int, int, int] | None = None  # a matrix instruction's m, n, k
    compare: str | None = None  # setp's and set's comparison
    writes: bool = field(init=False)  # whether the registers of its first operand are written
    accumulates: bool = field(init=False)  # … and read (wgmma's accumulator)

    def __post_init__(self) -> None:
        object.__setattr__(self, "writes", self.family.defs is not Defs.NONE)
        object.__setattr__(self, "accumulates", self.family.defs is Defs.ACCUMULATES)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Opcode) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)

    @property
    def known(self) -> bool:
        """Whether the table has its family (the parser refuses an opcode it does not have)."""
        return self.family.known

    @property
    def type(self) -> str | None:
        """The instruction type: the last type it names (a conversion's source, an mma's C)."""
        return self.types[-1] if self.types else None

    @property
    def bits(self) -> int | None:
        """Bits of an element of `type` (None when it names none)."""
        return TYPE_BITS.get(self.types[-1]) if self.types else None

    def with_types(self, *types: str) -> str:
        """The opcode's text with its types replaced, in order (`mma….f16.e4m3.e5m2.f16` with
        the A and B types swapped: `with_types("f16", "e5m2", "e4m3", "f16")`)."""
        if len(types) != len(self.types):
            raise ValueError(f"{self.text} names {len(self.types)} types, not {len(types)}")
        new = iter(types)
        return ".".join([self.base] + [next(new) if m in TYPE_BITS else m for m in self.mods])


def _family_name(base: str, mods: tuple[str, ...]) -> str:
    if base == "mma":
        sp = any(m == "sp" or m.startswith("sp::") for m in mods)
        return "mma" + (".sp" if sp else "") + (".block_scale" if "block_scale" in mods else "")
    if base in _SUB_INSTRUCTIONS:
        return f"{base}.{mods[0]}" if mods else base
    if base == "setp":
        return "setp.bool" if len(mods) > 1 and mods[1] in ("and", "or", "xor") else "setp"
    if base == "shfl":
        return "shfl.sync" if "sync" in mods else "shfl"
    if base in ("bar", "barrier") and "red" in mods:
        return f"{base}.red"
    return base


def _parse(text: str) -> Opcode:
    base, *rest = text.split(".")
    mods = tuple(rest)
    name = _family_name(base, mods)
    family = TABLE.get(name) or Family(name, Kind.MISC, known=False)
    types = tuple(m for m in mods if m in TYPE_BITS)
    spaces = tuple(s for s in (m.partition("::")[0] for m in mods) if s in SPACES)
    vector = next((_VECTORS[m] for m in mods if m in _VECTORS), 1)
    rounding = next((m for m in mods if m in ROUNDINGS), None)
    shape = next((tuple(map(int, s.groups())) for s in map(_SHAPE.fullmatch, mods) if s), None)
    compare = mods[0] if base in ("setp", "set") and mods else None
    return Opcode(text, base, mods, family, types, spaces, spaces[0] if spaces else None, vector, rounding, shape,
                  compare)


_PARSED: dict[str, Opcode] = {}


def parse_opcode(text: str) -> Opcode:
    """The opcode `text` parsed (once per process for each text: a memo)."""
    code = _PARSED.get(text)
    if code is None:
        code = _PARSED[text] = _parse(text)
    return code


def families(kind: Kind) -> list[str]:
    """The names of the families of one kind, in the table's order."""
    return [name for name, f in TABLE.items() if f.kind is kind]


def by_family(handlers: dict) -> dict:
    """A dispatch on `Opcode.family.name` (the CPU interpreter's, the provenance analysis's),
    checked against the table: a name it does not have is an error where the dispatch is made."""
    unknown = sorted(set(handlers) - TABLE.keys())
    if unknown:
        raise KeyError(f"not families of the opcode table: {', '.join(unknown)}")
    return handlers


def unknown_message(code: Opcode) -> str:
    """Why the parser refuses an opcode whose family the table does not have."""
    return f"unknown instruction {code.text!r}: PTX has no instruction {code.family.name!r}"
