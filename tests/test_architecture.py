"""rr's modules import each other one way: no import circle between them (issue 35, big rooms).

The import graph is read from the sources with `ast`: every `import` and `from … import`, at the
top of a module or inside a function (a function-local import ties two modules as much as a top
one does: it only runs later), relative ones too. `from PACKAGE import NAME` is an arrow to the
submodule NAME where there is one, else to the package's __init__.py. A circle is a set of
modules each of which reaches every other (a strongly connected component of more than one).

The circles that remain are for later steps of the redesign, each named below with the step
that removes it; a new circle fails the test, and so does an allowance whose circle is gone (the
step that removed it empties its entry)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "rr"

# the circles still to be broken, by the step of issue 35 that breaks them: a circle found must
# lie inside one of these
ALLOWED_CIRCLES: dict[str, set[str]] = {}


def module_name(path: Path, root: Path) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def import_graph(root: Path) -> dict[str, set[str]]:
    """module → the modules of the package at `root` it imports (top-level or in a function)."""
    files = {module_name(f, root): f for f in root.rglob("*.py") if "__pycache__" not in f.parts}
    graph: dict[str, set[str]] = {}
    for name, f in files.items():
        package = name if f.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(up + ([base] if base else []))
                targets.update(f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names)
        graph[name] = {t for t in targets if t in files and t != name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def ties(graph: dict[str, set[str]], circle: set[str]) -> str:
    """The arrows inside a circle, for the failure message."""
    return "; ".join(f"{a} → {b}" for a in sorted(circle) for b in sorted(graph[a] & circle))


def test_no_import_circle_between_rrs_modules_but_those_still_allowed():
    graph = import_graph(PACKAGE)
    new = [c for c in circles(graph) if not any(c <= allowed for allowed in ALLOWED_CIRCLES.values())]
    assert not new, "import circles between rr's modules:\n" + "\n".join(
        f"  {', '.join(sorted(c))}: {ties(graph, c)}" for c in new)


def test_every_allowed_circle_is_still_there():
    found = circles(import_graph(PACKAGE))
    gone = [why for why, allowed in ALLOWED_CIRCLES.items() if not any(c <= allowed for c in found)]
    assert not gone, f"no circle is left of {gone}: remove its allowance from ALLOWED_CIRCLES"


def test_a_circle_through_a_function_local_or_relative_import_is_found(tmp_path):
    # the detector itself: a → b at the top, b → a inside a function (as rr.run.frame → rr.run.cuda
    # was); c → d by a relative import and d → c through `from pkg import c`; e imports a alone
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.b import f\n")
    (package / "b.py").write_text("def f():\n    from pkg import a\n    return a\n")
    (package / "c.py").write_text("from .d import g\n")
    (package / "d.py").write_text("def g():\n    from pkg import c\n")
    (package / "e.py").write_text("import pkg.a\n")
    graph = import_graph(package)
    assert graph["pkg.e"] == {"pkg.a"}
    assert sorted(map(sorted, circles(graph))) == [["pkg.a", "pkg.b"], ["pkg.c", "pkg.d"]]
