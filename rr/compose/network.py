"""The composed engine measured: the network's frame captured with every layer's composed module in
place and compared with the unspliced frame (final frame first, the first differing layer and
buffer otherwise); on the GPU the whole frame timed against the unspliced one, and each composed
layer timed alone against its unspliced self, next to the product of its parts' ratios.

A composition that breaks identity, or whose layer is slower than its parts predict (its ratio
above the product by more than k·noise), is bisected to the phase(s) at fault: the layer is
composed again of each half of its phases and measured the same way (identity: the frame with
only that layer replaced; time: the layer alone); a half that is at fault alone is bisected
further, and where neither half is but both together are, the fault is the two halves' together
and is reported so. Each sub-composition is made with rr.splice.compose from the corpus's module
and, on the GPU, compiled by ptxas as the layer's is."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rr.records import SPLICE, Status
from rr.compose.select import Plan


@dataclass
class Layer:
    """One layer's composition: its plan, the module the frame runs (a cubin on cuda, PTX on the
    cpu backend) and its splice record, and what sub-compositions are made from."""

    plan: Plan
    module: Path
    splice_record: Path
    source: Path  # the corpus's module of the entry
    alone: Path | None = None  # the layer alone from the reference frame (cuda), rr relaunch --extract
    grouping: str = "run"


@dataclass
class Measured:
    """What the composed network gave."""

    status: str = Status.OK
    message: str = ""
    frame_identical: bool | None = None
    first_differing_layer: str | None = None
    first_differing_buffer: str | None = None
    layers_identical: dict = field(default_factory=dict)  # layer -> its outputs identical in the composed frame
    frame_ratio: float | None = None
    frame_noise: float | None = None
    timing_status: str | None = None
    timing_message: str = ""
    gpu: str | None = None
    layer_ratio: dict = field(default_factory=dict)  # layer -> (ratio, noise) of the composed layer alone
    layer_timing: dict = field(default_factory=dict)  # layer -> (status, message)
    culprits: dict = field(default_factory=dict)  # layer -> (phases, why) where bisection found them
    steps: list = field(default_factory=list)  # what was measured, in order (for people)


class Network:
    def __init__(self, layout: Path, reference: Path, layers: dict[str, Layer], work: Path, backend: str,
                 noise: float = 0.005, time_limit_s: float = 30.0, timeout_s: float = 3600.0,
                 noise_multiple: float = 2.0, arch: str = "sm_90", say=print):
        self.layout, self.reference, self.layers, self.work = layout, reference, layers, work
        self.backend, self.noise, self.time_limit_s, self.timeout_s = backend, noise, time_limit_s, timeout_s
        self.noise_multiple, self.arch, self.say = noise_multiple, arch, say
        self._n = 0

    def _dir(self, what: str) -> Path:
        self._n += 1
        return self.work / f"{self._n:03d}-{what}"

    # -- the frame ----------------------------------------------------------------------------

    def frame_with(self, modules: dict[str, tuple[Path, Path]]) -> Path:
        """The layout with each named layer's module (and splice record) in place."""
        from rr.run.frame import replace_layer

        layout = self.layout
        for layer, (module, record) in modules.items():
            out = self._dir(f"{layer}.layout")
            # on the cpu backend a frame of one replaced layer resumes there from the reference
            resume = self.reference if self.backend == "cpu" and len(modules) == 1 else None
            replace_layer(layout, layer, module, out, resume, record)
            layout = out
        return layout

    def capture(self, layout: Path):
        """(the run record, the comparison with the reference or None)."""
        from rr.run.frame import compare_runs
        from rr.run.isolate import run_isolated
        from rr.run.launch import LaunchError

        out = self._dir("capture")
        record = run_isolated(layout, out, self.backend, self.timeout_s, reference=self.reference)
        if record["status"] != Status.OK:
            return record, None
        try:
            return record, compare_runs(self.reference, out)
        except LaunchError:
            return record, None

    def time(self, reference: Path, other: Path) -> dict:
        from rr.run.isolate import time_isolated

        return time_isolated(reference, other, self.noise, self.time_limit_s, "cuda")

    # -- a layer's sub-compositions --------------------------------------------------------------

    def composed(self, layer: str, phases: list[int]) -> tuple[Path, Path]:
        """The layer composed of `phases` only (its plan's recipes): the module the frame runs and
        its splice record."""
        from rr.splice.compose import compose

        lyr = self.layers[layer]
        spec = {p: r for p, r in lyr.plan.spec.items() if p in phases}
        d = self._dir(f"{layer}.sub")
        d.mkdir(parents=True)
        ptx = d / "composed.ptx"
        compose(lyr.source, lyr.plan.entry, spec, ptx, lyr.grouping)
        if self.backend != "cuda":
            return ptx, SPLICE.next_to(ptx)
        from rr.run.compile import compile_ptx

        cubin = d / "composed.cubin"
        result = compile_ptx(ptx, cubin, self.arch)
        if result.status != Status.OK:
            raise RuntimeError(f"{layer}: the composition of phases {phases} did not compile: {result.message}")
        return cubin, SPLICE.next_to(ptx)

    def identical_with(self, layer: str, phases: list[int]) -> bool:
        module, record = self.composed(layer, phases)
        run, compared = self.capture(self.frame_with({layer: (module, record)}))
        same = compared is not None and all(r.identical for r in compared.rows)
        self.steps.append(f"{layer} composed of phases {phases}: frame {'identical' if same else 'differs'}")
        return same

    def ratio_alone(self, layer: str, module: Path, record: Path) -> dict:
        from rr.run.frame import extract_layer

        out = self._dir(f"{layer}.alone")
        extract_layer(self.reference, layer, out, module, record)
        return self.time(self.layers[layer].alone, out)

    def slower_than_predicted(self, layer: str, phases: list[int]) -> bool:
        plan = self.layers[layer].plan
        module, record = self.composed(layer, phases)
        t = self.ratio_alone(layer, module, record)
        predicted = 1.0
        for c in plan.chosen:
            if c.phase in phases:
                predicted *= c.ratio
        slow = t["status"] == Status.OK and t["ratio"] > predicted + self.noise_multiple * t["ratio_noise"]
        self.steps.append(f"{layer} composed of phases {phases}: alone {t.get('ratio', float('nan')):.4f} against "
                          f"{predicted:.4f} predicted: {'slower' if slow else 'as predicted'}")
        return slow

    def bisect(self, phases: list[int], at_fault) -> tuple[list[int], str]:
        """The phases `at_fault` (a test of a sub-composition) blames: one phase, a smaller set, or
        two halves that are at fault only together."""
        if len(phases) == 1:
            return phases, "this phase alone"
        half = len(phases) // 2
        a, b = phases[:half], phases[half:]
        if at_fault(a):
            return self.bisect(a, at_fault)
        if at_fault(b):
            return self.bisect(b, at_fault)
        return phases, f"phases {a} and {b} together (neither half alone)"

    # -- the whole ------------------------------------------------------------------------------

    def measure(self) -> Measured:
        m = Measured()
        self.steps = m.steps
        spliced = {name: lyr for name, lyr in self.layers.items() if lyr.plan.chosen}
        layout = self.frame_with({name: (lyr.module, lyr.splice_record) for name, lyr in spliced.items()})
        run, compared = self.capture(layout)
        if run["status"] != Status.OK or compared is None:
            m.status, m.message = run["status"], run.get("message", "the composed frame could not be compared")
            return m
        rows, producer = compared.rows, compared.layers
        m.frame_identical = rows[0].identical
        differing = next((r for r in rows[1:] if not r.identical), None)
        if differing is not None:
            m.first_differing_layer, m.first_differing_buffer = producer.get(differing.buffer), differing.buffer
        for name in self.layers:
            mine = [r for r in rows if producer.get(r.buffer) == name]
            m.layers_identical[name] = all(r.identical for r in mine) if mine else None
        self.say(f"composed frame: {'identical' if m.frame_identical else 'differs'}"
                 + (f", first in {m.first_differing_layer} ({m.first_differing_buffer})" if differing else ""))
        if not m.frame_identical and m.first_differing_layer in spliced:
            layer = m.first_differing_layer
            phases = [c.phase for c in spliced[layer].plan.chosen]
            m.culprits[layer] = self.bisect(phases, lambda sub: not self.identical_with(layer, sub)) + ("identity",)
            self.say(f"{layer}: the frame differs because of {m.culprits[layer][1]}: phases {m.culprits[layer][0]}")
        if self.backend != "cuda":
            m.timing_status = Status.UNSUPPORTED
            m.timing_message = "the cpu backend gives no timing: times are only measured on a GPU"
            return m
        t = self.time(self.layout, layout)
        m.timing_status, m.timing_message, m.gpu = t["status"], t.get("message", ""), t.get("gpu")
        if t["status"] == Status.OK:
            m.frame_ratio, m.frame_noise = t["ratio"], t["ratio_noise"]
            self.say(f"composed frame: ratio {t['ratio']:.4f} ± {t['ratio_noise']:.2%}")
        for name, lyr in spliced.items():
            if lyr.alone is None:
                continue
            tl = self.ratio_alone(name, lyr.module, lyr.splice_record)
            m.layer_timing[name] = (tl["status"], tl.get("message", ""))
            if tl["status"] != Status.OK:
                continue
            m.layer_ratio[name] = (tl["ratio"], tl["ratio_noise"])
            predicted = lyr.plan.predicted_ratio
            self.say(f"{name}: composed alone {tl['ratio']:.4f} ± {tl['ratio_noise']:.2%}, parts predict {predicted:.4f}")
            if (name not in m.culprits and len(lyr.plan.chosen) > 1
                    and tl["ratio"] > predicted + self.noise_multiple * tl["ratio_noise"]):
                phases = [c.phase for c in lyr.plan.chosen]
                found = self.bisect(phases, lambda sub: self.slower_than_predicted(name, sub))
                m.culprits[name] = found + ("time",)
                self.say(f"{name}: slower than its parts predict because of {found[1]}: phases {found[0]}")
        return m
