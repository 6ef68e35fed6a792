"""The nvvm suite's truth: for each fp8 mma kernel in tests/cuda/nvvm/, what `rr spec --json` must
say about every phase, derived from the CUDA source by hand, never from rr; and the launches that
run them (random inputs, small grids).

How the truth is written. Each kernel lists its mma statements in program order (the asm is
volatile, so NVVM keeps that order), each with its A, B and C as the source writes them: a load
(`Mem`: the pointer's parameter offset as the signature lays it out, the constant byte offset, the
bytes the lane part adds for lanes 0..31, the other address terms, and how far a rolled loop's trip
moves it), zero, the D of an earlier mma, a pack or a transpose of earlier D, or a merge of
several. A phase's expected description is then arithmetic on the mma it holds (`expected_phase`):
distinct A and B fragments, chains, m n k, M N K, and per operand the union of its loads' offsets.
What only the PTX can tell is where NVVM's runs of consecutive mma end: `phases` gives how many mma
each phase holds, read from `nvcc -ptx -arch=sm_90 -O3` (CUDA 13.0) and explained per kernel.

Reading of /work/notes/operand_format.md that the comparison relies on (see `differences`):
- offsets are those of the load statements, one per statement (a v4 load once; a register that
  NVVM joins from two 16-bit loads, `mov.b32 %r, {%rs1, %rs2}`, has both loads' offsets);
- an induction factor that names a register R of the loop's `induction` list stands for R's value
  on the trip, init + step * trip (step * trip where init is null: R's non-constant initial value
  then belongs to base, offsets, lane and the other terms); one that names no register stands for
  the trip number itself. Either way the truth pins down what does not depend on the encoding:
  the offsets at trip 0 (`Mem.offset`) and the bytes a trip adds (`Mem.per_trip`);
- lane_bytes null and 32 zeros mean the same (no lane part); non-memory operands have no base,
  offsets, lane part or terms; a merge is compared by its kind and its alternatives.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import ml_dtypes
import numpy as np

from rr.run.launch import Buffer, Field, Launch, write_launch

LANES = range(32)
MEMORY_KINDS = ("weight", "table", "shared")


def lane_stride(size: int) -> tuple:
    """The lane part of `frag[... + lane]` with `size`-byte elements: size * lane."""
    return tuple(size * lane for lane in LANES)


LANE16 = lane_stride(16)  # a uint4 A fragment per lane
LANE8 = lane_stride(8)  # a uint2 B fragment per lane
COLUMN4 = tuple(4 * (lane & 3) for lane in LANES)  # bias[n*4 + (lane & 3)] of 4-byte words


# address terms as hashable tuples (a Mem is a dict key): (coefficient, (factor, ...)), each
# factor a tuple of its JSON object's items; `term_json` gives the format's object
def term(coefficient: int, *factors: tuple) -> tuple:
    return coefficient, factors


CTAID_X = (("kind", "ctaid.x"),)
TID_Z = (("kind", "tid.z"),)


def param(offset: int) -> tuple:
    """A scalar kernel parameter at `offset` in the parameter space."""
    return ("kind", "param"), ("offset", offset)


def term_json(t: tuple) -> dict:
    return {"coefficient": t[0], "factors": [dict(f) for f in t[1]]}


# -- what the source says an operand is ---------------------------------------------------------

@dataclass(frozen=True)
class Mem:
    """A fragment (or table word) loaded from memory: `base` + offset + lane part + terms, moved
    by per_trip[loop] bytes on each trip of a rolled loop. Two equal Mem are one register (NVVM
    loads a fragment once)."""
    kind: str  # weight | table | shared
    base: tuple  # the descriptor's base pointer, as its items: (("space", "param"), ("offset", 8)),
    # (("space", "shared"), ("symbol", "sm_a"))
    offset: int  # the constant byte offset (at trip 0)
    lane: tuple  # bytes the lane part adds, lanes 0..31
    terms: tuple = ()  # every other address term (see `term`)
    per_trip: tuple = ()  # ((loop number, bytes a trip), ...)
    parts: tuple = (0,)  # byte offsets of the loads that make the register, from `offset`


@dataclass(frozen=True)
class Zero:
    pass


@dataclass(frozen=True)
class D:
    mma: int  # index (program order) of the mma whose D this is


@dataclass(frozen=True)
class Pack:
    mma: tuple  # the mma whose D are requantised to e4m3


@dataclass(frozen=True)
class Transpose:
    mma: tuple  # the mma whose D movmatrix transposes


@dataclass(frozen=True)
class Merge:
    alternatives: tuple  # what reaches the operand through the branches


@dataclass(frozen=True)
class Mma:
    a: object
    b: object
    c: object


def _pointer(param: int) -> tuple:
    """A pointer loaded from byte `param` of the parameter space, as Mem.base holds it."""
    return (("space", "param"), ("offset", param))


def weight(base: int, offset: int, lane=LANE16, terms=(), per_trip=()) -> Mem:
    return Mem("weight", _pointer(base), offset, tuple(lane), tuple(terms), tuple(per_trip))


def table(base: int, offset: int, lane=COLUMN4, terms=(), per_trip=(), parts=(0,)) -> Mem:
    return Mem("table", _pointer(base), offset, tuple(lane), tuple(terms), tuple(per_trip), tuple(parts))


def shared(symbol: str, offset: int, lane) -> Mem:
    return Mem("shared", (("space", "shared"), ("symbol", symbol)), offset, tuple(lane))


# -- launches -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Buf:
    """A global buffer: `fill` is e4m3 (random fragments), f16 (a random bias table) or zeros
    (an output, read back as `dtype`)."""
    name: str
    nbytes: int
    fill: str  # e4m3 | f16 | zeros
    dtype: str = "float16"  # how an output's bytes are numbers


@dataclass(frozen=True)
class Scalar:
    name: str
    dtype: str
    value: int


@dataclass(frozen=True)
class Kernel:
    name: str  # tests/cuda/nvvm/<name>.cu
    entry: str
    mma: tuple  # Mma in program order
    phases: tuple  # mma per phase, in order, as the PTX has them (default grouping)
    params: tuple  # Buf and Scalar in signature order
    grid: tuple = (1, 1, 1)
    block: tuple = (32, 1, 1)
    struct_size: int = 0  # >0: the parameters are one struct of this size passed by value
    loops: dict = field(default_factory=dict)  # phase -> (loop number, trips or None)
    grouping_gemm: tuple | None = None  # mma per phase under `--grouping gemm`, where it differs
    regen_refusal: dict = field(default_factory=dict)  # phase -> words a refusal must name (and why)
    accumulator: str = "f16"  # what its mma accumulate in (f32acc does not apply to f32)

    @property
    def source(self) -> str:
        return f"nvvm/{self.name}"


def param_offsets(kernel: Kernel) -> dict:
    """Byte offset of each parameter: 8-byte pointers in order, a scalar aligned to its size;
    inside a struct the same rule gives the members' C offsets."""
    out, at = {}, 0
    for p in kernel.params:
        size = 8 if isinstance(p, Buf) else np.dtype(p.dtype).itemsize
        at = -(-at // size) * size
        out[p.name] = at
        at += size
    return out


def _random_bytes(fill: str, nbytes: int, rng) -> np.ndarray:
    if fill == "e4m3":  # values in [-2, 2]: 32-term dot products stay far from f16's range
        values = rng.uniform(-2, 2, nbytes).astype(ml_dtypes.float8_e4m3fn)
        return values.view(np.uint8)
    if fill == "f16":
        return rng.uniform(-1, 1, nbytes // 2).astype(np.float16).view(np.uint8)
    return np.zeros(nbytes, np.uint8)


def write_kernel_launch(kernel: Kernel, directory: Path, module: Path, seed: int = 0) -> None:
    """A launch directory for `kernel` running `module` (its PTX, spliced or not): random inputs
    from `seed`, zeroed outputs, the parameters as the signature (or the struct) lays them out."""
    rng = np.random.default_rng(seed)
    offsets = param_offsets(kernel)
    fields, buffers, arrays = [], {}, {}
    for p in kernel.params:
        at = offsets[p.name] if kernel.struct_size else 0
        if isinstance(p, Buf):
            fields.append(Field("buffer", at, buffer=p.name))
            out = p.fill == "zeros"
            buffers[p.name] = Buffer(p.name, f"{p.name}.npy", "out" if out else "in",
                                     dtype=p.dtype if out else None)
            arrays[p.name] = _random_bytes(p.fill, p.nbytes, rng)
        else:
            fields.append(Field("scalar", at, p.dtype, (p.value,)))
    launch = Launch(entry=kernel.entry, module="kernel.ptx", grid=kernel.grid, block=kernel.block,
                    fields=tuple(fields), buffers=buffers, layout="block" if kernel.struct_size else "list",
                    params_size=kernel.struct_size)
    write_launch(directory, launch, arrays, module)


def outputs(kernel: Kernel) -> dict:
    """Output buffer name -> the dtype its bytes hold."""
    return {p.name: p.dtype for p in kernel.params if isinstance(p, Buf) and p.fill == "zeros"}


# -- the kernels --------------------------------------------------------------------------------

def _pointers() -> Kernel:
    # a +0, b +8, bias +16, out +24. mma i = k*4 + m*2 + n of the first GEMM (K = 64), then
    # 8 + m*2 + n of the second (K = 32) chained on the first's D.
    mma = []
    for k in range(2):
        for m in range(2):
            for n in range(2):
                c = table(16, 16 * n) if k == 0 else D(m * 2 + n)  # bias[n*4 + (lane&3)]: 16n bytes
                mma.append(Mma(weight(0, 512 * (m * 2 + k)), weight(8, 256 * (n * 2 + k), LANE8), c))
    for m in range(2):
        for n in range(2):
            mma.append(Mma(weight(0, 512 * (4 + m)), weight(8, 256 * (4 + n), LANE8), D(4 + m * 2 + n)))
    return Kernel(
        "pointers", "nvvm_pointers", tuple(mma),
        # NVVM's scheduler puts the output address (add.s64 out + 8*lane) between the k=0 and k=1
        # mma of the first GEMM, so its K=64 chain is phases 1 and 2 (k = 1 each)
        phases=(4, 4, 4),
        params=(Buf("a", 6 * 512, "e4m3"), Buf("b", 6 * 256, "e4m3"), Buf("bias", 32, "f16"),
                Buf("out", 8 * 256, "zeros")))


def _struct_laneid() -> Kernel:
    # struct Params {a +0, b +8, bias +16, out +24, stride +32}; A = p.a[blockIdx.x*p.stride + t*32
    # + lane]: 16 bytes * ctaid.x * stride. mma i = k*2 + n (K = 64), then 4 + n chained.
    per_block = (term(16, CTAID_X, param(32)),)
    mma = [Mma(weight(0, 512 * k, terms=per_block), weight(8, 256 * (n * 2 + k), LANE8),
               table(16, 16 * n) if k == 0 else D(n))
           for k in range(2) for n in range(2)]
    mma += [Mma(weight(0, 1024, terms=per_block), weight(8, 256 * (4 + n), LANE8), D(2 + n)) for n in range(2)]
    stride = 96
    return Kernel(
        "struct_laneid", "nvvm_struct_laneid", tuple(mma),
        # the output address (shl/add of ctaid and laneid) lands between k=0 and k=1
        phases=(2, 2, 2),
        params=(Buf("a", (stride + 3 * 32) * 16, "e4m3"), Buf("b", 6 * 256, "e4m3"), Buf("bias", 32, "f16"),
                Buf("out", 2 * 128 * 8, "zeros"), Scalar("stride", "int32", stride)),
        grid=(2, 1, 1), struct_size=40)


def _tid_slabs() -> Kernel:
    # a +0, b +8, out +16; A = a[blockIdx.x*256 + threadIdx.z*64 + m*32 + lane] (uint4): 4096 bytes
    # a block, 1024 a slab; lane = threadIdx.x, which .reqntid 32,1,4 bounds to 0..31
    slab = (term(4096, CTAID_X), term(1024, TID_Z))
    mma = [Mma(weight(0, 512 * m, terms=slab), weight(8, 256 * n, LANE8), Zero())
           for m in range(2) for n in range(2)]
    return Kernel(
        "tid_slabs", "nvvm_tid_slabs", tuple(mma), phases=(4,),
        params=(Buf("a", 2 * 256 * 16, "e4m3"), Buf("b", 2 * 256, "e4m3"), Buf("out", 8 * 128 * 8, "zeros")),
        grid=(2, 1, 1), block=(32, 1, 4))


def _rolled() -> Kernel:
    # a +0, b +8, bias +16, out +24, pairs +32. Loop 1 (k < 4): A a[k*32+lane] (512 bytes a trip),
    # B b[(k*2+n)*32+lane] (512 a trip), acc in place from the bias table. Loop 2 (j < pairs):
    # A a[(4+2j+i)*32+lane] (1024 a trip), B b[(8+2j+i)*32+lane] (512 a trip), chained on acc[0].
    a1 = weight(0, 0, per_trip=((1, 512),))
    mma = [Mma(a1, weight(8, 0, LANE8, per_trip=((1, 512),)), table(16, 0)),
           Mma(a1, weight(8, 256, LANE8, per_trip=((1, 512),)), table(16, 16)),
           Mma(weight(0, 2048, per_trip=((2, 1024),)), weight(8, 2048, LANE8, per_trip=((2, 512),)), D(0)),
           Mma(weight(0, 2560, per_trip=((2, 1024),)), weight(8, 2304, LANE8, per_trip=((2, 512),)), D(2))]
    pairs = 2
    return Kernel(
        "rolled", "nvvm_rolled", tuple(mma), phases=(2, 2),
        params=(Buf("a", (4 + 2 * pairs) * 512, "e4m3"), Buf("b", (8 + 2 * pairs) * 256, "e4m3"),
                Buf("bias", 32, "f16"), Buf("out", 3 * 256, "zeros"), Scalar("pairs", "int32", pairs)),
        loops={1: (1, 4), 2: (2, None)},
        # regen may refuse a rolled loop instead of rebuilding its operands per trip, naming it
        regen_refusal={1: ("loop 1",), 2: ("loop 2",)})


def _branches() -> Kernel:
    # a +0, b +8, bias +16, out +24, use_bias +32. The seed is bias[lane & 3] or zero by an if/else;
    # the third mma only runs in odd blocks.
    mma = (Mma(weight(0, 0), weight(8, 0, LANE8), Merge((table(16, 0), Zero()))),
           Mma(weight(0, 512), weight(8, 256, LANE8), D(0)),
           Mma(weight(0, 1024), weight(8, 512, LANE8), D(1)))
    return Kernel(
        "branches", "nvvm_branches", mma, phases=(2, 1),
        params=(Buf("a", 3 * 512, "e4m3"), Buf("b", 3 * 256, "e4m3"), Buf("bias", 16, "f16"),
                Buf("out", 2 * 64 * 8, "zeros"), Scalar("use_bias", "int32", 1)),
        grid=(2, 1, 1))


def _bias_u16() -> Kernel:
    # a +0, b +8, bias +16 (unsigned short*), out +24; C word = bias[n*8 + 2*(lane&3)] and the next
    # u16: bytes 16n + 4*(lane & 3) and two more, two ld.u16 that NVVM joins by mov.b32 {lo, hi}
    mma = tuple(Mma(weight(0, 0), weight(8, 256 * n, LANE8), table(16, 16 * n, parts=(0, 2))) for n in range(2))
    return Kernel(
        "bias_u16", "nvvm_bias_u16", mma, phases=(2,),
        params=(Buf("a", 512, "e4m3"), Buf("b", 2 * 256, "e4m3"), Buf("bias", 32, "f16"),
                Buf("out", 2 * 256, "zeros")))


def _shared() -> Kernel:
    # a +0, b +8, out +16; A sm_a[m*32+lane] (uint4), B sm_b[n*32+lane] (uint2), staged by the warp
    mma = tuple(Mma(shared("sm_a", 512 * m, LANE16), shared("sm_b", 256 * n, LANE8), Zero())
                for m in range(2) for n in range(2))
    return Kernel(
        "shared", "nvvm_shared", mma, phases=(4,),
        params=(Buf("a", 2 * 512, "e4m3"), Buf("b", 2 * 256, "e4m3"), Buf("out", 4 * 256, "zeros")))


def _pack_transpose() -> Kernel:
    # a +0, b +8, out +16. mma 0, 1: n tiles of phase 1; mma 2: B = pack of both D of phase 1;
    # mma 3: C = movmatrix of mma 0's D, accumulated in place
    mma = (Mma(weight(0, 0), weight(8, 0, LANE8), Zero()),
           Mma(weight(0, 0), weight(8, 256, LANE8), Zero()),
           Mma(weight(0, 512), Pack((0, 1)), Zero()),
           Mma(weight(0, 1024), weight(8, 512, LANE8), Transpose((0,))))
    return Kernel(
        "pack_transpose", "nvvm_pack_transpose", mma, phases=(2, 1, 1),
        params=(Buf("a", 3 * 512, "e4m3"), Buf("b", 3 * 256, "e4m3"), Buf("out", 2 * 256, "zeros")))


def _f32_accum() -> Kernel:
    # a +0, b +8, out +16 (float4*); mma 0, 1 a K=64 chain from 0.0f, mma 2 chained on it
    mma = (Mma(weight(0, 0), weight(8, 0, LANE8), Zero()),
           Mma(weight(0, 512), weight(8, 256, LANE8), D(0)),
           Mma(weight(0, 1024), weight(8, 512, LANE8), D(1)))
    return Kernel(
        "f32_accum", "nvvm_f32_accum", mma, phases=(2, 1), accumulator="f32",
        params=(Buf("a", 3 * 512, "e4m3"), Buf("b", 3 * 256, "e4m3"), Buf("out", 2 * 512, "zeros", "float32")))


def _addr_math() -> Kernel:
    # a +0, b +8, bias +16, out +24, ld +32.
    # phase 1: A a[lane | (m << 5)] = 512m + 16 lane (or); B b[n*64 + (lane>>2)*8 + (lane&3)]
    # (bfi): 512n + 64*(lane>>2) + 8*(lane&3); C bias[(blockIdx.x << 8) | (lane & 3)] (prmt):
    # 1024 ctaid.x + 4*(lane&3).
    # phase 2: A a[size_t(blockIdx.x)*2048 + 64 + lane]: 32768 ctaid.x + 1024 + 16 lane;
    # B b[(blockIdx.x*ld + 4)*32 + lane]: 256 ctaid.x*ld + 1024 + 8 lane; C = D(mma 0).
    # phase 3: A a[blockIdx.x*(ld+1) + 96 + lane] (mad): 16 ctaid.x*ld + 16 ctaid.x + 1536 + 16 lane;
    # B b[lane]; C = D(mma 4).
    bfi_lane = tuple(8 * ((lane >> 2) * 8 + (lane & 3)) for lane in LANES)
    seed = table(16, 0, terms=(term(1024, CTAID_X),))
    mma = [Mma(weight(0, 512 * m), table(8, 512 * n, bfi_lane), seed) for m in range(2) for n in range(2)]
    mma.append(Mma(weight(0, 1024, terms=(term(32768, CTAID_X),)),
                   weight(8, 1024, LANE8, terms=(term(256, CTAID_X, param(32)),)), D(0)))
    mma.append(Mma(weight(0, 1536, terms=(term(16, CTAID_X), term(16, CTAID_X, param(32)))),
                   weight(8, 0, LANE8), D(4)))
    ld = 8
    return Kernel(
        "addr_math", "nvvm_addr_math", tuple(mma), phases=(4, 1, 1),
        params=(Buf("a", 2 * 2048 * 16, "e4m3"), Buf("b", ((ld + 4) * 32 + 32) * 8, "e4m3"),
                Buf("bias", (256 + 4) * 4, "f16"), Buf("out", 2 * 192 * 8, "zeros"), Scalar("ld", "int32", ld)),
        grid=(2, 1, 1))


def _gemm_interleaved() -> Kernel:
    # a +0, b +8, bias +16, out +24; mma i = k*4 + m*2 + n, A a[(m*2+k)*32+lane],
    # B b[(n*2+k)*32+lane], C bias[n*4+(lane&3)] at k = 0, else the D of mma i - 4
    mma = []
    for k in range(2):
        for m in range(2):
            for n in range(2):
                c = table(16, 16 * n) if k == 0 else D(m * 2 + n)
                mma.append(Mma(weight(0, 512 * (m * 2 + k)), weight(8, 256 * (n * 2 + k), LANE8), c))
    return Kernel(
        "gemm_interleaved", "nvvm_gemm_interleaved", tuple(mma),
        # the loads stay where the source has them, before the first mma that reads them (B of
        # (n, k) is loaded once and reused for m = 1): mma 0 | ld B | mma 1 | ld A | mma 2, 3 |
        # ld A, ld B | mma 4 | ld B | mma 5 | ld A | mma 6, 7 - six phases by DESIGN's definition
        phases=(1, 1, 2, 1, 1, 2),
        # every statement between them is a load that feeds a later mma of the GEMM: one phase
        grouping_gemm=(8,),
        params=(Buf("a", 4 * 512, "e4m3"), Buf("b", 4 * 256, "e4m3"), Buf("bias", 32, "f16"),
                Buf("out", 4 * 256, "zeros")))


KERNELS = {k.name: k for k in (_pointers(), _struct_laneid(), _tid_slabs(), _rolled(), _branches(), _bias_u16(),
                               _shared(), _pack_transpose(), _f32_accum(), _addr_math(), _gemm_interleaved())}
# each kernel as nvcc -O3 builds it, and with -lineinfo (.loc directives between the statements,
# inside phases too: the same phases, the same truth)
FLAGS = {"O3": ("-O3",), "lineinfo": ("-O3", "-lineinfo")}


def mma_runs(ptx: str, entry: str) -> list[int]:
    """How many mma each maximal run of consecutive mma statements in `entry` holds, read from the
    PTX text alone (comments, directives, labels and lone braces are not statements): the check
    that the truth's `phases` are this nvcc's, independent of rr."""
    lines = ptx.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f".visible .entry {entry}("))
    body = next(i for i in range(start, len(lines)) if lines[i].strip() == "{")
    end = next(i for i in range(body + 1, len(lines)) if lines[i].strip() == "}")
    text = []
    for line in lines[body + 1:end]:
        code = line.split("//", 1)[0].strip()
        if code and not code.startswith(".") and not code.endswith(":") and code not in "{}":
            text.append(code)
    runs, run = [], 0
    for statement in filter(None, (x.strip() for x in " ".join(text).split(";"))):
        if statement.startswith("mma."):
            run += 1
        elif run:
            runs, run = runs + [run], 0
    return runs + [run] if run else runs


