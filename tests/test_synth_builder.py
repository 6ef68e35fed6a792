"""The PTX builder writes NVVM-style kernels that the front end round-trips exactly, that ptxas
accepts without warnings for sm_89 and sm_90, and whose registers are declared from use."""

from __future__ import annotations


import pytest

from conftest import PTXAS, run_ptxas
from rr.describe import find_phases
from rr.ptx import emit, linearise, parse
from rr.synth import KernelBuilder, KernelParam


def build(target: str = "sm_90") -> str:
    k = KernelBuilder("cuda_dldn_engine_swin_test_kernel",
                      [KernelParam("cuda_dldn_engine_swin_test_kernel_param_0", ".param .align 8 .b8 {name}[136]")],
                      directives=".maxntid 32, 1, 4", target=target)
    p = k.param()
    w = k.op("ld.param.u64", "b64", f"[{p}+40]")
    g = k.op("cvta.to.global.u64", "b64", w)
    lane = k.op("mov.u32", "b32", "%laneid")
    off = k.op("mul.wide.u32", "b64", lane, "16")
    base = k.op("add.s64", "b64", g, off)
    a, a2 = k.regs(4), k.regs(4)
    k.ins("ld.weak.global.ca.v4.u32", "{" + ", ".join(a) + "}", f"[{base}+192]")
    k.ins("ld.weak.global.ca.v4.u32", "{" + ", ".join(a2) + "}", f"[{base}+704]")
    bs = k.regs(4)
    k.ins("ld.weak.global.ca.v4.u32", "{" + ", ".join(bs) + "}", f"[{base}+3264]")
    zero = k.op("mov.u32", "b32", "0")
    d1, d2 = k.regs(2), k.regs(2)
    k.mma(d1, a, bs[:2], [zero, zero])
    k.mma(d2, a2, bs[2:], d1)  # the second k-step: C is the first's D
    # a loop with a guarded back edge
    i = k.op("mov.u32", "b32", "0")
    top = k.new_label()
    k.place(top)
    k.ins("add.s32", i, i, "1")
    again = k.op("setp.lt.u32", "pred", i, "4")
    k.bra(top, guard=again)
    # cuda_fp16-style inline asm block with registers of its own
    f = k.reg("f32")
    with k.block(("b16", "low"), ("b16", "high")) as (low, high):
        k.ins("mov.b32", "{low, high}", d2[0])
        k.ins("cvt.f32.f16", f, "low")
    out = k.op("cvt.rn.f16.f32", "b16", f)
    k.ins("st.global.u16", f"[{base}]", out)
    return k.module_text()


def test_built_kernel_round_trips_and_linearises():
    text = build()
    module = parse(text, "built.ptx")
    assert emit(module) == text
    stmts = linearise(module.function("cuda_dldn_engine_swin_test_kernel"))
    mma = [s for s in stmts if s.opcode.startswith("mma.")]
    assert len(mma) == 2 and all(s.last_line == s.line + 3 for s in mma)
    assert [s.scope for s in stmts if s.opcode in ("mov.b32", "cvt.f32.f16")] == [1, 1]
    (phase,) = find_phases(stmts)
    assert (phase.mma, phase.chains, phase.k, phase.M, phase.N, phase.K) == (2, 1, 2, 16, 8, 64)


def test_registers_are_declared_from_use():
    text = build()
    decls = [line.strip() for line in text.splitlines() if line.strip().startswith(".reg")]
    assert decls[:2] == [".reg .pred \t%p<2>;", ".reg .b16 \t%rs<2>;"]
    assert decls[2].startswith(".reg .b32 \t%r<") and decls[3] == ".reg .f32 \t%f<2>;"
    module = parse(text)
    used = {u for s in linearise(module.entries[0]) for u in s.defs + s.uses if u.startswith("%")}
    declared = set()
    for item in module.entries[0].body:
        declared.update(getattr(item, "register_names", lambda: [])())
    assert used <= declared


@pytest.mark.skipif(PTXAS is None, reason="ptxas is not on PATH")
@pytest.mark.parametrize("arch", ["sm_89", "sm_90"])
def test_ptxas_accepts_the_built_kernel_without_warnings(tmp_path, arch):
    src = tmp_path / "k.ptx"
    src.write_text(build(arch))
    r = run_ptxas(src, arch, "-v")
    assert r.returncode == 0, r.stderr
    assert "warning" not in (r.stdout + r.stderr).lower()
