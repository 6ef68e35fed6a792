"""Kernels from other generators (issue 38, items 2, 3 and 5): phases grouped by their chains (a
Triton GEMM whose runs of mma are no GEMM one by one is one phase; the engine's numbering stays),
the f16/bf16/tf32/s8 `mma.sync` forms as first-class phases (geometry, the f32acc recipe's
applicability, the cpu backend's model and fragment layouts), and two operand sources nvcc's
kernels showed wrong (a pack chosen by a branch or a selp, a remainder loop's advancing pointer).

The Triton kernel is tests/data/generators/triton_fp8_gemm.ptx (made by make_fixtures.py there);
the CUDA kernels are written here and compiled by nvcc at test time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from conftest import NVCC, PTXAS, needs_nvcc
from rr.describe.phases import find_phases, mma_runs
from rr.describe.spec import spec_json, spec_table
from rr.numerics.forms import form_exact, form_sm90, mma_form
from rr.ptx import linearise, parse, parse_file
from rr.run.cpu import run_cpu
from rr.run.launch import Buffer, Field, Launch, write_launch

ROOT = Path(__file__).resolve().parents[1]
TRITON = ROOT / "tests" / "data" / "generators" / "triton_fp8_gemm.ptx"
MMA_CUH = ROOT / "tests" / "cuda" / "nvvm"


@pytest.fixture(scope="session")
def cuda(tmp_path_factory):
    """cuda(SOURCE, *flags) → the PTX nvcc -ptx -arch=sm_90 makes of CUDA C SOURCE (mma.cuh on the path)."""
    if NVCC is None:
        pytest.skip("nvcc is not on PATH: install the CUDA toolkit to compile the test kernels")
    out = tmp_path_factory.mktemp("forms")
    made: dict = {}

    def build(source: str, *flags: str) -> Path:
        key = (source, flags)
        if key not in made:
            cu = out / f"k{len(made)}.cu"
            cu.write_text(source)
            ptx = cu.with_suffix(".ptx")
            subprocess.run([NVCC, "-ptx", "-arch=sm_90", f"-I{MMA_CUH}", *flags, str(cu), "-o", str(ptx)],
                           check=True, capture_output=True)
            made[key] = ptx
        return made[key]
    return build


def _spec(ptx: Path, entry: str) -> dict:
    return spec_json(parse_file(ptx).function(entry))


# -- item 2: phases by their chains -------------------------------------------------------------

def test_a_triton_gemm_whose_chains_are_seeded_between_its_mma_is_one_phase_a_trip():
    # Triton seeds each of the 8 accumulator chains (2 m tiles × 4 n tiles) with zero just before
    # its first mma: 7 one-mma runs, then a run continuing all chains. BM=BN=32, BK=64 on one
    # warp, m16n8k16: 2·4·4 = 32 mma per trip of the K loop.
    spec = _spec(TRITON, "gemm")
    (phase,) = spec["phases"]
    assert (phase["M"], phase["N"], phase["K"], phase["mma"], phase["identity"]) == (32, 32, 64, 32, True)
    assert phase["opcode"] == "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
    assert len(phase["runs"]) == 8 and "chains of unequal length: 7×3, 1×4" in phase["joined"]
    assert phase["loop"]["trips"] is None  # K is a parameter
    table = spec_table(spec)
    assert "joined: 8 runs of mma are one GEMM" in table and "32×32×64 per trip of loop 1" in table


def test_runs_with_a_store_between_them_stay_apart_and_keep_their_problem():
    # a store between the seeded runs and the last one: no group around the shapeless run is
    # operand set-up only, so it stays alone, saying why it has no shape
    text = TRITON.read_text()
    lines = text.splitlines(keepends=True)
    seventh = [i for i, line in enumerate(lines) if "mma.sync" in line][7]
    lines.insert(seventh, "\tst.global.b32 \t[%rd1], %r161;\n")
    statements = linearise(parse("".join(lines)).function("gemm"))
    phases = find_phases(statements)
    assert len(phases) == len(mma_runs(statements)) == 8
    assert all(p.joined is None and not p.runs for p in phases)
    assert phases[-1].problem.startswith("chains of unequal length")


def test_the_engines_phases_are_its_runs_of_mma():
    # the reference numbering: every enc2 run has a GEMM shape, so none is joined
    from rr.synth.enc2 import build_enc2

    statements = linearise(parse(build_enc2()).function("cuda_dldn_engine_swin_enc2_kernel"))
    phases = find_phases(statements)
    assert [(p.first_stmt, p.last_stmt) for p in phases] == [(r[0].stmt, r[-1].stmt) for r in mma_runs(statements)]
    assert len(phases) == 38 and all(p.joined is None for p in phases)


# -- item 3: the f16, bf16, tf32 and s8 forms ---------------------------------------------------

FORMS_CU = r"""
#include <cstdint>
// one mma of each form, A/B/C fragments loaded per lane from [register][lane] word arrays, D stored
#define FRAGS const uint32_t* __restrict__ a, const uint32_t* __restrict__ b, const uint32_t* __restrict__ c, \
                 uint32_t* __restrict__ d
