"""rr inject: a CUDA program run with kernels' code replaced by a module of the user's, matched by
entry name, the rest of each module the program's; rr capture --inject; rr compare-captures; and
rr inject --time, CUDA events on the program's own streams.

Without a GPU the interposer is driven by the fake driver of tests/test_capture.py, whose modules
know what their images say: the entries a PTX image defines with their `.param` lists, its module
variables, and comments that make its kernels write something else (`rr-fake-variant: N`) or take
another time on the fake device clock (`rr-fake-ns: N`); its log (FAKE_CUDA_LOG) says which
module every launched function came from. A replacement is the kernels' own PTX (identical), or
that PTX with such a comment (different), with another parameter list, or for a target the fake
sm_90 cannot load. On the H200 (marked gpu) tests/cuda/capture_app.cu's two kernels — one through
the runtime API with a 136-byte struct parameter, one through the driver API from a module file —
are replaced by their own PTX (captures equal) and by a changed one (captures differ, named)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from rr.run.launch import read_launch
from test_capture import CC, build_capture_app, fake, index, launch_dir, replay_matches_after, rr  # noqa: F401

needs_cc = pytest.mark.skipif(CC is None, reason="no C compiler (cc) on PATH: rr capture builds its interposer with it")
pytestmark = needs_cc


def variant(fake, tmp: Path, name: str, *comments: str, edit=lambda text: text) -> Path:
    """The kernels' PTX, with `comments` after its .target line and `edit` applied, as tmp/name."""
    text = edit(fake["ptx"].read_text())
    text = re.sub(r"^(\.target .*)$", lambda m: "\n".join([m.group(1), *(f"// {c}" for c in comments)]), text,
                  count=1, flags=re.M)
    (tmp / name).write_text(text)
    return tmp / name


def inject(fake, tmp: Path, *options: str, program=("fake_app", "engine"), env=None) -> subprocess.CompletedProcess:
    """rr inject OPTIONS -- PROGRAM KERNELS.ptx, the fake driver logging to tmp/log."""
    exe = [str(fake["dir"] / program[0]), *program[1:]] if program[0].startswith("fake_") else list(program)
    return rr("inject", *options, "--", *exe, str(fake["ptx"]),
              env={**fake["env"], "FAKE_CUDA_LOG": str(tmp / "log"), **(env or {})})


def launched(tmp: Path) -> list[tuple[str, int, int]]:
    """(entry, module, variant) of each launch the fake driver ran, in order."""
    lines = (tmp / "log").read_text().splitlines() if (tmp / "log").exists() else []
    found = (re.fullmatch(r"\d+ launch (\S+) module=(\d+) variant=(\d+)", line) for line in lines)
    return [(m.group(1), int(m.group(2)), int(m.group(3))) for m in found if m]


def record(path: Path) -> dict:
    return json.loads(path.read_text())


def decisions(rec: dict) -> list[tuple[str, str, str]]:
    return [(d["entry"], d["status"], d["api"])
            for run in rec["runs"] for p in run["processes"] for d in p["decisions"]]


# -- substitution --------------------------------------------------------------------------------

def test_the_named_entry_runs_the_replacements_code_and_the_rest_of_its_module_the_programs(fake, tmp_path):
    other = variant(fake, tmp_path, "other.ptx", "rr-fake-variant: 1")
    done = inject(fake, tmp_path, "--module", f"rr_cap_list={other}", "-o", str(tmp_path / "rec.json"))
    assert done.returncode == 0, done.stderr
    assert "fake_app: in[1] = 1039" in done.stdout  # both rr_cap_list launches added one more: the replacement's code
    # module 0 is the program's, module 1 the replacement rr loaded beside it: rr_cap_struct stays the program's
    assert launched(tmp_path) == [("rr_cap_struct", 0, 0), ("rr_cap_list", 1, 1), ("rr_cap_list", 1, 1)]
    assert f"rr_cap_list: {other} ran in 2 launches (process " in done.stdout
    rec = record(tmp_path / "rec.json")
    assert decisions(rec) == [("rr_cap_list", "replaced", "cuModuleGetFunction")]
    assert rec["runs"][0]["processes"][0]["launches"] == {"rr_cap_list": {"replaced": 2, "original": 0}}
    assert rec["modules"][0]["params"] == [[0, 8], [8, 8], [16, 4], [20, 4]] and rec["problems"] == []


