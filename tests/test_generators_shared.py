"""Kernels other generators make (issue 38): Triton's GEMMs and window attention, whose operands go
global → cp.async → shared → ldmatrix → mma (XOR-swizzled, a ring of stages, a software-pipelined
K loop, fp8 widened to f16 on Hopper's MMAv2). Their A and B sources name the kernel's pointer
parameters, and every element's byte offset — per lane, warp and trip — is where the kernel's own
pointer arithmetic (tools/triton_corpus.py) puts it, by the PTX ISA's mma fragment layout;
parameters read only by cp.async are read; regen reads such operands again from shared memory
and says per operand where it cannot; isolate, regen and probe splices run byte-identical on the
cpu backend, whose cp.async, ldmatrix and stmatrix follow the PTX ISA.

The corpus is made at test time where Triton is importable (its compiler needs no GPU), and is
also checked in (tests/data/triton, made by `python tools/triton_corpus.py -o tests/data/triton`):
Triton is a 290 MB wheel (1 GB installed), too large for the test extra."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from conftest import PTXAS, run_ptxas
from rr.describe.spec import spec_json
from rr.ptx import emit, parse, parse_file
from rr.run.launch import Buffer, Field, Launch, write_launch

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "data" / "triton"
RECIPES = ROOT / "config" / "recipes"
CORPUS = {k["name"]: k for k in json.loads((FIXTURES / "corpus.json").read_text())["kernels"]}
GEMMS = [n for n, k in CORPUS.items() if k["kernel"] == "gemm"]
ATTENTIONS = [n for n, k in CORPUS.items() if k["kernel"] == "window_attention"]


def _rr(*args):
    return subprocess.run([sys.executable, "-m", "rr.cli", *map(str, args)], capture_output=True, text=True)


@pytest.fixture(scope="module", params=["fixtures", "triton"])
def corpus(request, tmp_path_factory) -> Path:
    """The directory of the corpus: the checked-in fixtures, or made now by Triton's compiler."""
    if request.param == "fixtures":
        return FIXTURES
    try:
        importlib.import_module("triton")
    except ImportError:
        pytest.skip("triton is not importable (pip install triton; it is not in the test extra: a 290 MB "
                    "wheel), so the corpus is not made at test time; the checked-in fixtures are checked")
    out = tmp_path_factory.mktemp("triton")
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "triton_corpus.py"), "-o", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return out


_SPECS: dict = {}


def spec(corpus: Path, name: str) -> dict:
    key = (corpus, name)
    if key not in _SPECS:
        module = parse_file(corpus / f"{name}.ptx")
        _SPECS[key] = spec_json(module.function(_entry(name)), module=module)
    return _SPECS[key]


def _entry(name: str) -> str:
    return CORPUS[name]["kernel"]


# -- the PTX ISA's mma fragments (A row-major 16×K, B column-major K×8) ----------------------------

