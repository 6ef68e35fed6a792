"""The recipe's checks evaluated on a collected row: each check passed or failed with the value it
measured and the threshold it was held to, and the row's verdict.

A check whose stage did not run, or cannot run here (no ptxas, a capture the cpu backend does not
interpret), is neither passed nor failed: `passed` is null and `detail` says why — so is every
check of a recipe that does not apply to the phase (splice status not_applicable: a direct splice
of a phase without a pack or transpose operand). A stage that ran and failed fails the checks that
stand on it: a refused splice fails roundtrip and
outside_unchanged, a ptxas error fails ptxas, a faulting or hanging spliced kernel fails
identical_output and psnr.
"""

from __future__ import annotations

import math

from rr.records import Status
from rr.splice.recipe import Check, Recipe

# statuses of a stage that ran and failed because of the splice (anything else not ok: not measured)
_FAILED = {"splice": (Status.ERROR,), "compile": (Status.COMPILE_ERROR,), "capture": (Status.FAULT, Status.TIMEOUT)}


def _check(name: str, passed: bool | None, detail: str, value: float | None = None,
           threshold: float | None = None) -> dict:
    return {"check": name, "passed": passed, "value": value, "threshold": threshold, "detail": detail}


def _unmeasured(name: str, row: dict, stage: str) -> dict | None:
    """The check's record when its stage did not end `ok`: failed or not measured, with the reason."""
    status = row.get(f"{stage}_status")
    if status == Status.OK:
        return None
    why = f"{stage} {status}: {row.get(f'{stage}_message') or ''}".rstrip(": ")
    return _check(name, False if status in _FAILED.get(stage, ()) else None, why)


def _splice_check(name: str, row: dict, what: str, value_key: str | None) -> dict:
    # rr splice refuses a module that does not round-trip or changes a statement outside the cut,
    # so a splice record with status ok is the proof; the count is what it compared
    return _unmeasured(name, row, "splice") or _check(name, True, what, row.get(value_key) if value_key else None)


def _capture_check(name: str, row: dict, recipe: Recipe) -> dict:
    unmeasured = _unmeasured(name, row, "capture")
    if unmeasured:
        return unmeasured
    buffers = row.get("buffers") or []
    final = row.get("final_buffer")  # a whole frame's capture: the final frame is what is judged
    if name == Check.IDENTICAL_OUTPUT:
        if final:
            judged = [b for b in buffers if b["name"] == final]
            differing = sum(b["differing_elements"] for b in judged)
            where = row.get("first_differing_layer")
            detail = (f"the final frame ({final}) byte-identical to the unspliced frame's" if row["frame_identical"] else
                      f"{differing} elements of the final frame ({final}) differ"
                      + (f"; first differing layer {where} ({row['first_differing_buffer']})" if where else ""))
            return _check(name, bool(row["frame_identical"]), detail, float(differing), 0.0)
        differing = sum(b["differing_elements"] for b in buffers)
        detail = ("every output buffer byte-identical to the unspliced kernel's" if row["frame_identical"] else
                  f"{differing} elements differ; worst buffer {row['worst_buffer']}")
        return _check(name, bool(row["frame_identical"]), detail, float(differing), 0.0)
    psnr, worst = row.get("psnr_db"), final or row.get("worst_buffer")
    what = f"final frame ({final})" if final else f"worst buffer {worst}"
    if psnr is None:
        return _check(name, False, f"non-finite values differ in {worst}", None, recipe.psnr_min_db)
    detail = ("identical (infinite PSNR)" if math.isinf(psnr) else
              f"{what}: {psnr:.2f} dB {'≥' if psnr >= recipe.psnr_min_db else '<'} "
              f"{recipe.psnr_min_db:g} dB")
    return _check(name, psnr >= recipe.psnr_min_db, detail, psnr, recipe.psnr_min_db)


def evaluate(recipe: Recipe, row: dict) -> list[dict]:
    """The recipe's checks, in its order, on a row collect has filled (rr.results.schema.CHECK)."""
    out = []
    for name in recipe.checks:
        if name == Check.ROUNDTRIP:
            out.append(_splice_check(name, row, "the spliced module round-trips through the front end", None))
        elif name == Check.OUTSIDE_UNCHANGED:
            out.append(_splice_check(name, row, "statements outside the cut compared, all unchanged",
                                     "outside_checked"))
        elif name == Check.PTXAS:
            out.append(_unmeasured(name, row, "compile") or _check(
                name, True, f"ptxas compiled it for {row.get('arch')}: {row.get('registers')} registers"))
        else:
            out.append(_capture_check(name, row, recipe))
    return out


def verdict(checks: list[dict]) -> bool | None:
    """True when every check passed, False when one failed, None when none failed but some were not
    measured (or the recipe has no checks)."""
    results = [c["passed"] for c in checks]
    if False in results:
        return False
    return True if results and all(results) else None
