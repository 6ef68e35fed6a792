"""Fingerprints of the code each pipeline stage runs, so Snakemake reruns exactly the stages whose
code changed (it does not track the modules a command imports): a rule passes its stage's
fingerprint as a param, and a changed param reruns the job.

A stage is the `rr` command module its rules run (rr.cli.<stage>), and the code it runs is that
module's import closure, found in the sources themselves: every `import` and `from … import`
(at the top or inside a function, relative ones too), every string that names an rr module (the
lazy names of rr.ptx, the `-m rr.run.child` a run starts), and the data files its modules name
(`"launch.schema.json"`, `"interposer.c"`, the `"recipes"` directory: a string that is the name of
a file beside the module or in rr/data). The fingerprint hashes what of each file can change what
the stage does: a module's syntax tree without its docstrings (so a comment, a docstring or a
reflowed line reruns nothing), a data file's bytes. A module's packages count as Python runs
them: importing rr.corpus.sample runs rr/corpus/__init__.py first (so rr/cli/__init__.py imports
nothing, and the dispatcher, rr.cli.main, is no stage's code)."""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import json
import os
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
DATA = "data"  # rr/data: the shipped schemas, recipes and tables

# the command module each stage's rules run (workflow/rules/*.smk: `params: code=CODE[stage]`), as
# a file of the package: a module's name written as text would count as an import of it (below)
STAGES = {
    "corpus": "cli/corpus.py",
    "synth": "cli/synth.py",
    "launch": "cli/launch.py",
    "linearise": "cli/ptx.py",
    "describe": "cli/describe.py",
    "splice": "cli/splice.py",
    "compile": "cli/compile.py",
    "run": "cli/run.py",
    "collect": "cli/collect.py",
    "report": "cli/report.py",
    "compose": "cli/compose.py",
}


def fingerprint(stage: str, root: str | Path = PACKAGE) -> str:
    """SHA-1 (12 hex digits) over the code stage `stage` runs (STAGES), or over the whole package
    for stage "all", in the package at `root` (rr's own by default; a copy, for the tests)."""
    root = Path(root).resolve()
    facts = _facts(root)
    files = sorted(_package_files(root)) if stage == "all" else closure(STAGES[stage], root, facts)
    h = hashlib.sha1()
    for f in files:
        h.update(f"{f.relative_to(root)}\0{facts.digest(f)}\0".encode())
    facts.save()
    return h.hexdigest()[:12]


def closure(module: str, root: str | Path = PACKAGE, facts: _Facts | None = None) -> list[Path]:
    """The files of `module` (a file of the package, `cli/run.py`) and of everything it imports,
    directly or not, with the data files they name; sorted."""
    root = Path(root).resolve()
    facts = facts or _facts(root)
    seen: set[Path] = set()
    todo = [root / module]
    while todo:
        f = todo.pop()
        if f is None or f in seen:
            continue
        seen.add(f)
        if f.suffix == ".py":
            modules, data = facts.names(f)
            todo += [facts.module_file(m) for m in modules]
            todo += [d / "__init__.py" for d in f.parents if d != root and d.is_relative_to(root)]  # run first
            seen.update(data)
    return sorted(seen)


@functools.lru_cache(maxsize=8)
def _facts(root: Path) -> _Facts:
    """One _Facts a package and process: a workflow asks the fingerprints of ten stages at once."""
    return _Facts(root)


