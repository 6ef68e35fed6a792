"""`rr spec` beyond `mma.sync`: `wmma.mma` and `wgmma.mma_async` phases get the geometry of their
chains with the instruction's own tile, and their operands traced as far as registers and
shared-memory descriptors allow — on nvcc-built kernels (tests/cuda/wmma.cu, tests/cuda/wgmma.cu)."""

from __future__ import annotations

from rr.describe.spec import spec_json
from rr.ptx import parse_file


def _spec(path, entry, grouping="run"):
    module = parse_file(path)
    return spec_json(module.function(entry), grouping=grouping, module=module)


def test_a_wmma_gemm_is_one_phase_with_the_m16n16k16_tile(nvcc_ptx):
    # 2x2 tiles over three k-steps, each chain seeded by a wmma.load of the C matrix
    (p,) = _spec(nvcc_ptx("wmma"), "wmma_gemm")["phases"]
    assert p["opcode"].startswith("wmma.mma.sync.aligned.row.col.m16n16k16")
    assert (p["mma"], p["a_quads"], p["b_pairs"], p["chains"], p["chain_len"]) == (12, 6, 6, 4, 3)
    assert (p["M"], p["N"], p["K"], p["identity"]) == (32, 32, 48, True)
    # fragments loaded by wmma.load from each pointer: 512 bytes (256 halves) a fragment
    pointer = {role: p["operands"][role]["base"] for role in "ABC"}
    assert pointer == {"A": {"space": "param", "offset": 0}, "B": {"space": "param", "offset": 8},
                       "C": {"space": "param", "offset": 16}}
    assert p["a_offsets"] == p["b_offsets"] == [512 * i for i in range(6)]
    assert p["c_offsets"] == [1024 * i for i in range(4)]


def test_wgmma_steps_are_phases_of_the_m64n8k32_tile_with_descriptors_into_shared_memory(nvcc_ptx):
    spec = _spec(nvcc_ptx("wgmma", arch="sm_90a"), "wgmma_gemm")
    phases = spec["phases"]
    # each step's descriptors are computed between the steps, so each is a run of its own
    assert [p["mma"] for p in phases] == [1, 1, 1, 1]
    assert all((p["M"], p["N"], p["K"]) == (64, 8, 32) for p in phases)
    assert {p["a_source"] for p in phases} == {"shared(descriptor of _ZZ10wgmma_gemmE2sa)"}
    assert {p["b_source"] for p in phases} == {"shared(descriptor of _ZZ10wgmma_gemmE2sb)"}
    # the accumulator starts at zero and each step accumulates in place on the one before
    assert [p["c_source"] for p in phases] == ["zero", "D(phase 1)", "D(phase 2)", "D(phase 3)"]


def test_gemm_grouping_joins_the_wgmma_steps_into_one_k128_phase(nvcc_ptx):
    (p,) = _spec(nvcc_ptx("wgmma", arch="sm_90a"), "wgmma_gemm", grouping="gemm")["phases"]
    assert (p["mma"], p["chains"], p["chain_len"], p["M"], p["N"], p["K"], p["identity"]) == (4, 1, 4, 64, 8, 128, True)
    assert len(p["runs"]) == 4 and p["c_source"] == "zero"
