"""The describe stage on the synthetic enc2 gives the reference document's numbers: the 38-row
geometry of §2.2, the B offsets of §3, the C seeds, the operand provenance of phases 7 and 8,
the shuffles of §5, the parameter table of §4 and the weight extent of §6 U5. The expected values
below are copied from the document, not from the code."""

from __future__ import annotations

import pytest

from rr.describe.spec import spec_json
from rr.ptx import parse
from rr.synth.enc2 import build_enc2
from rr.synth.layout import ENTRY


@pytest.fixture(scope="module")
def spec() -> dict:
    f = parse(build_enc2(), "enc2.ptx").function(ENTRY)
    return spec_json(f)


def phase(spec, p: int) -> dict:
    return spec["phases"][p - 1]


# §2.2: (A quads, B pairs, chains, chain length) → (M, N, K)
GEOMETRY = {**{p: (6, 4, 24, 1, 96, 32, 32) for p in range(1, 7)},
            7: (4, 12, 48, 1, 64, 96, 32), 8: (12, 12, 16, 3, 64, 32, 96),
            **{p: (1, 12, 12, 1, 16, 96, 32) for p in range(9, 13)},
            **{p: (3, 12, 4, 3, 16, 32, 96) for p in range(13, 36, 2)},
            **{p: (1, 12, 12, 1, 16, 96, 32) for p in range(14, 37, 2)},
            37: (12, 48, 4, 12, 16, 32, 384), 38: (3, 6, 2, 3, 16, 16, 96)}


def test_the_38_rows_of_the_documents_phase_table(spec):
    assert len(spec["phases"]) == 38
    assert sum(p["mma"] for p in spec["phases"]) == 630
    for p, (a, b, chains, length, M, N, K) in GEOMETRY.items():
        row = phase(spec, p)
        got = (row["a_quads"], row["b_pairs"], row["chains"], row["chain_len"], row["M"], row["N"], row["K"])
        assert got == (a, b, chains, length, M, N, K), p
        assert row["identity"] and row["mma"] == row["m"] * row["n"] * row["k"]


def tiles(first: int, count: int) -> list[int]:
    return [first + 512 * i for i in range(count)]


def test_b_offsets_of_every_phase_named_in_section_3(spec):
    for p, first in {2: 3264, 3: 1216, 4: 4288, 5: 2240, 6: 5312}.items():  # E1–E5
        assert phase(spec, p)["b_offsets"] == tiles(first, 2) and phase(spec, p)["slab_stride"] == 21504
    for p, first in {9: 18624, 10: 40128, 11: 61632, 12: 83136}.items():  # E8–E11, no %tid.z term
        assert phase(spec, p)["b_offsets"] == tiles(first, 6) and phase(spec, p)["slab_stride"] is None
    odd = [86592, 92992, 99200, 105408, 111616, 117824, 124032, 130240, 136448, 142656, 148864, 155072]
    even = [89728, 96128, 102336, 108544, 114752, 120960, 127168, 133376, 139584, 145792, 152000, 158208]
    for i in range(12):
        assert phase(spec, 13 + 2 * i)["b_offsets"] == tiles(odd[i], 6)
        assert phase(spec, 14 + 2 * i)["b_offsets"] == tiles(even[i], 6)
    assert phase(spec, 36)["b_offsets"][-1] == 160768
    assert phase(spec, 37)["b_offsets"] == tiles(161280, 24) and phase(spec, 37)["b_offsets"][-1] == 173056
    assert phase(spec, 37)["slab_stride"] == 12288
    assert phase(spec, 38)["b_offsets"] == [210688, 211200, 211712]


def test_c_seeds(spec):
    assert phase(spec, 7)["c_offsets"] == tiles(6336, 24)  # E6(a): the 12288-byte score bias
    assert phase(spec, 7)["slab_stride"] == 21504
    bias = [89664, 96064, 102272, 108480, 114688, 120896, 127104, 133312, 139520, 145728, 151936, 158144]
    for i, first in enumerate(bias):
        assert phase(spec, 13 + 2 * i)["c_offsets"] == [first, first + 16, first + 32, first + 48]
    assert phase(spec, 37)["c_offsets"] == [210432, 210448, 210464, 210480]
    assert phase(spec, 38)["c_offsets"] == [212224, 212240]
    assert phase(spec, 1)["c_source"] == phase(spec, 2)["c_source"] == phase(spec, 8)["c_source"] == "zero"
    for p in range(10, 13):
        assert phase(spec, p)["c_source"] == f"D(phase {p - 1})"  # 9→10→11→12
    for p in range(16, 37, 2):
        assert phase(spec, p)["c_source"] == f"D(phase {p - 2})"  # the residual chain D14→…→D36


def test_operand_provenance_of_the_attention(spec):
    # phases 7 and 8 read no weights (§7 acceptance index)
    assert phase(spec, 7)["a_source"] == phase(spec, 7)["b_source"] == "pack(D of phase 5)"
    assert phase(spec, 7)["b_offsets"] == [] and phase(spec, 8)["b_offsets"] == []
    assert phase(spec, 8)["b_source"] == "transpose(D of phase 6)"
    assert phase(spec, 8)["a_source"].startswith("computed(epilogue 7)")
    for p in range(9, 13):  # E8–E11: phase 8's D through shared
        assert phase(spec, p)["a_source"] == "shared(pack(D of phase 8))"
    for p in range(13, 36, 2):  # all twelve odd band phases share E12's normed tile
        assert phase(spec, p)["a_source"] == "computed(epilogue 12)"
    assert phase(spec, 37)["a_source"] == "shared(pack(D of phase 36))"


def test_shuffles_and_constants(spec):
    shfl = [r for e in spec["epilogues"] for r in e["reductions"]]
    # §5 counts 32 shuffles: the butterflies of the prologue (8), E7 (16) and E12 (4), and E38's 4 downs
    assert sum(r["kind"] == "bfly" for r in shfl) == 28 and sum(r["kind"] == "down" for r in shfl) == 4
    assert {r["delta"] for r in shfl if r["kind"] == "bfly"} == {1, 2}
    assert sorted(r["delta"] for r in shfl if r["kind"] == "down") == [1, 1, 8, 8]
    e7 = spec["epilogues"][7]
    assert [c["f16_bits"] for c in e7["constants"]] == ["0x2466", "0xB873", "0x3873", "0x3B6B", "0x3D80"]
    e13 = spec["epilogues"][13]
    assert [c["f16_bits"] for c in e13["constants"]] == ["0x3698", "0x2D30", "0x3800", "0x4000"]


def test_epilogue_names(spec):
    names = {e["epilogue"]: e["name"] for e in spec["epilogues"]}
    assert "RMS norm" in names[0] and "RMS norm" in names[12]
    assert "softmax" in names[7] and "transpose" in names[7]
    assert all("clamped cubic" in names[i] for i in range(13, 36, 2))
    assert "global stores" in names[36] and "shared staging" in names[36]
    assert names[38].startswith("texture gather") and "surface writes" in names[38]
    assert all(names[i] == "B loads" for i in range(1, 6))


def test_parameter_table_and_weight_extent(spec):
    roles = {p["offset"]: p["role"] for p in spec["params"]}
    assert roles == {0: "scalar", 8: "read", 40: "read", 48: "written", 56: "written", 80: "scalar",
                     88: "sampled (texture)", 112: "written", 120: "written", 128: "written"}
    assert spec["weight_extent"] == 212256
    assert spec["block_z"] == 4
