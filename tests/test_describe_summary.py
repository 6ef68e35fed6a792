"""Epilogue summaries (traffic, reductions, constants and their f16 values, names) and the
parameter table (roles and extents), on kernels whose contents are known; `rr describe` output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq

from rr.describe import find_epilogues, find_phases
from rr.describe.dataflow import Dataflow
from rr.describe.summary import summarise_epilogue, summarise_params
from rr.ptx import linearise, parse_file

ROOT = Path(__file__).parent
SINK = ROOT / "data" / "kitchen_sink.ptx"


def _flow(path, entry):
    f = parse_file(path).function(entry)
    statements = linearise(f)
    phases = find_phases(statements)
    return Dataflow(f, statements), find_epilogues(statements, phases)


def test_constants_are_reported_with_the_f16_they_round_to():
    # the reference document's %f476 and %fd383: 0f3C8CCB50 -> f16 0x2466, 0dBFE1CC0000000000 -> 0xB873
    flow, epilogues = _flow(SINK, "cuda_dldn_engine_swin_enc9_kernel")
    constants = summarise_epilogue(flow, epilogues[0]).constants
    assert [(c["literal"], c["f16_bits"], c["f16"]) for c in constants] == [
        ("0f3C8CCB50", "0x2466", 0.017181396484375), ("0dBFE1CC0000000000", "0xB873", -0.55615234375)]


def test_reductions_carry_their_kind_and_delta(nvcc_ptx):
    flow, epilogues = _flow(nvcc_ptx("shuffles"), "reduce")
    (e,) = epilogues  # no mma: everything is the prologue
    found = [(r["kind"], r["delta"]) for r in summarise_epilogue(flow, e).reductions]
    assert sorted(found) == sorted([("bfly", 1), ("bfly", 2), ("down", 1), ("down", 8), ("up", 4), ("idx", 0), ("bfly", 4)])


def test_traffic_names_and_parameter_roles_of_the_struct_kernel():
    flow, epilogues = _flow(ROOT / "ptx" / "struct_mma_tex_surf.ptx", "rr_test_struct")
    prologue, tail = (summarise_epilogue(flow, e) for e in epilogues)
    assert prologue.traffic == {"weight loads": 2} and prologue.name == "B loads"
    assert tail.traffic == {"global stores": 1, "texture reads": 1, "surface writes": 1}
    assert tail.name.startswith("texture gather") and "surface writes" in tail.name
    params = summarise_params(flow)
    assert [(u.offset, u.kind, u.role) for u in params.values()] == [
        (0, "pointer", "read"), (8, "pointer", "read"), (16, "pointer", "written"),
        (24, "pointer", "sampled (texture)"), (32, "pointer", "written"), (40, "scalar", "scalar")]
    # A: 16 bytes per lane at +0 -> 31·16 + 16; B: 8 bytes per lane -> 31·8 + 8
    assert (params[0].extent, params[8].extent) == (512, 256)


def test_describe_writes_the_descriptor_and_tables(tmp_path):
    out = tmp_path / "d"
    r = subprocess.run([sys.executable, "-m", "rr.cli", "describe", str(ROOT.parent / "rr" / "data" / "sample_swin.ptx"),
                        "--entry", "cuda_dldn_engine_swin_sample_kernel", "-o", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    spec = json.loads((out / "descriptor.json").read_text())
    phases = pq.read_table(out / "phases.parquet").to_pylist()
    assert [p["mma"] for p in phases] == [p["mma"] for p in spec["phases"]] == [32, 16]
    epilogues = pq.read_table(out / "epilogues.parquet").to_pylist()
    assert dict(epilogues[-1]["ops"])["st.global.v2.u32"] == 16
    assert spec["weight_extent"] == 3072