# -- a phase's expected description, by arithmetic on its mma -----------------------------------

def phase_bounds(counts: tuple) -> list[range]:
    out, at = [], 0
    for c in counts:
        out.append(range(at, at + c))
        at += c
    return out


def _phase_of(counts: tuple, index: int) -> int:
    return next(p for p, r in enumerate(phase_bounds(counts), start=1) if index in r)


def _operand(values: list, counts: tuple) -> dict:
    """The expected Operand for the distinct values one phase reads in one position."""
    kinds = {type(v) for v in values}
    if len(kinds) != 1:
        raise ValueError(f"truth error: one operand of mixed kinds {values}")
    v0 = values[0]
    none = {"base": None, "phase": None, "offsets": [], "lane_bytes": None, "terms": [], "per_trip": {}}
    if isinstance(v0, Mem):
        same = {(v.kind, v.base, v.lane, v.terms, v.per_trip) for v in values}
        if len(same) != 1:
            raise ValueError(f"truth error: loads of one operand differ beyond their offsets: {values}")
        offsets = sorted({v.offset + part for v in values for part in v.parts})
        return {"kind": v0.kind, "base": dict(v0.base), "phase": None, "offsets": offsets,
                "lane_bytes": list(v0.lane), "terms": sorted_terms([term_json(t) for t in v0.terms]), "per_trip": dict(v0.per_trip)}
    if isinstance(v0, Zero):
        return {"kind": "zero", **none}
    if isinstance(v0, (D, Pack, Transpose)):
        of = {_phase_of(counts, i) for v in values for i in ((v.mma,) if isinstance(v, D) else v.mma)}
        if len(of) != 1:
            raise ValueError(f"truth error: one operand from the D of several phases {sorted(of)}")
        kind = {D: "D", Pack: "pack", Transpose: "transpose"}[type(v0)]
        return {"kind": kind, **none, "phase": of.pop()}
    if isinstance(v0, Merge):
        if len(set(values)) != 1:
            raise ValueError(f"truth error: different merges in one operand {values}")
        return {"kind": "merge", **none, "alternatives": [_operand([a], counts) for a in v0.alternatives]}
    raise TypeError(v0)