#define LOAD uint32_t l = threadIdx.x & 31, a0 = a[l], a1 = a[32 + l], a2 = a[64 + l], a3 = a[96 + l], \
                 b0 = b[l], b1 = b[32 + l];
#define FORM(name, op)                                                                          \
  extern "C" __global__ void name(FRAGS) {                                                         \
    LOAD uint32_t c0 = c[l], c1 = c[32 + l], c2 = c[64 + l], c3 = c[96 + l], d0, d1, d2, d3;            \
    asm volatile(op " {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};"            \
                 : "=r"(d0), "=r"(d1), "=r"(d2), "=r"(d3)                                              \
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "r"(c0), "r"(c1), "r"(c2), "r"(c3)); \
    d[l] = d0; d[32 + l] = d1; d[64 + l] = d2; d[96 + l] = d3;                                         \
  }
FORM(f16_f32, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
FORM(bf16_f32, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32")
FORM(tf32_f32, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32")
FORM(s8_s32, "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32")
// f16 accumulate, a K=32 chain of two mma from a zero seed, then a second phase chained on it
extern "C" __global__ void f16_f16(FRAGS) {
  LOAD uint32_t d0 = 0, d1 = 0;
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0, %1}, {%2, %3, %4, %5}, {%6, %7}, {%0, %1};"
               : "+r"(d0), "+r"(d1) : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0, %1}, {%2, %3, %4, %5}, {%6, %7}, {%0, %1};"
               : "+r"(d0), "+r"(d1) : "r"(a1), "r"(a0), "r"(a3), "r"(a2), "r"(b1), "r"(b0));
  d[l] = d0; d[32 + l] = d1;
}
"""

# name -> (element type of A and B, accumulator, K)
FORMS = {"f16_f32": ("f16", "f32", 16), "bf16_f32": ("bf16", "f32", 16), "tf32_f32": ("tf32", "f32", 8),
         "s8_s32": ("s8", "s32", 32)}
ELEMENT = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "tf32": np.float32, "s8": np.int8}


@needs_nvcc
@pytest.mark.parametrize("name", FORMS)
def test_each_mma_form_is_a_phase_with_its_own_tile(cuda, name):
    ab, acc, k = FORMS[name]
    (phase,) = _spec(cuda(FORMS_CU), name)["phases"]
    assert (phase["M"], phase["N"], phase["K"], phase["identity"]) == (16, 8, k, True)
    assert mma_form((16, 8, k), (acc, ab, ab, acc)).name == f"m16n8k{k}.{acc}.{ab}"
    assert phase["a_source"] == "weight(param+0)" and phase["b_source"] == "weight(param+8)"


def _fragments(a: np.ndarray, b: np.ndarray, k: int) -> tuple:
    """A (16, K) and B (K, 8) elements → the [register][lane] words the PTX ISA's layouts give
    (m16n8k16 f16/bf16, m16n8k8 tf32, m16n8k32 s8 alike: register r of lane (g, t) holds row
    8(r & 1) + g of A at the element run of 4 bytes number t of k-half r >> 1; B's column g likewise)."""
    a_words = np.ascontiguousarray(a).view(np.uint32).reshape(16, 2, 4)  # row, k-half, t
    bt_words = np.ascontiguousarray(b.T).view(np.uint32).reshape(8, 2, 4)  # column, k-half, t
    lanes = [(lane >> 2, lane & 3) for lane in range(32)]
    aw = np.array([[a_words[8 * (r & 1) + g, r >> 1, t] for g, t in lanes] for r in range(4)], np.uint32)
    bw = np.array([[bt_words[g, r, t] for g, t in lanes] for r in range(2)], np.uint32)
    return aw, bw


def _c_words(c: np.ndarray) -> np.ndarray:
    """C (16, 8) of 32-bit elements → 4 registers: c0, c1 row g at columns 2t, 2t + 1; c2, c3 row g + 8."""
    bits = np.ascontiguousarray(c).view(np.uint32)
    return np.array([[bits[g + 8 * (r >> 1), 2 * t + (r & 1)] for g, t in ((lane >> 2, lane & 3) for lane in range(32))]
                     for r in range(4)], np.uint32)


def _launch(directory: Path, ptx: Path, entry: str, a, b, c) -> dict:
    launch = Launch(entry=entry, module="kernel.ptx", grid=(1, 1, 1), block=(32, 1, 1), layout="list",
                    fields=tuple(Field("buffer", buffer=x) for x in "abcd"),
                    buffers={x: Buffer(x, f"{x}.npy", "out" if x == "d" else "in") for x in "abcd"})
    write_launch(directory, launch, {"a": a, "b": b, "c": c, "d": np.zeros((4, 32), np.uint32)}, ptx)
    record, buffers = run_cpu(directory)
    assert record["status"] == "ok", record
    return buffers


@needs_nvcc
@pytest.mark.parametrize("name", FORMS)
def test_the_cpu_backend_runs_each_form_as_its_model_computes_it(cuda, tmp_path, name):
    # the fragments built here from the PTX ISA's layouts, the model given the matrices: the cpu
    # backend's D (read back by the same layouts) is the model's, bit for bit
    ab, acc, k = FORMS[name]
    rng = np.random.default_rng(7)
    if ab == "s8":
        a, b = rng.integers(-128, 128, (16, k)).astype(np.int8), rng.integers(-128, 128, (k, 8)).astype(np.int8)
        c = rng.integers(-(1 << 31), 1 << 31, (16, 8)).astype(np.int32)
    else:
        a = (rng.normal(size=(16, k)) * 2.0 ** rng.integers(-8, 8, (16, k))).astype(np.float32).astype(ELEMENT[ab])
        b = rng.normal(size=(k, 8)).astype(np.float32).astype(ELEMENT[ab])
        c = rng.normal(scale=4, size=(16, 8)).astype(np.float32)
    aw, bw = _fragments(a, b, k)
    d = _launch(tmp_path / "run", cuda(FORMS_CU), name, aw, bw, _c_words(c))["d"].reshape(4, 32)
    form = mma_form((16, 8, k), (acc, ab, ab, acc))
    a_bytes = np.ascontiguousarray(a).view(np.uint8).reshape(1, 16, 32)
    b_bytes = np.ascontiguousarray(np.ascontiguousarray(b.T).view(np.uint8).reshape(1, 8, 32).transpose(0, 2, 1))
    want = form_sm90(form, a_bytes, b_bytes, c.reshape(1, 16, 8))[0]
    assert np.array_equal(d, _c_words(want))
    if ab == "s8":  # exact: wraps modulo 2^32
        exact = (a.astype(np.int64) @ b.astype(np.int64) + c + (1 << 31)) % (1 << 32) - (1 << 31)
        assert np.array_equal(want, exact.astype(np.int32))


def test_the_sm90_form_model_cuts_each_term_below_its_alignment_and_rounds_f32_toward_zero():
    # one f16 mma: products 1, 2^-24 and 2^-25 (all multiples of 2^(0 - 25): nothing is cut),
    # C = 0: the sum 1 + 1.5·2^-24 is 0.75 of an f32 ulp above 1 — toward zero 1, to nearest 1 + 2^-23;
    # a product of 2^-26 is below the cut and is lost entirely
    form = mma_form((16, 8, 16), ("f32", "f16", "f16", "f32"))
    a = np.zeros((1, 16, 16), np.float16)
    b = np.zeros((1, 16, 8), np.float16)
    a[0, 0, :4] = [1, 2.0 ** -12, 2.0 ** -12, 2.0 ** -13]
    b[0, :4, 0] = [1, 2.0 ** -12, 2.0 ** -13, 2.0 ** -13]
    a_bytes = a.view(np.uint8).reshape(1, 16, 32)
    b_bytes = np.ascontiguousarray(np.ascontiguousarray(b.transpose(0, 2, 1)).view(np.uint8).transpose(0, 2, 1))
    c = np.zeros((1, 16, 8), np.float32)
    assert form_sm90(form, a_bytes, b_bytes, c)[0, 0, 0] == np.float32(1.0)
    assert form_exact(form, a_bytes, b_bytes, c)[0, 0, 0] == np.float32(1 + 2.0 ** -23)
    a[0, 0, 1:] = 0
    a[0, 0, 1] = 2.0 ** -13
    c[0, 0, 0] = 2.0 ** -22  # 1 + 2^-22 + 2^-26: the 2^-26 is cut (below 2^(0 - 25))
    a_bytes = a.view(np.uint8).reshape(1, 16, 32)
    assert form_sm90(form, a_bytes, b_bytes, c)[0, 0, 0] == np.float32(1 + 2.0 ** -22)


PROBES = Path(__file__).parent / "data" / "probes"


@pytest.mark.parametrize("name, shape, ab, acc", [("f16_f16", (16, 8, 16), "f16", "f16"),
                                                  ("s8", (16, 8, 32), "s8", "s32")])
def test_the_sm90_form_models_give_the_h200s_bits_on_its_probes(name, shape, ab, acc):
    """What an H200 computed (benchmarks/mma_forms_probe.py --backend cuda --warps 2048 --seed 1,
    64 warps of each input design kept: random, wide exponent spreads, one big term among small
    ones, cancelling pairs, C far from the products, special values; for s8 random and wrapping
    sums): the sm_90 model gives every bit of D; the order-free exact one does not (f16)."""
    z = np.load(PROBES / f"forms_h200_{name}.npz")
    assert str(z["backend"]) == "cuda" and len(z["designs"]) == len(set(z["design"].tolist()))
    form = mma_form(shape, (acc, ab, ab, acc))
    bits = np.uint16 if z["D"].dtype == np.float16 else np.uint32
    assert np.array_equal(form_sm90(form, z["A"], z["B"], z["C"]).view(bits), z["D"].view(bits))
    if name == "f16_f16":
        assert not np.array_equal(form_exact(form, z["A"], z["B"], z["C"]).view(bits), z["D"].view(bits))


def test_tf32_operands_are_read_in_their_top_19_bits():
    form = mma_form((16, 8, 8), ("f32", "tf32", "tf32", "f32"))
    a = np.zeros((1, 16, 8), np.float32)
    b = np.zeros((1, 8, 8), np.float32)
    a[0, 0, 0], b[0, 0, 0] = 1 + 2.0 ** -12, 1.0  # 2^-12 is below tf32's 10 fraction bits
    a_bytes = a.view(np.uint8).reshape(1, 16, 32)
    b_bytes = np.ascontiguousarray(np.ascontiguousarray(b.transpose(0, 2, 1)).view(np.uint8).transpose(0, 2, 1))
    assert form_sm90(form, a_bytes, b_bytes, np.zeros((1, 16, 8), np.float32))[0, 0, 0] == 1.0


def _splice(ptx: Path, entry: str, recipe: str, phase: int, out: Path) -> tuple:
    r = subprocess.run([sys.executable, "-m", "rr", "splice", str(ptx), "--entry", entry, "--recipe", recipe,
                        "--phase", str(phase), "-o", str(out), "--record"], capture_output=True, text=True)
    return r, json.loads(Path(f"{out}.splice.json").read_text())


def test_f32acc_does_not_apply_to_a_phase_that_accumulates_in_f32_already(tmp_path):
    r, record = _splice(TRITON, "gemm", "f32acc", 1, tmp_path / "f.ptx")
    assert record["status"] == "not_applicable"
    assert "its 32 mma accumulate in f32 already" in record["message"] and "does not apply" in r.stderr


@needs_nvcc
def test_f32acc_widens_an_f16_accumulating_f16_mma(cuda, tmp_path):
    ptx = cuda(FORMS_CU)
    r, record = _splice(ptx, "f16_f16", "f32acc", 1, tmp_path / "f.ptx")
    assert record["status"] == "ok", record
    assert record["f32acc"] == {"mma_converted": 2, "mma_already_f32": 0}
    widened = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"  # the module's f16_f32 entry has one
    assert (tmp_path / "f.ptx").read_text().count(widened) == ptx.read_text().count(widened) + 2
    if PTXAS is not None:
        done = subprocess.run([PTXAS, "-arch=sm_90", str(tmp_path / "f.ptx"), "-o", str(tmp_path / "f.cubin")],
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    rng = np.random.default_rng(3)
    a, b = (rng.normal(size=s).astype(np.float16) for s in ((16, 16), (16, 8)))
    aw, bw = _fragments(a, b, 16)
    c = np.zeros((4, 32), np.uint32)
    original = _launch(tmp_path / "o", ptx, "f16_f16", aw, bw, c)["d"]
    widened = _launch(tmp_path / "w", tmp_path / "f.ptx", "f16_f16", aw, bw, c)["d"]
    lo, hi = (x[:2].view(np.float16).astype(np.float64) for x in (original, widened))
    assert np.isfinite(hi).all() and np.abs(lo - hi).max() <= 2.0 ** -6 * np.abs(lo).max()


def test_the_cpu_backend_runs_the_triton_gemm_as_the_form_model_computes_it(tmp_path):
    # cp-less Triton pipeline: global loads, shared staging, ldmatrix, stmatrix, its one-element
    # vector braces; C = A·B of e4m3 32×128 by 128×32, widened to f16: per K trip four chained
    # m16n8k16 mma from a zero seed, added in f32 to the running sum, stored as f16
    m = n = 32
    k = 128
    rng = np.random.default_rng(3)
    a = rng.normal(size=(m, k)).astype(ml_dtypes.float8_e4m3fn)
    b = rng.normal(size=(k, n)).astype(ml_dtypes.float8_e4m3fn)
    launch = Launch(entry="gemm", module="kernel.ptx", grid=(1, 1, 1), block=(32, 1, 1), layout="list",
                    shared_bytes=8192,
                    fields=(Field("buffer", buffer="a"), Field("buffer", buffer="b"), Field("buffer", buffer="c"),
                            *(Field("scalar", 0, "uint32", (v,)) for v in (m, n, k)),
                            Field("buffer", buffer="s0"), Field("buffer", buffer="s1")),
                    buffers={"a": Buffer("a", "a.npy", "in"), "b": Buffer("b", "b.npy", "in"),
                             "c": Buffer("c", "c.npy", "out"), "s0": Buffer("s0", "s0.npy", "inout"),
                             "s1": Buffer("s1", "s1.npy", "inout")})
    write_launch(tmp_path, launch, {"a": a.view(np.uint8), "b": b.view(np.uint8), "c": np.zeros((m, n), np.float16),
                                    "s0": np.zeros(64, np.uint8), "s1": np.zeros(64, np.uint8)}, TRITON)
    record, buffers = run_cpu(tmp_path)
    assert record["status"] == "ok", record
    form = mma_form((16, 8, 16), ("f32", "f16", "f16", "f32"))
    wa, wb = a.astype(np.float16), b.astype(np.float16)
    acc = np.zeros((m, n), np.float32)
    for k0 in range(0, k, 64):
        for i in range(0, m, 16):
            for j in range(0, n, 8):
                d = np.zeros((16, 8), np.float32)
                for kk in range(k0, k0 + 64, 16):
                    at = np.ascontiguousarray(wa[i:i + 16, kk:kk + 16]).view(np.uint8)
                    bt = np.ascontiguousarray(wb[kk:kk + 16, j:j + 8].T).view(np.uint8).T
                    d = form_sm90(form, at, bt, d)
                acc[i:i + 16, j:j + 8] += d
    assert np.array_equal(buffers["c"].view(np.uint16).reshape(m, n), acc.astype(np.float16).view(np.uint16))


def test_the_forms_probe_benchmark_runs_every_form_on_the_cpu(tmp_path):
    # what an H200 session runs with --backend cuda; on the cpu backend the model computed D, so
    # every form's sm_90 share is 100 % (the launch, layouts and replay agree)
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "mma_forms_probe.py"), "--backend", "cpu",
                        "--warps", "2", "--out", str(tmp_path / "w"), "--save", str(tmp_path / "saved")],
                       capture_output=True, text=True, cwd=ROOT / "benchmarks")
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stdout.splitlines() if " sm_90 " in line]
    assert len(lines) == 5 and all("all 100.0000%" in line for line in lines), r.stdout
    assert sorted(p.name for p in (tmp_path / "saved").iterdir()) == sorted(
        f"forms_{x}.npz" for x in ("f16_f32", "f16_f16", "bf16", "tf32", "s8"))


