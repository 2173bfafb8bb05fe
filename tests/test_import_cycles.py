"""No import circles in `workbench/` or `trainers/`, between modules or between their parts.

The graph is read with `ast`, nothing is imported. An edge is every import a module makes, at module level
or inside a function (a lazy import that closes a circle hides it, it does not remove it), except those
under `if TYPE_CHECKING:`, which never run. `from a.b import c` is an edge to the module `a.b.c` when it
is one, else to `a.b`; importing `a.b.c` is not counted as importing its package `a.b` (Python runs
`a/b/__init__` first, but what that loads is the package's own choice). Migrations are left out (Django
writes them).

Three graphs must be acyclic: the modules', the parts' (each module counted as its app or subpackage:
`workbench.runs.web.views` as `workbench.runs`, `trainers.rollout.engine` as `trainers.rollout`), so that an
app never depends on one that depends on it, and the parts' parts (`workbench.runs.web`,
`trainers.training.engines`), so that the subpackages an app is made of do not either. A failure prints each
circle with the lines that close it.
"""

from __future__ import annotations

import ast
from itertools import pairwise
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("workbench", "trainers")
Graph = dict[str, dict[str, str]]  # module -> {imported module: "path:line" of the import}


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    return {
        module_name(path, root): path
        for package in packages
        for path in sorted((root / package).rglob("*.py"))
        if "migrations" not in path.parts
    }


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(inner) for statement in node.body for inner in ast.walk(statement))
    return skipped


def _absolute(module: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = package[: len(package) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> dict[str, int]:
    """The project modules this one imports, each with the line of its first import."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    skipped = _type_checking_nodes(tree)
    named: dict[str, int] = {}
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                named.setdefault(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, path, node)
            for alias in node.names:
                target = f"{base}.{alias.name}"
                named.setdefault(target if target in modules else base, node.lineno)
    found = {}
    for name, line in named.items():
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if name and name != module:
            found.setdefault(name, line)
    return found


def module_graph(root: Path, packages: tuple[str, ...] = PACKAGES) -> Graph:
    modules = project_modules(root, packages)
    return {
        module: {
            target: f"{path.relative_to(root)}:{line}"
            for target, line in imports_of(module, path, modules).items()
        }
        for module, path in modules.items()
    }


def part_of(module: str, depth: int = 2) -> str:
    """The package `depth` names deep that a module belongs to (`workbench.runs` at depth 2; a module
    that is not that deep is its own part)."""
    return ".".join(module.split(".")[:depth])


def collapsed(graph: Graph, depth: int = 2) -> Graph:
    parts: Graph = {part_of(module, depth): {} for module in graph}
    for module, targets in graph.items():
        for target, where in targets.items():
            if part_of(module, depth) != part_of(target, depth):
                parts[part_of(module, depth)].setdefault(part_of(target, depth), where)
    return parts


def cycles(graph: Graph) -> list[list[str]]:
    """One shortest circle through each node that lies on one, each circle reported once, as
    [a, b, ..., a]."""
    found: dict[frozenset[str], list[str]] = {}
    for start in sorted(graph):
        paths, seen = [[start]], {start}
        while paths and not any(start in graph[path[-1]] for path in paths):
            paths = [
                path + [target]
                for path in paths
                for target in sorted(graph[path[-1]])
                if target not in seen and not seen.add(target)
            ]
        circle = next((path + [start] for path in paths if start in graph[path[-1]]), None)
        if circle is not None:
            found.setdefault(frozenset(circle), circle)
    return list(found.values())


def described(graph: Graph, circles: list[list[str]]) -> str:
    return "\n".join(
        " -> ".join(circle)
        + "\n"
        + "".join(f"    {a} -> {b} at {graph[a][b]}\n" for a, b in pairwise(circle))
        for circle in circles
    )


def test_no_module_imports_itself_in_a_circle():
    graph = module_graph(REPO_ROOT)
    assert len(graph) > 300 and "workbench.runs.models" in graph["workbench.runs.admin"]
    circles = cycles(graph)
    assert circles == [], "import circles between modules:\n" + described(graph, circles)


@pytest.mark.parametrize("depth", [2, 3])
def test_no_app_or_subpackage_depends_on_itself_through_another(depth):
    graph = collapsed(module_graph(REPO_ROOT), depth)
    assert "trainers.workbench_api" in graph["workbench.runs" if depth == 2 else "workbench.runs.web"]
    circles = cycles(graph)
    assert circles == [], f"import circles between packages {depth} names deep:\n" + described(graph, circles)


def test_the_checker_finds_lazy_and_relative_circles_but_not_type_only_ones(tmp_path):
    package = tmp_path / "workbench" / "app"
    package.mkdir(parents=True)
    (tmp_path / "workbench" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from .b import thing\n")
    (package / "b.py").write_text("def later():\n    from workbench.app import c\n")
    (package / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n"
    )
    (package / "d.py").write_text("import workbench.app.e\n")
    (package / "e.py").write_text("from . import d\n")
    graph = module_graph(tmp_path, ("workbench",))
    assert graph["workbench.app.b"] == {"workbench.app.c": "workbench/app/b.py:2"}
    assert graph["workbench.app.c"] == {}
    assert cycles(graph) == [["workbench.app.d", "workbench.app.e", "workbench.app.d"]]
    assert "workbench/app/e.py:1" in described(graph, cycles(graph))


def test_the_parts_graph_sees_a_circle_that_no_two_modules_close(tmp_path):
    for app, source in {
        "jobs": "from workbench.runs.models import Run\n",
        "runs": "from workbench.jobs import gpus\n",
    }.items():
        (tmp_path / "workbench" / app).mkdir(parents=True)
        (tmp_path / "workbench" / app / "__init__.py").write_text("")
        (tmp_path / "workbench" / app / "models.py").write_text("")
        (tmp_path / "workbench" / app / "gpus.py").write_text(source)
    graph = module_graph(tmp_path, ("workbench",))
    assert cycles(graph) == []
    assert cycles(collapsed(graph)) == [["workbench.jobs", "workbench.runs", "workbench.jobs"]]