def expected_phase(kernel: Kernel, phase: int, counts: tuple | None = None) -> dict:
    """What `rr spec --json` must say about `phase` of `kernel` (DESIGN §3's geometry, the format's
    operands, the loop), from the source-level mma list."""
    counts = counts or kernel.phases
    indices = list(phase_bounds(counts)[phase - 1])
    mmas = [kernel.mma[i] for i in indices]
    inside = set(indices)
    chain_of, lengths, seeds = {}, [], []
    for i, m in zip(indices, mmas):
        if isinstance(m.c, D) and m.c.mma in inside:  # continues a chain of this phase
            chain = chain_of[m.c.mma]
        else:
            chain = len(lengths)
            lengths.append(0)
            seeds.append(m.c)
        lengths[chain] += 1
        chain_of[i] = chain
    if len(set(lengths)) != 1:
        raise ValueError(f"truth error: {kernel.name} phase {phase} has chains of unequal length {lengths}")
    a = list(dict.fromkeys(m.a for m in mmas))
    b = list(dict.fromkeys(m.b for m in mmas))
    k = lengths[0]
    m_, n_ = len(a) // k, len(b) // k
    assert m_ * k == len(a) and n_ * k == len(b) and m_ * n_ == len(lengths) and m_ * n_ * k == len(mmas)
    loop = kernel.loops.get(phase) if counts == kernel.phases else None
    return {
        "mma": len(mmas), "a_quads": len(a), "b_pairs": len(b), "chains": len(lengths), "chain_len": k,
        "m": m_, "n": n_, "k": k, "M": 16 * m_, "N": 8 * n_, "K": 32 * k,
        "operands": {"A": _operand(a, counts), "B": _operand(b, counts),
                     "C": _operand(list(dict.fromkeys(seeds)), counts)},
        "loop": None if loop is None else {"loop": loop[0], "trips": loop[1]},
    }


