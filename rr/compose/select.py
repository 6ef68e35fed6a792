"""Which splices a layer's composition takes: per phase, the fastest recipe whose splice left the
final frame byte-identical and whose layer-alone time ratio is below 1 − k·noise (k the config's
`compose.noise_multiple`, 2 by default: faster beyond the noise of its own measurement). A phase
without such a recipe stays unspliced. Without timings (the cpu backend) no splice can be called
faster: every phase whose splice was byte-identical is taken, the first such recipe in the order
given, so the composition's identity is still tested — and the rows say timing needs a GPU."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from rr.records import Status

DEFAULT_NOISE_MULTIPLE = 2.0


@dataclass(frozen=True)
class Choice:
    phase: int
    recipe: str
    ratio: float | None  # the layer alone with this phase spliced, against unspliced (None: not timed)
    noise: float | None


@dataclass
class Plan:
    """A layer's composition: the chosen splice of each phase, and why the other phases have none."""

    layer: str
    entry: str
    timed: bool  # chosen by their timings (else: every byte-identical phase, untimed)
    noise_multiple: float
    chosen: list[Choice] = field(default_factory=list)
    unspliced: dict[int, str] = field(default_factory=dict)  # phase -> why no recipe was chosen

    @property
    def spec(self) -> dict[int, str]:
        """{phase: recipe}, what rr splice --compose takes."""
        return {c.phase: c.recipe for c in self.chosen}

    @property
    def predicted_ratio(self) -> float | None:
        """The product of the chosen splices' ratios: what the composition's would be if the phases'
        savings added up (1 for no splice; None untimed)."""
        if not self.timed:
            return None
        return math.prod(c.ratio for c in self.chosen) if self.chosen else 1.0

    def as_dict(self) -> dict:
        return {"layer": self.layer, "entry": self.entry, "timed": self.timed, "noise_multiple": self.noise_multiple,
                "chosen": [asdict(c) for c in self.chosen], "unspliced": {str(p): r for p, r in self.unspliced.items()},
                "predicted_ratio": self.predicted_ratio}


def select(rows: list[dict], layer: str, noise_multiple: float = DEFAULT_NOISE_MULTIPLE,
           recipes: list[str] | None = None) -> Plan:
    """The plan of `layer` from its cells' rows (rr collect's, every recipe of every phase).
    `recipes`: those that may be chosen, in the order the untimed choice prefers (default: as the
    rows list them)."""
    mine = [r for r in rows if r["layer"] == layer and r["phase"] is not None]
    order = recipes or list(dict.fromkeys(r["recipe"] for r in mine))
    timed = any(r.get("timing_status") == Status.OK for r in mine)
    entry = next((r["entry"] for r in mine if r.get("entry")), "")
    plan = Plan(layer, entry, timed, noise_multiple)
    for phase in sorted({r["phase"] for r in mine}):
        candidates = [r for r in mine if r["phase"] == phase and r["recipe"] in order]
        identical = [r for r in candidates if r.get("splice_status") == Status.OK and r.get("frame_identical") is True]
        if not identical:
            plan.unspliced[phase] = _why_none(candidates)
            continue
        if not timed:
            best = min(identical, key=lambda r: order.index(r["recipe"]))
            plan.chosen.append(Choice(phase, best["recipe"], None, None))
            continue
        faster = [r for r in identical if r.get("timing_status") == Status.OK and r.get("ratio") is not None
                  and r["ratio"] < 1 - noise_multiple * (r.get("noise") or 0.0)]
        if not faster:
            ratios = ", ".join(f"{r['recipe']} {r['ratio']:.4f} ± {r.get('noise') or 0:.2%}" for r in identical
                               if r.get("ratio") is not None)
            plan.unspliced[phase] = (f"no byte-identical splice is faster than 1 − {noise_multiple:g}·noise"
                                     + (f" ({ratios})" if ratios else " (none was timed)"))
            continue
        best = min(faster, key=lambda r: r["ratio"])
        plan.chosen.append(Choice(phase, best["recipe"], best["ratio"], best.get("noise")))
    return plan


def _why_none(rows: list[dict]) -> str:
    if not rows:
        return "no row of a recipe that may be chosen"
    said = []
    for r in rows:
        if r.get("splice_status") != Status.OK:
            said.append(f"{r['recipe']}: splice {r.get('splice_status')}")
        elif r.get("frame_identical") is not True:
            said.append(f"{r['recipe']}: " + ("frame differs" if r.get("frame_identical") is False
                                               else f"capture {r.get('capture_status')}"))
    return "no byte-identical splice (" + "; ".join(said) + ")"