def test_an_identical_replacement_gives_the_programs_own_results_from_the_replacements_module(fake, tmp_path):
    same = variant(fake, tmp_path, "same.ptx")
    done = inject(fake, tmp_path, "--module", f"rr_cap_list={same}", "--module", f"rr_cap_struct={same}")
    assert done.returncode == 0, done.stderr
    assert "fake_app: in[1] = 1037" in done.stdout  # what the program computes alone
    # each entry bound to a module of its own beside the program's (loaded in the order the program asked)
    assert launched(tmp_path) == [("rr_cap_struct", 1, 0), ("rr_cap_list", 2, 0), ("rr_cap_list", 2, 0)]


def test_a_runtime_api_program_gets_the_replacement_through_cuGetProcAddress_as_a_library(fake, tmp_path):
    other = variant(fake, tmp_path, "other.ptx", "rr-fake-variant: 1")
    done = inject(fake, tmp_path, "--module", f"rr_cap_list={other}", "-o", str(tmp_path / "rec.json"),
                  program=("fake_runtime",))
    assert done.returncode == 0, done.stderr
    assert launched(tmp_path) == [("rr_cap_list", 1, 1), ("rr_cap_list", 1, 1)]
    assert decisions(record(tmp_path / "rec.json")) == [("rr_cap_list", "replaced", "cuLibraryGetKernel")]


def test_a_handle_got_without_a_hooked_call_is_replaced_at_its_first_launch(fake, tmp_path):
    other = variant(fake, tmp_path, "other.ptx", "rr-fake-variant: 1")
    done = inject(fake, tmp_path, "--module", f"rr_cap_list={other}", "-o", str(tmp_path / "rec.json"),
                  program=("fake_app", "untracked"))
    assert done.returncode == 0, done.stderr
    assert "fake_app: untracked b[1] = 7" in done.stdout  # 1 + 5, and the replacement's one more
    assert launched(tmp_path) == [("rr_cap_list", 1, 1)]
    assert decisions(record(tmp_path / "rec.json")) == [("rr_cap_list", "replaced", "launch")]


def test_the_programs_module_variables_are_copied_to_the_replacement_and_a_global_back(fake, tmp_path):
    same = variant(fake, tmp_path, "same.ptx")
    done = inject(fake, tmp_path, "--module", f"rr_cap_const={same}", "-o", str(tmp_path / "rec.json"),
                  program=("fake_app", "const"))
    assert done.returncode == 0, done.stderr
    # rr_cap_coef as the program set it in its own module (the replacement's own copy is zero), and
    # the program reads its rr_cap_launches back as the replacement counted them
    assert "fake_app: const 10 20 30 40, launches 2" in done.stdout
    assert launched(tmp_path) == [("rr_cap_const", 1, 0)] * 2
    message = record(tmp_path / "rec.json")["runs"][0]["processes"][0]["decisions"][0]["message"]
    assert "the program's rr_cap_coef is copied to it before each launch;" in message
    assert "the program's rr_cap_launches is copied to it before each launch and back after it" in message


def test_the_interposer_and_rr_speak_of_bindings_in_the_same_words():
    from rr.capture.build import interposer_source
    from rr.capture.inject import Binding

    words = re.search(rb"STATUS_WORDS\[\] = \{([^}]*)\}", interposer_source()).group(1)
    assert re.findall(rb'"(\w+)"', words) == [b.value.encode() for b in Binding]


# -- refusals: before the program starts, or per module with the program's own code running -------