# -- comparing rr's description with the truth --------------------------------------------------

def _key(x) -> str:
    return json.dumps(x, sort_keys=True)


def sorted_terms(terms: list) -> list:
    """Terms with their factors sorted, in a canonical order (the format sorts them; which order
    it picks is not what the truth is about)."""
    norm = [{"coefficient": t["coefficient"], "factors": sorted(t["factors"], key=_key)} for t in terms]
    return sorted(norm, key=_key)


def _split_terms(op: dict, loop: dict | None, where: str, diffs: list) -> tuple:
    """rr's terms as (trip-0 offsets, {loop: bytes a trip}, other terms)."""
    steps = {i["register"]: i for i in (loop or {}).get("induction") or []}
    shift, per_trip, other = 0, {}, []
    for t in op.get("terms") or []:
        ind = [f for f in t["factors"] if f.get("kind") == "induction"]
        if not ind:
            other.append(t)
            continue
        if len(ind) != 1 or len(t["factors"]) != 1:
            diffs.append(f"{where}.terms: an induction term with other factors: {t}")
            continue
        f = ind[0]
        if loop is None or f.get("loop") != loop.get("loop") or ("register" in f and f["register"] not in steps):
            diffs.append(f"{where}.terms: induction factor {f} is not one of the phase's loop's "
                         f"induction variables {sorted(steps)}")
            continue
        var = steps[f["register"]] if "register" in f else {"step": 1, "init": 0}  # the trip number
        per_trip[f["loop"]] = per_trip.get(f["loop"], 0) + t["coefficient"] * var["step"]
        shift += t["coefficient"] * (var["init"] if isinstance(var.get("init"), int) else 0)
    offsets = sorted(o + shift for o in op.get("offsets") or [])
    return offsets, per_trip, other


