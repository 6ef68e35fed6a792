"""The workflow against hostile config values and working directories (issue 33, items 1 and 4): a
config value reaches a job's command as one quoted argument and never as shell text; the schema
refuses what a value cannot be (a control character anywhere, an entry pattern that is no PTX
name, a path that would read as an option), naming the key; and the jobs run this checkout's rr,
never an `rr/` in the directory Snakemake is started in or told to work in (`-d`)."""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import sys
import tokenize
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from rr.validation import InvalidInput, checked_config, schema_errors

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "rr" / "data" / "sample_swin.ptx"
SAMPLE_ENTRY = "cuda_dldn_engine_swin_sample_kernel"
SCHEMA = yaml.safe_load((ROOT / "workflow/schemas/config.schema.yaml").read_text())
RULE_FILES = sorted((ROOT / "workflow/rules").glob("*.smk")) + [ROOT / "Snakefile"]
# a placeholder a rule's command takes from its job: every one must be quoted (`:q`)
FIELD = re.compile(r"\{(?:input|output|params|wildcards|log|resources|threads)\b[^{}]*\}")


def copy_workflow(dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("Snakefile", "workflow", "config", "profiles"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, dest / name)
    return dest


def snakemake(*args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=600)


def plain_strings(path: Path):
    """Every string literal of a rule file that is not an f-string (f-strings build paths in the
    helpers; a rule's command is a plain string Snakemake formats)."""
    for token in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if token.type == tokenize.STRING and not token.string.lstrip("rbRB").startswith(("f", "F")):
            yield token.start[0], token.string


def test_every_value_a_rule_puts_in_a_command_is_one_quoted_argument():
    fields = []
    for path in RULE_FILES:
        for line, text in plain_strings(path):
            fields += [(f"{path.name}:{line}", f) for f in FIELD.findall(text)]
    assert len(fields) > 60  # every rule's command was read
    unquoted = [(where, f) for where, f in fields if not f.endswith(":q}")]
    assert unquoted == []


def test_every_job_runs_rr_with_the_working_directory_off_sys_path():
    commands = [text for path in RULE_FILES for _, text in plain_strings(path) if "-m rr " in text]
    assert len(commands) >= 15
    assert [c for c in commands if "python3 -P -m rr " not in c] == []


def config(**values) -> dict:
    """The default config with `values` set (dotted keys for the corpus's)."""
    cfg = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    for key, value in values.items():
        if key.startswith("corpus_"):
            cfg["corpus"][key[len("corpus_"):]] = value
        else:
            cfg[key] = value
    return cfg


def refusal(cfg: dict) -> str:
    """What the workflow's two checks (rr's, then the schema) say of a config; '' when it passes."""
    try:
        checked_config(cfg)
    except InvalidInput as e:
        return str(e)
    return "\n".join(schema_errors(cfg, SCHEMA, "config"))


def test_the_default_config_passes():
    assert refusal(config()) == ""


@pytest.mark.parametrize("key, value, says", [
    ("corpus_entry_pattern", "cuda_dldn_engine_swin_{layer}_kernel$(touch M)", "corpus.entry_pattern"),
    ("corpus_entry_pattern", "cuda_dldn_engine_swin_{layer}_kernel`touch M`", "corpus.entry_pattern"),
    ("corpus_entry_pattern", "x_{layer}' ; touch M ; '", "corpus.entry_pattern"),
    ("corpus_entry_pattern", "x_{layer};touch M;#", "corpus.entry_pattern"),
    ("corpus_entry_pattern", "x_{layer}_{other}", "corpus.entry_pattern"),  # str.format would fail on it
    ("corpus_entry_pattern", "no_layer_in_it", "corpus.entry_pattern"),
    ("arch", "sm_90\n", "arch"),
    ("arch", "sm_90\nrm -rf ~", "arch"),
    ("arch", "sm_90; touch M", "arch"),
    ("frame", "3840x2160\n", "frame"),
    ("recipes", ["isolate\n"], "recipes[0]"),
    ("layers", ["enc2\n"], "layers[0]"),
    ("corpus_source", "-rf", "corpus.source"),
    ("corpus_source", "engine.bin\n", "corpus.source"),
    ("corpus_launches", "--help", "corpus.launches"),
])
def test_the_schema_refuses_what_a_value_cannot_be_naming_the_key(key, value, says):
    message = refusal(config(**{key: value}))
    assert message and says in message, message


@pytest.mark.parametrize("pattern", ["{layer}", "mm_{layer}_K4", "Kernel$2_{layer}", "%{layer}", "a{layer}b{layer}"])
def test_entry_patterns_are_any_ptx_name_around_the_layer(pattern):
    assert refusal(config(corpus_entry_pattern=pattern)) == ""


def test_a_hostile_value_on_the_command_line_is_refused_before_any_job(tmp_path):
    work = copy_workflow(tmp_path / "w")
    r = snakemake("-n", "--config", "arch=sm_90$(touch M)", cwd=work)
    assert r.returncode != 0 and "arch" in r.stdout + r.stderr
    assert not (work / "M").exists()


def test_paths_and_names_with_shell_characters_reach_the_jobs_literally(tmp_path):
    """A corpus file named with `$(…)`, a space and a quote, and an entry name with `$` in it (a PTX
    identifier may hold one): the jobs read that file and that entry — a shell would have run the
    command substitution, split the name and expanded `$dldn` to nothing."""
    work = copy_workflow(tmp_path / "w")
    corpus = work / "my 'corpus' $(touch M)"
    corpus.mkdir()
    entry = "cuda$dldn_engine_swin_sample_kernel"
    (corpus / "engine`touch M`.ptx").write_text(SAMPLE.read_text().replace(SAMPLE_ENTRY, entry))
    cfg = yaml.safe_load((work / "config/config.yaml").read_text())
    cfg["corpus"].update(source=str(corpus.relative_to(work)), entry_pattern="cuda$dldn_engine_swin_{layer}_kernel")
    cfg["layers"] = ["sample"]
    (work / "config/config.yaml").write_text(yaml.safe_dump(cfg))
    targets = ["results/sample/statements.parquet", "results/sample/descriptor.json",
               "results/sample/phase1/isolate.ptx"]
    r = snakemake(*targets, cwd=work)
    assert r.returncode == 0, r.stderr[-3000:]
    assert not (work / "M").exists() and not (corpus / "M").exists()
    opcodes = pq.read_table(work / "results/sample/statements.parquet").column("opcode").to_pylist()
    assert sum(op.startswith("mma.sync") for op in opcodes) == 48
    assert f".entry {entry}(" in (work / "results/sample/phase1/isolate.ptx").read_text()


def plant_rr(directory: Path, marker: Path) -> None:
    """An `rr` package that, imported, leaves `marker` and runs nothing of rr's."""
    (directory / "rr").mkdir(parents=True)
    (directory / "rr" / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('imported')\n"
                                                  "raise SystemExit('the planted rr ran')\n")
    (directory / "rr" / "__main__.py").write_text("")


def test_only_the_checkouts_rr_runs_whatever_the_working_directory(tmp_path):
    checkout = copy_workflow(tmp_path / "checkout")
    shutil.copytree(ROOT / "rr", checkout / "rr", ignore=shutil.ignore_patterns("__pycache__"))
    started_in, work = tmp_path / "started_in", tmp_path / "work"
    plant_rr(started_in, tmp_path / "imported_from_started_in")
    plant_rr(work, tmp_path / "imported_from_work")
    shutil.copytree(checkout / "config", work / "config")
    r = snakemake("-s", checkout / "Snakefile", "-d", work, "results/sample/statements.parquet", cwd=started_in)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (work / "results/sample/statements.parquet").is_file()
    assert not (tmp_path / "imported_from_started_in").exists()
    assert not (tmp_path / "imported_from_work").exists()