# -- item 5: merges of packs, advancing pointers -------------------------------------------------

PACKS_CU = r"""
#include "mma.cuh"
__device__ __forceinline__ uint16_t cvt8(uint32_t x) {
  uint16_t h; asm("cvt.rn.satfinite.e4m3x2.f16x2 %0, %1;" : "=h"(h) : "r"(x)); return h;
}
#define PHASES                                                                                     \
  const int lane = threadIdx.x & 31;                                                               \
  uint2 fb[9];                                                                                     \
  _Pragma("unroll") for (int n = 0; n < 9; ++n) fb[n] = b[n * 32 + lane];                          \
  uint4 fa0 = a[lane], fa1 = a[32 + lane];                                                         \
  uint2 d1[4], d2[4];                                                                              \
  _Pragma("unroll") for (int n = 0; n < 4; ++n) d1[n] = mma(fa0, fb[n], make_uint2(0, 0));         \
  out[lane] = d1[0];                                                                               \
  _Pragma("unroll") for (int n = 0; n < 4; ++n) d2[n] = mma(fa1, fb[4 + n], make_uint2(0, 0));     \
  out[32 + lane] = d2[0];
// phase 3's A: phase 1's D packed on one side of the branch, phase 2's on the other; the
// halves are joined after the branch
extern "C" __global__ void branch_halves(const uint4* __restrict__ a, const uint2* __restrict__ b,
                                         uint2* __restrict__ out, int flag) {
  PHASES
  uint16_t h[8];
  if (flag) {
    _Pragma("unroll") for (int n = 0; n < 4; ++n) { h[2 * n] = cvt8(d1[n].x); h[2 * n + 1] = cvt8(d1[n].y); }
    out[96 + lane] = d1[1];
  } else {
    _Pragma("unroll") for (int n = 0; n < 4; ++n) { h[2 * n] = cvt8(d2[n].x); h[2 * n + 1] = cvt8(d2[n].y); }
    out[96 + lane] = d2[2];
  }
  uint4 p;
  asm("mov.b32 %0, {%1, %2};" : "=r"(p.x) : "h"(h[0]), "h"(h[1]));
  asm("mov.b32 %0, {%1, %2};" : "=r"(p.y) : "h"(h[2]), "h"(h[3]));
  asm("mov.b32 %0, {%1, %2};" : "=r"(p.z) : "h"(h[4]), "h"(h[5]));
  asm("mov.b32 %0, {%1, %2};" : "=r"(p.w) : "h"(h[6]), "h"(h[7]));
  out[64 + lane] = mma(p, fb[8], make_uint2(0, 0));
}
// the same choice made by selp: both packs computed, one taken
extern "C" __global__ void select_packs(const uint4* __restrict__ a, const uint2* __restrict__ b,
                                        uint2* __restrict__ out, int flag) {
  PHASES
  uint4 p1 = make_uint4(pack_e4m3(d1[0].x, d1[0].y), pack_e4m3(d1[1].x, d1[1].y), pack_e4m3(d1[2].x, d1[2].y),
                        pack_e4m3(d1[3].x, d1[3].y));
  uint4 p2 = make_uint4(pack_e4m3(d2[0].x, d2[0].y), pack_e4m3(d2[1].x, d2[1].y), pack_e4m3(d2[2].x, d2[2].y),
                        pack_e4m3(d2[3].x, d2[3].y));
  uint4 p = flag ? p1 : p2;
  out[64 + lane] = mma(p, fb[8], make_uint2(0, 0));
}
// a K loop whose weight pointer advances 1024 bytes a trip, two B fragments at +0 and +512; nvcc
// unrolls it by 4 and runs the rest in a remainder loop
extern "C" __global__ void advancing(const uint4* __restrict__ a, const uint2* __restrict__ b,
                                     uint2* __restrict__ out, int trips) {
  const int lane = threadIdx.x & 31;
  uint2 acc = make_uint2(0, 0);
  const uint2* w = b + lane;
  const uint4* x = a + lane;
  for (int k = 0; k < trips; ++k) {
    uint2 b0 = w[0], b1 = w[64];
    uint4 a0 = x[0], a1 = x[32];
    acc = mma(a0, b0, acc);
    acc = mma(a1, b1, acc);
    w += 128;
    x += 64;
  }
  out[lane] = acc;
}
"""


