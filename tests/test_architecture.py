"""The house's shape, checked: stages depend one way (import-linter), no import cycles, no private names
or optional imports of our own modules across modules, a top level of packages, docs/architecture.md in
step with the code."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grimp
import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "supervisor"
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
LEAF_MODULES = {"settings.py", "logs.py", "redact.py", "faultpoints.py", "ports.py"}


def modules() -> Iterator[tuple[str, Path, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(REPO).with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        yield name, path, ast.parse(path.read_text(), str(path))


def this_checkout(root: Path = REPO) -> dict[str, str]:
    """A subprocess env that imports `supervisor` from `root`, whatever the venv's editable install says."""
    return {**os.environ, "PYTHONPATH": str(root)}


def lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=cwd,
        env=this_checkout(cwd),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_layers_contract_holds() -> None:
    result = lint_imports(REPO)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


def test_an_upward_import_breaks_the_layers_contract(tmp_path: Path) -> None:
    shutil.copytree(PACKAGE, tmp_path / "supervisor", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    domain = tmp_path / "supervisor" / "domain" / "__init__.py"
    domain.write_text(
        domain.read_text() + "\nimport supervisor.daemon.compose  # the vocabulary reaching up\n"
    )
    result = lint_imports(tmp_path)
    assert result.returncode == 1, result.stdout[-3000:]
    assert "BROKEN" in result.stdout and "supervisor.domain -> supervisor.daemon.compose" in result.stdout


def test_there_is_no_import_cycle_among_supervisor_modules() -> None:
    graph = grimp.build_graph("supervisor")
    edges = {m: {i for i in graph.find_modules_directly_imported_by(m)} for m in graph.modules}
    # Tarjan's strongly connected components: any component of two or more modules is a cycle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(comp)

    sys.setrecursionlimit(10_000)
    for m in sorted(edges):
        if m not in index:
            visit(m)
    assert cycles == []


def test_no_module_imports_another_modules_private_name() -> None:
    offenders = [
        f"{path.relative_to(REPO)}:{node.lineno}: {node.module}.{alias.name}"
        for _name, path, tree in modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("supervisor")
        for alias in node.names
        if alias.name.startswith("_")
    ]
    assert offenders == []


def test_our_modules_are_imported_at_module_top_and_never_as_optional() -> None:
    """Only genuinely heavy or optional libraries are imported inside a function (matplotlib, hyperscan)."""
    late, optional = [], []
    for _name, path, tree in modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for sub in ast.walk(node):
                    if isinstance(sub, ast.Import | ast.ImportFrom):
                        mod = sub.module if isinstance(sub, ast.ImportFrom) else sub.names[0].name
                        if (mod or "").split(".")[0] not in ("matplotlib", "hyperscan"):
                            late.append(f"{path.relative_to(REPO)}:{sub.lineno}: {mod}")
            if isinstance(node, ast.Try):
                guards_import = any(
                    isinstance(h.type, ast.Name) and h.type.id in ("ImportError", "ModuleNotFoundError")
                    for h in node.handlers
                )
                ours = any(
                    isinstance(s, ast.ImportFrom | ast.Import)
                    and any(
                        n.startswith("supervisor")
                        for n in (
                            [s.module or ""] if isinstance(s, ast.ImportFrom) else [a.name for a in s.names]
                        )
                    )
                    for s in node.body
                )
                if guards_import and ours:
                    optional.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert late == [] and optional == []


def test_the_top_level_holds_packages_and_at_most_five_leaf_modules() -> None:
    files = {p.name for p in PACKAGE.iterdir() if p.is_file() and p.suffix == ".py"} - {"__init__.py"}
    assert files <= LEAF_MODULES and len(files) <= 5
    packages = [p for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"]
    assert all((p / "__init__.py").is_file() for p in packages)


def test_every_module_says_why_it_exists_in_its_docstring() -> None:
    missing = [str(path.relative_to(REPO)) for _n, path, tree in modules() if not ast.get_docstring(tree)]
    assert missing == []


ARCHITECTURE = REPO / "docs" / "architecture.md"


def test_docs_architecture_names_every_package_and_only_existing_ones() -> None:
    text = ARCHITECTURE.read_text()
    named = set(re.findall(r"^### `supervisor/([a-z_/]+)/`", text, re.M))
    actual = {str(p.parent.relative_to(PACKAGE)) for p in PACKAGE.glob("*/__init__.py")}
    assert named == actual


def test_docs_architecture_shows_the_graph_the_imports_make() -> None:
    generated = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "import-graph")],
        env=this_checkout(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert generated in ARCHITECTURE.read_text(), "run scripts/import-graph --write"


@pytest.mark.parametrize("forbidden", ["supervisor.testing"])
def test_the_daemon_never_imports_the_test_stand_ins(forbidden: str) -> None:
    graph = grimp.build_graph("supervisor")
    importers = {
        m for m in graph.find_upstream_modules(forbidden, as_package=True) if not m.startswith(forbidden)
    }
    assert importers == set()
