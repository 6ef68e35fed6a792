"""Phase geometry from the mma chain (DESIGN §3): M, N, K are derived from the distinct A and B
fragments divided by the chain length, on nvcc-built GEMMs of known shape; impossible shapes are
reported, never forced."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rr.describe import find_epilogues, find_phases
from rr.ptx import linearise, parse, parse_file

SINK = (Path(__file__).parent / "data" / "kitchen_sink.ptx").read_text()


def _phases(path, entry="gemm_phase"):
    statements = linearise(parse_file(path).function(entry))
    return statements, find_phases(statements)


@pytest.mark.parametrize("m,n,k", [(4, 12, 1), (4, 4, 1), (2, 3, 2), (4, 4, 3), (1, 4, 3), (1, 2, 3), (1, 4, 12)])
def test_nvcc_gemm_phases_have_the_source_shape(nvcc_ptx, m, n, k):
    # nvcc computes the store addresses before the last k-step, which ends the first run of mma
    # statements there: a K = 32k GEMM is phase 1 with k-1 steps and phase 2 with the last one,
    # both with the source's M and N. Each phase satisfies mma = m·n·k.
    statements, phases = _phases(nvcc_ptx("mma_chain", f"-DM_TILES={m}", f"-DN_TILES={n}", f"-DK_STEPS={k}"))
    assert sum(p.mma for p in phases) == m * n * k
    for p in phases:
        assert p.problem is None and p.identity
        assert (p.m, p.n, p.M, p.N) == (m, n, 16 * m, 8 * n)
        assert (p.a_quads, p.b_pairs, p.chains) == (m * p.k, n * p.k, m * n)
    assert sum(p.k for p in phases) == k
    if k == 1:
        assert len(phases) == 1 and phases[0].K == 32


def test_chains_follow_c_from_d_not_textual_order(nvcc_ptx):
    # k-outer unrolling interleaves the m·n chains: consecutive mma statements belong to
    # different chains, and each chain's steps are m·n statements apart.
    statements, phases = _phases(nvcc_ptx("mma_chain", "-DM_TILES=2", "-DN_TILES=3", "-DK_STEPS=4"))
    first = phases[0]
    assert first.chains == 6 and first.chain_lengths == (3,) * 6 and (first.M, first.N, first.K) == (32, 24, 96)


def _mma(d, a, b, c):
    return ("\tmma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16\n"
            f"\t{{{d[0]}, {d[1]}}},\n\t{{{', '.join(a)}}},\n\t{{{b[0]}, {b[1]}}}, {{{c[0]}, {c[1]}}};\n")


def _kernel(body: str) -> str:
    return (".version 8.7\n.target sm_90\n.address_size 64\n\n.visible .entry k()\n{\n"
            "\t.reg .b32 \t%r<100>;\n\n" + body + "\tret;\n\n}\n")


A0, A1 = ["%r1", "%r2", "%r3", "%r4"], ["%r5", "%r6", "%r7", "%r8"]
B0, B1 = ["%r10", "%r11"], ["%r12", "%r13"]
Z = ["%r0", "%r0"]


def test_unequal_chains_are_reported_with_their_lengths():
    body = (_mma(["%r20", "%r21"], A0, B0, Z) + _mma(["%r22", "%r23"], A1, B0, ["%r20", "%r21"])
            + _mma(["%r24", "%r25"], A0, B1, Z))
    (p,) = find_phases(linearise(parse(_kernel(body)).function("k")))
    assert not p.identity and p.m is None and p.M is None
    assert p.problem == "chains of unequal length: 1×1, 1×2"


def test_counts_that_admit_no_integer_shape_are_reported():
    # three chains of one step over two A and two B fragments: m·n would be 4, not 3
    body = _mma(["%r20", "%r21"], A0, B0, Z) + _mma(["%r22", "%r23"], A1, B0, Z) + _mma(["%r24", "%r25"], A0, B1, Z)
    (p,) = find_phases(linearise(parse(_kernel(body)).function("k")))
    assert p.problem == "m·n = 2·2 = 4 output tiles but 3 chains (|A|=2, |B|=2, k=1)"


def test_epilogues_cover_everything_between_the_phases(nvcc_ptx):
    statements, phases = _phases(nvcc_ptx("mma_chain", "-DM_TILES=4", "-DN_TILES=4", "-DK_STEPS=3"))
    epilogues = find_epilogues(statements, phases)
    assert [e.epilogue for e in epilogues] == list(range(len(phases) + 1))
    covered = sum(e.stmts for e in epilogues) + sum(p.mma for p in phases)
    assert covered == len(statements)
    assert epilogues[0].first_stmt == 1 and epilogues[-1].last_stmt == len(statements)
    assert epilogues[-1].ops.get("st.global.v2.u32") == 16  # the 16 output tiles stored in the tail


def _rr(*args):
    return subprocess.run([sys.executable, "-m", "rr.cli", *args], capture_output=True, text=True)


def test_spec_json_and_table(nvcc_ptx):
    path = nvcc_ptx("mma_chain", "-DM_TILES=4", "-DN_TILES=12", "-DK_STEPS=1")
    r = _rr("spec", str(path), "--entry", "gemm_phase", "--json")
    assert r.returncode == 0, r.stderr
    spec = json.loads(r.stdout)
    (p,) = spec["phases"]
    assert {k: p[k] for k in ("mma", "a_quads", "b_pairs", "chains", "chain_len", "m", "n", "k", "M", "N", "K", "identity")} == \
        {"mma": 48, "a_quads": 4, "b_pairs": 12, "chains": 48, "chain_len": 1, "m": 4, "n": 12, "k": 1,
         "M": 64, "N": 96, "K": 32, "identity": True}
    assert spec["statements"] == len(linearise(parse_file(path).function("gemm_phase")))
    assert p["b_source"] == "weight(param+8)" and p["b_offsets"] == [256 * nn for nn in range(12)]
    # B fragments at param+8 reach 256·11 + 31·8 + 8 bytes
    assert spec["weight_extent"] == 256 * 11 + 31 * 8 + 8
    assert [(u["offset"], u["role"]) for u in spec["params"]] == [(0, "read"), (8, "read"), (16, "read"), (24, "written")]
    table = _rr("spec", str(path), "--entry", "gemm_phase").stdout
    assert "4·12·1 = 48" in table


def test_spec_of_a_corpus_directory_describes_the_module_its_index_names(nvcc_ptx, tmp_path):
    # the corpus path of the command as people run it (`python -m rr`, which starts without the
    # packages the command does not use): the same description as from the PTX file
    path = nvcc_ptx("mma_chain", "-DM_TILES=2", "-DN_TILES=3", "-DK_STEPS=2")
    extract = subprocess.run([sys.executable, "-m", "rr", "extract", str(path), "-o", str(tmp_path / "corpus")],
                             capture_output=True, text=True)
    assert extract.returncode == 0, extract.stderr
    for form in ((), ("--json",)):
        from_corpus = subprocess.run([sys.executable, "-m", "rr", "spec", str(tmp_path / "corpus"), "--entry",
                                      "gemm_phase", *form], capture_output=True, text=True)
        assert from_corpus.returncode == 0, from_corpus.stderr
        assert from_corpus.stdout == _rr("spec", str(path), "--entry", "gemm_phase", *form).stdout
    assert [p["m"] * p["n"] * p["k"] for p in json.loads(from_corpus.stdout)["phases"]] == [6, 6]
    r = subprocess.run([sys.executable, "-m", "rr", "spec", str(tmp_path / "corpus"), "--entry", "nope"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "no module in this corpus defines entry 'nope'" in r.stderr


def test_the_commands_that_use_no_numpy_start_without_it_and_write_the_same_files(nvcc_ptx, tmp_path):
    # the console script (rr.cli.main.entry) tells pyarrow numpy is absent for extract, linearise and
    # describe; their files are the bytes main() writes in a process that has numpy
    path = nvcc_ptx("mma_chain", "-DM_TILES=2", "-DN_TILES=3", "-DK_STEPS=2")
    commands = {"extract": ["extract", str(path), "-o", "{}/corpus"],
                "linearise": ["linearise", str(path), "--entry", "gemm_phase", "-o", "{}/statements.parquet"],
                "describe": ["describe", str(path), "--entry", "gemm_phase", "-o", "{}/description"]}
    code = "import sys; from rr.cli.main import entry; sys.argv[0] = 'rr'; s = entry(); print('numpy' in sys.modules); sys.exit(s)"
    for name, args in commands.items():
        script, with_numpy = tmp_path / name / "script", tmp_path / name / "main"
        r = subprocess.run([sys.executable, "-c", code, *(a.format(script) for a in args)], capture_output=True, text=True)
        assert r.returncode == 0 and r.stdout.splitlines()[-1] == "False", (name, r.stdout, r.stderr)
        code_main = "import sys, numpy; from rr.cli.main import main; sys.exit(main(sys.argv[1:]))"
        r = subprocess.run([sys.executable, "-c", code_main, *(a.format(with_numpy) for a in args)],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        written = sorted(p.relative_to(script) for p in script.rglob("*") if p.is_file())
        assert written and written == sorted(p.relative_to(with_numpy) for p in with_numpy.rglob("*") if p.is_file())
        assert all((script / p).read_bytes() == (with_numpy / p).read_bytes() for p in written), name


def test_spec_rejects_a_missing_entry_and_a_kernel_without_mma(tmp_path):
    f = tmp_path / "k.ptx"
    f.write_text(SINK.replace("\tmma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16\n\t{%r12, %r13},\n\t{%r5, %r6, %r7, %r8},\n\t{%r5, %r6}, {%r9, %r9};\n", ""))
    r = _rr("spec", str(f), "--entry", "nope")
    assert r.returncode == 2 and "no entry or function named 'nope'" in r.stderr
    r = _rr("spec", str(f), "--entry", "cuda_dldn_engine_swin_enc9_kernel")
    assert r.returncode == 1 and "no mma statements" in r.stderr and "Traceback" not in r.stderr
