"""The cpu backend: the PTX interpreter runs launch descriptions without a GPU. Checked here against
numpy truth — instruction families, the runs issue's kernels, nvcc-built kernels with shuffles,
movmatrix, branches and loops, textures and surfaces, mma chains — and against the synthetic
enc2's numpy model, byte for byte when both use the same mma model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from run_kernels import PTX, single_buffer_launch, struct_launch

from rr.numerics import fp8, half, mufu
from rr.numerics.mma import DEFAULT_MMA, MMA_MODELS, mma_sync
from rr.run import fragments
from rr.run.cpu import CpuUnsupported, run_cpu
from rr.run.launch import Buffer, Field, Launch, load_buffers, read_launch, write_launch
from rr.synth import model
from rr.synth.inputs import write_enc2

RECIPES = Path(__file__).resolve().parents[1] / "config" / "recipes"


def _rr(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "rr.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, check=False)


def launch_of(directory: Path, module: Path, entry: str, buffers: dict, grid=(1, 1, 1), block=(32, 1, 1),
              scalars: tuple = (), images: dict | None = None) -> None:
    """A list-layout launch: one parameter per buffer (in order), then texture/surface objects and
    scalars. `buffers`: name -> (array, role)."""
    fields, described = [], {}
    for name, (array, role) in buffers.items():
        kind = (images or {}).get(name, "buffer")
        fields.append(Field(kind, buffer=name))
        described[name] = Buffer(name, f"{name}.npy", role, "rgba16f" if kind != "buffer" else None)
    fields += [Field("scalar", 0, dtype, (value,)) for dtype, value in scalars]
    launch = Launch(entry=entry, module="kernel.ptx", grid=grid, block=block, layout="list",
                    fields=tuple(fields), buffers=described)
    write_launch(directory, launch, {n: a for n, (a, _) in buffers.items()}, module)


def test_instruction_families_against_numpy(tmp_path):
    rng = np.random.default_rng(5)
    # keep the f16 halves finite and the divisor away from zero
    halves = rng.uniform(-4, 4, (32, 2, 2)).astype(np.float16)
    halves[:, 1, 0] = np.where(np.abs(halves[:, 1, 0]) < 0.25, np.float16(0.5), halves[:, 1, 0])
    words = (halves.view(np.uint16).astype(np.uint32)[..., 0] | (halves.view(np.uint16).astype(np.uint32)[..., 1] << 16))
    words[:8, 0] |= 0x80000000 & words[:8, 1]  # some negative integers too
    halves = np.ascontiguousarray(words).view(np.float16).reshape(32, 2, 2)
    launch_of(tmp_path / "l", PTX / "families.ptx", "rr_test_families",
              {"inp": (words, "in"), "out": (np.zeros((32, 16), np.uint32), "out")})
    record, out = run_cpu(tmp_path / "l")
    got = out["out"]
    a, b = words[:, 0].view(np.int32).astype(np.int64), words[:, 1].view(np.int32).astype(np.int64)
    ua, ub = words[:, 0].astype(np.uint64), words[:, 1].astype(np.uint64)
    i32 = lambda v: (np.asarray(v, np.int64) & 0xFFFFFFFF).astype(np.uint32)  # noqa: E731
    assert np.array_equal(got[:, 0], i32(a + b))
    assert np.array_equal(got[:, 1], i32(a * b))
    assert np.array_equal(got[:, 2], i32(a * 7 + b))
    assert np.array_equal(got[:, 3], i32(a >> 3))
    assert np.array_equal(got[:, 4], (ua >> 3).astype(np.uint32))
    assert np.array_equal(got[:, 5], ((ua << (ub & 31)) & 0xFFFFFFFF).astype(np.uint32))
    assert np.array_equal(got[:, 6], i32(np.minimum(a, b)))
    assert np.array_equal(got[:, 7], np.maximum(ua, ub).astype(np.uint32))
    assert np.array_equal(got[:, 8], np.where((a < b) | (ua > ub), words[:, 0], words[:, 1]))
    assert np.array_equal(got[:, 9], words[:, 0] ^ words[:, 1])
    x, x_hi, y, y_hi = halves[:, 0, 0], halves[:, 0, 1], halves[:, 1, 0], halves[:, 1, 1]
    prod = np.stack([half.mul(x, y), half.mul(x_hi, y_hi)], -1).view(np.uint32)[:, 0]
    assert np.array_equal(got[:, 10], prod)
    q = (x.astype(np.float64) / y.astype(np.float64)).astype(np.float32)
    assert np.array_equal(got[:, 11], np.trunc(q).astype(np.int32).view(np.uint32))
    packed = fp8.from_e4m3(fp8.to_e4m3(halves[:, 0]))  # e4m3 round trip of both halves of a
    assert np.array_equal(got[:, 12], packed.view(np.uint32)[:, 0])
    assert np.array_equal(got[:, 13], mufu.ex2_approx(y.astype(np.float32)).view(np.uint32))
    fused = half.fma(x, y, x_hi)
    assert np.array_equal(got[:, 14], np.stack([fused, q.astype(np.float16)], -1).view(np.uint32)[:, 0])
    assert np.array_equal(got[:, 15], np.arange(32, dtype=np.uint32))
    assert record["unwritten_registers"] == []


def test_struct_kernel_on_the_cpu_matches_numpy_bit_for_bit(tmp_path):
    expected = struct_launch(tmp_path / "l", height=8, scale=2.0)
    r = _rr("run", tmp_path / "l", "--backend", "cpu", "-o", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    assert np.array_equal(np.load(tmp_path / "out" / "d.npy").view(np.uint16), expected["d"].view(np.uint16))
    assert np.array_equal(np.load(tmp_path / "out" / "surf.npy").view(np.uint16), expected["surf"].view(np.uint16))
    record = json.loads((tmp_path / "out" / "run.json").read_text())
    assert record["status"] == "ok" and record["backend"] == "cpu" and record["device"]["mma_model"] == DEFAULT_MMA


def test_an_out_of_bounds_store_is_a_fault_naming_statement_and_thread(tmp_path):
    single_buffer_launch(tmp_path / "fault", "fault.ptx", "rr_test_fault")
    r = _rr("run", tmp_path / "fault", "--backend", "cpu", "-o", tmp_path / "o")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    record = json.loads((tmp_path / "o" / "run.json").read_text())
    assert record["status"] == "fault"
    assert "rr_test_fault s3 (line 15): st.global.u32" in record["message"] and "thread 0" in record["message"]


def test_an_unsupported_instruction_is_named_with_its_statement_and_line(tmp_path):
    text = (PTX / "fault.ptx").read_text().replace("st.global.u32 \t[%rd1], %r1;", "wgmma.fence.sync.aligned;")
    single_buffer_launch(tmp_path / "l", "fault.ptx", "rr_test_fault")
    (tmp_path / "l" / "kernel.ptx").write_text(text)
    with pytest.raises(CpuUnsupported, match=r"rr_test_fault s3 \(line 15\): wgmma.fence.sync.aligned"):
        run_cpu(tmp_path / "l")


def test_a_hanging_kernel_times_out_on_the_cpu_too(tmp_path):
    single_buffer_launch(tmp_path / "hang", "hang.ptx", "rr_test_hang")
    r = _rr("run", tmp_path / "hang", "--backend", "cpu", "-o", tmp_path / "o", "--timeout", "4")
    assert r.returncode == 1
    assert json.loads((tmp_path / "o" / "run.json").read_text())["status"] == "timeout"


def test_shuffles_against_numpy(tmp_path, nvcc_ptx):
    v = np.random.default_rng(6).uniform(-2, 2, 64).astype(np.float32)
    launch_of(tmp_path / "l", nvcc_ptx("shuffles"), "reduce",
              {"in": (v, "in"), "out": (np.zeros(64, np.float32), "out"), "hout": (np.zeros(64, np.uint32), "out")},
              grid=(2, 1, 1))
    _, out = run_cpu(tmp_path / "l")
    w = v.reshape(2, 32)
    lane = np.arange(32)
    s = w + w[:, lane ^ 1]
    s = s + s[:, lane ^ 2]
    d = w[:, np.where(lane + 1 <= 31, lane + 1, lane)]  # a source lane past 31 gives its own value
    d = d + d[:, np.where(lane + 8 <= 31, lane + 8, lane)]
    u = w[:, np.where(lane - 4 >= 0, lane - 4, lane)]
    i = w[:, [0]] * np.ones((1, 32), np.float32)
    assert np.array_equal(out["out"].reshape(2, 32), ((s + d) + u) + i)
    h = np.stack([s.astype(np.float16), d.astype(np.float16)], -1)  # __floats2half2_rn(s, d): s low
    partner = (lane & ~7) | ((lane ^ 4) & 7)  # width 8: segments of 8 lanes
    expect = np.stack([half.add(h[..., 0], h[:, partner, 0]), half.add(h[..., 1], h[:, partner, 1])], -1)
    assert np.array_equal(out["hout"].reshape(2, 32), expect.view(np.uint32)[..., 0])


def test_movmatrix_transposes_each_8x8_tile(tmp_path, nvcc_ptx):
    tiles = np.random.default_rng(7).integers(0, 2 ** 32, (3, 32), dtype=np.uint64).astype(np.uint32)
    launch_of(tmp_path / "l", nvcc_ptx("movmatrix"), "transpose_tiles",
              {"in": (tiles.reshape(-1), "in"), "out": (np.zeros(96, np.uint32), "out")}, scalars=(("int32", 3),))
    _, out = run_cpu(tmp_path / "l")
    halves = tiles.view(np.uint16).reshape(3, 8, 8)  # lane l: row l>>2, columns 2(l&3), +1
    assert np.array_equal(out["out"].reshape(3, 32),
                          np.ascontiguousarray(halves.transpose(0, 2, 1)).reshape(3, 64).view(np.uint32))


@pytest.mark.parametrize("flags", [(), ("-G",)])
def test_loops_divergent_branches_calls_and_barriers(tmp_path, nvcc_ptx, flags):
    n = 300
    v = np.random.default_rng(8).uniform(-3, 3, n).astype(np.float32)
    launch_of(tmp_path / "l", nvcc_ptx("branches", *flags), "loops",
              {"in": (v, "in"), "out": (np.zeros(2, np.float32), "out")}, grid=(2, 1, 1), block=(128, 1, 1),
              scalars=(("int32", n),))
    record, out = run_cpu(tmp_path / "l")

    def cubic(x):
        y = np.clip(x, -2, 2)
        return x * (0.5 + y * (0.412109375 - 0.0810546875 * np.abs(y)))
    acc = np.zeros(128)
    for t in range(128):
        for i in range(t, n, 128):
            x = float(v[i])
            acc[t] += cubic(x) if x > 0 else (-x * x if x < -1 else 0.0)
    # the compiler's own operation order (fma contraction, the tree) differs from this loop in f32
    assert np.allclose(out["out"], acc.sum(), rtol=1e-5)
    assert record["unwritten_registers"] == []


@pytest.mark.parametrize("flags", [(), ("-G",)])  # -G: through cvta.local and generic ld/st
def test_a_local_array_indexed_by_data(tmp_path, nvcc_ptx, flags):
    idx = np.random.default_rng(11).integers(0, 100, 32).astype(np.int32)
    launch_of(tmp_path / "l", nvcc_ptx("local_array", *flags), "local_array",
              {"idx": (idx, "in"), "out": (np.zeros(32, np.float32), "out")})
    _, out = run_cpu(tmp_path / "l")
    assert np.array_equal(out["out"], (idx & 7) * np.float32(1.5) + np.arange(32, dtype=np.float32))


UNWRITTEN = """.version 8.7
.target sm_90
.address_size 64

