"""Injection: a CUDA program run with some of its kernels' code replaced (`rr inject`, `rr capture
--inject`), and timed with CUDA events on its own streams (`rr inject --time`).

rr writes what the interposer needs into a private directory of its own (`injection`): the
manifest (each replaced entry, rr's copy of its file — the bytes rr checked, PTX with its NUL —
and its module variables; each entry to time) and the copies. The interposer (interposer.c,
"injection") binds each module of the program that defines a replaced entry to a replacement
loaded beside it, and writes, per process, `<pid>.jsonl`: every binding's decision (`Binding`),
launches that failed, and at exit the launch counts and the times. `read_processes` reads them
back; `Outcome` says, for one run of the program, what ran where and what went wrong;
`time_runs` runs the program --repeat times with and without the replacements, interleaved, and
`Timing` summarises each kernel's times over the runs."""

from __future__ import annotations

import contextlib
import enum
import json
import os
import signal
import statistics
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from rr import children
from rr.capture.build import CaptureError, interposer
from rr.capture.replacement import Replacement
from rr.private import open_private, why_not_private
from rr.validation import cut

MANIFEST = "manifest.tsv"


class Binding(enum.StrEnum):
    """What became of a replaced entry in one module of the program: the interposer's words
    (STATUS_WORDS), docs/capture.md's table."""

    REPLACED = "replaced"  # the program was handed the replacement's function: its launches run FILE's code
    LOAD_FAILED = "load_failed"  # the driver could not load FILE: the program's own code runs
    NO_ENTRY = "no_entry"  # the driver finds no ENTRY in FILE once loaded: the program's own code runs
    PARAM_MISMATCH = "param_mismatch"  # FILE's ENTRY takes other parameters: the program's own code runs
    VARIABLE_MISMATCH = "variable_mismatch"  # a variable FILE reads differs, or the program's module is unknown


