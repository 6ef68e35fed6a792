"""Decoding a PTX module once for the CPU interpreter: the entry and the functions it calls become
one numbered list of operations, with names made unique and liveness known.

* Registers and `.param`s declared inside a `{ … }` scope block are renamed `name@N` (N the block),
  so blocks that reuse a name (cuda_fp16's `low`, say) do not collide; a called function's
  registers are prefixed `func::`, since isolate's functions reuse the entry's names.
* Labels are per function; a callee's code follows the entry's, so program counters are global.
* Each register's last use is known, extended to the end of any loop that reads it, so the
  machine frees it once no thread can read it again (min-PC scheduling runs lower PCs first).
* The module's `.const` and `.global` variables are laid out in images built from their
  initializers, and each register's declared width is kept (a signed result narrower than its
  register is sign-extended to the register's width).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np

from rr.ptx.model import (
    Addr,
    Block,
    Directive,
    Function,
    Imm,
    Instruction,
    Label,
    Pair,
    Plist,
    Reg,
    Sym,
    TopLevel,
    Vec,
    registers_in,
)
from rr.ptx.opcodes import Opcode, parse_opcode
from rr.run.cpu import memory

_CONTROL = frozenset({"bra", "call", "ret", "exit", "trap"})  # the machine moves the pc (Machine._control)
_PARAM_DECL = re.compile(r"\.param\s+(?:\.align\s+\d+\s+)?\.(\w+)\s+([\w$%]+)\s*(?:\[(\d+)\])?")
_SHARED_DECL = re.compile(r"\.shared\s+(?:\.align\s+(\d+)\s+)?\.(\w+)\s+([\w$]+)\s*(?:\[(\d*)\])?")
_LOCAL_DECL = re.compile(r"\.local\s+(?:\.align\s+(\d+)\s+)?\.(\w+)\s+([\w$]+)\s*(?:\[(\d*)\])?")
_MODULE_VAR = re.compile(r"^\s*(?:\.(?:visible|extern|weak|common)\s+)*\.(const|global)\s+(?:\.align\s+(\d+)\s+)?"
                         r"(?:\.v(\d)\s+)?\.(\w+)\s+([\w$]+)\s*((?:\[\d*\]\s*)*)(?:=\s*(.*?))?\s*;?\s*$", re.S)
_REG_DECL = re.compile(r"\.reg\s+(?:\.v\d\s+)?(?:\.align\s+\d+\s+)?\.(\w+)\s+(.*?);?\s*$", re.S)
_REG_ITEM = re.compile(r"\s*([%\w$]+?)\s*(?:<\s*(\d+)\s*>)?\s*$")


class DecodeError(ValueError):
    """A module the interpreter cannot run; names the function, statement and line."""


@dataclass
class Op:
    pc: int
    func: str
    stmt: int  # statement number within its function (1-based, DESIGN §3)
    line: int
    opcode: str
    text: str
    guard: tuple | None  # (register, negated)
    operands: tuple
    code: Opcode  # the opcode parsed (rr.ptx.opcodes): what the semantics dispatch on
    reads: tuple = ()
    writes: tuple = ()
    target: int | None = None  # branch target pc
    call: dict | None = None  # call: {"func", "args": [...], "rets": [...]}
    kind: str = "plain"  # plain, or control (bra, call, ret, exit, trap: the machine moves the pc)
    run: object = None  # the compiled semantics of a plain op
    # an add/sub that ptxas fuses with the mul feeding it (_contract): (a, b, c, −a·b?, −c?) of one fma
    contract: tuple | None = None
    contracted: bool = False  # a mul fused so: only that add reads its product, which it computes itself

    def where(self) -> str:
        return f"{self.func} s{self.stmt} (line {self.line}): {self.opcode}"


@dataclass
class Program:
    entry: str
    ops: list
    func_start: dict  # function -> first pc
    formals: dict  # function -> (in param names, out param names), prefixed
    param_sizes: dict  # param-memory name -> bytes (call-block params and formals)
    shared: dict  # symbol -> offset in the block's shared window
    shared_bytes: int
    kernel_params: list  # the entry's Param objects
    local: dict = field(default_factory=dict)  # .local symbol -> offset in a thread's local window
    local_bytes: int = 0
    last_use: dict = field(default_factory=dict)  # register -> pc after which it is dead
    frees: dict = field(default_factory=dict)  # pc -> registers to free after it
    const: dict = field(default_factory=dict)  # .const symbol -> offset in the const image
    const_image: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))
    globals: dict = field(default_factory=dict)  # module .global symbol -> offset in its image
    globals_image: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))
    reg_widths: dict = field(default_factory=dict)  # register, or `%r`-style prefix of `%r<N>` -> bits

    def register_bits(self, name: str) -> int | None:
        """The declared width of a register (1 for a predicate), None where nothing declares it."""
        bits = self.reg_widths.get(name)
        if bits is None:
            bits = self.reg_widths.get(name.rstrip("0123456789") + "<>")
        return bits


def _rename(op, name, registers=frozenset()):
    """`op` with its names resolved through the scopes; a scoped register spelt without `%`
    (`low`, `fl`: parsed as a symbol) becomes a register again."""
    if isinstance(op, Reg):
        return op if op.special else Reg(name(op.name), op.negated)
    if isinstance(op, Sym):
        n = name(op.name, symbol=True)
        return Reg(n) if n in registers else Sym(n)
    if isinstance(op, Vec):
        return Vec(tuple(_rename(o, name, registers) for o in op.items))
    if isinstance(op, Pair):
        return Pair(_rename(op.first, name, registers), _rename(op.second, name, registers))
    if isinstance(op, Addr):
        base = _rename(op.base, name, registers) if op.base is not None else None
        return Addr(base, op.offset, tuple(_rename(o, name, registers) for o in op.extra))
    if isinstance(op, Plist):
        return Plist(tuple(_rename(o, name, registers) for o in op.items))
    return op


def _regs(op) -> list[str]:
    """The names of the ordinary (not special) registers an operand mentions."""
    if type(op) is Reg:  # most operands: no walk over the operand's parts
        return [] if op.special else [op.name]
    if type(op) is Imm:
        return []
    return [r.name for r in registers_in(op) if not r.special]


def _space_layout(module, functions, space: str) -> tuple[dict, int]:
    """Offsets of the `.shared` (or `.local`) variables in their window: module-level ones, and
    those NVVM declares inside function bodies (local depots)."""
    offsets, at = {}, 0
    decls = [item for item in module.items if isinstance(item, TopLevel)]
    for f in functions.values():
        decls += [d for d in f.body or () if isinstance(d, Directive) and d.kind == space]
    pattern = _SHARED_DECL if space == "shared" else _LOCAL_DECL
    for item in decls:
        if f".{space}" in item.text:
            m = pattern.search(item.text)
            if not m:
                continue
            align = int(m.group(1) or 4)
            width = max(int(re.sub(r"\D", "", m.group(2)) or 8) // 8, 1)
            count = int(m.group(4)) if m.group(4) else (0 if m.group(4) == "" else 1)
            at = -(-at // align) * align
            offsets[m.group(3)] = at
            at += width * count
    return offsets, at


def _type_bits(t: str) -> int | None:
    if t == "pred":
        return 1
    digits = re.sub(r"\D", "", t)
    return int(digits) if digits and t[0] in "bsuf" and not t.endswith("x2") else (32 if t.endswith("x2") else None)


def _record_registers(text: str, prefix: str, widths: dict, scoped: dict | None = None) -> None:
    """Declared widths of a `.reg` directive's registers: `%r<9>` as the prefix `%r<>`, a single
    name as itself (through `scoped`, the block's renaming, when inside a `{ }` block)."""
    m = _REG_DECL.match(text.strip())
    bits = _type_bits(m.group(1)) if m else None
    if bits is None:
        return
    for item in m.group(2).split(","):
        it = _REG_ITEM.match(item)
        if not it:
            continue
        name, count = it.group(1), it.group(2)
        if count is not None and scoped is None:
            widths[f"{prefix}{name}<>"] = bits
        elif count is not None:
            for i in range(int(count)):
                widths[scoped.get(f"{name}{i}", f"{prefix}{name}{i}")] = bits
        else:
            widths[(scoped or {}).get(name, prefix + name)] = bits


def _initializer(text: str, typ: str, count: int, where: str) -> bytes:
    """The bytes of a module variable's `= {…}` initializer (integers and 0f/0d floats of the
    declared type) up to its last value: elements past the list are zero."""
    width = max((_type_bits(typ) or 8) // 8, 1)
    dtype = {"f": {2: np.float16, 4: np.float32, 8: np.float64}}.get(typ[0], {}).get(width)
    values = [v for v in re.split(r"[\s,{}]+", text) if v]
    if len(values) > count:
        raise DecodeError(f"{where}: {len(values)} initial values for {count} elements")
    out = bytearray(width * len(values))
    for i, v in enumerate(values):
        try:
            if v[:2].lower() in ("0f", "0d"):
                raw = int(v[2:], 16)
            elif dtype is not None:
                raw = int(np.array(float(v), dtype).view({2: np.uint16, 4: np.uint32, 8: np.uint64}[width]))
            else:
                raw = int(v, 0)
        except ValueError:
            raise DecodeError(f"{where}: initial value {v!r} (only numbers are supported, not addresses)") from None
        out[i * width:(i + 1) * width] = (raw & ((1 << (8 * width)) - 1)).to_bytes(width, "little")
    return bytes(out)


def _module_variables(module, space: str) -> tuple[dict, np.ndarray]:
    """Offsets and the initial image of the module's `.const` or `.global` variables; the image's
    size is checked against the interpreter's memory limit (rr.run.cpu.memory) before it is made."""
    offsets, initial, size, bound = {}, [], 0, memory.limit()
    for item in module.items:
        if not isinstance(item, TopLevel) or item.kind != space:
            continue
        m = _MODULE_VAR.match(item.text)
        where = f"line {item.line}: .{space} variable"
        if not m:
            raise DecodeError(f"{where} {item.text.strip()[:60]!r} (a declaration the interpreter cannot lay out)")
        align, vec, typ, name, dims, init = m.group(2), m.group(3), m.group(4), m.group(5), m.group(6), m.group(7)
        sizes = [int(x) for x in re.findall(r"\[(\d*)\]", dims or "") if x] or [1]
        if dims and "[]" in dims.replace(" ", ""):
            raise DecodeError(f"{where} {name} has no size")
        count = math.prod(sizes) * int(vec or 1)
        width = max((_type_bits(typ) or 8) // 8, 1)
        at = -(-size // int(align or width)) * int(align or width)
        offsets[name] = at
        size = at + width * count
        memory.check(f".{space}", size, bound, f" (to the end of {name}, line {item.line})")
        if init:
            initial.append((at, _initializer(init, typ, count, f"{where} {name}")))
    image = np.zeros(size, np.uint8)
    for at, data in initial:
        image[at:at + len(data)] = np.frombuffer(data, np.uint8)
    return offsets, image


def decode(module, entry: str) -> Program:
    functions = {item.name: item for item in module.items if isinstance(item, Function) and item.has_body}
    if entry not in functions:
        raise DecodeError(f"no entry {entry!r} with a body in the module")
    shared, shared_bytes = _space_layout(module, functions, "shared")
    local, local_bytes = _space_layout(module, functions, "local")
    ops: list[Op] = []
    func_start, formals, param_sizes = {}, {}, {}
    pending = [entry]
    branch_fix: list[tuple[Op, str, str]] = []
    labels: dict[tuple, int] = {}
    blocks = [0]
    scoped_registers: set[str] = set()
    reg_widths: dict = {}

    def emit_function(fname: str) -> None:
        f: Function = functions[fname]
        prefix = "" if fname == entry else f"{fname}::"
        func_start[fname] = len(ops)
        if fname != entry:
            ins = [prefix + p.name for p in f.params]
            outs = [prefix + p.name for p in f.returns]
            formals[fname] = (ins, outs)
            for p in list(f.params) + list(f.returns):
                param_sizes[prefix + p.name] = p.size
        counter = [0]
        for d in f.body:
            if isinstance(d, Directive) and d.kind == "reg":
                _record_registers(d.text, prefix, reg_widths)

        def walk(items, scopes):
            for item in items:
                if isinstance(item, Directive) and item.kind in ("reg", "param", "local", "shared"):
                    continue  # declarations were gathered with their block
                if isinstance(item, Label):
                    labels[fname, item.name] = len(ops)
                elif isinstance(item, Block):
                    blocks[0] += 1
                    local = {}
                    for d in item.items:
                        if isinstance(d, Directive) and d.kind == "reg":
                            for r in d.register_names():
                                local[r] = f"{prefix}{r}@{blocks[0]}"
                                scoped_registers.add(local[r])
                            _record_registers(d.text, prefix, reg_widths, local)
                        if isinstance(d, Directive) and d.kind == "param":
                            m = _PARAM_DECL.search(d.text)
                            if m:
                                scoped = f"{prefix}{m.group(2)}@{blocks[0]}"
                                local[m.group(2)] = scoped
                                width = max(int(re.sub(r"\D", "", m.group(1)) or 8) // 8, 1)
                                param_sizes[scoped] = width * int(m.group(3) or 1)
                    walk(item.items, scopes + [local])
                elif isinstance(item, Instruction):
                    counter[0] += 1
                    compile_instruction(item, counter[0], scopes)

        def compile_instruction(item: Instruction, stmt: int, scopes) -> None:
            def name(n: str, symbol: bool = False) -> str:
                for scope in reversed(scopes):
                    if n in scope:
                        return scope[n]
                if symbol:  # a callee's formal parameters are its own; other symbols are global
                    formal = fname != entry and any(n == p.name for p in list(f.params) + list(f.returns))
                    return prefix + n if formal else n
                return prefix + n

            opcode, code = item.opcode, item.code
            # in the entry, outside any block that declares names, every name is already its own
            renamed = prefix or any(scopes)
            operands = tuple(_rename(o, name, scoped_registers) for o in item.operands) if renamed else item.operands
            guard = None
            if item.guard:
                g = item.guard
                guard = (name(g.lstrip("!")), g.startswith("!"))
            op = Op(len(ops), fname, stmt, item.line, opcode, item.render(), guard, operands, code)
            if code.base in _CONTROL:
                op.kind = "control"
            if code.base == "bra":
                branch_fix.append((op, fname, item.operands[-1].name))
            if code.base == "call":
                plists = [o for o in operands if isinstance(o, Plist)]
                callee = next(o.name for o in item.operands if isinstance(o, Sym))
                if callee not in functions:
                    raise DecodeError(f"{op.where()}: calls {callee!r}, which has no body in the module")
                rets = [str(x) for x in plists[0].items] if len(plists) == 2 else []
                args = [str(x) for x in plists[-1].items] if plists else []
                op.call = {"func": callee, "args": args, "rets": rets}
                if callee not in pending:
                    pending.append(callee)
            # the family's def/use rule, as linearisation reads it (rr.ptx.defuse): a first operand
            # that is an address is read
            writes = code.writes and bool(operands) and not isinstance(operands[0], Addr)
            dests = _regs(operands[0]) if writes else []
            srcs = [r for o in (operands[1:] if writes else operands) for r in _regs(o)]
            op.writes = tuple(dests)
            op.reads = tuple(srcs + ([guard[0]] if guard else []))
            ops.append(op)

        walk(f.body, [{}])
        # a function's last statement falls through to its end: add an implicit ret
        ops.append(Op(len(ops), fname, counter[0] + 1, f.last_line, "ret", "ret;", None, (), parse_opcode("ret"),
                      kind="control"))

    i = 0
    while i < len(pending):
        emit_function(pending[i])
        i += 1
    for op, fname, label in branch_fix:
        if (fname, label) not in labels:
            raise DecodeError(f"{op.where()}: branch to unknown label {label!r}")
        op.target = labels[fname, label]
    const, const_image = _module_variables(module, "const")
    module_globals, globals_image = _module_variables(module, "global")
    program = Program(entry, ops, func_start, formals, param_sizes, shared, shared_bytes,
                      list(functions[entry].params), local, local_bytes, const=const, const_image=const_image,
                      globals=module_globals, globals_image=globals_image, reg_widths=reg_widths)
    if "debug" not in (module.target or "").replace(",", " ").split():
        _contract(program)  # a `.target sm_XX, debug` module (nvcc -G) ptxas compiles unoptimised: no fusing
    _liveness(program)
    return program


CONTRACTED_TYPES = ("f16", "f16x2", "f32")


def _contractible(op, base: str) -> bool:
    code = op.code
    return (code.base == base and code.type in CONTRACTED_TYPES and code.rounding is None and "sat" not in code.mods
            and op.guard is None)


def _contract(program: Program) -> None:
    """What ptxas does to PTX that leaves it free to (the ISA: `mul`/`add` without a rounding
    modifier "may be optimized aggressively"; ptxas's default --fmad=true): a `mul` whose result
    only one `add` or `sub` of the same type and modifiers reads, in the same basic block, becomes
    one fma with it — rounded once. Established with ptxas 13 and nvdisasm on sm_90 for f32 (.ftz
    or not), f16 and f16x2: the pair becomes FFMA / HFMA2; a mul with a rounding modifier, an add
    with one, mixed .ftz, a second reader of the product, or a branch target between them keeps
    FMUL + FADD; where both operands of the add are such products, the first one is fused
    (tests/test_run_cpu_isa.py). An interpreter that rounded twice would differ from the GPU in
    the last bit wherever NVVM leaves the pair unfused."""
    ops = program.ops
    reads: dict = {}
    writes: dict = {}
    for op in ops:
        for r in op.reads:
            reads[r] = reads.get(r, 0) + 1
        for r in op.writes:
            writes[r] = writes.get(r, 0) + 1
    targets = {op.target for op in ops if op.target is not None}
    products = {op.writes[0]: op for op in ops if _contractible(op, "mul") and len(op.writes) == 1
                and writes[op.writes[0]] == 1 and reads.get(op.writes[0]) == 1}
    for op in ops:
        if not (_contractible(op, "add") or _contractible(op, "sub")) or len(op.operands) != 3:
            continue
        for i in (0, 1):
            src = op.operands[1 + i]
            mul = products.get(src.name) if isinstance(src, Reg) and not src.special else None
            if mul is None or mul.func != op.func or mul.code.mods != op.code.mods:
                continue
            between = ops[mul.pc + 1:op.pc]
            sources = set(mul.reads)
            if (any(pc in targets for pc in range(mul.pc + 1, op.pc + 1)) or any(o.kind == "control" for o in between)
                    or any(sources & set(o.writes) for o in between)):
                continue
            subtract = op.code.base == "sub"
            op.contract = (mul.operands[1], mul.operands[2], op.operands[2 - i], subtract and i == 1, subtract and i == 0)
            mul.contracted = True
            op.reads = op.reads + tuple(mul.reads)  # the product's operands live until the fma
            break


def _liveness(program: Program) -> None:
    last: dict[str, int] = {}
    for op in program.ops:
        for r in op.reads + op.writes:
            last[r] = op.pc
    # A loop keeps what it touches alive past its back edge: to the statement after it, which
    # min-PC scheduling runs only once no thread can go round again.
    for op in program.ops:
        if op.target is not None and op.target <= op.pc:
            for r in {r for o in program.ops[op.target:op.pc + 1] for r in o.reads + o.writes}:
                last[r] = max(last[r], op.pc + 1)
    program.last_use = last
    frees: dict[int, list] = {}
    for r, pc in last.items():
        frees.setdefault(pc, []).append(r)
    program.frees = frees