.visible .entry rr_test_unwritten(
	.param .u64 rr_test_unwritten_param_0
)
{
	.reg .b32 	%r<3>;
	.reg .b64 	%rd<3>;

	ld.param.u64 	%rd1, [rr_test_unwritten_param_0];
	cvta.to.global.u64 	%rd2, %rd1;
	add.s32 	%r2, %r1, 1;
	st.global.u32 	[%rd2], %r2;
	ret;

}
"""


def test_reads_of_never_written_registers_are_reported(tmp_path):
    (tmp_path / "k.ptx").write_text(UNWRITTEN)
    launch_of(tmp_path / "l", tmp_path / "k.ptx", "rr_test_unwritten", {"buf": (np.zeros(4, np.uint32), "inout")})
    record, out = run_cpu(tmp_path / "l")
    assert record["unwritten_registers"] == ["%r1 first read at rr_test_unwritten s3 (line 14): add.s32"]
    assert out["buf"][0] == 1  # read as zero
    r = _rr("run", tmp_path / "l", "--backend", "cpu", "-o", tmp_path / "o")
    assert r.returncode == 0 and "rr: warning: register %r1 first read at" in r.stderr


def test_texture_reads_and_surface_writes(tmp_path, nvcc_ptx):
    h, w = 5, 7
    tex = np.random.default_rng(9).uniform(0, 1, (h, w, 4)).astype(np.float16)
    launch_of(tmp_path / "l", nvcc_ptx("tex_surf"), "blur3",
              {"src": (tex, "in"), "dst": (np.zeros((h, w, 4), np.float16), "out")}, grid=(1, 2, 1),
              block=(8, 4, 1), scalars=(("int32", w), ("int32", h)), images={"src": "texture", "dst": "surface"})
    _, out = run_cpu(tmp_path / "l")
    acc = np.zeros((h, w, 4), np.float32)
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            ys, xs = np.clip(np.arange(h) + dy, 0, h - 1), np.clip(np.arange(w) + dx, 0, w - 1)
            acc = acc + tex[ys][:, xs].astype(np.float32)
    expect = np.concatenate([(acc[..., :3] * np.float32(1 / 9)).astype(np.float16), acc[..., 3:].astype(np.float16)], -1)
    assert np.array_equal(out["dst"].view(np.uint16), expect.view(np.uint16))


def _texel_taps(directory, nvcc_ptx, tex):
    h, w = tex.shape[:2]
    launch_of(directory, nvcc_ptx("tex_surf"), "texel_taps",
              {"src": (tex, "in"), "out": (np.zeros(h * w * 36, np.uint16), "out")}, grid=(1, 2, 1),
              block=(8, 4, 1), scalars=(("int32", w), ("int32", h)), images={"src": "texture"})


def test_integer_texture_coordinates_outside_the_image_read_zeros_not_the_clamped_edge(tmp_path, nvcc_ptx):
    # what the H200 does with tex.2d.v4.f16.s32 (the engine's reads): clamp addressing applies to
    # float coordinates (test_texture_reads_and_surface_writes), an integer one past the edge reads 0
    h, w = 5, 7
    tex = np.random.default_rng(9).uniform(0.5, 1, (h, w, 4)).astype(np.float16)
    _texel_taps(tmp_path / "l", nvcc_ptx, tex)
    _, out = run_cpu(tmp_path / "l")
    taps = out["out"].reshape(h, w, 3, 3, 4)
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            ys, xs = np.arange(h)[:, None] + dy, np.arange(w)[None, :] + dx
            inside = (ys >= 0) & (ys < h) & (xs >= 0) & (xs < w)
            want = np.where(inside[..., None], tex[np.clip(ys, 0, h - 1), np.clip(xs, 0, w - 1)], np.float16(0))
            assert np.array_equal(taps[:, :, dy + 1, dx + 1], want.view(np.uint16)), (dy, dx)


def test_an_mma_chain_against_the_mma_model(tmp_path, nvcc_ptx):
    """By default the interpreter's mma is the H200's (rr.numerics.mma.DEFAULT_MMA)."""
    m, n, k = 2, 3, 2
    rng = np.random.default_rng(10)
    a = fp8.to_e4m3(rng.normal(0, 1, (m * k * 32 * 16,)).astype(np.float16))
    b = fp8.to_e4m3(rng.normal(0, 1, (n * k * 32 * 8,)).astype(np.float16))
    bias = rng.normal(0, 1, (n * 4 * 2,)).astype(np.float16).view(np.uint32)
    launch_of(tmp_path / "l", nvcc_ptx("mma_chain"), "gemm_phase",
              {"a": (a, "in"), "b": (b, "in"), "bias": (bias, "in"), "out": (np.zeros(m * n * 64, np.uint32), "out")})
    _, out = run_cpu(tmp_path / "l")
    aw, bw = a.view(np.uint32).reshape(m, k, 32, 4), b.view(np.uint32).reshape(n, k, 32, 2)
    got = out["out"].reshape(m, n, 32, 2)
    for i in range(m):
        for j in range(n):
            seed = np.repeat(bias.reshape(n, 4)[j][np.arange(32) & 3][None], 2, 0)
            c = fragments.c_matrix([seed[0][None], seed[1][None]])
            for s in range(k):
                c = mma_sync(fragments.a_matrix([aw[i, s, :, r][None] for r in range(4)]),
                                 fragments.b_matrix([bw[j, s, :, r][None] for r in range(2)]), c)
            d = fragments.d_registers(c)
            assert np.array_equal(got[i, j, :, 0], d[0][0]) and np.array_equal(got[i, j, :, 1], d[1][0])


def test_mov_packs_and_unpacks_words_low_part_first(tmp_path):
    """mov.b64 {lo, hi} / mov.b32 {lo, hi} split a register into its parts (a sink skips one) and
    mov.b32 r, {lo, hi} / mov.b64 joins them, the first part lowest; a guarded join writes only
    its threads."""
    rng = np.random.default_rng(13)
    words = rng.integers(0, 1 << 64, 32, dtype=np.uint64, endpoint=False)
    launch_of(tmp_path / "l", PTX / "mov_pack.ptx", "rr_test_mov_pack",
              {"inp": (words, "in"), "out": (np.zeros((32, 4), np.uint32), "out")})
    _, out = run_cpu(tmp_path / "l")
    lo, hi = (words & 0xFFFFFFFF).astype(np.uint32), (words >> np.uint64(32)).astype(np.uint32)
    rs1, rs2, rs3 = lo & 0xFFFF, lo >> 16, hi >> 16
    r4 = rs2 | (rs1 << 16)
    r6 = np.where(np.arange(32) < 16, rs1 | (rs3 << 16), 7).astype(np.uint32)
    assert np.array_equal(out["out"], np.stack([r4, r6, r4, hi], axis=1))


def test_runs_of_mma_with_one_a_give_what_the_statements_give_one_by_one(tmp_path, monkeypatch):
    """Consecutive mma with the same A registers run as one (rr.run.cpu.semantics.fuse_mma_runs):
    a run whose last statement accumulates in place into registers an earlier one read, and one
    whose second D overwrites the first run's A; an mma reading an earlier one's D, a guarded
    one, and one at a branch target each begin anew. 640 warps (two chunks of the model's), codes
    small enough that nothing is cut in most, the full range in the rest: every D is what the
    statements give run one at a time."""
    from rr.ptx.parser import read_text
    from rr.run.cpu import prepare
    from rr.run.cpu import semantics

    rng = np.random.default_rng(11)
    threads = 160 * 128
    codes = rng.integers(0, 256, (threads, 48), dtype=np.uint8)
    small = np.repeat(rng.random(threads // 32) < 0.8, 32)[:, None]
    codes = np.where(small, (codes & 0x80) | ((codes & 0x7F) % 0x50), codes)
    c = rng.normal(0, 4, (threads, 8)).astype(np.float16).view(np.uint16)
    words = np.concatenate([codes.view(np.uint32), c.view(np.uint32)], axis=1)
    launch_of(tmp_path / "l", PTX / "mma_runs.ptx", "rr_test_mma_runs",
              {"inp": (words, "in"), "out": (np.zeros((threads, 24), np.uint32), "out")}, grid=(160, 1, 1),
              block=(128, 1, 1))
    program, _ = prepare(read_text(PTX / "mma_runs.ptx"), "rr_test_mma_runs")
    runs = [op.stmt for op in program.ops if op.run is semantics._skip]
    assert len(runs) == 3  # the second and third of the first run, the second of the last
    record, fused = run_cpu(tmp_path / "l")
    monkeypatch.setattr("rr.run.cpu.fuse_mma_runs", lambda program: None)
    alone_record, alone = run_cpu(tmp_path / "l")
    assert np.array_equal(fused["out"], alone["out"])
    assert record["lane_statements"] == alone_record["lane_statements"]
    assert (fused["out"][:, :22] != 0).mean() > 0.9 and np.unique(fused["out"][:, :22]).size > 100000
    guarded = fused["out"].reshape(-1, 4, 32, 24)[..., 10:12]  # D of the mma of every other warp
    assert not guarded[:, 1::2].any() and guarded[:, ::2].all(axis=(-1, -2)).all()


@pytest.fixture(scope="module")
def enc2_small(tmp_path_factory) -> Path:
    return write_enc2(tmp_path_factory.mktemp("enc2") / "e", (16, 12))


@pytest.mark.parametrize("mma", ["exact", "sm_90"])
def test_enc2_on_the_cpu_equals_its_numpy_model_byte_for_byte(enc2_small, mma):
    """With either mma model (the exact sum, or the H200's two HMMA): the interpreter and the
    numpy model compute the same thing, and the record names the model."""
    record, out = run_cpu(enc2_small / "launch", mma=mma)
    assert record["device"]["mma_model"] == mma
    launch = read_launch(enc2_small / "launch")
    inp = load_buffers(enc2_small / "launch", launch)
    ref = model.forward(model.Enc2Inputs(inp["weights"], inp["input"], inp["texture"]), mma=MMA_MODELS[mma])
    for name in ("arena", "half_out", "surface0", "surface1", "surface2"):
        assert np.array_equal(np.ascontiguousarray(out[name]).view(np.uint8), ref[name].view(np.uint8)), name
    assert record["unwritten_registers"] == []
    vals = out["arena"].view(ml_dtypes.float8_e4m3fn).astype(np.float32)
    assert np.isfinite(vals).all() and np.unique(vals).size > 50


def test_rr_run_takes_the_mma_model_and_names_it(enc2_small, tmp_path):
    """`rr run --backend cpu --mma sm_90`: the H200's structure, as the numpy model computes it;
    and the command offers exactly the models rr.numerics has, the H200's by default."""
    from rr.cli.main import build_parser

    r = _rr("run", enc2_small / "launch", "--backend", "cpu", "--mma", "sm_90", "-o", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    assert "mma model sm_90" in r.stdout
    assert json.loads((tmp_path / "out/run.json").read_text())["device"]["mma_model"] == "sm_90"
    inp = load_buffers(enc2_small / "launch", read_launch(enc2_small / "launch"))
    ref = model.forward(model.Enc2Inputs(inp["weights"], inp["input"], inp["texture"]), mma=mma_sync)
    assert np.array_equal(np.load(tmp_path / "out/arena.npy").view(np.uint8), ref["arena"].view(np.uint8))
    run = next(a for a in build_parser()._subparsers._group_actions[0].choices["run"]._actions if a.dest == "mma")
    assert set(run.choices) == set(MMA_MODELS) and run.default == DEFAULT_MMA


def test_an_isolated_phase_runs_through_its_call_on_the_cpu(enc2_small, tmp_path):
    spliced = tmp_path / "iso.ptx"
    assert _rr("splice", enc2_small / "enc2.ptx", "--entry", "cuda_dldn_engine_swin_enc2_kernel", "--recipe",
               RECIPES / "isolate.yaml", "--phase", 38, "-o", spliced).returncode == 0
    assert _rr("relaunch", enc2_small / "launch", "--module", spliced, "-o", tmp_path / "l").returncode == 0
    for d in ("ref", "iso"):
        r = _rr("run", enc2_small / "launch" if d == "ref" else tmp_path / "l", "--backend", "cpu",
                "-o", tmp_path / f"{d}.out")
        assert r.returncode == 0, r.stderr
    assert _rr("compare", tmp_path / "ref.out", tmp_path / "iso.out").returncode == 0


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", ["struct", "shuffles", "movmatrix", "branches", "branches-G", "local_array",
                                    "tex_surf", "texel_taps"])
def test_the_test_kernels_give_the_same_bytes_on_both_backends(tmp_path, nvcc_ptx, gpu, kernel):
    rng = np.random.default_rng(12)
    if kernel == "struct":
        struct_launch(tmp_path / "l", height=4)
    elif kernel == "shuffles":
        launch_of(tmp_path / "l", nvcc_ptx("shuffles"), "reduce",
                  {"in": (rng.uniform(-2, 2, 64).astype(np.float32), "in"), "out": (np.zeros(64, np.float32), "out"),
                   "hout": (np.zeros(64, np.uint32), "out")}, grid=(2, 1, 1))
    elif kernel == "movmatrix":
        launch_of(tmp_path / "l", nvcc_ptx("movmatrix"), "transpose_tiles",
                  {"in": (rng.integers(0, 2 ** 32, 96, dtype=np.uint64).astype(np.uint32), "in"),
                   "out": (np.zeros(96, np.uint32), "out")}, scalars=(("int32", 3),))
    elif kernel.startswith("branches"):
        launch_of(tmp_path / "l", nvcc_ptx("branches", *(("-G",) if kernel.endswith("G") else ())), "loops",
                  {"in": (rng.uniform(-3, 3, 300).astype(np.float32), "in"), "out": (np.zeros(2, np.float32), "out")},
                  grid=(2, 1, 1), block=(128, 1, 1), scalars=(("int32", 300),))
    elif kernel == "local_array":
        launch_of(tmp_path / "l", nvcc_ptx("local_array"), "local_array",
                  {"idx": (rng.integers(0, 99, 32).astype(np.int32), "in"), "out": (np.zeros(32, np.float32), "out")})
    elif kernel == "texel_taps":
        _texel_taps(tmp_path / "l", nvcc_ptx, rng.uniform(0, 1, (5, 7, 4)).astype(np.float16))
    else:
        launch_of(tmp_path / "l", nvcc_ptx("tex_surf"), "blur3",
                  {"src": (rng.uniform(0, 1, (5, 7, 4)).astype(np.float16), "in"),
                   "dst": (np.zeros((5, 7, 4), np.float16), "out")}, grid=(1, 2, 1), block=(8, 4, 1),
                  scalars=(("int32", 7), ("int32", 5)), images={"src": "texture", "dst": "surface"})
    for backend in ("cuda", "cpu"):
        r = _rr("run", tmp_path / "l", "--backend", backend, "-o", tmp_path / backend)
        assert r.returncode == 0, r.stderr
    r = _rr("compare", tmp_path / "cuda", tmp_path / "cpu")
    if kernel != "branches":
        assert r.returncode == 0, r.stdout
        return
    # Optimised, the kernel has mul.f32/add.f32 without a rounding modifier, which PTX lets ptxas
    # fuse into an FFMA: the GPU may round once where the PTX says twice (seen: 1 ulp in 1 of 2
    # values on the H200). The -G build, which ptxas does not contract, is byte-identical above.
    a, b = np.load(tmp_path / "cuda" / "out.npy"), np.load(tmp_path / "cpu" / "out.npy")
    assert np.all(np.abs(a.view(np.int32).astype(np.int64) - b.view(np.int32).astype(np.int64)) <= 2)