def _compare_operand(got: dict | None, want: dict, where: str, loop: dict | None, diffs: list) -> None:
    if not isinstance(got, dict):
        diffs.append(f"{where}: missing (rr gives {got!r})")
        return
    for key in ("kind",) if want["kind"] == "merge" else ("kind", "base", "phase"):
        if got.get(key) != want[key]:
            diffs.append(f"{where}.{key}: rr {got.get(key)!r}, truth {want[key]!r}")
    if want["kind"] == "merge":
        alternatives = got.get("alternatives") or []
        if len(alternatives) != len(want["alternatives"]):
            diffs.append(f"{where}.alternatives: rr {[a.get('kind') for a in alternatives]}, "
                         f"truth {[a['kind'] for a in want['alternatives']]}")
            return
        order = lambda ops: sorted(ops, key=lambda o: (str(o.get("kind")), str(o.get("base"))))  # noqa: E731
        for i, (g, w) in enumerate(zip(order(alternatives), order(want["alternatives"]))):
            _compare_operand(g, w, f"{where}.alternatives[{i}]", loop, diffs)
        return
    offsets, per_trip, other = _split_terms(got, loop, where, diffs)
    if offsets != want["offsets"]:
        diffs.append(f"{where}.offsets (at trip 0): rr {offsets}, truth {want['offsets']}")
    if per_trip != want["per_trip"]:
        diffs.append(f"{where} bytes a trip (induction terms): rr {per_trip}, truth {want['per_trip']}")
    lane = got.get("lane_bytes")
    lane = None if lane is None or (isinstance(lane, list) and not any(lane)) else lane
    want_lane = want["lane_bytes"] if want["lane_bytes"] and any(want["lane_bytes"]) else None
    if lane != want_lane:
        diffs.append(f"{where}.lane_bytes: rr {lane}, truth {want_lane}")
    if sorted_terms(other) != want["terms"]:
        diffs.append(f"{where}.terms: rr {sorted_terms(other)}, truth {want['terms']}")