@contextlib.contextmanager
def injection(found: list[Replacement], timed: list[str] = ()) -> Iterator[Path]:
    """A private directory (removed after) with the manifest for `found` and the entries `timed`,
    and rr's copy of each replacement; the interposer's records appear in it. CaptureError when
    the temporary directory is not private."""
    with tempfile.TemporaryDirectory(prefix="rr-inject-") as tmp:
        why = why_not_private(tmp)
        if why is not None:
            raise CaptureError(f"{tmp}: refusing to put the replacements there: {why}")
        lines = []
        for i, r in enumerate(found):
            name = f"{i}.{r.kind}"
            with os.fdopen(open_private(Path(tmp) / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
                f.write(r.image)
            variables = ",".join(f"{v.name}:{v.space[0]}" for v in r.variables) or "-"
            lines.append(f"replace\t{r.entry}\t{name}\t{variables}\t{r.shown}\n")
        lines += [f"time\t{entry}\n" for entry in timed]
        with os.fdopen(open_private(Path(tmp) / MANIFEST, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
            f.writelines(lines)
        yield Path(tmp)


@dataclass(frozen=True)
class Decision:
    pid: int
    entry: str
    status: Binding
    api: str  # how the program got the handle: cuModuleGetFunction, cuLibraryGetKernel, or launch
    message: str


@dataclass
class Process:
    """What the interposer wrote in one process of the program."""
    pid: int
    decisions: list = field(default_factory=list)  # Decision
    failures: dict = field(default_factory=dict)  # entry → the driver's error of a failed launch of the replacement
    launches: dict | None = None  # entry → (replaced, original); None: the process did not exit (a crash)
    times: dict = field(default_factory=dict)  # (entry, replaced) → ([ms, …], untimed, why)


def read_processes(directory: Path) -> list[Process]:
    """The interposer's records in `directory`, one Process per process, in pid order. A line cut
    short (a process killed while writing it), or one the interposer did not write, is skipped."""
    out = []
    for path in sorted(directory.glob("*.jsonl"), key=lambda p: int(p.stem) if p.stem.isdigit() else -1):
        if not path.stem.isdigit():
            continue
        p = Process(int(path.stem))
        for line in path.read_text(errors="replace").splitlines():
            try:
                _event(p, json.loads(line))
            except (ValueError, KeyError, TypeError):  # json.JSONDecodeError, a word that is no Binding
                continue
        out.append(p)
    return out


def _event(p: Process, event: dict) -> None:
    kind = event["event"]
    if kind == "decision":
        p.decisions.append(Decision(p.pid, str(event["entry"]), Binding(event["status"]), str(event["api"]),
                                    str(event["message"])))
    elif kind == "launch_failed":
        p.failures[str(event["entry"])] = str(event["message"])
    elif kind == "launches":
        p.launches = p.launches or {}
        p.launches[str(event["entry"])] = (int(event["replaced"]), int(event["original"]))
    elif kind == "times":
        p.times[(str(event["entry"]), bool(event["replaced"]))] = ([float(t) for t in event["ms"]],
                                                                   int(event["untimed"]), str(event["why"]))


@dataclass(frozen=True)
class Outcome:
    """One run of the program under the interposer: its status and what each replacement did."""
    exit_status: int
    processes: list  # Process
    found: tuple  # the Replacements given
    killed_by: str | None = None  # the signal that ended the program (its exit status is 128 + its number)

    def launches(self, entry: str) -> tuple[int, int]:
        """(launches of the replacement, launches of the program's own code) over the processes that exited."""
        counts = [p.launches.get(entry, (0, 0)) for p in self.processes if p.launches is not None]
        return sum(c[0] for c in counts), sum(c[1] for c in counts)

    def problems(self) -> list[str]:
        """Why the replacements were not (all) in place: a binding that was refused, an entry the
        program never got from a module of its own, launches of its own code anyway, a launch of
        a replacement that failed. None: each replacement ran wherever the program ran its entry."""
        out = []
        for r in self.found:
            decisions = [d for p in self.processes for d in p.decisions if d.entry == r.entry]
            refused = [d for d in decisions if d.status != Binding.REPLACED]
            for d in refused:
                out.append(f"{r.entry}: process {d.pid}: {d.message} ({d.status}): the program's own {r.entry} "
                           "ran instead")
            if not decisions:
                out.append(f"{r.entry}: the program never got {r.entry} from a module of its own (no module it loaded "
                           "defines it, or it never asked for it): nothing was replaced")
            original = self.launches(r.entry)[1]
            if original and not refused:
                out.append(f"{r.entry}: {original} launches ran the program's own code")
            for p in self.processes:
                if r.entry in p.failures:
                    out.append(f"{r.entry}: process {p.pid}: a launch of the replacement failed: {p.failures[r.entry]}")
        return out

    def summary(self) -> list[str]:
        """A line per replaced entry: where its replacement ran."""
        out = []
        for r in self.found:
            replaced, original = self.launches(r.entry)
            pids = sorted({d.pid for p in self.processes for d in p.decisions
                           if d.entry == r.entry and d.status == Binding.REPLACED})
            where = f" (process{'es' if len(pids) > 1 else ''} {', '.join(map(str, pids))})" if pids else ""
            own = f", the program's own code {original}" if original else ""
            out.append(f"{r.entry}: {r.path} ran in {replaced} launch{'es' if replaced != 1 else ''}{where}{own}")
        for p in self.processes:
            if p.launches is None:
                out.append(f"process {p.pid} ended without exiting (killed?): its launches were not counted")
        return out

    def record(self) -> dict:
        return {"exit_status": self.exit_status, "processes": [
            {"pid": p.pid, "exited": p.launches is not None,
             "decisions": [{"entry": d.entry, "status": d.status, "api": d.api, "message": d.message}
                           for d in p.decisions],
             "launch_failures": p.failures,
             "launches": {e: {"replaced": n, "original": m} for e, (n, m) in (p.launches or {}).items()}}
            for p in self.processes]}


def environment(library, directory: Path | None, base: dict | None = None) -> dict:
    """The program's environment: `base` (rr's own by default) with the interposer preloaded — the
    library checked now, as it goes into LD_PRELOAD — and pointed at the injection's directory
    (None: no injection)."""
    env = dict(os.environ if base is None else base)
    env.pop("RR_INJECT_DIR", None)
    if directory is not None:
        env["RR_INJECT_DIR"] = str(directory)
    env["LD_PRELOAD"] = ":".join(p for p in (library.preload(), env.get("LD_PRELOAD", "")) if p)
    return env


def run_once(command: list[str], found: list[Replacement], timed: list[str] = (), cache=None) -> Outcome:
    """The program run once under the interposer with `found` in place and `timed` timed; its
    output and terminal are its own (it stays in rr's process group, rr.children)."""
    with interposer(cache) as library, injection(found, timed) as directory:
        env = environment(library, directory)
        for name in ("RR_CAPTURE_DIR", "RR_CAPTURE_KERNELS", "RR_CAPTURE_LAUNCHES"):
            env.pop(name, None)
        try:
            status = children.run(command, env=env, stdin=None, group=False).returncode
        except OSError as e:
            raise CaptureError(f"{command[0]}: cannot run it ({e.strerror})") from None
        return Outcome(128 - status if status < 0 else status, read_processes(directory), tuple(found),
                       signal.Signals(-status).name if status < 0 else None)


# -- timing -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Series:
    """One kernel's times on one side (the replacement's, or the program's own code) over the runs."""
    runs: tuple  # per run, the launches' ms
    untimed: int  # launches not timed (a CUDA graph's capture, events that could not be read)
    why: str  # the last reason one was not

    @property
    def launches(self) -> int:
        return sum(len(r) for r in self.runs)

    @property
    def medians(self) -> list[float]:
        return [statistics.median(r) for r in self.runs if r]

    def stats(self) -> dict | None:
        """median (of the runs' medians), min and max (of every launch) in ms, and the noise: half
        the range of the runs' medians, relative to their median (None with one run)."""
        medians = self.medians
        if not medians:
            return None
        middle = statistics.median(medians)
        every = [t for r in self.runs for t in r]
        return {"launches": self.launches, "untimed": self.untimed, "median_ms": middle, "min_ms": min(every),
                "max_ms": max(every), "run_medians_ms": medians, "noise": _spread(medians, middle)}


def _spread(values: list[float], middle: float) -> float | None:
    """Half the range of `values` relative to `middle`; None for fewer than two."""
    if len(values) < 2:
        return None
    return (max(values) - min(values)) / 2 / middle if middle else 0.0


@dataclass(frozen=True)
class Timing:
    entry: str
    replaced: Series
    original: Series

    def ratio(self) -> tuple[float | None, float | None]:
        """The replacement's time over the program's own, the median of the runs' ratios (each of
        a run of each, taken one after the other), and its noise as `Series.stats` takes it."""
        ratios = [r / o for r, o in zip(self.replaced.medians, self.original.medians) if o]
        if not ratios:
            return None, None
        middle = statistics.median(ratios)
        return middle, _spread(ratios, middle)

    def record(self) -> dict:
        ratio, noise = self.ratio()
        return {"entry": self.entry, "replaced": self.replaced.stats(), "original": self.original.stats(),
                "ratio": ratio, "ratio_noise": noise}

    def lines(self, shown: str) -> list[str]:
        out = [f"{self.entry} ({shown}): {len(self.replaced.runs)} run{'s' if len(self.replaced.runs) != 1 else ''} "
               "with it, as many without"]
        for side, series in (("replaced", self.replaced), ("original", self.original)):
            s = series.stats()
            if s is None:
                out.append(f"  {side:<9} no timed launch" + (f" ({series.why})" if series.why else ""))
                continue
            noise = "n/a (one run: --repeat N for it)" if s["noise"] is None else f"±{s['noise']:.1%}"
            untimed = f"; {s['untimed']} not timed: {series.why}" if s["untimed"] else ""
            out.append(f"  {side:<9} {s['launches']} launches: median {s['median_ms']:.6f} ms, min {s['min_ms']:.6f}, "
                       f"max {s['max_ms']:.6f}; noise {noise}{untimed}")
        ratio, noise = self.ratio()
        if ratio is not None:
            out.append(f"  ratio     {ratio:.4f}" + ("" if noise is None else f" ± {noise * ratio:.4f}")
                       + " (replaced / original)")
        return out


@dataclass(frozen=True)
class Timed:
    """`time_runs`: the runs with the replacements, the runs without, each entry's Timing, and the
    run whose program failed (which ended the timing), if one did."""
    replaced: list
    original: list
    timings: list
    failed: Outcome | None


def time_runs(command: list[str], found: list[Replacement], repeat: int, cache=None,
              say=lambda line: None) -> Timed:
    """The program run `repeat` times with the replacements and as often without (its own code,
    timed the same way), interleaved — with, without, then without, with — so that a drift falls
    on both alike. A run whose program exits with a failure ends the timing."""
    entries = [r.entry for r in found]
    runs: dict[bool, list[Outcome]] = {True: [], False: []}
    failed = None
    for i in range(repeat):
        for replaced in ((True, False) if i % 2 == 0 else (False, True)):
            say(f"run {i + 1} of {repeat}, {'with the replacements' if replaced else 'the program as it is'}")
            outcome = run_once(command, found if replaced else [], entries, cache)
            runs[replaced].append(outcome)
            if outcome.exit_status != 0:
                failed = outcome
                break
        if failed:
            break
    timings = [Timing(e, _series(runs[True], e, True), _series(runs[False], e, False)) for e in entries]
    return Timed(runs[True], runs[False], timings, failed)


def _series(outcomes: list[Outcome], entry: str, replaced: bool) -> Series:
    per_run, untimed, why = [], 0, ""
    for o in outcomes:
        ms = []
        for p in o.processes:
            times, missed, reason = p.times.get((entry, replaced), ([], 0, ""))
            ms += times
            untimed += missed
            why = reason or why
        per_run.append(tuple(ms))
    return Series(tuple(per_run), untimed, cut(why))
