"""The CPU interpreter's machine: every thread of a chunk of blocks is one lane of numpy arrays.

Registers hold raw bits (uint16/32/64, bool for predicates). One statement runs for every active
thread at once; the threads at the lowest program counter run together (min-PC reconvergence), so
divergent branches and loops reconverge where the GPU's would, and warp-wide instructions (`shfl`,
`mma`, `movmatrix`) see every lane of the warp that reached them. A warp is 32 consecutive lanes
(threads in x-fastest order, each block padded to whole warps). Memory: global buffers at
synthetic 64-bit addresses (buffer i at (i+1)·2^40), the module's `.global` variables (one image
for the whole launch) and `.const` tables (read-only), the kernel's parameter image, per-thread
call-parameter memory, a shared window per block, RGBA16F textures and surfaces by handle.
Out-of-bounds accesses stop the run naming the statement, the thread and the address.
"""

from __future__ import annotations

import numpy as np

from rr.numerics import half, mma
from rr.numerics.forms import FORM_MODELS, mma_form
from rr.run import fragments

BUFFER_SHIFT = 40
PARAM_BASE = 0xF0 << BUFFER_SHIFT  # generic address of the kernel parameter space
HANDLE_BASE = 0xE0 << BUFFER_SHIFT  # texture and surface objects
MAX_CALL_DEPTH = 4
LOCAL_BASE = 0xC0 << BUFFER_SHIFT  # a thread's local window as a generic address (cvta.local)
SHARED_BASE = 0xD0 << BUFFER_SHIFT  # the shared window as a generic address (cvta.shared)
CONST_BASE = 0xB0 << BUFFER_SHIFT  # the module's .const tables as a generic address (cvta.const)
GLOBALS_BASE = 0xA0 << BUFFER_SHIFT  # the module's .global variables (their own global addresses)
BITS = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
TYPES = {"b8": np.uint8, "u8": np.uint8, "s8": np.int8, "b16": np.uint16, "u16": np.uint16, "s16": np.int16,
         "f16": np.float16, "b32": np.uint32, "u32": np.uint32, "s32": np.int32, "f32": np.float32,
         "f16x2": np.uint32, "e4m3x2": np.uint16, "e5m2x2": np.uint16, "b64": np.uint64, "u64": np.uint64,
         "s64": np.int64, "f64": np.float64, "pred": np.bool_,
         # held as raw bits: bf16 and tf32 have no numpy type; packed integer halves are words
         "bf16": np.uint16, "bf16x2": np.uint32, "tf32": np.uint32, "u16x2": np.uint32, "s16x2": np.uint32}
SPECIAL_REGISTERS = frozenset(
    f"%{r}.{c}" for r in ("tid", "ntid", "ctaid", "nctaid") for c in "xyz") | {
    "%laneid", "%warpid", "%lanemask_eq", "%lanemask_le", "%lanemask_lt", "%lanemask_ge", "%lanemask_gt"}


_UNITS = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32), 8: np.dtype(np.uint64)}