class _Facts:
    """What the fingerprints need of each module — the names in it that may be rr modules or data
    files, the digest of its syntax tree — found once per version of its text and kept in the
    package's `__pycache__/rr-fingerprint.json` (as Python keeps bytecode there: parsing the whole
    package took 0.7 s, a second of every Snakemake start and of every run that asks the worker's
    key; reading and hashing it, 6 ms). Which of those names are modules or files is asked of the
    package as it is now; the facts of another version of this module's rules are not used. Where
    the cache cannot be written the facts are found again."""

    def __init__(self, root: Path):
        self.root = root
        self.cache = root / "__pycache__" / "rr-fingerprint.json"
        self.rules = hashlib.sha1(Path(__file__).read_bytes()).hexdigest()
        try:
            cached = json.loads(self.cache.read_text())
            self.known = cached["files"] if cached.get("rules") == self.rules else {}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            self.known = {}
        self.changed = False
        self.found: dict[tuple[Path, str], tuple] = {}  # (file, its text's sha1) -> names()
        self.listed: dict[Path, set[str]] = {}
        self.files: dict[str, Path | None] = {}  # a name -> its module's file (two stats each: a closure asked ~1000)

    def module_file(self, name: str) -> Path | None:
        """_module_file(name, root), asked of the file system once per name."""
        if name not in self.files:
            self.files[name] = _module_file(name, self.root)
        return self.files[name]

    def _key(self, f: Path) -> tuple[str, bytes]:
        data = f.read_bytes()
        return hashlib.sha1(data).hexdigest(), data

    def _of(self, f: Path) -> dict:
        key, data = self._key(f)
        facts = self.known.get(key)
        if facts is None:
            modules, strings = _names(f, self.root, data)
            facts = {"modules": modules, "strings": strings, "digest": hashlib.sha1(_content(f, data)).hexdigest()}
            self.known[key] = facts
            self.changed = True
        return facts

    def names(self, f: Path) -> tuple[list[str], list[Path]]:
        """(the rr modules `f` imports or names, the data files it names)."""
        found = (f, self._key(f)[0])
        if found not in self.found:
            facts = self._of(f)
            data = {d for where in (f.parent, self.root / DATA) for text in self._entries(where) & set(facts["strings"])
                    for d in _data_files(where / text)}
            self.found[found] = ([m for m in facts["modules"] if self.module_file(m) is not None],
                                 sorted(data))
        return self.found[found]

    def _entries(self, directory: Path) -> set[str]:
        """The names in `directory` (read once: most strings of a module name no file)."""
        if directory not in self.listed:
            try:
                self.listed[directory] = set(os.listdir(directory))
            except OSError:
                self.listed[directory] = set()
        return self.listed[directory]

    def digest(self, f: Path) -> str:
        if f.suffix != ".py":
            return hashlib.sha1(f.read_bytes()).hexdigest()
        return self._of(f)["digest"]

    def save(self) -> None:
        if not self.changed:
            return
        with contextlib.suppress(OSError):
            self.cache.parent.mkdir(exist_ok=True)
            tmp = self.cache.with_name(f".{self.cache.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"rules": self.rules, "files": self.known}))
            os.replace(tmp, self.cache)


def _module_file(name: str, root: Path) -> Path | None:
    """rr.a.b → ROOT/a/b.py or ROOT/a/b/__init__.py; None for a name that is no module of rr's."""
    parts = name.split(".")
    if parts[0] != "rr":
        return None
    base = root.joinpath(*parts[1:])
    for f in (base.with_suffix(".py"), base / "__init__.py"):
        if f.is_file():
            return f
    return None


def _dotted(f: Path, root: Path) -> str:
    rel = f.relative_to(root).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(("rr", *parts))


def _names(f: Path, root: Path, source: bytes) -> tuple[list[str], list[str]]:
    """(the dotted names `f` imports, and the rr module names it holds as text; the other short
    strings in it, which may name data files)."""
    tree = ast.parse(source, str(f))
    here = _dotted(f, root)
    package = here if f.name == "__init__.py" else here.rpartition(".")[0]
    modules, strings = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(up + ([base] if base else []))
            modules.add(base)
            modules.update(f"{base}.{a.name}" for a in node.names)  # where a name is a submodule
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) < 200:
            text = node.value
            if _MODULE_NAME.fullmatch(text):
                modules.add(text)
            elif text and "/" not in text and "\0" not in text and text not in (".", ".."):
                strings.add(text)
    return sorted(m for m in modules if m.split(".")[0] == "rr"), sorted(strings)


_MODULE_NAME = re.compile(r"rr(\.[A-Za-z_][A-Za-z0-9_]*)+")


def _data_files(p: Path) -> list[Path]:
    """The data files a name stands for: a file that is not Python source, or a directory of such
    files that is no package (rr/data/recipes; not rr/data, nor rr/corpus, whose names are words
    in many a string)."""
    if "__pycache__" in p.parts:
        return []
    if p.is_file():
        return [] if p.suffix == ".py" else [p]
    if p.is_dir() and not (p / "__init__.py").exists():
        return [f for f in _package_files(p) if f.suffix != ".py"]
    return []


def _package_files(directory: Path):
    """The source and data files under `directory` (not caches, not compiled bytecode)."""
    for dirpath, dirnames, filenames in os.walk(directory):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for name in filenames:
            if not name.endswith((".pyc", ".pyo")):
                yield Path(dirpath, name)


def _content(f: Path, source: bytes) -> bytes:
    """What of a module the fingerprint covers: its syntax tree without docstrings."""
    tree = ast.parse(source, str(f))
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree).encode()


def import_rr_from(checkout: str | Path) -> None:
    """Make every job this process starts (`python3 -P -m rr …`) import rr from `checkout`, the code
    `fingerprint` covers, in whichever environment runs the job: the active one, or a rule's conda
    env, which has rr's dependencies but not rr. (`-P` keeps the job's working directory off
    sys.path: with `snakemake -d DIR` an `rr/` in DIR would come first.)"""
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(checkout), os.environ.get("PYTHONPATH")) if p)