def test_a_replacement_with_another_parameter_list_is_refused_and_the_programs_code_runs(fake, tmp_path):
    def one_u64(text: str) -> str:  # rr_cap_list's n and add as one 8-byte parameter
        return text.replace(".param .u32 rr_cap_list_param_2,\n\t.param .u32 rr_cap_list_param_3", ".param .u64 "
                            "rr_cap_list_param_2").replace("[rr_cap_list_param_3]", "[rr_cap_list_param_2+4]")
    wrong = variant(fake, tmp_path, "wrong.ptx", "rr-fake-variant: 1", edit=one_u64)
    done = inject(fake, tmp_path, "--module", f"rr_cap_list={wrong}", "-o", str(tmp_path / "rec.json"))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "fake_app: in[1] = 1037" in done.stdout  # the program ran its own rr_cap_list: its results are right
    assert launched(tmp_path) == [("rr_cap_struct", 0, 0), ("rr_cap_list", 0, 0), ("rr_cap_list", 0, 0)]
    said = f"rr_cap_list: {wrong}'s parameters (offset:size) are 0:8, 8:8, 16:8, the program's 0:8, 8:8, 16:4, 20:4"
    assert f"rr inject: {said}; the program's own rr_cap_list runs instead" in done.stderr  # from the program, at once
    assert done.stderr.rstrip().endswith("rr: error: the replacements were not all in place (above): the program ran "
                                         "its own code there")
    rec = record(tmp_path / "rec.json")
    assert decisions(rec) == [("rr_cap_list", "param_mismatch", "cuModuleGetFunction")]
    assert rec["runs"][0]["processes"][0]["launches"]["rr_cap_list"] == {"replaced": 0, "original": 2}


def test_a_replacement_the_driver_cannot_load_is_reported_with_its_error_and_the_programs_code_runs(fake, tmp_path):
    newer = variant(fake, tmp_path, "sm100.ptx", edit=lambda t: t.replace(".target sm_90", ".target sm_100a"))
    done = inject(fake, tmp_path, "--module", f"rr_cap_list={newer}")
    assert done.returncode == 2 and "fake_app: in[1] = 1037" in done.stdout
    assert (f"rr inject: rr_cap_list: {newer} could not be loaded: CUDA_ERROR_INVALID_PTX (a PTX JIT compilation "
            "failed), error 218: ptxas application ptx input, line 9; fatal   : the fake device is an sm_90; the "
            "program's own rr_cap_list runs instead") in done.stderr  # the driver's error, and its JIT's first line
    assert "(load_failed)" in done.stderr
    assert [m for _, m, _ in launched(tmp_path)] == [0, 0, 0]


def test_a_module_variable_of_another_size_is_refused_and_the_programs_code_runs(fake, tmp_path):
    wider = variant(fake, tmp_path, "wider.ptx", edit=lambda t: t.replace("rr_cap_coef[16]", "rr_cap_coef[32]"))
    done = inject(fake, tmp_path, "--module", f"rr_cap_const={wider}", program=("fake_app", "const"))
    assert done.returncode == 2 and "fake_app: const 10 20 30 40, launches 2" in done.stdout
    assert (f"rr_cap_const: the module variable rr_cap_coef is 32 bytes in {wider}, 16 in the program's module; the "
            "program's own rr_cap_const runs instead") in done.stderr
    assert launched(tmp_path) == [("rr_cap_const", 0, 0)] * 2


def test_an_entry_the_program_never_gets_is_an_error_after_it_ran(fake, tmp_path):
    same = variant(fake, tmp_path, "same.ptx")
    done = inject(fake, tmp_path, "--module", f"rr_cap_const={same}")  # the engine scenario never asks for it
    assert done.returncode == 2 and "fake_app: in[1] = 1037" in done.stdout
    assert ("rr_cap_const: the program never got rr_cap_const from a module of its own (no module it loaded defines "
            "it, or it never asked for it): nothing was replaced") in done.stderr


