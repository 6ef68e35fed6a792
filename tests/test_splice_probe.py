"""The probe template: the computation untouched, the phase's mma operands stored per lane into an
extra buffer that `rr relaunch` appends to the launch; on a GPU the outputs stay byte-identical
and the probed D agree with the mma model replayed on the probed A, B and C (to the hardware's
rounding: a few ulps of the largest term)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import PTXAS, run_ptxas
from rr.corpus.sample import sample_launch
from rr.numerics.mma import mma_exact
from rr.ptx import linearise, parse_file
from rr.run.launch import param_images, read_launch

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "rr" / "data" / "sample_swin.ptx"
ENTRY = "cuda_dldn_engine_swin_sample_kernel"
RECIPES = ROOT / "config" / "recipes"


def _rr(*args):
    return subprocess.run([sys.executable, "-m", "rr.cli", *map(str, args)], capture_output=True, text=True,
                          check=False)


def test_probe_leaves_the_phase_and_adds_stores_and_a_parameter(tmp_path):
    out = tmp_path / "p.ptx"
    r = _rr("splice", SAMPLE, "--entry", ENTRY, "--recipe", RECIPES / "probe.yaml", "--phase", 1, "-o", out)
    assert r.returncode == 0, r.stderr
    record = json.loads(Path(f"{out}.splice.json").read_text())
    probe = record["probe"]
    f = parse_file(out).function(ENTRY)
    assert f.params[-1].name == probe["param"] == f"{ENTRY}_param_probe"
    before = linearise(parse_file(SAMPLE).function(ENTRY))
    after = linearise(f)
    cut = before[record["cut"]["first_stmt"] - 1:record["cut"]["last_stmt"]]
    spliced = after[record["cut"]["first_stmt"] - 1:record["cut"]["first_stmt"] - 1 + record["inserted_statements"]]
    # the phase itself is untouched and in order; all that is added are the probe's own statements
    assert [s.text for s in spliced if not _probes(s)] == [s.text for s in cut]
    stores = [s for s in spliced if s.opcode == "st.global.b32" and "%rrpd0" in s.text]
    assert len(stores) == probe["words_per_thread"] == len(probe["registers"])
    assert len(probe["mma"]) == 32 and all(len(m["A"]) == 4 and len(m["B"]) == 2 and len(m["D"]) == 2
                                           for m in probe["mma"])
    if PTXAS:
        assert run_ptxas(out).returncode == 0


def _probes(s) -> bool:
    """A statement the probe added: it touches only the probe's registers (and reads others)."""
    return any(r.startswith("%rrp") for r in s.uses + s.defs) or s.opcode == "ld.param.u64" and "probe" in s.text


IN_PLACE = """.version 8.7
.target sm_90
.address_size 64

.visible .entry k(
	.param .u64 k_param_0
)
{
	.reg .b32 	%r<16>;
	.reg .b64 	%rd<4>;

	ld.param.u64 	%rd1, [k_param_0];
	cvta.to.global.u64 	%rd2, %rd1;
	ld.global.v4.u32 	{%r1, %r2, %r3, %r4}, [%rd2];
	ld.global.v2.u32 	{%r5, %r6}, [%rd2+16];
	ld.global.v2.u32 	{%r7, %r8}, [%rd2+24];
	mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16
	{%r7, %r8},
	{%r1, %r2, %r3, %r4},
	{%r5, %r6}, {%r7, %r8};
	mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16
	{%r7, %r8},
	{%r1, %r2, %r3, %r4},
	{%r5, %r6}, {%r7, %r8};
	st.global.v2.u32 	[%rd2+32], {%r7, %r8};
	ret;

}
"""


