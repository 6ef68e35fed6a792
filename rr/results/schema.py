"""The results schema (DESIGN §3): one row per recipe run on a layer × phase cell.

Every stage that ran fills its columns; a stage that failed leaves its status and message; a stage
that did not run (yet, or because an earlier one failed, or because the backend cannot — timing on
the cpu backend) has status `not_run` and says why. A failure is a row, never a missing one.
"""

from __future__ import annotations

import pyarrow as pa

STAGES = ("splice", "compile", "capture", "timing")

RESULTS_SCHEMA = pa.schema([
    # identity
    ("layer", pa.string()), ("phase", pa.int32()), ("recipe", pa.string()), ("template", pa.string()),
    ("entry", pa.string()), ("module_hash", pa.string()),
    # the phase descriptor
    ("M", pa.int32()), ("N", pa.int32()), ("K", pa.int32()), ("mma", pa.int32()),
    ("first_stmt", pa.int32()), ("last_stmt", pa.int32()),
    ("b_offsets", pa.list_(pa.int64())), ("c_offsets", pa.list_(pa.int64())),
    # splice
    ("splice_status", pa.string()), ("splice_message", pa.string()),
    ("stmts_cut", pa.int32()), ("stmts_inserted", pa.int32()),
    ("live_in", pa.int32()), ("live_out", pa.int32()), ("spliced_sha1", pa.string()),
    # what regen proved: operands loaded again from the description, read as live-ins, chained
    ("operands_rebuilt", pa.int32()), ("operands_live_in", pa.int32()), ("operands_chained", pa.int32()),
    # compile
    ("compile_status", pa.string()), ("compile_message", pa.string()), ("compile_backend", pa.string()),
    ("arch", pa.string()), ("registers", pa.int32()), ("spill_bytes", pa.int32()),
    ("shared_bytes", pa.int32()), ("compile_ms", pa.float64()),
    # capture
    ("capture_status", pa.string()), ("capture_message", pa.string()), ("capture_backend", pa.string()),
    ("frame", pa.string()),
    ("buffers_identical", pa.map_(pa.string(), pa.bool_())), ("differing_bytes", pa.int64()),
    ("max_abs_diff", pa.float64()), ("psnr_db", pa.float64()), ("frame_identical", pa.bool_()),
    # timing
    ("timing_status", pa.string()), ("timing_message", pa.string()),
    ("ref_median_ms", pa.float64()), ("splice_median_ms", pa.float64()),
    ("splice_min_ms", pa.float64()), ("splice_max_ms", pa.float64()), ("noise", pa.float64()),
    ("samples", pa.int32()), ("ratio", pa.float64()), ("gpu", pa.string()), ("driver", pa.string()),
    # provenance
    ("rr_version", pa.string()), ("code_fingerprint", pa.string()), ("created_at", pa.timestamp("ms", tz="UTC")),
], metadata={b"rr.stage": b"collect"})