@pytest.mark.parametrize("make, says", [
    (lambda d, ptx: d / "absent.ptx", "{f}: no such file (the replacement of rr_cap_list)"),
    (lambda d, ptx: ptx, "{f}: defines no entry rr_cap_lost (its entries: rr_cap_struct, rr_cap_list, rr_cap_crash, "
                         "rr_cap_const)"),
    (lambda d, ptx: _write(d / "k.fatbin", bytes.fromhex("50ed55ba01001000") + bytes(8)),
     "{f}: a fatbin; rr inject takes the kernel's PTX or a cubin"),
    (lambda d, ptx: _write(d / "empty.ptx", b""), "{f}: an empty file, not a module"),
    (lambda d, ptx: _write(d / "junk.ptx", b"\x01\x02\0\x03"), "{f}: neither PTX text nor a cubin (ELF)"),
    (lambda d, ptx: _write(d / "extern.ptx", ptx.read_bytes().replace(b".const .align 4", b".extern .const .align 4")),
     "{f}:14: an .extern variable: a replacement is loaded as a module of its own"),
    (lambda d, ptx: _write(d / "bad.ptx", ptx.read_bytes().replace(b"ld.param.u64", b"ld.param.u64 %%", 1)), "{f}:"),
], ids=["missing", "no-entry", "fatbin", "empty", "junk", "extern", "unparsable"])
def test_a_file_that_cannot_replace_the_entry_is_refused_before_the_program_starts(fake, tmp_path, make, says):
    f = make(tmp_path, fake["ptx"])
    entry = "rr_cap_lost" if "rr_cap_lost" in says else "rr_cap_list"
    done = rr("inject", "--module", f"{entry}={f}", "--", "sh", "-c", "echo ran", env=fake["env"])
    assert done.returncode == 2 and done.stdout == ""  # the program did not start
    assert done.stderr.startswith("rr: error: " + says.format(f=f)) and "Traceback" not in done.stderr, done.stderr


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_bad_options_are_refused_before_the_program_starts(fake, tmp_path):
    same = variant(fake, tmp_path, "same.ptx")
    for options, says in ((["--module", f"rr_cap_list={same}", "--repeat", "3"], "--repeat N: only with --time"),
                          (["--module", f"rr_cap_list={same}", "--module", f"rr_cap_list={same}"],
                           "--module rr_cap_list: given twice"),
                          ([], "rr inject: no --module ENTRY=FILE given")):
        done = rr("inject", *options, "--", "sh", "-c", "echo ran", env=fake["env"])
        assert done.returncode == 2 and done.stdout == "" and done.stderr.startswith(f"rr: error: {says}"), done.stderr
    done = rr("inject", "--module", "not a name=x.ptx", "--", "true", env=fake["env"])
    assert done.returncode == 2 and "expected ENTRY=FILE" in done.stderr


def test_a_parameter_list_unlike_the_programs_own_ptx_is_an_error_before_it_starts(fake, tmp_path):
    program = tmp_path / "app_with_ptx"  # an executable carrying the kernels' PTX, as a runtime-API program's does
    program.write_bytes((fake["dir"] / "fake_app").read_bytes() + fake["ptx"].read_bytes())
    program.chmod(0o755)
    wrong = variant(fake, tmp_path, "wrong.ptx", edit=lambda t: t.replace(
        ".param .u32 rr_cap_list_param_2,\n\t.param .u32 rr_cap_list_param_3", ".param .u64 rr_cap_list_param_2"))
    done = inject(fake, tmp_path, "--module", f"rr_cap_list={wrong}", program=(str(program), "engine"))
    assert done.returncode == 2 and "fake_app:" not in done.stdout and not launched(tmp_path)
    assert re.match(rf"rr: error: {re.escape(str(wrong))}: rr_cap_list's parameters \(offset:size\) 0:8, 8:8, 16:8 are "
                    rf"not those of rr_cap_list in {re.escape(str(program))} \(its PTX at byte \d+\): 0:8, 8:8, 16:4, "
                    r"20:4$", done.stderr.strip()), done.stderr
    same = variant(fake, tmp_path, "same.ptx")
    done = inject(fake, tmp_path, "--module", f"rr_cap_list={same}", program=(str(program), "engine"))
    assert done.returncode == 0 and f"rr_cap_list: {same}'s parameters are those of rr_cap_list in {program}'s PTX" \
        in done.stderr