def _units(mem: np.ndarray, offs: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """`mem` as the widest words that the access's width, every offset and the memory's size and
    address are multiples of (a whole access of more than 8 bytes as one opaque word: numpy takes
    those several times faster than pairs of integers), and the word index of each lane's bytes:
    (lanes,) for one word a lane, else (lanes, width / unit)."""
    spread = int(np.bitwise_or.reduce(offs)) if offs.size else 0
    for u in (width, 8, 4, 2, 1):
        if u <= width and not u & (u - 1) and width % u == 0 and mem.size % u == 0 and mem.ctypes.data % u == 0 and not spread & (u - 1):
            first = offs >> (u.bit_length() - 1)  # offsets are never negative (checked): // u, 5x faster
            words = mem.view(_UNITS.get(u) or np.dtype((np.void, u)))
            return words, first if width == u else first[:, None] + np.arange(width // u)
    raise AssertionError("a byte is always a unit")


def _pick(x: np.ndarray, lanes: np.ndarray | None) -> np.ndarray:
    """The selected lanes' elements (None: every lane)."""
    return x if lanes is None else x[lanes]


class ExecutionError(RuntimeError):
    """The kernel did something the GPU would fault on, or the interpreter cannot do."""


class Machine:
    def __init__(self, program, blocks: np.ndarray, grid: tuple, block: tuple, param_image: bytes,
                 buffers: list, images: list, mma_model, module_globals: np.ndarray | None = None):
        self.program = program
        self.grid, self.block = grid, block
        threads = block[0] * block[1] * block[2]
        self.T = -(-threads // 32) * 32  # lanes per block, padded to whole warps
        self.nblocks = len(blocks)
        self.n = n = self.nblocks * self.T
        self.lane_block = np.repeat(np.arange(self.nblocks), self.T)
        local = np.tile(np.arange(self.T), self.nblocks)
        self.done = np.tile(np.arange(self.T) >= threads, self.nblocks)
        tx, ty, tz = local % block[0], (local // block[0]) % block[1], local // (block[0] * block[1])
        bx, by, bz = blocks % grid[0], (blocks // grid[0]) % grid[1], blocks // (grid[0] * grid[1])
        lb = self.lane_block
        u = np.uint32
        self.special = {
            "%tid.x": tx.astype(u), "%tid.y": ty.astype(u), "%tid.z": tz.astype(u),
            "%ntid.x": u(block[0]), "%ntid.y": u(block[1]), "%ntid.z": u(block[2]),
            "%ctaid.x": bx[lb].astype(u), "%ctaid.y": by[lb].astype(u), "%ctaid.z": bz[lb].astype(u),
            "%nctaid.x": u(grid[0]), "%nctaid.y": u(grid[1]), "%nctaid.z": u(grid[2]),
            "%laneid": (local % 32).astype(u), "%warpid": (local // 32).astype(u),
        }
        lane = (local % 32).astype(np.uint64)
        one = np.uint64(1)
        self.special.update({  # bit masks relative to the thread's lane
            "%lanemask_eq": (one << lane).astype(u), "%lanemask_lt": ((one << lane) - one).astype(u),
            "%lanemask_le": ((one << (lane + one)) - one).astype(u),
            "%lanemask_ge": (~((one << lane) - one)).astype(u), "%lanemask_gt": (~((one << (lane + one)) - one)).astype(u)})
        self.regs: dict[str, np.ndarray] = {}  # register -> its bits
        # f16 and f16x2 registers as an f16 instruction left them or one read them: the values of
        # their halves as f32, `n` or `2n` (a word's low half first); a register there and not in
        # `regs` has its bits made from them where something reads those (`get`)
        self.halves: dict[str, np.ndarray] = {}
        self.pmem: dict[str, np.ndarray] = {}
        self.params = np.frombuffer(param_image, dtype=np.uint8)
        self.buffers = buffers  # uint8 views, written in place
        self.images = images  # (array (h, w, 4) float16, is_surface)
        self.shared = np.zeros((self.nblocks, max(program.shared_bytes, 1)), np.uint8)
        self.const = program.const_image  # read-only
        self.module_globals = np.zeros(0, np.uint8) if module_globals is None else module_globals
        self.local = np.zeros((n, max(program.local_bytes, 1)), np.uint8) if program.local_bytes else None
        self.pc = np.zeros(n, np.int64)
        # A thread inside called functions is scheduled by its call sites, outermost first, then by
        # its place in the innermost callee (callee code follows the entry's, so raw pcs would run
        # callers' later statements before their callees finish). A small stack, no recursion.
        self.depth = np.zeros(n, np.int64)
        self.sites = np.zeros((n, MAX_CALL_DEPTH), np.int64)
        self.starts = np.zeros((n, MAX_CALL_DEPTH), np.int64)
        self.mma_model = mma_model
        self.unwritten: dict[str, str] = {}  # register -> where it was first read unwritten
        self.calls: dict[str, dict] = {}  # callee -> its active call site
        self.lane_steps = 0  # statements executed, summed over lanes (padding lanes included)

    # -- registers ------------------------------------------------------------------------------

    def get(self, name: str, op) -> np.ndarray:
        r = self.regs.get(name)
        if r is None:
            values = self.halves.get(name)
            if values is None:
                self.unwritten.setdefault(name, op.where())
                return np.zeros(self.n, np.uint32)
            r = half.f16_bits(values)
            r = self.regs[name] = r if r.size == self.n else r.view(np.uint32)
        return r

    def touch(self, name: str, op) -> None:
        """A read of a register whose value is not needed: recorded if it was never written."""
        if name not in self.regs and name not in self.halves:
            self.unwritten.setdefault(name, op.where())

    def put(self, name: str, value, mask) -> None:
        value = np.asarray(value)
        if value.dtype != np.bool_:
            value = value.view(BITS[value.dtype.itemsize * 8])  # raw bits, scalars included
        if mask is None:
            self.regs[name] = value if value.shape == (self.n,) else np.broadcast_to(value, (self.n,)).copy()
            self.halves.pop(name, None)
            return
        old = self.regs.get(name) if name not in self.halves else self.get(name, None)
        self.halves.pop(name, None)
        if old is None:
            old = np.zeros(self.n, value.dtype)
        elif old.dtype != value.dtype:  # a narrower write zero-extends: keep both at the wider width
            if value.dtype == np.bool_ or old.dtype == np.bool_:
                old = np.zeros(self.n, value.dtype)
            elif old.dtype.itemsize > value.dtype.itemsize:
                value = value.astype(old.dtype)
            else:
                old = old.astype(value.dtype)
        self.regs[name] = np.where(mask, value, old)

    def put_halves(self, name: str, values, count: int, mask) -> None:
        """An f16 (`count` 1) or f16x2 (2) result as the f32 values of its halves (rr.numerics.half's
        `*_values`), kept so for the f16 instructions that read it; under a mask, merged as bits."""
        values = np.asarray(values)
        if values.shape != (count * self.n,):
            values = np.broadcast_to(values.reshape(-1, count), (self.n, count)).reshape(-1).copy()
        if mask is not None:
            bits = half.f16_bits(values)
            self.put(name, bits if count == 1 else bits.view(np.uint32), mask)
            return
        self.halves[name] = values
        self.regs.pop(name, None)

    def values(self, name: str, op, count: int) -> np.ndarray:
        """An f16 (`count` 1) or f16x2 (2) register's halves as their f32 values, `count · n`: as
        held (`halves`), else made from its bits (viewed as the instruction's type, as `get` and
        rr.run.cpu.values.view read them) and held from then on while it holds those bits."""
        v = self.halves.get(name)
        if v is not None and v.size == count * self.n:
            return v
        r = self.get(name, op)
        own = r.dtype.itemsize == 2 * count and r.shape == (self.n,)
        bits = r if own else np.broadcast_to(r.astype(BITS[16 * count]), (self.n,))  # narrower or wider: resized
        v = half.f16_as_f32(np.ascontiguousarray(bits).view(np.float16))
        if own and name in self.regs:
            self.halves[name] = v
        return v

    def move_halves(self, dest: str, src: str, count: int, mask) -> bool:
        """`mov` of a register whose halves are held (`count` a lane, as the mov's type has): the
        values and any bits go to `dest` as they are; False (nothing done) where they are not held."""
        values = self.halves.get(src)
        if mask is not None or values is None or values.size != count * self.n:
            return False
        bits = self.regs.get(src)
        if bits is None:
            self.regs.pop(dest, None)
        else:
            self.regs[dest] = bits
        self.halves[dest] = values
        return True

    # -- memory ---------------------------------------------------------------------------------

    def _fail(self, op, lanes: np.ndarray | None, what: str) -> None:
        lane = 0 if lanes is None else int(np.flatnonzero(lanes)[0])
        b, t = divmod(lane, self.T)
        raise ExecutionError(f"{op.where()}: {what} (block {b} of this chunk, thread {t})")

    def _first_bad(self, lanes: np.ndarray | None, bad: np.ndarray) -> np.ndarray:
        """The lane mask of the first selected lane whose access is out of bounds."""
        first = np.flatnonzero(bad)[0] if lanes is None else np.flatnonzero(lanes)[bad][0]
        return np.arange(self.n) == first

    def gather(self, space: str, addr: np.ndarray, width: int, op, mask) -> np.ndarray:
        """`width` bytes per lane at `addr` → (n, width) uint8 (zeros where a lane is inactive)."""
        if mask is not None and not mask.any():
            return np.zeros((self.n, width), np.uint8)
        addr = np.broadcast_to(np.asarray(addr, np.uint64), (self.n,))
        out = None
        for mem, offs, sel in self.regions(space, addr, width, op, mask):
            words, index = _units(mem, offs, width)
            got = words.take(index).view(np.uint8).reshape(-1, width)
            if sel is None:  # every lane, from one memory
                return got
            if out is None:
                out = np.zeros((self.n, width), np.uint8)
            out[sel] = got
        return out

    def scatter(self, space: str, addr: np.ndarray, data: np.ndarray, op, mask) -> None:
        if mask is not None and not mask.any():
            return
        width = data.shape[1]
        addr = np.broadcast_to(np.asarray(addr, np.uint64), (self.n,))
        for mem, offs, sel in self.regions(space, addr, width, op, mask, write=True):
            words, index = _units(mem, offs, width)
            # lanes writing the same unit: the last one wins, as it did byte by byte (all lanes'
            # accesses are aligned to the unit, so two of them overlap in whole units or not at all)
            words[index] = np.ascontiguousarray(_pick(data, sel)).view(words.dtype).reshape(index.shape)

    def regions(self, space, addr, width, op, lanes, write: bool = False):
        """(flat memory, byte offsets of the selected lanes, lane selection) per memory touched;
        `lanes` None is every lane, and so is a selection of None."""
        if space == "generic":  # by the window the address falls in
            tag = addr >> np.uint64(BUFFER_SHIFT)
            live = np.ones(self.n, bool) if lanes is None else lanes
            windows = (("shared", SHARED_BASE), ("local", LOCAL_BASE), ("param", PARAM_BASE), ("const", CONST_BASE))
            for window, base in windows:
                sel = live & (tag == np.uint64(base >> BUFFER_SHIFT))
                if sel.any():
                    yield from self.regions(window, addr - np.uint64(base) if window != "param" else addr,
                                            width, op, sel, write)
            rest = live.copy()
            for _, base in windows:
                rest &= tag != np.uint64(base >> BUFFER_SHIFT)
            if rest.any():
                yield from self.regions("global", addr, width, op, None if lanes is None and rest.all() else rest, write)
            return
        if space == "const":
            if write:
                self._fail(op, lanes, "a write to constant memory")
            yield from self._window(self.const, "const", addr, width, op, lanes)
            return
        if space == "local":
            if self.local is None:
                self._fail(op, lanes, "a local access, but the module declares no .local memory")
            a = _pick(addr, lanes).astype(np.int64)
            size = self.local.shape[1]
            bad = (a < 0) | (a + width > size)
            if bad.any():
                self._fail(op, self._first_bad(lanes, bad),
                           f"local access of {width} bytes at {int(a[bad][0])} outside the {size}-byte window")
            rows = np.arange(self.n) if lanes is None else np.flatnonzero(lanes)
            yield self.local.reshape(-1), rows * size + a, lanes
            return
        if space == "shared":
            a = _pick(addr, lanes).astype(np.int64)
            size = self.shared.shape[1]
            bad = (a < 0) | (a + width > size)
            if bad.any():
                self._fail(op, self._first_bad(lanes, bad),
                           f"shared access of {width} bytes at {int(a[bad][0])} outside the {size}-byte window")
            yield self.shared.reshape(-1), _pick(self.lane_block, lanes) * size + a, lanes
            return
        if space == "param":
            a = _pick(addr, lanes)
            if np.all((a >> np.uint64(BUFFER_SHIFT)) == np.uint64(PARAM_BASE >> BUFFER_SHIFT)):
                off = (a - np.uint64(PARAM_BASE)).astype(np.int64)
                if (off + width > self.params.size).any():
                    self._fail(op, lanes, f"parameter read past the {self.params.size}-byte image")
                yield self.params, off, lanes
                return
            self._fail(op, lanes, "a parameter address that is not in the kernel's parameter space")
        picked = _pick(addr, lanes)
        if picked.size:  # most accesses: every lane in one buffer, told by the lowest and highest address
            top = int(picked.max())
            tag = top >> BUFFER_SHIFT
            if (int(picked.min()) >> BUFFER_SHIFT == tag and 0 < tag <= len(self.buffers)
                    and tag != GLOBALS_BASE >> BUFFER_SHIFT and top - (tag << BUFFER_SHIFT) + width <= self.buffers[tag - 1].size):
                yield self.buffers[tag - 1], (picked - np.uint64(tag << BUFFER_SHIFT)).view(np.int64), lanes
                return
        ids = (addr >> np.uint64(BUFFER_SHIFT)).view(np.int64) - 1
        offs = (addr & np.uint64((1 << BUFFER_SHIFT) - 1)).view(np.int64)  # below 2^40: the same bits
        touched = _pick(ids, lanes)
        one = touched.size and touched.min() == touched.max()
        for i in (touched[:1] if one else np.unique(touched)):
            sel = lanes if one else ((ids == i) if lanes is None else lanes & (ids == i))
            if i == (GLOBALS_BASE >> BUFFER_SHIFT) - 1:
                yield from self._window(self.module_globals, "module .global", addr - np.uint64(GLOBALS_BASE),
                                        width, op, sel)
                continue
            if not 0 <= i < len(self.buffers):
                self._fail(op, sel, f"global address 0x{int(_pick(addr, sel)[0]):x} is in no buffer")
            mem = self.buffers[i]
            o = _pick(offs, sel)
            if o.max() + width > mem.size:
                bad = o + width > mem.size
                self._fail(op, self._first_bad(sel, bad),
                           f"global access of {width} bytes at offset {int(o[bad][0])} of a {mem.size}-byte buffer")
            yield mem, o, sel

    def _window(self, mem, what, offset, width, op, lanes):
        """One flat memory addressed by byte offset (the module's const or global image)."""
        a = _pick(offset, lanes).astype(np.int64)
        bad = (a < 0) | (a + width > mem.size)
        if bad.any():
            self._fail(op, self._first_bad(lanes, bad),
                       f"{what} access of {width} bytes at {int(a[bad][0])} outside its {mem.size} bytes")
        yield mem, a, lanes

    def param_memory(self, name: str) -> np.ndarray:
        if name not in self.pmem:
            self.pmem[name] = np.zeros((self.n, self.program.param_sizes[name]), np.uint8)
        return self.pmem[name]

    # -- running --------------------------------------------------------------------------------

    def run(self, progress=None) -> None:
        """Run until every thread has returned. While all live threads share one pc it is kept as
        a number; the pc array is written when control splits them."""
        ops, frees = self.program.ops, self.program.frees
        pc, done = self.pc, self.done
        live_mask = None if not done.any() else ~done
        uniform = 0
        steps = 0
        while True:
            if uniform is not None:
                lo, active = uniform, live_mask
            else:
                live = ~done
                if not live.any():
                    return
                at = self._lowest(live)
                lo = int(pc[at][0])
                if at.sum() == live.sum():
                    uniform, active = lo, live_mask
                else:
                    active = at
            op = ops[lo]
            eff = active
            if op.guard is not None:
                g = self.get(op.guard[0], op).astype(bool)
                g = ~g if op.guard[1] else g
                eff = g if eff is None else (eff & g)
            if op.kind == "plain":
                op.run(self, eff)
                if uniform is not None:
                    uniform += 1
                else:
                    pc[active] += 1
            else:
                if uniform is not None:
                    pc[~done] = uniform
                    uniform = None
                act = ~done if active is None else active
                taken = act if eff is None else (act & eff)
                pc[act & ~taken] = lo + 1
                self._control(op, taken, lo)
                live_mask = None if not done.any() else ~done
            for r in frees.get(lo, ()):
                self.regs.pop(r, None)
                self.halves.pop(r, None)
            steps += 1
            self.lane_steps += self.n if active is None else int(np.count_nonzero(active))
            if progress is not None and steps % 5000 == 0:
                progress(steps, lo)

    def _in_function(self, func: str) -> np.ndarray:
        """Threads with `func` on their call stack."""
        levels = np.arange(MAX_CALL_DEPTH)[None, :] < self.depth[:, None]
        return ((self.starts == self.program.func_start[func]) & levels).any(1)

    def _lowest(self, live: np.ndarray) -> np.ndarray:
        """The live threads first in (call site, …, call site, pc) order; a missing level sorts
        first, so a thread at a call site enters the call before its callee's threads go on."""
        at = live.copy()
        for level in range(MAX_CALL_DEPTH + 1):
            if level == 0:
                col = np.where(self.depth == 0, self.pc, self.sites[:, 0])
            else:
                inner = np.where(self.depth == level, self.pc, self.sites[:, min(level, MAX_CALL_DEPTH - 1)])
                col = np.where(self.depth < level, -1, inner - self.starts[:, level - 1])
            at &= col == col[at].min()
            if not (self.depth[at] > level).any():
                return at
        return at

    def _control(self, op, taken: np.ndarray, lo: int) -> None:
        base = op.code.base
        if base == "bra":
            self.pc[taken] = op.target
        elif base == "call":
            callee = op.call["func"]
            site = self.calls.get(callee)
            if site is not None and site is not op.call and self._in_function(callee).any():
                raise ExecutionError(f"{op.where()}: {callee} entered from two call sites at once")
            self.calls[callee] = op.call
            ins, _ = self.program.formals[callee]
            for actual, formal in zip(op.call["args"], ins):
                self.param_memory(formal)[taken] = self.param_memory(actual)[taken]
            d = self.depth[taken]
            if (d >= MAX_CALL_DEPTH).any():
                raise ExecutionError(f"{op.where()}: calls nested deeper than {MAX_CALL_DEPTH}")
            rows = np.flatnonzero(taken)
            self.sites[rows, d] = lo
            self.starts[rows, d] = self.program.func_start[callee]
            self.depth[taken] += 1
            self.pc[taken] = self.program.func_start[callee]
        elif base in ("ret", "exit"):
            if op.func == self.program.entry or base == "exit":
                self.done |= taken
                return
            site = self.calls[op.func]
            _, outs = self.program.formals[op.func]
            for actual, formal in zip(site["rets"], outs):
                self.param_memory(actual)[taken] = self.param_memory(formal)[taken]
            rows = np.flatnonzero(taken)
            self.depth[taken] -= 1
            self.pc[taken] = self.sites[rows, self.depth[taken]] + 1
        elif base == "trap":
            self._fail(op, taken, "trap executed")


def mma_sync(m: Machine, op, mask, d_regs, a_regs, b_regs, c_regs) -> None:
    """One `mma.sync.aligned.…row.col` of a form rr.numerics.forms knows, over every warp of the chunk."""
    mma_sync_run(m, [op], mask, [(d_regs, a_regs, b_regs, c_regs)])


def _c_view(c: np.ndarray, form) -> np.ndarray:
    """An f32-layout C matrix as the form's accumulator: s32 for an integer form (its D goes
    back into the registers as the same bits)."""
    return c.view(np.int32) if form.integer else c


def mma_sync_run(m: Machine, ops: list, mask, members: list) -> None:
    """A run of `mma.sync` statements (`ops`, their (D, A, B, C) registers `members`) that share
    A's registers, none of whose registers is a D of an earlier one (rr.run.cpu.semantics.
    fuse_mma_runs): each as `mma_sync`, every operand read before any D is written, and A's
    fragments and values made once."""
    if mask is not None and not np.all(mask.reshape(-1, 32).all(1) | ~mask.reshape(-1, 32).any(1)):
        raise ExecutionError(f"{ops[0].where()}: mma.sync reached by part of a warp")

    def w(name, op):
        return m.get(name, op).view(np.uint32).reshape(-1, 32)
    a = fragments.a_matrix([w(r, ops[0]) for r in members[0][1]])
    bs = [fragments.b_matrix([w(r, op) for r in b_regs]) for op, (_, _, b_regs, _) in zip(ops, members)]
    form = mma_form(ops[0].code.shape, ops[0].code.types, ops[0].code.mods)
    other_form = form is not None and not form.fp8
    if not other_form and m.mma_model is mma.mma_sync and all(len(c_regs) == 2 for *_, c_regs in members):
        # e4m3's f16 form, C added in the D registers' own layout: C's halves as values (those a D
        # of an earlier mma left), D's left so (Machine.halves) for the f16 code and the mma after
        cs = [[m.values(r, op, 2) for r in c_regs] for op, (*_, c_regs) in zip(ops, members)]
        for (d_regs, *_), t, c in zip(members, mma.mma_sync_sums(a, bs), cs):
            for name, tr, cr in zip(d_regs, _d_halves(t), c):
                m.put_halves(name, mma.add_c_values(tr, cr.reshape(tr.shape)).reshape(-1), 2, mask)
        return
    cs = [fragments.c_matrix([w(r, op) for r in c_regs]) for op, (*_, c_regs) in zip(ops, members)]
    if other_form:  # the other forms' models, by the name of the e4m3 one (rr.numerics.forms)
        model = FORM_MODELS[next((k for k, f in mma.MMA_MODELS.items() if f is m.mma_model), mma.DEFAULT_MMA)]
        ds = [model(form, a, b, _c_view(c, form)).view(c.dtype) for b, c in zip(bs, cs)]
    elif m.mma_model is mma.mma_sync and len(ops) > 1:
        ds = mma.mma_sync_many(a, bs, cs)
    else:
        ds = [m.mma_model(a, b, c) for b, c in zip(bs, cs)]  # the .f16 or .f32 form, by c's dtype
    for (d_regs, _, _, _), d in zip(members, ds):
        for name, value in zip(d_regs, fragments.d_registers(d)):
            m.put(name, value.reshape(-1), mask)


def _d_halves(t: np.ndarray) -> list:
    """(warps, 16, 8) f32 values of an f16 D → its two registers' halves, views (warps, 64) of it:
    the layout of rr.run.fragments.d_registers (register r's lane (g, t) holds row 8r + g, columns
    2t, 2t + 1), a lane's two values 8 bytes."""
    rows = t.view(np.uint64).reshape(-1, 2, 32)
    return [rows[:, r].view(np.float32) for r in range(2)]
