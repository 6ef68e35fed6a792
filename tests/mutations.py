"""Mutation harness: random edits of the synthetic enc2 PTX through parse, emit, linearise and spec.

Every mutant either fails to parse with a `ParseError` or goes through the whole front end and the
description without any other exception (issue 14 item 7): emit reproduces it byte for byte,
every function linearises, and `rr.describe.spec.spec_json` describes the entry (an entry left
without `mma` is `NothingToDescribe`, the CLI's "no phases", and counts as described). The mutations
are token- and line-level edits of the kind a hand edit or a broken generator makes: delete,
duplicate or swap tokens, lines and braces; drop, duplicate or swap an instruction's operands; give
an instruction another opcode from the file (so its operand count is wrong for it); and so on.
Prints the counts by outcome, then by stage and exception type with the first examples.
tests/test_ptx_mutations.py runs the first 200 mutants of the fixed seed; the full run is this
script's (a benchmark: docs/benchmarks.md):

    python tests/mutations.py [--count 2000] [--seed 14] [--ptx enc2.ptx] [--examples 3]
                              [--ptxas 100]

Without `--ptx` it mutates the synthetic enc2 (the enc2.ptx that `python -m rr synth enc2` writes).
`--ptxas N` also gives the first N mutants rr rejects to ptxas: one that ptxas accepts is valid PTX
that the front end refused, and is listed.
"""

from __future__ import annotations

import argparse
import random
import re
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ENTRY = "cuda_dldn_engine_swin_enc2_kernel"

_TOKEN = re.compile(r"%[\w$.]+|[A-Za-z_$][\w$.:]*|0[fFdD][0-9a-fA-F]+|0[xX][0-9a-fA-F]+|\d+|//[^\n]*|\S")
_INSTRUCTION = re.compile(r"^([ \t]*(?:@!?%\w+[ \t]+)?)([a-z][\w.:]*)([ \t]+)([^;\n]*)(;)", re.M)
_OPERANDS = re.compile(r"\{[^{}]*\}|\[[^\]]*\]|[^,{}\[\]]+")


def _operands(text: str) -> list[str]:
    return [o.strip() for o in _OPERANDS.findall(text) if o.strip()]


def mutate(text: str, rng: random.Random) -> tuple[str, str]:
    """One random edit of `text`: (mutant, what was done)."""
    kind = rng.choice(_MUTATIONS)
    return kind(text, rng), kind.__name__


def _token_span(text: str, rng: random.Random) -> re.Match:
    # Sample a position, then the token at or after it: cheap on a large file.
    while True:
        m = _TOKEN.search(text, rng.randrange(len(text)))
        if m is not None:
            return m


def delete_token(text, rng):
    m = _token_span(text, rng)
    return text[:m.start()] + text[m.end():]


def duplicate_token(text, rng):
    m = _token_span(text, rng)
    return text[:m.end()] + " " + m.group() + text[m.end():]


def swap_tokens(text, rng):
    a = _token_span(text, rng)
    b = _TOKEN.search(text, a.end())
    if b is None:
        return text
    return text[:a.start()] + b.group() + text[a.end():b.start()] + a.group() + text[b.end():]


def replace_token(text, rng):
    a, b = _token_span(text, rng), _token_span(text, rng)
    return text[:a.start()] + b.group() + text[a.end():]


def _lines(text):
    return text.splitlines(keepends=True)


def delete_line(text, rng):
    lines = _lines(text)
    del lines[rng.randrange(len(lines))]
    return "".join(lines)


def duplicate_line(text, rng):
    lines = _lines(text)
    i = rng.randrange(len(lines))
    lines.insert(i, lines[i])
    return "".join(lines)


def swap_lines(text, rng):
    lines = _lines(text)
    i = rng.randrange(len(lines))
    j = min(len(lines) - 1, i + rng.randint(1, 20))
    lines[i], lines[j] = lines[j], lines[i]
    return "".join(lines)


def move_line(text, rng):
    lines = _lines(text)
    line = lines.pop(rng.randrange(len(lines)))
    lines.insert(rng.randrange(len(lines) + 1), line)
    return "".join(lines)


def _brace(text, rng):
    positions = [m.start() for m in re.finditer(r"[{}]", text)]
    return rng.choice(positions) if positions else None


def delete_brace(text, rng):
    i = _brace(text, rng)
    return text if i is None else text[:i] + text[i + 1:]


def duplicate_brace(text, rng):
    i = _brace(text, rng)
    return text if i is None else text[:i] + text[i] + text[i:]


def insert_brace(text, rng):
    lines = _lines(text)
    lines.insert(rng.randrange(len(lines) + 1), rng.choice(["\t{\n", "\t}\n", "{", "}"]))
    return "".join(lines)


def _instruction(text, rng) -> re.Match | None:
    for _ in range(50):
        m = _INSTRUCTION.search(text, rng.randrange(len(text)))
        if m is not None:
            return m
    return None