def test_a_cubin_replaces_the_entry_as_its_ptx_does(fake, tmp_path):
    from rr.capture.replacement import read_replacement

    ptxas = shutil.which("ptxas")
    if ptxas is None:
        pytest.skip("ptxas is not on PATH: it makes the cubin")
    cubin = tmp_path / "kernels.cubin"
    subprocess.run([ptxas, "-arch=sm_90", str(fake["ptx"]), "-o", str(cubin)], check=True)
    from_cubin, from_ptx = read_replacement("rr_cap_list", cubin), read_replacement("rr_cap_list", fake["ptx"])
    assert (from_cubin.kind, from_cubin.params, from_cubin.variables) == ("cubin", from_ptx.params, from_ptx.variables)
    done = inject(fake, tmp_path, "--module", f"rr_cap_list={cubin}")
    assert done.returncode == 0, done.stderr
    assert launched(tmp_path) == [("rr_cap_struct", 0, 0), ("rr_cap_list", 1, 0), ("rr_cap_list", 1, 0)]
    done = rr("inject", "--module", f"rr_cap_lost={cubin}", "--", "true", env=fake["env"])
    assert done.returncode == 2 and done.stderr.startswith(f"rr: error: {cubin}: a cubin that defines no entry "
                                                           "rr_cap_lost (its functions: ")


# -- capture with a replacement, and captures compared --------------------------------------------

def capture(fake, out: Path, *options: str, scenario: str = "engine") -> subprocess.CompletedProcess:
    return rr("capture", "-o", str(out), *options, "--", str(fake["dir"] / "fake_app"), scenario, str(fake["ptx"]),
              env=fake["env"])


@pytest.fixture(scope="module")
def captures(fake, tmp_path_factory):
    """The engine captured as it is (A), with rr_cap_list replaced by its own PTX (same) and by one
    that adds one more (other)."""
    d = tmp_path_factory.mktemp("captures")
    same, other = variant(fake, d, "same.ptx"), variant(fake, d, "other.ptx", "rr-fake-variant: 1")
    done = {"A": capture(fake, d / "A"), "same": capture(fake, d / "same", "--inject", f"rr_cap_list={same}"),
            "other": capture(fake, d / "other", "--inject", f"rr_cap_list={other}")}
    for name, run in done.items():
        assert run.returncode == 0, (name, run.stderr)
    return {"dir": d, "same": same, "other": other, "done": done}


def test_a_capture_with_a_replacement_says_which_launches_ran_it_and_holds_its_module(captures):
    d = captures["dir"]
    assert f"rr_cap_list: {captures['other']} ran in 2 launches" in captures["done"]["other"].stdout
    launches = index(d / "other")["launches"]
    assert [(e["entry"], e["replaced"]) for e in launches] == [("rr_cap_struct", None), ("rr_cap_list", True),
                                                                ("rr_cap_list", True)]
    module = launches[1]["module"]
    assert read_launch(launch_dir(d / "other", 1)).module == module  # what rr run loads: the replacement
    assert (d / "other" / "modules" / module).read_bytes() == captures["other"].read_bytes()
    assert launches[0]["module"] != module  # rr_cap_struct ran the program's module
    inj = index(d / "other")["inject"]
    assert [m["entry"] for m in inj["modules"]] == ["rr_cap_list"] and inj["problems"] == []
    assert "replaced" not in index(d / "A")["launches"][0]  # a capture without --inject is as it was


def test_a_launch_captured_with_an_identical_replacement_replays_as_captured(captures, tmp_path):
    compared = replay_matches_after(launch_dir(captures["dir"] / "same", 1), tmp_path)
    assert compared.returncode == 0, compared.stdout