@needs_nvcc
@pytest.mark.parametrize("entry", ["branch_halves", "select_packs"])
def test_an_a_operand_packed_from_one_phase_or_another_is_the_merge_of_the_two_packs(cuda, entry):
    spec = _spec(cuda(PACKS_CU), entry)
    phases = spec["phases"]
    assert len(phases) == 3 and all(p["identity"] for p in phases)
    a = phases[2]["operands"]["A"]
    assert a["kind"] == "merge" and a["source"] == "merge(pack(D of phase 1) | pack(D of phase 2))"
    assert sorted((x["kind"], x["phase"]) for x in a["alternatives"]) == [("pack", 1), ("pack", 2)]
    if entry == "branch_halves":  # each pack made on its side of the branch
        blocks = [{d["block"] for d in x["definitions"]} for x in a["alternatives"]]
        assert len(blocks[0]) == len(blocks[1]) == 1 and blocks[0] != blocks[1]


@needs_nvcc
def test_a_remainder_loops_weight_pointer_keeps_its_advance_per_trip(cuda):
    # w = b + lane (8-byte fragments); B at w[0] and w[64] (+0, +512), w += 128 (1024 bytes) a trip:
    # the unrolled loop's phases advance 4096 a trip, the remainder loop's 1024 — from where the
    # unrolled loop left it (an opaque term), on the same base pointer and lane part
    spec = _spec(cuda(PACKS_CU), "advancing")
    *main, rest = spec["phases"]
    loops = {p["loop"]["loop"] for p in spec["phases"]}
    assert len(loops) == 2 and len(main) == 4
    for i, p in enumerate(main):
        b = p["operands"]["B"]
        assert b["offsets"] == [1024 * i, 1024 * i + 512]
        assert [t["coefficient"] for t in b["terms"] if t["factors"][0]["kind"] == "induction"] == [4096]
    b = rest["operands"]["B"]
    assert b["source"] == "weight(param+8)" and b["offsets"] == [0, 512]
    assert b["lane_bytes"] == [8 * lane for lane in range(32)]
    per_trip = [(t["coefficient"], t["factors"][0]["loop"]) for t in b["terms"] if t["factors"][0]["kind"] == "induction"]
    assert per_trip == [(1024, rest["loop"]["loop"])]
    assert rest["loop"]["loop"] != main[0]["loop"]["loop"]