def _edit_operands(text, rng, edit):
    m = _instruction(text, rng)
    if m is None:
        return text
    ops = _operands(m.group(4))
    ops = edit(ops, rng)
    return text[:m.start(4)] + ", ".join(ops) + text[m.end(4):]


def drop_operand(text, rng):
    return _edit_operands(text, rng, lambda ops, r: [o for i, o in enumerate(ops) if i != r.randrange(max(len(ops), 1))])


def duplicate_operand(text, rng):
    def edit(ops, r):
        if not ops:
            return ops
        i = r.randrange(len(ops))
        return ops[:i + 1] + [ops[i]] + ops[i + 1:]
    return _edit_operands(text, rng, edit)


def swap_operands(text, rng):
    def edit(ops, r):
        if len(ops) >= 2:
            i, j = r.sample(range(len(ops)), 2)
            ops[i], ops[j] = ops[j], ops[i]
        return ops
    return _edit_operands(text, rng, edit)


def drop_all_operands(text, rng):
    return _edit_operands(text, rng, lambda ops, r: ops[:r.randrange(max(len(ops), 1))])


def vector_element(text, rng):
    """Drop or add an element of a vector operand ({a, b} → {a} or {a, b, b})."""
    vecs = list(re.finditer(r"\{([^{}\n]*,[^{}\n]*)\}", text))
    if not vecs:
        return text
    m = rng.choice(vecs)
    items = [i.strip() for i in m.group(1).split(",")]
    if rng.random() < 0.5 and len(items) > 1:
        del items[rng.randrange(len(items))]
    else:
        items.append(rng.choice(items))
    return text[:m.start(1)] + ", ".join(items) + text[m.end(1):]


def change_opcode(text, rng):
    """Give an instruction the opcode of another instruction of the file (operand counts and
    kinds then rarely fit)."""
    a, b = _instruction(text, rng), _instruction(text, rng)
    if a is None or b is None:
        return text
    return text[:a.start(2)] + b.group(2) + text[a.end(2):]


def change_register(text, rng):
    """Replace a register by another one of the file, or by one that is declared nowhere."""
    regs = list(re.finditer(r"%(?:r|rs|rd|f|fd|p)\d+", text))
    m = rng.choice(regs)
    other = rng.choice(regs).group() if rng.random() < 0.7 else m.group() + "999"
    return text[:m.start()] + other + text[m.end():]


def change_number(text, rng):
    nums = list(re.finditer(r"(?<![\w%.])\d+(?![\w.])", text))
    m = rng.choice(nums)
    new = rng.choice(["0", "1", "-1", "4294967296", "99999999999999999999", str(int(m.group()) * 3 + 1)])
    return text[:m.start()] + new + text[m.end():]


def add_guard(text, rng):
    m = _instruction(text, rng)
    if m is None:
        return text
    return text[:m.start(2)] + rng.choice(["@%p1 ", "@!%p2 ", "@p ", "@%r1 "]) + text[m.start(2):]


def delete_semicolon(text, rng):
    m = _instruction(text, rng)
    return text if m is None else text[:m.start(5)] + text[m.end(5):]


def split_instruction(text, rng):
    """A newline or a comment inside an instruction."""
    m = _instruction(text, rng)
    if m is None:
        return text
    i = rng.randint(m.start(4), m.end(4))
    return text[:i] + rng.choice(["\n\t", " /* ; */ ", "\r\n", "\r"]) + text[i:]


def nest_block(text, rng):
    """Wrap a run of lines in a scope block."""
    lines = _lines(text)
    i = rng.randrange(len(lines))
    j = min(len(lines), i + rng.randint(1, 30))
    return "".join(lines[:i] + ["\t{\n"] + lines[i:j] + ["\t}\n"] + lines[j:])


_MUTATIONS = [delete_token, duplicate_token, swap_tokens, replace_token, delete_line, duplicate_line,
              swap_lines, move_line, delete_brace, duplicate_brace, insert_brace, drop_operand,
              duplicate_operand, swap_operands, drop_all_operands, vector_element, change_opcode,
              change_register, change_number, add_guard, delete_semicolon, split_instruction, nest_block]


@dataclass
class Outcome:
    """What happened to each mutant: counts by outcome, and by (stage, exception type) the first
    examples (mutation, message, the innermost frames)."""

    outcomes: Counter = field(default_factory=Counter)
    crashes: dict = field(default_factory=dict)
    refused: list = field(default_factory=list)  # valid PTX (ptxas accepts it) that parse rejected

    @property
    def crash_count(self) -> int:
        return sum(len(v) for v in self.crashes.values())