def test_captures_compare_equal_with_an_identical_replacement_and_name_the_first_difference_with_another(captures):
    d = captures["dir"]
    equal = rr("compare-captures", str(d / "A"), str(d / "same"))
    assert equal.returncode == 0, equal.stdout + equal.stderr
    assert equal.stdout.splitlines()[-1] == f"{d / 'A'} and {d / 'same'}: 3 launches compared, all 8 buffers " \
                                            "byte-identical"
    differ = rr("compare-captures", str(d / "A"), str(d / "other"), "-o", str(d / "cmp.json"))
    assert differ.returncode == 1
    assert differ.stdout.splitlines()[-1] == (
        f"{d / 'A'} and {d / 'other'}: 3 launches compared, 2 differ; first difference: launch 1 (rr_cap_list; A ran "
        "the program's own code, B the replacement), buffer p8: 64 of 256 bytes differ, first at [0]: 15 vs 16")
    rows = record(d / "cmp.json")["launches"]
    assert [(r["entry"], r["replaced"], r["identical"]) for r in rows] == [
        ("rr_cap_struct", [None, None], True), ("rr_cap_list", [None, True], False),
        ("rr_cap_list", [None, True], False)]


def test_a_capture_whose_replacement_was_not_in_place_fails_and_proves_nothing(captures, fake, tmp_path):
    d = captures["dir"]
    newer = variant(fake, tmp_path, "sm100.ptx", edit=lambda t: t.replace(".target sm_90", ".target sm_100a"))
    done = capture(fake, tmp_path / "B", "--inject", f"rr_cap_list={newer}")
    assert done.returncode == 2 and "CUDA_ERROR_INVALID_PTX" in done.stderr
    assert [e["replaced"] for e in index(tmp_path / "B")["launches"]] == [None, False, False]
    assert index(tmp_path / "B")["inject"]["problems"]
    compared = rr("compare-captures", str(d / "A"), str(tmp_path / "B"))
    assert compared.returncode == 1  # every buffer equal: the program ran its own code
    assert "rr: launch 1 (rr_cap_list): B was captured with its replacement but ran the program's own code" in \
        compared.stderr


def test_captures_of_different_launches_are_not_compared_past_the_first_that_does_not_correspond(captures, fake,
                                                                                                  tmp_path):
    done = capture(fake, tmp_path / "exit", scenario="exit")  # launches 0 and 1, then exits
    assert done.returncode == 3
    compared = rr("compare-captures", str(captures["dir"] / "A"), str(tmp_path / "exit"), "--json")
    assert compared.returncode == 1
    assert "rr: A has 3 launches, B 2: the last 1 of A are not compared" in compared.stderr
    assert [r["identical"] for r in json.loads(compared.stdout)["launches"]] == [True, True]


# -- timing --------------------------------------------------------------------------------------

