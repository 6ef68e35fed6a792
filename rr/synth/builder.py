"""A PTX builder that writes NVVM-style kernels: the synthetic engine and the splice templates
emit their code through it.

It keeps an instruction list with NVVM's numbered virtual registers (`%p`, `%rs`, `%r`, `%rd`,
`%f`, `%fd`, numbered from 1 per class), declares them from use (`.reg .b32 %r<N>;`), writes
`{ … }` scope blocks with their own `.reg`s as cuda_fp16's inline asm does, the 4-line
`mma.sync` layout nvcc gives inline asm, `$L__BB…` labels and guarded branches. What it emits
round-trips through `rr.ptx` and is accepted by ptxas.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

# register class -> (PTX type of its declaration, NVVM prefix)
CLASSES = {
    "pred": (".pred", "%p"),
    "b16": (".b16", "%rs"),
    "b32": (".b32", "%r"),
    "f32": (".f32", "%f"),
    "b64": (".b64", "%rd"),
    "f64": (".f64", "%fd"),
}
_DECL_ORDER = ("pred", "b16", "b32", "f32", "b64", "f64")  # the order NVVM declares them in


@dataclass(frozen=True)
class KernelParam:
    name: str
    decl: str  # e.g. ".param .align 8 .b8 {name}[136]" or ".param .u64 {name}"

    def text(self) -> str:
        return "\t" + self.decl.format(name=self.name)


@dataclass
class _Block:
    regs: list = field(default_factory=list)  # (type, name) declared inside
    lines: list = field(default_factory=list)


class KernelBuilder:
    """Build one `.entry`. Operands are written as PTX text (`"%r12"`, `"[%rd3+16]"`, `"0f3F800000"`);
    helpers return the names of the registers they create."""

    def __init__(self, name: str, params: list[KernelParam] | None = None,
                 directives: str = "", version: str = "8.7", target: str = "sm_90"):
        self.name = name
        self.params = list(params or [])
        self.directives = directives
        self.version, self.target = version, target
        self._counts = {c: 0 for c in CLASSES}
        self._lines: list[str] = []
        self._blocks: list[_Block] = []
        self._labels = 0
        self.globals: list[str] = []  # module-level declarations, e.g. ".shared .align 16 .b8 smem[8192];"

    # -- registers -----------------------------------------------------------------------------

    def reg(self, cls: str = "b32") -> str:
        """A fresh virtual register of a class (pred, b16, b32, f32, b64, f64)."""
        self._counts[cls] += 1
        return f"{CLASSES[cls][1]}{self._counts[cls]}"

    def regs(self, n: int, cls: str = "b32") -> list[str]:
        return [self.reg(cls) for _ in range(n)]

    def param(self, index: int = 0) -> str:
        return self.params[index].name

    # -- statements ----------------------------------------------------------------------------

    def _emit(self, line: str) -> None:
        (self._blocks[-1].lines if self._blocks else self._lines).append(line)

    def ins(self, opcode: str, *operands: str, guard: str | None = None) -> None:
        """One instruction, NVVM layout: tab, opcode, tab, operands."""
        head = f"@{guard} {opcode}" if guard else opcode
        self._emit(f"\t{head}" + (f" \t{', '.join(operands)};" if operands else ";"))

    def op(self, opcode: str, cls: str, *sources: str, guard: str | None = None) -> str:
        """An instruction that defines one fresh register of class `cls`; returns its name."""
        d = self.reg(cls)
        self.ins(opcode, d, *sources, guard=guard)
        return d

    def mma(self, d: list[str], a: list[str], b: list[str], c: list[str],
            opcode: str = "mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16") -> None:
        """The 4-line layout nvcc gives an mma written as inline asm."""
        self._emit(f"\t{opcode}\n\t{{{', '.join(d)}}},\n\t{{{', '.join(a)}}},\n"
                   f"\t{{{', '.join(b)}}}, {{{', '.join(c)}}};")

    def comment(self, text: str) -> None:
        self._emit(f"\t// {text}")

    def blank(self) -> None:
        self._emit("")

    def new_label(self) -> str:
        self._labels += 1
        return f"$L__BB0_{self._labels}"

    def place(self, label: str) -> None:
        self._emit(f"\n{label}:")

    def bra(self, label: str, guard: str | None = None) -> None:
        self.ins("bra.uni" if guard is None else "bra", label, guard=guard)

    @contextlib.contextmanager
    def block(self, *local: tuple[str, str]):
        """A `{ … }` scope block with its own registers, e.g. `block(("b16", "low"), ("b16", "high"))`;
        yields their names."""
        blk = _Block(regs=[(CLASSES[cls][0], name) for cls, name in local])
        self._blocks.append(blk)
        try:
            yield [name for _, name in local]
        finally:
            self._blocks.pop()
        decls = "".join(f".reg {t} {n};\n\t" for t, n in blk.regs)
        body = "\n".join(line.lstrip("\t") if i == 0 else line for i, line in enumerate(blk.lines))
        self._emit("\t// begin inline asm\n\t{" + decls + body + "\n\t}\n\t// end inline asm")

    # -- output --------------------------------------------------------------------------------

    def declarations(self) -> list[str]:
        return [f"\t.reg {CLASSES[c][0]} \t{CLASSES[c][1]}<{self._counts[c] + 1}>;"
                for c in _DECL_ORDER if self._counts[c]]

    def entry_text(self) -> str:
        params = ",\n".join(p.text() for p in self.params)
        header = f".visible .entry {self.name}(\n{params}\n)" if params else f".visible .entry {self.name}()"
        if self.directives:
            header += "\n" + self.directives
        body = "\n".join(self.declarations()) + "\n\n" + "\n".join(self._lines)
        return f"{header}\n{{\n{body}\n\tret;\n\n}}\n"

    def module_text(self, banner: bool = True) -> str:
        head = ("//\n// Generated by rr.synth (NVVM-style)\n//\n\n" if banner else "")
        head += f".version {self.version}\n.target {self.target}\n.address_size 64\n\n"
        head += "".join(g + "\n" for g in self.globals) + ("\n" if self.globals else "")
        return head + "\t// .globl\t" + self.name + "\n" + self.entry_text()