def check(text: str, entry: str = ENTRY) -> tuple[str, str | None, BaseException | None]:
    """(outcome, stage, exception) for one PTX text: 'parse error', 'described', 'no phases', or
    'crash' with the stage (parse, emit, linearise, spec) and the exception."""
    from rr.describe.spec import NothingToDescribe, spec_json
    from rr.ptx import ParseError, emit, linearise, parse

    stage = "parse"
    try:
        module = parse(text, source="mutant.ptx")
        stage = "emit"
        if emit(module) != text:
            raise AssertionError("emit(parse(text)) != text")
        stage = "linearise"
        rows = {f.name: linearise(f) for f in module.functions if f.has_body}
        if entry not in rows:
            return "no entry", None, None
        stage = "spec"
        f = module.function(entry)
        spec_json(f, rows[entry], module=module)
        return "described", None, None
    except ParseError:
        if stage != "parse":
            return "crash", stage, sys.exc_info()[1]  # only parse may reject the text
        return "parse error", None, None
    except NothingToDescribe:
        return "no phases", None, None
    except RecursionError as e:
        return "crash", stage, e
    except Exception as e:  # noqa: BLE001 — counting every other exception is the point
        return "crash", stage, e


def ptxas_accepts(text: str, arch: str = "sm_90") -> bool:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "mutant.ptx"
        path.write_bytes(text.encode())
        r = subprocess.run(["ptxas", f"-arch={arch}", str(path), "-o", str(path.with_suffix(".cubin"))],
                           capture_output=True, timeout=600)
        return r.returncode == 0


def run(text: str, count: int, seed: int, entry: str = ENTRY, progress=None, ptxas: int = 0) -> Outcome:
    rng = random.Random(seed)
    out = Outcome()
    for i in range(count):
        mutant, how = mutate(text, rng)
        outcome, stage, exc = check(mutant, entry)
        out.outcomes[outcome] += 1
        if outcome == "parse error" and out.outcomes["parse error"] <= ptxas:
            out.outcomes["rejected, given to ptxas"] += 1
            if ptxas_accepts(mutant):
                out.outcomes["rejected, but ptxas accepts"] += 1
                from rr.ptx import ParseError, parse

                try:
                    parse(mutant)
                except ParseError as e:
                    out.refused.append((i, how, str(e).splitlines()[0][:200]))
        if exc is not None:
            frames = traceback.extract_tb(exc.__traceback__)[-3:]
            where = "; ".join(f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in frames)
            out.crashes.setdefault((stage, type(exc).__name__), []).append(
                (i, how, str(exc).splitlines()[0][:200] if str(exc) else "", where))
        if progress and (i + 1) % progress == 0:
            print(f"  {i + 1} mutants: {dict(out.outcomes)}", file=sys.stderr, flush=True)
    return out


def mutant(text: str, seed: int, index: int) -> tuple[str, str]:
    """The mutant `index` of a run with this seed (to reproduce one)."""
    rng = random.Random(seed)
    for _ in range(index):
        mutate(text, rng)
    return mutate(text, rng)


def synth_enc2() -> str:
    """The text `rr synth enc2` writes as enc2.ptx."""
    from rr.synth.enc2 import build_enc2

    return build_enc2()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--count", type=int, default=2000)
    p.add_argument("--seed", type=int, default=14)
    p.add_argument("--ptx", type=Path, help="PTX to mutate (default: the synthetic enc2)")
    p.add_argument("--entry", default=ENTRY)
    p.add_argument("--examples", type=int, default=3, help="examples shown per stage and exception")
    p.add_argument("--write", type=int, metavar="INDEX", help="write mutant INDEX to mutant-INDEX.ptx and stop")
    p.add_argument("--ptxas", type=int, default=0, metavar="N",
                   help="give the first N mutants rr rejects to ptxas (sm_90), to find valid PTX it refused")
    a = p.parse_args()
    text = synth_enc2() if a.ptx is None else a.ptx.read_bytes().decode()
    if a.write is not None:
        m, how = mutant(text, a.seed, a.write)
        Path(f"mutant-{a.write}.ptx").write_bytes(m.encode())
        print(f"mutant-{a.write}.ptx: {how}")
        return
    t0 = time.perf_counter()
    out = run(text, a.count, a.seed, a.entry, progress=max(a.count // 10, 1), ptxas=a.ptxas)
    print(f"{a.count} mutants of {a.ptx or 'the synthetic enc2'} (seed {a.seed}) in {time.perf_counter() - t0:.0f} s")
    for outcome, n in out.outcomes.most_common():
        print(f"  {outcome:<12} {n:>6}")
    print(f"exceptions other than ParseError: {out.crash_count}")
    for (stage, name), examples in sorted(out.crashes.items()):
        print(f"  {stage:<10} {name:<20} {len(examples):>5}")
        for i, how, message, where in examples[:a.examples]:
            print(f"      mutant {i} ({how}): {message}\n          at {where}")
    if a.ptxas:
        print(f"rejected by rr but accepted by ptxas: {len(out.refused)} of the first "
              f"{out.outcomes['rejected, given to ptxas']} rejected")
        for i, how, message in out.refused[:a.examples * 4]:
            print(f"      mutant {i} ({how}): {message}")


if __name__ == "__main__":
    main()
