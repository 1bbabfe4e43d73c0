"""The package's architecture: one-way dependencies, no cycles, small modules."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "langchain_context_guard"
SUBPACKAGES = ("engine", "adapters", "compaction", "recovery", "replay", "cli")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> list[str]:
    """Absolute names of the package modules an ``import from`` reaches."""
    if node.level == 0:
        base = node.module or ""
    else:
        parts = module.split(".")
        keep = len(parts) - node.level + (1 if is_package else 0)
        base = ".".join(parts[:keep] + ([node.module] if node.module else []))
    return [base] + [f"{base}.{alias.name}" for alias in node.names]


def import_graph() -> dict[str, set[str]]:
    """Every explicit import, at any depth (functions, ``TYPE_CHECKING``) included."""
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        targets: set[str] = set()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                found = _resolve(name, path.name == "__init__.py", node)
            elif isinstance(node, ast.Import):
                found = [alias.name for alias in node.names]
            else:
                continue
            targets |= {t for t in found if t in files and t != name}
        graph[name] = targets
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _lazy_targets(path: Path) -> set[str]:
    """Modules named in a ``lazy_getattr`` table of an ``__init__``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.startswith(".")
    }


def test_no_import_cycles() -> None:
    assert _cycles(import_graph()) == []


def test_engine_imports_no_sibling_subpackage() -> None:
    graph = import_graph()
    engine = {m for m in graph if m.split(".")[1:2] == ["engine"]}
    assert engine
    outside = {
        (module, target)
        for module in engine
        for target in graph[module]
        if target.split(".")[1:2] != ["engine"]
    }
    assert outside == set()


def test_lower_layers_never_import_higher_ones() -> None:
    rank = {sub: i for i, sub in enumerate(SUBPACKAGES)}
    rank["adapters"] = 1
    rank["compaction"] = rank["recovery"] = 2
    graph = import_graph()
    wrong = set()
    for module, targets in graph.items():
        here = module.split(".")[1:2]
        if not here or here[0] not in rank:
            continue
        for target in targets:
            there = target.split(".")[1:2]
            if there and there[0] in rank and rank[there[0]] > rank[here[0]]:
                wrong.add((module, target))
    assert wrong == set()


def test_no_module_over_500_lines() -> None:
    sizes = {
        str(p.relative_to(PACKAGE)): len(p.read_text(encoding="utf-8").splitlines())
        for p in PACKAGE.rglob("*.py")
    }
    assert {name: n for name, n in sizes.items() if n > 500} == {}


def test_every_subpackage_says_what_it_owns() -> None:
    for sub in SUBPACKAGES:
        init = PACKAGE / sub / "__init__.py"
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert doc and "import" in doc.lower(), (
            f"{sub}/__init__.py: say what it may import"
        )


@pytest.mark.parametrize("sub", SUBPACKAGES)
def test_lazy_exports_name_real_modules(sub: str) -> None:
    init = PACKAGE / sub / "__init__.py"
    for target in _lazy_targets(init):
        assert (PACKAGE / sub / (target.lstrip(".") + ".py")).exists(), target


def test_import_stays_light() -> None:
    code = (
        "import sys, langchain_context_guard\n"
        "heavy = ('langchain', 'matplotlib', 'tqdm', 'aiosqlite', 'psycopg',\n"
        "         'langgraph.checkpoint.sqlite', 'langgraph.checkpoint.postgres')\n"
        "print(sorted(m for m in sys.modules\n"
        "             if any(m == h or m.startswith(h + '.') for h in heavy)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


ENGINE_LAYERS = ("vocabulary", "tokens", "passes", "incremental", "guard")
"""The engine's folders, lowest first: each imports only its own and lower ones."""
_ENGINE_TOP = {"_guard", "_call", "_notices", "_reference"}
"""Root modules above the folders: ``ContextGuard`` and the specification."""


def _engine_layer(module: str) -> int | None:
    parts = module.split(".")
    if parts[1:2] != ["engine"] or len(parts) < 3:
        return None  # not inside the engine, or the engine's own __init__
    name = parts[2]
    if name in ENGINE_LAYERS:
        return ENGINE_LAYERS.index(name)
    return ENGINE_LAYERS.index("guard" if name in _ENGINE_TOP else "vocabulary")


def test_engine_folders_import_one_way() -> None:
    """vocabulary <- tokens <- passes <- incremental <- ContextGuard."""
    graph = import_graph()
    wrong = set()
    for module, targets in graph.items():
        here = _engine_layer(module)
        if here is None:
            continue
        for target in targets:
            there = _engine_layer(target)
            if there is not None and there > here:
                wrong.add((module, target))
    assert wrong == set()
    folders = {p.name for p in (PACKAGE / "engine").iterdir() if p.is_dir()}
    assert {"tokens", "passes", "incremental"} <= folders


def _private_targets(module: str, targets: set[str]) -> set[str]:
    """The private modules of another subpackage that ``module`` imports."""
    own = module.split(".")[1:2]
    return {
        target
        for target in targets
        if target.split(".")[1:2] != own
        and any(part.startswith("_") for part in target.split(".")[1:])
        and target != "langchain_context_guard._lazy"
    }


def test_subpackages_meet_at_their_public_faces() -> None:
    """adapters, compaction, recovery, replay and cli import each other (and the
    engine) through package ``__init__``s, never a sibling's private module."""
    graph = import_graph()
    wrong = {
        (module, target)
        for module, targets in graph.items()
        if module.split(".")[1:2] != ["engine"]
        for target in _private_targets(module, targets)
    }
    assert wrong == set()


SPECIFICATION = "langchain_context_guard.engine._reference"
"""The plain pipeline that ``prepare`` is held equal to."""
_READ = {"langchain_context_guard.engine._guard"}
"""What the specification reads its setting from (the guard), not runs."""


def _reached(graph: dict[str, set[str]], start: str, skip: set[str]) -> set[str]:
    """Every module ``start`` imports, directly or through others, bar ``skip``."""
    seen, todo = set(), [start]
    while todo:
        for target in graph[todo.pop()] - skip - seen:
            seen.add(target)
            todo.append(target)
    return seen


def test_the_specification_runs_none_of_the_fast_path() -> None:
    """``_reference`` and what it imports reach nothing in ``engine/incremental/``.

    The fast path may import the passes; were the reverse true, the property
    test holding ``prepare`` equal to the reference would test that code against
    itself.
    """
    graph = import_graph()
    fast = {
        module
        for module in _reached(graph, SPECIFICATION, _READ)
        if module.startswith("langchain_context_guard.engine.incremental")
    }
    assert fast == set()
