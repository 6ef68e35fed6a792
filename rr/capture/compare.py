"""Two captures of one program compared launch by launch (`rr compare-captures A B`): the program
run as it is and with a replacement in place (`rr capture --inject`), say. The launches must
correspond — the same entries with the same grids, in the same order — and each pair's
after-states (every buffer and array the launch could write) are compared as `rr compare`
compares two runs; a launch rr cannot replay (no launch.json) has its after-state files compared
byte for byte. The first launch and buffer that differ are named. A launch of a replaced entry
that ran the program's own code in a capture made with its replacement proves nothing about the
replacement: it is a problem of the comparison, as are launches that do not correspond."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rr.capture.index import read_capture

_SAME = ("entry", "grid", "block", "process_launch", "params_size")  # what corresponding launches share


@dataclass(frozen=True)
class LaunchPair:
    index: int
    entry: str
    replaced: tuple  # (A's, B's): True a replacement ran, False the program's own code of a replaced entry, None neither
    differing: tuple  # (buffer, what differs), in the launch's order
    compared: int  # buffers compared

    @property
    def identical(self) -> bool:
        return not self.differing

    def record(self) -> dict:
        return {"index": self.index, "entry": self.entry, "replaced": list(self.replaced), "identical": self.identical,
                "buffers": self.compared, "differing": [{"buffer": b, "difference": d} for b, d in self.differing]}


@dataclass(frozen=True)
class CaptureComparison:
    a: Path
    b: Path
    pairs: list  # LaunchPair, in order
    problems: list  # str: why the comparison does not cover the whole program, or not a replacement

    @property
    def identical(self) -> bool:
        return not self.problems and all(p.identical for p in self.pairs)

    def first_difference(self) -> LaunchPair | None:
        return next((p for p in self.pairs if not p.identical), None)

    def verdict(self) -> str:
        compared = f"{self.a} and {self.b}: {len(self.pairs)} launch{'es' if len(self.pairs) != 1 else ''} compared"
        first = self.first_difference()
        if first is None:
            same = sum(p.compared for p in self.pairs)
            return f"{compared}, all {same} buffers byte-identical" + ("" if not self.problems else
                                                                        f"; but {len(self.problems)} problem(s) above")
        buffer, what = first.differing[0]
        differ = sum(not p.identical for p in self.pairs)
        return (f"{compared}, {differ} differ; first difference: launch {first.index} ({first.entry}"
                f"{_sides(first.replaced)}), buffer {buffer}: {what}")

    def record(self) -> dict:
        return {"a": str(self.a), "b": str(self.b), "identical": self.identical, "problems": self.problems,
                "launches": [p.record() for p in self.pairs]}


def _sides(replaced: tuple) -> str:
    a, b = ("the replacement" if r else "the program's own code" for r in replaced)
    return "" if a == b else f"; A ran {a}, B {b}"


def replaced_word(replaced: bool | None) -> str:
    return {True: "replaced", False: "own code", None: "-"}[replaced]


def compare_captures(a: str | Path, b: str | Path) -> CaptureComparison:
    """The captures `a` and `b` compared launch by launch (InvalidInput for a directory that is not
    a capture, as rr.capture.index reads one)."""
    a, b = Path(a), Path(b)
    ia, ib = read_capture(a), read_capture(b)
    pairs, problems = [], []
    for ea, eb in zip(ia["launches"], ib["launches"]):
        unlike = [k for k in _SAME if ea[k] != eb[k]]
        if unlike:
            problems.append(f"launch {ea['index']}: A's is {_launch(ea)}, B's {_launch(eb)}: the captures' launches do "
                            "not correspond from here on (not compared)")
            break
        pair = LaunchPair(ea["index"], ea["entry"], (ea.get("replaced"), eb.get("replaced")),
                          *_after_states(a / ea["dir"] / "after", b / eb["dir"] / "after"))
        pairs.append(pair)
        for side, index in (("A", ia), ("B", ib)):
            r = pair.replaced[0 if side == "A" else 1]
            if r is False and "inject" in index:
                problems.append(f"launch {pair.index} ({pair.entry}): {side} was captured with its replacement but ran "
                                f"the program's own code ({side}'s capture.json, inject, says why): this launch proves "
                                "nothing about the replacement")
    else:
        na, nb = len(ia["launches"]), len(ib["launches"])
        if na != nb:
            problems.append(f"A has {na} launches, B {nb}: the last {abs(na - nb)} of "
                            f"{'A' if na > nb else 'B'} are not compared")
    return CaptureComparison(a, b, pairs, problems)


def _launch(e: dict) -> str:
    return f"{e['entry']} (grid {e['grid']}, block {e['block']}, process launch {e['process_launch']})"


def _after_states(a: Path, b: Path) -> tuple[tuple, int]:
    """What differs between two after-states ((buffer, how), …), and how many buffers were compared."""
    from rr.run.frame import compare_runs

    if (a / "launch.json").is_file() and (b / "launch.json").is_file():
        compared = compare_runs(a, b)
        differing = [(r.buffer, _difference(r)) for r in compared.rows if not r.identical]
        differing += [(name, "in one capture only") for name in compared.only]
        return tuple(differing), len(compared.rows)
    names = sorted({p.name for p in a.iterdir()} | {p.name for p in b.iterdir()})  # a launch rr cannot replay
    differing = []
    for name in names:
        if not (a / name).is_file() or not (b / name).is_file():
            differing.append((name, "in one capture only"))
        elif (a / name).read_bytes() != (b / name).read_bytes():
            differing.append((name, "the files differ"))
    return tuple(differing), len(names)


def _difference(r) -> str:
    first = "" if r.first_index is None else (f", first at {list(r.first_index)}: {r.first_values[0]:.6g} vs "
                                              f"{r.first_values[1]:.6g}")
    return f"{r.differing_bytes} of {r.bytes} bytes differ{first}"