def differences(got: dict, want: dict) -> list[str]:
    """Every field in which rr's phase object `got` differs from the expected `want`; empty when
    rr is right."""
    diffs = []
    for key in ("mma", "a_quads", "b_pairs", "chains", "chain_len", "m", "n", "k", "M", "N", "K"):
        if got.get(key) != want[key]:
            diffs.append(f"{key}: rr {got.get(key)!r}, truth {want[key]!r}")
    if got.get("identity") is not True:
        diffs.append(f"identity: rr {got.get('identity')!r}, truth True")
    loop = got.get("loop")
    if want["loop"] is None:
        if loop is not None:
            diffs.append(f"loop: rr {loop}, truth null (straight-line phase)")
    elif not isinstance(loop, dict):
        diffs.append(f"loop: rr {loop!r}, truth {want['loop']}")
    else:
        for key in ("loop", "trips"):
            if loop.get(key) != want["loop"][key]:
                diffs.append(f"loop.{key}: rr {loop.get(key)!r}, truth {want['loop'][key]!r}")
        first, last = loop.get("first_stmt"), loop.get("last_stmt")
        if not (isinstance(first, int) and isinstance(last, int)
                and first <= got.get("first_stmt", 0) <= got.get("last_stmt", 0) <= last):
            diffs.append(f"loop: statements s{first}-s{last} do not hold the phase "
                         f"s{got.get('first_stmt')}-s{got.get('last_stmt')}")
        for var in loop.get("induction") or []:
            if not isinstance(var.get("step"), int):
                diffs.append(f"loop.induction: {var} has no integer step")
    operands = got.get("operands")
    if not isinstance(operands, dict):
        return diffs + [f"operands: missing (rr gives {operands!r})"]
    for name in ("A", "B", "C"):
        op = operands.get(name)
        _compare_operand(op, want["operands"][name], name, loop if isinstance(loop, dict) else None, diffs)
        source = got.get(f"{name.lower()}_source")
        if isinstance(op, dict) and op.get("source") != source:
            diffs.append(f"{name}.source: {op.get('source')!r} is not {name.lower()}_source {source!r}")
        if isinstance(op, dict) and want["operands"][name]["kind"] in MEMORY_KINDS \
                and got.get(f"{name.lower()}_offsets") != op.get("offsets"):
            diffs.append(f"{name.lower()}_offsets: {got.get(f'{name.lower()}_offsets')} is not "
                         f"operands.{name}.offsets {op.get('offsets')}")
    return diffs
