"""The synthetic enc2 is the kernel the reference document describes: its structure is counted here
from the PTX text and the front end's statements alone (not through the describe stage), checked
against the document's numbers; ptxas compiles it for sm_89 and sm_90; its files are deterministic;
its launch directory is complete."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import PTXAS, run_ptxas

from rr.ptx import emit, linearise, parse
from rr.run.launch import read_launch
from rr.synth import layout as L
from rr.synth.enc2 import build_enc2
from rr.synth.inputs import frame_inputs, weight_image, write_enc2

MMA = "mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16"


@pytest.fixture(scope="module")
def enc2_text() -> str:
    return build_enc2()


@pytest.fixture(scope="module")
def stmts(enc2_text):
    return linearise(parse(enc2_text, "enc2.ptx").function(L.ENTRY))


def phase_runs(stmts) -> list[list]:
    runs, cur = [], []
    for s in stmts:
        if s.opcode.startswith("mma."):
            cur.append(s)
        elif cur:
            runs.append(cur)
            cur = []
    return runs + ([cur] if cur else [])


def test_module_round_trips_exactly(enc2_text):
    assert emit(parse(enc2_text, "enc2.ptx")) == enc2_text


def test_entry_has_one_136_byte_parameter_block_and_block_shape(enc2_text):
    assert re.search(rf"\.entry {L.ENTRY}\(\n\t\.param \.align 8 \.b8 {L.ENTRY}_param_0\[136\]\n\)", enc2_text)
    assert ".reqntid 32, 1, 4" in enc2_text


def test_38_phases_with_the_documents_mma_counts(stmts):
    runs = phase_runs(stmts)
    # reference §2.2: phases 1–6 24 each, 7 and 8 48, 9–36 12 each, 37 48, 38 6 — 630 in all
    assert [len(r) for r in runs] == [24] * 6 + [48, 48] + [12] * 28 + [48, 6]
    assert all(s.opcode == MMA for r in runs for s in r)
    assert all(s.last_line == s.line + 3 for r in runs for s in r)  # the 4-line layout


def test_chain_geometry_of_the_documents_flagged_rows(stmts):
    """Rows 8, 13…35, 37, 38 of §2.2: distinct A quads, B pairs and C←D chain lengths."""
    runs = phase_runs(stmts)

    def geometry(run):
        groups = [[tuple(re.findall(r"%\w+", g)) for g in re.findall(r"\{([^}]*)\}", s.text)] for s in run]
        a = {ops[1] for ops in groups}
        b = {ops[2] for ops in groups}
        defined = {r for ops in groups for r in ops[0]}
        starts = [ops for ops in groups if not set(ops[3]) & defined]
        return len(a), len(b), len(starts), len(run) // len(starts)

    assert geometry(runs[7]) == (12, 12, 16, 3)  # phase 8: M=64, N=32, K=96
    assert all(geometry(runs[i]) == (3, 12, 4, 3) for i in range(12, 35, 2))  # 13, 15, …, 35
    assert all(geometry(runs[i]) == (1, 12, 12, 1) for i in range(13, 36, 2))  # 14, 16, …, 36
    assert geometry(runs[36]) == (12, 48, 4, 12)  # phase 37: M=16, N=32, K=384
    assert geometry(runs[37]) == (3, 6, 2, 3)  # phase 38: M=16, N=16, K=96


def test_instruction_counts_of_the_document(stmts):
    ops = [s.opcode for s in stmts]
    assert ops.count("movmatrix.sync.trans.aligned.m8n8.b16") == 48  # E7(f)
    assert ops.count("bar.sync") == 7  # §5: prologue, E8 ×2, E36 ×2, E38 ×2
    assert ops.count("tex.base.2d.v4.f16.s32") == 9  # E38(d)
    assert ops.count("sust.b.2d.v4.b16.zero") == 3  # E38(f)
    assert ops.count("shfl.sync.down.b32") == 4  # E38(e): deltas 1 and 8, two paths
    # butterflies: prologue 4 rows × 2, E7 8 row sums × 2, E12 2 rows × 2
    assert ops.count("shfl.sync.bfly.b32") == 8 + 16 + 4
    assert ops.count("rsqrt.approx.ftz.f32") == 4 + 2  # one per normed row
    assert ops.count("st.global.u32") + ops.count("st.global.v2.u16") == 12 + 4  # arena + half extents
    assert sum(o.startswith("ld.global.v2.u16") for o in ops) == 4 * 6 + 12 * 4  # input + 4 tables
    assert not [o for o in ops if o.startswith(("atom", "red."))]


def test_documented_immediates(enc2_text):
    for imm in ("0f3C8CCB50", "0dBFE1CC0000000000", "0d3FE1CC0000000000", "0f3F6D6000", "0f3FB00000",
                "0f3ED306EB", "0f3DA60DD6", "0f3F000000", "0f40000000", "0d3F20000000000000",
                "0fBFB8AA3B", "0f3FB8AA3B", "0f3F800000", "0f3E800000", "2145419232"):
        assert imm in enc2_text, imm
    # the four MLP constants are materialised once (E13) and re-converted in every band epilogue
    assert len(re.findall(r"mov\.f32 \t%f\d+, 0f3ED306EB", enc2_text)) == 1
    assert len(re.findall(r"cvt\.rn\.f16\.f32 \tlow, %f", enc2_text)) >= 12 * 8 * 4


def test_every_documented_weight_offset_is_read(stmts):
    imm = {int(m) for s in stmts if s.opcode == "add.s64"
           for m in re.findall(r", (\d+);", s.text)}
    table = {int(m) for s in stmts if s.opcode in ("ld.global.v2.u16", "ld.global.u32")
             for m in re.findall(r"\+(\d+)\]", s.text)}
    # B tiles (§3): phases 2–6 (E1–E5), 9, 10–12, the band's first and last, 37 and 38
    for off in (3264, 3776, 1216, 4288, 2240, 5312, 6336, 18112, 18624, 40128, 61632, 83136,
                86592, 89152, 89728, 92992, 158208, 160768, 161280, 173056, 210688, 211200, 211712):
        assert off in imm, off
    # per-column tables and bias words (§3, §6 U7)
    for off in (16, 176, 86208, 86224, 86384, 86400, 86576, 89664, 89712, 92800, 92976, 96064,
                158144, 158192, 210432, 210480, 212224, 212240):
        assert off in table, off
    slabs = [s.text for s in stmts if s.opcode in ("mul.lo.s32",) and ("10752" in s.text or "384" in s.text)]
    assert len(slabs) == 2  # 21504·%tid.z (as 2·10752) for phases 1–7, 12288·%tid.z for phase 37


def test_parameter_offsets_and_the_arena_pointer_through_param_plus_80(stmts):
    params = {int(m or 0) for s in stmts if s.opcode.startswith("ld.param")
              for m in re.findall(r"param_0(?:\+(\d+))?\]", s.text)}
    assert params == {0, 8, 40, 80}
    through = [s.text for s in stmts if s.opcode == "ld.param.u64" and "param_0" not in s.text]
    assert any("+-32]" in t for t in through)  # param+80-32 = the plane arena at 48
    assert {re.search(r"\+(\d+)\]", t).group(1) for t in through if "+-32" not in t} == {"56", "88", "112", "120", "128"}


def test_weight_image_spans_the_documents_extent():
    w = weight_image()
    assert w.size == L.WEIGHT_BYTES == 212256
    regions = L.weight_regions()
    assert max(r.offset + r.size for r in regions) == 212256
    # the per-%tid.z slabs stay inside the image: 21504·3 + 18624 + 3072 and 12288·3 + 161280 + 12288
    assert L.SLAB_QKV * 3 + 18624 + 3072 <= 86208 and L.SLAB_MERGE * 3 + 161280 + 12288 == 210432


@pytest.mark.skipif(PTXAS is None, reason="ptxas is not on PATH")
@pytest.mark.parametrize("arch", ["sm_89", "sm_90"])
def test_ptxas_compiles_enc2_without_warnings(tmp_path, arch):
    ptx = tmp_path / "enc2.ptx"
    ptx.write_text(build_enc2(arch))
    r = run_ptxas(ptx, arch, "-v")
    assert r.returncode == 0, r.stderr
    assert "warning" not in r.stderr.lower(), r.stderr
    assert re.search(r"Used \d+ registers", r.stderr)


def test_generation_is_deterministic_and_seeded(tmp_path):
    a, b = write_enc2(tmp_path / "a", (16, 12)), write_enc2(tmp_path / "b", (16, 12))
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert Path("launch/launch.json") in files and Path("enc2.weights.bin") in files
    for f in files:
        assert (a / f).read_bytes() == (b / f).read_bytes(), f
    assert not np.array_equal(weight_image(2), weight_image(3))
    img3, _ = frame_inputs(16, 12, seed=3)
    assert not np.array_equal(np.load(a / "launch" / "input.npy"), img3)


def test_launch_directory_is_complete(tmp_path):
    out = write_enc2(tmp_path / "e", (240, 135))
    launch = read_launch(out / "launch")
    assert launch.grid == (30, 17, 1) and launch.block == (32, 1, 4) and launch.params_size == 136
    kinds = {f.offset: f.kind for f in launch.fields}
    assert kinds == {0: "scalar", 8: "buffer", 40: "buffer", 48: "buffer", 56: "buffer", 80: "scalar",
                     88: "texture", 112: "surface", 120: "surface", 128: "surface"}
    assert np.load(out / "launch" / "surface2.npy").shape == (67, 120, 4)
    assert (out / "launch" / launch.module).read_text() == (out / "enc2.ptx").read_text()


def test_bad_extents_are_rejected_by_the_cli(tmp_path):
    r = subprocess.run(["rr", "synth", "enc2", "--extents", "240by135", "-o", str(tmp_path / "x")],
                       capture_output=True, text=True, check=False)
    assert r.returncode == 2 and "240by135" in r.stderr and not (tmp_path / "x").exists()
