"""The results schema (docs/design.md, "Results"): one row per recipe run on a layer × phase cell.

Every stage that ran fills its columns; a stage that failed leaves its status and message; a stage
that did not run (yet, or because an earlier one failed, or because the backend cannot — timing on
the cpu backend) has a status that is not `ok` and says why. A failure is a row, never a missing one.
"""

from __future__ import annotations

import pyarrow as pa

from rr.run.compile import FIGURES

STAGES = ("splice", "compile", "capture", "timing")

# one output buffer of the launch, spliced against unspliced (rr compare's record of it)
BUFFER = pa.struct([
    ("name", pa.string()), ("dtype", pa.string()), ("identical", pa.bool_()), ("elements", pa.int64()),
    ("differing_elements", pa.int64()), ("max_abs_diff", pa.float64()), ("psnr_db", pa.float64()),
])

# one of the recipe's checks: passed is null when what it checks was not measured (the stage did
# not run, or cannot on this backend: detail says which)
CHECK = pa.struct([
    ("check", pa.string()), ("passed", pa.bool_()), ("value", pa.float64()), ("threshold", pa.float64()),
    ("detail", pa.string()),
])

_int = pa.int32()

RESULTS_SCHEMA = pa.schema([
    # identity
    ("layer", pa.string()), ("phase", pa.int32()), ("recipe", pa.string()), ("template", pa.string()),
    ("entry", pa.string()), ("module_hash", pa.string()),
    # the phase descriptor
    ("M", pa.int32()), ("N", pa.int32()), ("K", pa.int32()), ("mma", pa.int32()),
    ("first_stmt", pa.int32()), ("last_stmt", pa.int32()),
    ("b_offsets", pa.list_(pa.int64())), ("c_offsets", pa.list_(pa.int64())),
    # the verdict: the recipe's checks, and whether all passed (null: none failed, some not measured)
    ("checks", pa.list_(CHECK)), ("passed", pa.bool_()),
    # splice
    ("splice_status", pa.string()), ("splice_message", pa.string()),
    ("stmts_cut", pa.int32()), ("stmts_inserted", pa.int32()),
    ("live_in", pa.int32()), ("live_out", pa.int32()), ("outside_checked", pa.int32()), ("spliced_sha1", pa.string()),
    # what regen proved: operands loaded again from the description, read as live-ins, chained
    ("operands_rebuilt", pa.int32()), ("operands_live_in", pa.int32()), ("operands_chained", pa.int32()),
    # compile: the splice's entry, the unspliced reference's (ref_*) and splice minus reference (*_delta)
    ("compile_status", pa.string()), ("compile_message", pa.string()), ("compile_backend", pa.string()),
    ("arch", pa.string()), *((f, _int) for f in FIGURES), ("compile_ms", pa.float64()),
    ("ref_compile_status", pa.string()), ("ref_compile_message", pa.string()), *((f"ref_{f}", _int) for f in FIGURES),
    *((f"{f}_delta", _int) for f in FIGURES),
    # capture
    ("capture_status", pa.string()), ("capture_message", pa.string()), ("capture_backend", pa.string()),
    ("capture_device", pa.string()), ("frame", pa.string()),
    ("buffers", pa.list_(BUFFER)), ("worst_buffer", pa.string()),
    ("max_abs_diff", pa.float64()), ("psnr_db", pa.float64()), ("frame_identical", pa.bool_()),
    # a whole frame's capture: the first layer whose outputs differ (and its buffer), where a
    # resumed frame started and after which layer it was completed from the reference's outputs
    ("final_buffer", pa.string()), ("first_differing_layer", pa.string()), ("first_differing_buffer", pa.string()),
    ("capture_started_at", pa.string()), ("capture_completed_after", pa.string()),
    # timing
    ("timing_status", pa.string()), ("timing_message", pa.string()),
    ("ref_median_ms", pa.float64()), ("splice_median_ms", pa.float64()),
    ("splice_min_ms", pa.float64()), ("splice_max_ms", pa.float64()), ("noise", pa.float64()),
    ("samples", pa.int32()), ("ratio", pa.float64()), ("gpu", pa.string()), ("driver", pa.string()),
    # a frame's cell: the ratio above is the layer's alone; these are the whole frame's
    ("frame_ref_median_ms", pa.float64()), ("frame_splice_median_ms", pa.float64()), ("frame_noise", pa.float64()),
    ("frame_ratio", pa.float64()),
    # provenance
    ("rr_version", pa.string()), ("code_fingerprint", pa.string()), ("created_at", pa.timestamp("ms", tz="UTC")),
], metadata={b"rr.stage": b"collect"})