def fragment(role: str, k: int, per_register: int, lane: int, element: int) -> tuple[int, int]:
    """(row, column) of A, or (k, n) of B, that element `element` of lane `lane` holds in an
    m16n8k`k` mma with `per_register` elements a 32-bit register (PTX ISA, "Matrix Fragments for
    mma.m16n8k16 / m16n8k32"): g = lane >> 2, t = lane & 3."""
    g, t = lane >> 2, lane & 3
    r, j = divmod(element, per_register)
    if role == "A":  # a0: row g, a1: row g + 8, a2 and a3 the same rows k/2 further
        return g + 8 * (r % 2), t * per_register + j + (k // 2) * (r // 2)
    return t * per_register + j + (k // 2) * r, g  # b0: k from t·per_register, b1: k/2 further; n = g


def mma_form(opcode: str) -> tuple[int, int]:
    """(k, elements per register) of an mma.sync opcode."""
    k = int(opcode.split("m16n8k")[1].split(".")[0])
    return k, 2 if ".f16.f16." in opcode else 4


def tables(st: dict) -> dict:
    """(warp, trip) → per lane, per element, the byte offset from the pointer (trip None: no loop)."""
    trips = range(st["trips"]) if st["loop"] is not None else [None]
    warps = len(st["warp_bytes"]) if st["warp_bytes"] is not None else len(st["elements"])
    out = {}
    for w in range(warps):
        for i, t in enumerate(trips):
            if "elements" in st:
                out[(w, t)] = st["elements"][w][i]
            else:
                shift = st["offset"] + st["warp_bytes"][w] + (t or 0) * (st["trip_bytes"] or 0)
                out[(w, t)] = [[x + shift for x in row] for row in st["lane_elements"]]
    return out


def positions(st: dict, opcode: str, role: str, decode) -> dict:
    """(warp, trip) → (the origin of the operand's rows (A) or columns (B), and per fragment k the
    tensor's k it holds): every element's offset decoded by the kernel's indexing (`decode`: A to
    (row, k), B to (k, column)) beside the position its lane and element have in the PTX ISA's
    fragment layout. One origin per operand, one tensor k per fragment k — a generator may give
    the fragment's k any order (Triton's widened fp8 interleaves them), as long as A and B of one
    mma agree (`products`)."""
    k, per = mma_form(opcode)
    out = {}
    for key, table in tables(st).items():
        origin, ks = set(), {}
        for lane, row in enumerate(table):
            for e, offset in enumerate(row):
                i, j = decode(offset)
                fi, fj = fragment(role, k, per, lane, e)
                if role == "A":
                    origin.add(i - fi)
                    ks.setdefault(fj, set()).add(j)
                else:
                    origin.add(j - fj)
                    ks.setdefault(fi, set()).add(i)
        assert len(origin) == 1 and all(len(v) == 1 for v in ks.values()), (st["stmt"], role, key)
        out[key] = origin.pop(), {fk: v.pop() for fk, v in ks.items()}
    return out


def operands_by_mma(s: dict, roles: dict) -> dict:
    """mma statement → (its opcode, {role: staged operand}) for the staged operands read through the
    parameters `roles` names (role → parameter offset)."""
    out = {}
    for p in s["phases"]:
        for role, param in roles.items():
            for st in ((p["operands"][role] or {}).get("staged", ())):
                if st["base"] == {"space": "param", "offset": param}:
                    out.setdefault(st["stmt"], (p["opcode"], {}))[1][role] = st
    return out


def products(s: dict, decode_a, decode_b, roles=None) -> dict:
    """(warp, trip) → {(row origin, column origin): the tensor k's its mma multiply}: what the
    mma statements compute, by the description's A and B offsets. A and B of each mma must hold
    the same tensor k at each fragment k."""
    out: dict = {}
    for stmt, (opcode, ops) in operands_by_mma(s, roles or {"A": 0, "B": 8}).items():
        assert set(ops) == {"A", "B"}, stmt
        a, b = positions(ops["A"], opcode, "A", decode_a), positions(ops["B"], opcode, "B", decode_b)
        assert a.keys() == b.keys()
        for key in a:
            (m0, ka), (n0, kb) = a[key], b[key]
            assert ka == kb, (stmt, key)
            out.setdefault(key, {}).setdefault((m0, n0), []).extend(ka.values())
    return out


def _block_terms(st: dict) -> list:
    return [(t["factors"], t["coefficient"]) for t in st["terms"]]


# -- GEMMs ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", GEMMS)
def test_gemm_operands_name_their_pointers_at_the_offsets_of_the_kernels_indexing(corpus, name):
    """A[rm, k] is a_ptr + rm·SA + k and B[k, rn] is b_ptr + k·SB + rn (elements): decoded by that
    indexing, every element of every A and B sits where its lane and register put it in the PTX
    ISA's fragment layout, A and B of each mma multiply the same k, and what the mma of each
    trip compute is the GEMM's: every 16×8 tile of the BM×BN block once, by one warp, summed
    over each k of that trip's BK columns exactly once — trip t's k being t·BK on (the loop moves
    A by BK columns and B by BK rows); the block's own origin is pid·BM·SA (pid·BN) elements on."""
    meta = CORPUS[name]
    c, eb = meta["constexprs"], 1 if meta["dtype"] == "fp8e4nv" else 2
    s = spec(corpus, name)
    assert all(p["a_source"].startswith("shared(global(param+0)") and p["b_source"].startswith("shared(global(param+8)")
               for p in s["phases"]), [(p["a_source"], p["b_source"]) for p in s["phases"]]
    widened = "e4m3" if meta["dtype"] == "fp8e4nv" and not meta["mma_v3"] else None
    by_mma = operands_by_mma(s, {"A": 0, "B": 8})
    assert len(by_mma) == sum(p["mma"] for p in s["phases"])  # every mma's A and B
    for _, ops in by_mma.values():
        assert _block_terms(ops["A"]) == [([{"kind": "ctaid.x"}], c["BM"] * c["SA"] * eb)]
        assert _block_terms(ops["B"]) == [([{"kind": "ctaid.y"}], c["BN"] * eb)]
        assert all(st["widened"] == widened and st["element_bytes"] == eb and st["loop"] is not None
                   for st in ops.values())
    done = products(s, lambda o: divmod(o // eb, c["SA"]), lambda o: divmod(o // eb, c["SB"]))
    tiles = {(m, n) for m in range(0, c["BM"], 16) for n in range(0, c["BN"], 8)}
    for t in sorted({trip for _, trip in done}):
        owners = {}
        for (w, trip), sums in done.items():
            if trip != t:
                continue
            for tile, ks in sums.items():
                assert tile not in owners, (tile, w, owners.get(tile))
                owners[tile] = w
                assert sorted(ks) == list(range(t * c["BK"], (t + 1) * c["BK"])), (w, t, tile)
        assert set(owners) == tiles


@pytest.mark.parametrize("name", GEMMS)
def test_gemm_operands_are_read_from_a_swizzled_ring_of_stages(corpus, name):
    """Each operand's shared reads have a layout (an XOR map of lane and warp bits), and the K
    loop's stages form a ring of num_stages − 1 buffers of one block tile each."""
    meta = CORPUS[name]
    c, eb = meta["constexprs"], 1 if meta["dtype"] == "fp8e4nv" else 2
    s = spec(corpus, name)
    for _, ops in operands_by_mma(s, {"A": 0, "B": 8}).values():
        for role, st in ops.items():
            tile = c["BM"] * c["BK"] * eb if role == "A" else c["BK"] * c["BN"] * eb
            assert st["trip_bytes"] == (c["BK"] * eb if role == "A" else c["BK"] * c["SB"] * eb)
            for read in st["reads"]:
                layout = read["layout"]
                assert layout is not None, (st["stmt"], read)
                assert layout["period"] == meta["num_stages"] - 1
                assert layout["stages"] == [i * tile for i in range(meta["num_stages"] - 1)]
                assert layout["symbol"] == "global_smem" and any(layout["lane"])


@pytest.mark.parametrize("name", GEMMS)
def test_pointers_read_only_by_cp_async_are_read(corpus, name):
    roles = {u["offset"]: u["role"] for u in spec(corpus, name)["params"]}
    assert roles[0] == roles[8] == "read" and roles[16] == "written"


# -- window attention -----------------------------------------------------------------------------

@pytest.mark.parametrize("name", ATTENTIONS)
def test_attention_operands_name_q_k_and_v_at_the_offsets_of_the_kernels_indexing(corpus, name):
    """S = Q·Kᵀ reads Q[t, d] = q_ptr + w·T·D + t·D + d as A and K[t, d] (loaded as its
    transpose) as B: its mma compute every 16×8 tile of the T×T scores once, over each d once. P·V
    reads V[t, d] as B, each mma one 8-column tile of O and K distinct t, all of T for each tile
    and warp; P itself, the softmax of the first dot, is computed in registers, not staged."""
    meta = CORPUS[name]
    c, eb = meta["constexprs"], 1 if meta["dtype"] == "fp8e4nv" else 2
    T, D = c["T"], c["D"]
    s = spec(corpus, name)
    block = [([{"kind": "ctaid.x"}], T * D * eb)]
    scores = products(s, lambda o: divmod(o // eb, D), lambda o: divmod(o // eb, D)[::-1])
    owners = {}
    for (w, _), sums in scores.items():
        for tile, ks in sums.items():
            assert tile not in owners and sorted(ks) == list(range(D)), (w, tile)
            owners[tile] = w
    assert set(owners) == {(m, n) for m in range(0, T, 16) for n in range(0, T, 8)}
    values: dict = {}
    for stmt, (opcode, ops) in operands_by_mma(s, {"B": 16}).items():
        assert _block_terms(ops["B"]) == block
        for (w, _), (n0, ks) in positions(ops["B"], opcode, "B", lambda o: divmod(o // eb, D)).items():
            values.setdefault((w, n0), []).extend(ks.values())
    assert {n0 for _, n0 in values} == set(range(0, D, 8))
    assert all(sorted(ks) == sorted(list(range(T)) * (len(ks) // T)) for ks in values.values())
    second = [p for p in s["phases"] if p["operands"]["B"] and "param+16" in p["b_source"]]
    assert second and all(p["a_source"].startswith("computed") for p in second)


def test_the_corpus_round_trips(corpus):
    for f in sorted(corpus.glob("*.ptx")):
        text = f.read_text()
        assert emit(parse(text, str(f))) == text, f.name


# -- hand-written kernels: the PTX ISA's layouts on the cpu backend and in the description ---------

MATRIX = """.version 8.0
.target sm_90
.address_size 64

.visible .entry rr_test_matrix(.param .u64 rr_test_matrix_in, .param .u64 rr_test_matrix_out)
.reqntid 32
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<40>;
	.reg .b64 	%rd<12>;
	.shared .align 16 .b8 tile[1536];

	ld.param.u64 	%rd1, [rr_test_matrix_in];
	ld.param.u64 	%rd2, [rr_test_matrix_out];
	cvta.to.global.u64 	%rd1, %rd1;
	cvta.to.global.u64 	%rd2, %rd2;
	mov.u32 	%r1, %laneid;
	shl.b32 	%r2, %r1, 4;
	mov.u32 	%r3, tile;
	add.u32 	%r4, %r3, %r2;
	cvt.u64.u32 	%rd3, %r2;
	add.u64 	%rd4, %rd1, %rd3;
	and.b32 	%r5, %r1, 15;
	and.b32 	%r6, %r1, 1;
	setp.eq.u32 	%p1, %r6, 1;
	cp.async.cg.shared.global [%r4], [%rd4], 16;
	cp.async.ca.shared.global [%r4+512], [%rd4+512], 16, %r5;
	cp.async.ca.shared.global [%r4+1024], [%rd4+1024], 16, %p1;
	cp.async.commit_group;
	cp.async.wait_group 	0;
	bar.sync 	0;
	ldmatrix.sync.aligned.m8n8.x4.shared.b16 	{%r10, %r11, %r12, %r13}, [%r4];
	ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 	{%r14, %r15}, [%r4+512];
	ldmatrix.sync.aligned.m8n8.x1.shared.b16 	{%r16}, [%r4+1024];
	bar.sync 	0;
	stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 	[%r4], {%r10, %r11, %r12, %r13};
	bar.sync 	0;
	shl.b32 	%r7, %r1, 5;
	cvt.u64.u32 	%rd5, %r7;
	add.u64 	%rd6, %rd2, %rd5;
	st.global.v4.b32 	[%rd6], {%r10, %r11, %r12, %r13};
	st.global.v2.b32 	[%rd6+16], {%r14, %r15};
	st.global.b32 	[%rd6+24], %r16;
	add.u64 	%rd7, %rd2, %rd3;
	ld.shared.v4.b32 	{%r20, %r21, %r22, %r23}, [%r4];
	st.global.v4.b32 	[%rd7+1024], {%r20, %r21, %r22, %r23};
	ld.shared.v4.b32 	{%r20, %r21, %r22, %r23}, [%r4+512];
	st.global.v4.b32 	[%rd7+1536], {%r20, %r21, %r22, %r23};
	ld.shared.v4.b32 	{%r20, %r21, %r22, %r23}, [%r4+1024];
	st.global.v4.b32 	[%rd7+2048], {%r20, %r21, %r22, %r23};
	ret;
}
"""


def _fragments(rows: np.ndarray, count: int, trans: bool) -> np.ndarray:
    """The PTX ISA's ldmatrix: (lanes, registers) u32 from `rows` (8·count rows of 8 u16): register
    i of lane 4g + t holds elements 2t, 2t + 1 of row g of matrix i, or, transposed, element g of
    rows 2t and 2t + 1."""
    out = np.zeros((32, count), np.uint32)
    for i in range(count):
        m = rows[8 * i:8 * i + 8]
        for lane in range(32):
            g, t = lane >> 2, lane & 3
            lo, hi = (m[2 * t, g], m[2 * t + 1, g]) if trans else (m[g, 2 * t], m[g, 2 * t + 1])
            out[lane, i] = int(lo) | int(hi) << 16
    return out


def test_cp_async_ldmatrix_and_stmatrix_follow_the_ptx_isa_on_the_cpu_backend(tmp_path):
    """cp.async copies 16 bytes a lane, zero-filling past src-size and all of them under a true
    ignore-src; ldmatrix .x4, .x2.trans and .x1 hand each lane the ISA's elements of the rows the
    lanes address; stmatrix .x4.trans writes each 8×8 matrix back transposed."""
    rng = np.random.default_rng(38)
    data = rng.integers(0, 256, 1536, dtype=np.uint8)
    (tmp_path / "m.ptx").write_text(MATRIX)
    launch = Launch(entry="rr_test_matrix", module="kernel.ptx", grid=(1, 1, 1), block=(32, 1, 1), layout="list",
                    fields=(Field("buffer", buffer="in"), Field("buffer", buffer="out")),
                    buffers={"in": Buffer("in", "in.npy", "in"), "out": Buffer("out", "out.npy", "out")})
    write_launch(tmp_path / "L", launch, {"in": data, "out": np.zeros(2560, np.uint8)}, tmp_path / "m.ptx")
    r = _rr("run", tmp_path / "L", "--backend", "cpu", "-o", tmp_path / "R")
    assert r.returncode == 0, r.stderr
    out = np.load(tmp_path / "R" / "out.npy")
    shared = np.zeros(1536, np.uint8)
    shared[:512] = data[:512]
    for lane in range(32):
        n = lane & 15
        shared[512 + 16 * lane:512 + 16 * lane + n] = data[512 + 16 * lane:512 + 16 * lane + n]
        if lane % 2 == 0:
            shared[1024 + 16 * lane:1040 + 16 * lane] = data[1024 + 16 * lane:1040 + 16 * lane]
    rows = shared.view(np.uint16).reshape(-1, 8)  # 16-byte rows: lane l addresses row l of each region
    regs = out[:1024].view(np.uint32).reshape(32, 8)
    np.testing.assert_array_equal(regs[:, 0:4], _fragments(rows[0:32], 4, False))
    np.testing.assert_array_equal(regs[:, 4:6], _fragments(rows[32:48], 2, True))
    np.testing.assert_array_equal(regs[:, 6:7], _fragments(rows[64:72], 1, False))
    stored = rows[0:32].reshape(4, 8, 8).transpose(0, 2, 1).reshape(32, 8)
    np.testing.assert_array_equal(out[1024:1536].view(np.uint16).reshape(32, 8), stored)
    np.testing.assert_array_equal(out[1536:2560], shared[512:])
    if PTXAS:
        assert run_ptxas(tmp_path / "m.ptx", "sm_90").returncode == 0


STAGED_K8 = """.version 8.0
.target sm_90
.address_size 64

.visible .entry rr_test_staged(.param .u64 rr_test_staged_a, .param .u64 rr_test_staged_b,
	.param .u64 rr_test_staged_d)
.reqntid 32
{
	.reg .b32 	%r<30>;
	.reg .f32 	%f<8>;
	.reg .b64 	%rd<12>;
	.shared .align 16 .b8 sa[256];
	.shared .align 16 .b8 sb[128];

	ld.param.u64 	%rd1, [rr_test_staged_a];
	ld.param.u64 	%rd2, [rr_test_staged_b];
	ld.param.u64 	%rd3, [rr_test_staged_d];
	cvta.to.global.u64 	%rd1, %rd1;
	cvta.to.global.u64 	%rd2, %rd2;
	cvta.to.global.u64 	%rd3, %rd3;
	mov.u32 	%r1, %laneid;
	shl.b32 	%r2, %r1, 3;
	mov.u32 	%r3, sa;
	add.u32 	%r4, %r3, %r2;
	cvt.u64.u32 	%rd4, %r2;
	add.u64 	%rd5, %rd1, %rd4;
	cp.async.ca.shared.global [%r4], [%rd5], 8;
	shl.b32 	%r5, %r1, 2;
	mov.u32 	%r6, sb;
	add.u32 	%r7, %r6, %r5;
	cvt.u64.u32 	%rd6, %r5;
	add.u64 	%rd7, %rd2, %rd6;
	cp.async.ca.shared.global [%r7], [%rd7], 4;
	cp.async.wait_all;
	bar.sync 	0;
	and.b32 	%r8, %r1, 15;
	shl.b32 	%r9, %r8, 4;
	add.u32 	%r10, %r3, %r9;
	ldmatrix.sync.aligned.m8n8.x2.shared.b16 	{%r11, %r12}, [%r10];
	and.b32 	%r13, %r1, 7;
	shl.b32 	%r14, %r13, 4;
	add.u32 	%r15, %r6, %r14;
	ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 	{%r16}, [%r15];
	mov.f32 	%f1, 0f00000000;
	mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%f2, %f3, %f4, %f5}, {%r11, %r12}, {%r16}, {%f1, %f1, %f1, %f1};
	shl.b32 	%r17, %r1, 4;
	cvt.u64.u32 	%rd8, %r17;
	add.u64 	%rd9, %rd3, %rd8;
	st.global.v4.f32 	[%rd9], {%f2, %f3, %f4, %f5};
	ret;
}
"""


def test_an_ldmatrix_x2_and_x1_trans_operand_names_its_pointers_and_elements():
    """A (16×8 f16, 16-byte rows) copied 8 bytes a lane by cp.async.ca and read by ldmatrix.x2;
    B (8×8 f16 k-major) copied 4 bytes a lane and read by ldmatrix.x1.trans: m16n8k8's A element
    (row, col) is a + 16·row + 2·col, B's (k, n) is b + 16·k + 2·n, as the fragment layout puts them."""
    s = spec_json(parse(STAGED_K8).function("rr_test_staged"))
    p = s["phases"][0]
    assert (p["a_source"], p["b_source"]) == ("shared(global(param+0))", "shared(global(param+8))")
    for role in ("A", "B"):
        st, = p["operands"][role]["staged"]
        assert st["terms"] == [] and st["loop"] is None and st["warp_bytes"] == [0]
        for lane, row in enumerate(tables(st)[(0, None)]):
            for e, offset in enumerate(row):
                assert divmod(offset // 2, 8) == fragment(role, 8, 2, lane, e)
        assert [r["opcode"] for r in st["reads"]] == [
            "ldmatrix.sync.aligned.m8n8.x2.shared.b16" if role == "A" else "ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16"]
    roles = {u["offset"]: u["role"] for u in s["params"]}
    assert roles == {0: "read", 8: "read", 16: "written"}


# -- splices on the cpu backend ---------------------------------------------------------------------

def _launch(directory: Path, name: str, ptx: Path, seed: int = 0) -> None:
    """A launch of a corpus kernel on random inputs: the GEMM over K = 4·BK (a pipelined loop of
    four trips), the attention over two windows."""
    meta, c = CORPUS[name], CORPUS[name]["constexprs"]
    rng = np.random.default_rng(seed)
    dt = ml_dtypes.float8_e4m3fn if meta["dtype"] == "fp8e4nv" else np.float16

    def data(*shape):
        return rng.normal(size=shape).astype(dt).view(np.uint8 if dt is not np.float16 else np.float16)
    params = parse_file(ptx).function(_entry(name)).params
    if meta["kernel"] == "gemm":
        k = 4 * c["BK"]
        arrays = {"a": data(c["BM"], c["SA"]), "b": data(k, c["SB"]), "c": np.zeros((c["BM"], c["SC"]), np.float16)}
        fields = [Field("buffer", buffer="a"), Field("buffer", buffer="b"), Field("buffer", buffer="c"),
                  Field("scalar", 0, "uint32", (k,))]
        grid = (1, 1, 1)
    else:
        T, D = c["T"], c["D"]
        arrays = {"q": data(2, T, D), "k": data(2, T, D), "v": data(2, T, D), "o": np.zeros((2, T, D), np.float16)}
        fields = [Field("buffer", buffer=x) for x in "qkvo"] + [Field("scalar", 0, "float32", (0.125,))]
        grid = (2, 1, 1)
    arrays["scratch"] = np.zeros(16, np.uint8)
    fields += [Field("buffer", buffer="scratch")] * (len(params) - len(fields))  # Triton's scratch pointers
    buffers = {b: Buffer(b, f"{b}.npy", "out" if b in ("c", "o") else "inout" if b == "scratch" else "in")
               for b in arrays}
    launch = Launch(entry=_entry(name), module="kernel.ptx", grid=grid, block=(32 * meta["num_warps"], 1, 1),
                    layout="list", shared_bytes=meta["shared_bytes"], fields=tuple(fields), buffers=buffers)
    write_launch(directory, launch, arrays, ptx)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict:
    """The unspliced runs on the cpu backend of the corpus kernels it runs (fp8: m16n8k32.e4m3)."""
    out = {}
    for name in ("gemm_fp8_64x64x64", "attention_fp8_64x32"):
        d = tmp_path_factory.mktemp(name)
        _launch(d / "L", name, FIXTURES / f"{name}.ptx")
        r = _rr("run", d / "L", "--backend", "cpu", "-o", d / "R")
        assert r.returncode == 0, r.stderr
        out[name] = d
    return out


def test_the_fp8_gemm_on_the_cpu_backend_is_the_product_of_its_inputs(reference):
    d = reference["gemm_fp8_64x64x64"]
    a, b = (np.load(d / "L" / f"{x}.npy").view(ml_dtypes.float8_e4m3fn).astype(np.float64) for x in "ab")
    c = np.load(d / "R" / "c.npy").astype(np.float64)[:, :64]
    want = a[:, :b.shape[0]] @ b[:, :64]
    assert np.abs(c - want).max() <= 2 ** -9 * np.abs(want).max() + 1e-3  # an f16 rounding of f32 sums


def _identical(ref: Path, run: Path) -> list:
    """The buffers of the reference run that differ in `run`."""
    return [f.name for f in sorted((ref / "R").glob("*.npy"))
            if not np.array_equal(np.load(f), np.load(run / f.name))]


@pytest.mark.parametrize("name", ["gemm_fp8_64x64x64", "attention_fp8_64x32"])
@pytest.mark.parametrize("recipe", ["isolate", "regen", "probe"])
def test_splices_run_byte_identical_on_the_cpu_backend(reference, tmp_path, name, recipe):
    d = reference[name]
    out = tmp_path / "s.ptx"
    r = _rr("splice", FIXTURES / f"{name}.ptx", "--entry", _entry(name), "--recipe", RECIPES / f"{recipe}.yaml",
            "--phase", 1, "-o", out)
    assert r.returncode == 0, r.stderr
    record = json.loads(Path(f"{out}.splice.json").read_text())
    assert _rr("relaunch", d / "L", "--module", out, "--splice-record", f"{out}.splice.json",
               "-o", tmp_path / "L").returncode == 0
    r = _rr("run", tmp_path / "L", "--backend", "cpu", "-o", tmp_path / "R")
    assert r.returncode == 0, r.stderr
    assert _identical(d, tmp_path / "R") == []
    if recipe == "regen":  # A and B read again from shared memory, not taken from the kernel's registers
        how = {o["role"]: o["from"] for o in record["regen"]["operands"] if o["role"] != "C"}
        assert how == {"A": "shared", "B": "shared"}, record["regen"]["operands"]
    if recipe == "probe":
        from rr.run.probe import replay

        result = replay(np.load(tmp_path / "R" / "probe.npy"), record["probe"])
        assert result["identical_share"] == 1.0, result
    if PTXAS:
        assert run_ptxas(out, "sm_89").returncode == 0


def test_regen_says_per_operand_why_it_cannot_read_one_again(tmp_path):
    """The K loop's second run of mma reads fragments the loop loaded before the next stage's
    cp.async overwrote their bytes: regen reads those as the kernel left them, naming the copy."""
    out = tmp_path / "s.ptx"
    assert _rr("splice", FIXTURES / "gemm_fp8_64x64x64.ptx", "--entry", "gemm", "--recipe", RECIPES / "regen.yaml",
               "--phase", 2, "-o", out).returncode == 0
    record = json.loads(Path(f"{out}.splice.json").read_text())["regen"]
    others = [o for o in record["operands"] if o["role"] != "C"]
    assert others and all(o["from"] == "live-in" and "not read again from shared memory" in o["reason"]
                          and "is written again by s" in o["reason"] for o in others)
