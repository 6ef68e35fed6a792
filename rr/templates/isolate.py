"""The `isolate` template: the cut statements moved, unchanged, into a `.func` and called.

The function takes the cut's live-in registers in one `.param` byte array and returns its
live-out registers in another (so any number of them fit, whatever their types); in it the cut
runs on registers of the same names, declared like the entry's. The call site is a `{ … }` block,
like NVVM's call sequences: stores of the live-ins, the `call`, loads of the live-outs. Predicates
travel as u32 (`selp` out, `setp.ne` back). PTX has no `.noinline` and ptxas does not inline
`.func` calls, so the phase really runs out of line — the isolation experiment of the reference.
"""

from __future__ import annotations

from rr.ptx.model import Directive
from rr.splice.recipe import Check
from rr.templates.base import Cut, Entry, Spliced
from rr.templates.body import register_types

_WIDTH = {".pred": 4, ".b8": 1, ".u8": 1, ".s8": 1, ".b16": 2, ".u16": 2, ".s16": 2, ".f16": 2,
          ".b32": 4, ".u32": 4, ".s32": 4, ".f32": 4, ".b64": 8, ".u64": 8, ".s64": 8, ".f64": 8}


def _layout(names: list[str], types: dict[str, str]) -> tuple[list[tuple[str, str, int]], int]:
    """(name, type, byte offset) for each register packed into a parameter array, and its size."""
    out, at = [], 0
    for n in names:
        w = _WIDTH[types[n]]
        at = -(-at // w) * w
        out.append((n, types[n], at))
        at += w
    return out, max(at, 4)


def _store(space: str, array: str, name: str, rtype: str, offset: int, temp: str) -> list[str]:
    if rtype == ".pred":
        return [f"selp.u32 \t{temp}, 1, 0, {name};", f"st.{space}.b32 \t[{array}+{offset}], {temp};"]
    return [f"st.{space}.{'b' + rtype[2:] if rtype[1] in 'bus' else rtype[1:]} \t[{array}+{offset}], {name};"]


def _load(space: str, array: str, name: str, rtype: str, offset: int, temp: str) -> list[str]:
    if rtype == ".pred":
        return [f"ld.{space}.b32 \t{temp}, [{array}+{offset}];", f"setp.ne.u32 \t{name}, {temp}, 0;"]
    return [f"ld.{space}.{'b' + rtype[2:] if rtype[1] in 'bus' else rtype[1:]} \t{name}, [{array}+{offset}];"]


def isolate(entry: Entry, cut: Cut, name: str) -> Spliced:
    """The cut of `entry` as the function `name`, and the call that replaces it."""
    function, first, last = entry.function, cut.first, cut.last
    live_in, live_out = cut.live.live_in, cut.live.live_out
    types = register_types(function)
    missing = [r for r in live_in + live_out if r not in types]
    if missing:
        raise ValueError(f"{function.name}: no .reg declaration for {', '.join(missing)} (registers of a scope "
                         "block cannot cross the cut)")
    ins, in_size = _layout(live_in, types)
    outs, out_size = _layout(live_out, types)
    temp = "%rr_pred_tmp"
    # the callee: parameters in, the cut as it was, parameters out
    decls = sorted({line.text for line in function.body if isinstance(line, Directive) and line.kind == "reg"})
    body = [f"\t{d}" for d in decls] + [f"\t.reg .b32 \t{temp};", ""]
    for n, t, off in ins:
        body += ["\t" + s for s in _load("param", f"{name}_in", n, t, off, temp)]
    body += ["\t" + s.text for s in entry.statements[first - 1:last]]
    for n, t, off in outs:
        body += ["\t" + s for s in _store("param", f"{name}_out", n, t, off, temp)]
    callee = (f".func  (.param .align 8 .b8 {name}_out[{out_size}]) {name}(\n"
              f"\t.param .align 8 .b8 {name}_in[{in_size}]\n)\n{{\n" + "\n".join(body) + "\n\tret;\n\n}")
    # the caller: a call sequence block
    call = [f"{{ // rr isolate: s{first}-s{last} -> {name}", f"\t.reg .b32 \t{temp};",
            f"\t.param .align 8 .b8 rr_in[{in_size}];", f"\t.param .align 8 .b8 rr_out[{out_size}];"]
    for n, t, off in ins:
        call += ["\t" + s for s in _store("param", "rr_in", n, t, off, temp)]
    call.append(f"\tcall.uni (rr_out), {name}, (rr_in);")
    for n, t, off in outs:
        call += ["\t" + s for s in _load("param", "rr_out", n, t, off, temp)]
    call.append("\t}")
    return Spliced(["\n".join(call)], functions=[callee])


class Isolate:
    """The template: the cut as the function `rr_<entry>_phase<P>_isolated`."""

    checks = (Check.IDENTICAL_OUTPUT,)

    def apply(self, entry: Entry, cut: Cut, params: dict) -> Spliced:
        return isolate(entry, cut, f"rr_{entry.function.name}_phase{cut.phase}_isolated")