def test_time_reports_each_kernels_event_times_with_and_without_the_replacement(fake, tmp_path):
    faster = variant(fake, tmp_path, "faster.ptx", "rr-fake-ns: 800")
    done = inject(fake, tmp_path, "--module", f"rr_cap_list={faster}", "--time", "--repeat", "3", "-o",
                  str(tmp_path / "rec.json"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("fake_app: in[1] = 1037") == 6  # three runs with it, three without
    runs = re.findall(r"rr inject: run (\d) of 3, (with the replacements|the program as it is)", done.stderr)
    assert runs == [("1", "with the replacements"), ("1", "the program as it is"), ("2", "the program as it is"),
                    ("2", "with the replacements"), ("3", "with the replacements"), ("3", "the program as it is")]
    # the fake device clock: the replacement's launches take 800 ns, the program's own 1000 + 10 per thread (64)
    assert f"rr_cap_list ({faster}): 3 runs with it, as many without" in done.stdout
    assert "  replaced  6 launches: median 0.000800 ms, min 0.000800, max 0.000800; noise ±0.0%" in done.stdout
    assert "  original  6 launches: median 0.001640 ms, min 0.001640, max 0.001640; noise ±0.0%" in done.stdout
    assert "  ratio     0.4878 ± 0.0000 (replaced / original)" in done.stdout
    timing = record(tmp_path / "rec.json")["timing"][0]
    assert timing["replaced"]["run_medians_ms"] == pytest.approx([0.0008] * 3)
    assert timing["ratio"] == pytest.approx(800 / 1640) and timing["ratio_noise"] == 0


def test_timing_reads_the_events_after_the_launches_not_between_them(fake, tmp_path):
    same = variant(fake, tmp_path, "same.ptx")
    done = inject(fake, tmp_path, "--module", f"rr_cap_struct={same}", "--module", f"rr_cap_list={same}", "--time")
    assert done.returncode == 0, done.stderr
    by_process: dict[str, list[str]] = {}
    for line in (tmp_path / "log").read_text().splitlines():
        pid, what = line.split(" ", 1)
        by_process.setdefault(pid, []).append(what.split(" ")[0])
    assert len(by_process) == 2  # the run with the replacements and the one without
    for events in by_process.values():
        # nothing waits for an event while the program launches: the fake device completes one once a
        # launch ran after it, so the first launch's events are read (not waited for) at the third
        # launch, and only the last two launches' are waited for, at the program's exit
        assert events == ["launch"] * 3 + ["event_synchronize"] * 2, events


def test_time_with_one_run_says_its_noise_is_unknown(fake, tmp_path):
    same = variant(fake, tmp_path, "same.ptx")
    done = inject(fake, tmp_path, "--module", f"rr_cap_list={same}", "--time")
    assert "noise n/a (one run: --repeat N for it)" in done.stdout and "ratio     1.0000 (replaced" in done.stdout


# -- on the GPU: an nvcc-built program of two kernels, the runtime and the driver API --------------

@pytest.mark.gpu
def test_the_programs_kernels_replaced_by_their_own_ptx_capture_equal_and_a_changed_one_differs(gpu, fake, tmp_path):
    app = build_capture_app(tmp_path, fake["dir"])
    program = [str(app["app"]), str(app["fatbin"]), "256", "128"]
    corpus = tmp_path / "corpus"  # the program's own PTX, as rr extract finds it in its fatbin
    assert rr("extract", str(app["app"]), "-o", str(corpus), env=app["env"]).returncode == 0
    from rr.corpus import find_entry

    capa, capb = "cuda_dldn_engine_swin_capa_kernel", "cuda_dldn_engine_swin_capb_kernel"
    own = find_entry(corpus, f"^{capa}$")[0][0]  # one module defines both kernels
    changed = tmp_path / "changed.ptx"  # capb's multiplier changed: another hash of the arena
    changed.write_text(own.read_text().replace("-1640531535", "-1640531533"))
    assert changed.read_text() != own.read_text()

    def cap(out: str, *options: str) -> Path:
        done = rr("capture", "-o", str(tmp_path / out), *options, "--", *program, env=app["env"])
        assert done.returncode == 0, done.stderr
        return tmp_path / out

    plain = cap("A")
    same = cap("same", "--inject", f"{capa}={own}", "--inject", f"{capb}={own}")
    other = cap("other", "--inject", f"{capb}={changed}")
    assert [e["replaced"] for e in index(same)["launches"]] == [True, True]  # the runtime API's kernel and the driver's
    equal = rr("compare-captures", str(plain), str(same), env=app["env"])
    assert equal.returncode == 0, equal.stdout + equal.stderr
    differ = rr("compare-captures", str(plain), str(other), env=app["env"])
    assert differ.returncode == 1 and f"first difference: launch 1 ({capb}; A ran the program's own code, B the " \
        "replacement), buffer p8" in differ.stdout, differ.stdout
    timed = rr("inject", "--module", f"{capa}={own}", "--time", "--repeat", "3", "-o", str(tmp_path / "t.json"), "--",
               *program, env=app["env"])
    assert timed.returncode == 0, timed.stderr
    timing = record(tmp_path / "t.json")["timing"][0]
    assert timing["replaced"]["launches"] == timing["original"]["launches"] == 3 and timing["ratio"] > 0
    print(timed.stdout)  # the H200's figures, for docs/benchmarks.md