def test_probe_records_the_true_input_c_when_an_mma_accumulates_in_place(tmp_path):
    # {%r7, %r8} is C and D of both mma: the first reads the loaded C, the second the first's D
    src = tmp_path / "k.ptx"
    src.write_text(IN_PLACE)
    out = tmp_path / "p.ptx"
    r = _rr("splice", src, "--entry", "k", "--recipe", RECIPES / "probe.yaml", "--phase", 1, "-o", out)
    assert r.returncode == 0, r.stderr
    probe = json.loads(Path(f"{out}.splice.json").read_text())["probe"]
    first, second = probe["mma"]
    names = probe["registers"]
    assert [names[w] for w in first["C"]] == ["%r7", "%r8"]  # as loaded, before the first mma
    assert [names[w] for w in first["D"]] == [f"%r7@s{first['stmt']}", f"%r8@s{first['stmt']}"]
    assert second["C"] == first["D"] and second["D"] != first["D"] != first["C"]
    stmts = linearise(parse_file(out).function("k"))
    mmas = [s.stmt for s in stmts if s.opcode.startswith("mma.")]
    c_stores = [s.stmt for s in stmts if s.opcode == "st.global.b32" and s.uses[-1] in ("%r7", "%r8")]
    # the loaded C is stored before the first mma overwrites it, each D right after its mma
    assert c_stores[:2] < [mmas[0]] * 2 and mmas[0] < c_stores[2] < mmas[1] < c_stores[4]
    if PTXAS:
        assert run_ptxas(out).returncode == 0


def test_relaunch_appends_the_probe_buffer(tmp_path):
    out = tmp_path / "p.ptx"
    assert _rr("splice", SAMPLE, "--entry", ENTRY, "--recipe", RECIPES / "probe.yaml", "--phase", 2,
               "-o", out).returncode == 0
    sample_launch(tmp_path / "ref", SAMPLE)
    r = _rr("relaunch", tmp_path / "ref", "--module", out, "--splice-record", f"{out}.splice.json",
            "-o", tmp_path / "probe")
    assert r.returncode == 0, r.stderr
    launch = read_launch(tmp_path / "probe")
    words = json.loads(Path(f"{out}.splice.json").read_text())["probe"]["words_per_thread"]
    assert np.load(tmp_path / "probe" / "probe.npy").shape == (1, 32, words)
    assert [f.buffer for f in launch.extra] == ["probe"]
    images = param_images(launch, {name: 1 for name in launch.buffers})
    assert len(images) == len(launch.fields) + 1  # one kernel parameter more


def test_probe_of_an_unknown_register_form_is_refused(tmp_path):
    recipe = tmp_path / "bad.yaml"
    recipe.write_text("name: badprobe\ndescription: a register name without its %\ncut: {phase: 1}\ntemplate: {name: probe, params: {registers: [A, r12]}}\n")
    r = _rr("splice", SAMPLE, "--entry", ENTRY, "--recipe", recipe, "-o", tmp_path / "x.ptx")
    assert r.returncode == 2 and "r12" in r.stderr and not (tmp_path / "x.ptx").exists()


@pytest.mark.gpu
def test_every_probed_mma_replays_bit_exactly_and_outputs_are_unchanged(tmp_path, gpu):
    from rr.run.probe import replay

    out = tmp_path / "p.ptx"
    assert _rr("splice", SAMPLE, "--entry", ENTRY, "--recipe", RECIPES / "probe.yaml", "--phase", 1,
               "-o", out).returncode == 0
    sample_launch(tmp_path / "ref", SAMPLE)
    assert _rr("relaunch", tmp_path / "ref", "--module", out, "--splice-record", f"{out}.splice.json",
               "-o", tmp_path / "probe").returncode == 0
    for d in ("ref", "probe"):
        r = _rr("run", tmp_path / d, "--backend", "cuda", "-o", tmp_path / f"{d}.out")
        assert r.returncode == 0, r.stderr
    assert _rr("compare", tmp_path / "ref.out", tmp_path / "probe.out").returncode == 0
    record = json.loads(Path(f"{out}.splice.json").read_text())["probe"]
    # the default replay model is the H200's (rr.numerics.mma.DEFAULT_MMA): every D given back; the
    # exact-sum model gives back most, not all (docs/numerics.md)
    result = replay(np.load(tmp_path / "probe.out" / "probe.npy"), record)
    assert result["identical_share"] == 1.0, result
    exact = replay(np.load(tmp_path / "probe.out" / "probe.npy"), record, mma_exact)
    assert 0.5 < exact["identical_share"] < 1.0, exact
