"""The core's layers: ``runtime/`` (the contract plugin authors import) imports nothing from the engine, and the
core's import graph has no cycle. Every import counts: at the top, inside functions, under ``TYPE_CHECKING``."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
from pathlib import Path

import agentcompass
import pytest

PACKAGE = Path(agentcompass.__file__).resolve().parent

#: Modules outside ``runtime/`` that ``runtime/`` may import: they import nothing but ``runtime/`` and each other.
FOUNDATION = frozenset({"agentcompass.errors", "agentcompass.redaction", "agentcompass.procfs"})


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def core_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imported(path: Path, modules: dict[str, Path]) -> set[str]:
    """The core modules ``path`` imports: ``from a.b import c`` is ``a.b.c`` when that is a module, else ``a.b``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in modules}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                name = f"{node.module}.{alias.name}"
                found.add(name if name in modules else node.module)
    return {m for m in found if m in modules}


def is_warning(node: ast.stmt) -> bool:
    """``warnings.warn(...)``: what a deprecated import path says when imported."""
    return (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
            and ast.unparse(node.value.func) == "warnings.warn")


def only_hands_names_on(path: Path) -> bool:
    """A module that only hands names on under another import path: a docstring, imports, ``__all__`` and (when
    the path is deprecated) its warning, nothing else."""
    body = ast.parse(path.read_text()).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return all(
        isinstance(node, ast.Import | ast.ImportFrom)
        or (isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__all__"])
        or is_warning(node)
        for node in body
    )


def graph() -> dict[str, set[str]]:
    modules = core_modules()
    return {name: imported(path, modules) - {name} for name, path in modules.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(edges.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def layer_violations() -> list[str]:
    modules = core_modules()
    edges = graph()
    bad = []
    for name, path in modules.items():
        lower = name == "agentcompass.runtime" or name.startswith("agentcompass.runtime.") or name in FOUNDATION
        if not lower or (name not in FOUNDATION and only_hands_names_on(path)):
            continue
        for target in sorted(edges[name]):
            if not (target.startswith("agentcompass.runtime") or target in FOUNDATION):
                bad.append(f"{name} imports {target}")
    return bad


def test_runtime_imports_no_engine_module():
    assert layer_violations() == []


def test_the_core_has_no_import_cycle():
    assert cycles(graph()) == []


#: Deprecated import paths, each with the module to import instead; they warn, and go in 0.2.0.
DEPRECATED = {"agentcompass.run_directory": "agentcompass.runtime.run_reader",
              "agentcompass.runtime.comparison": "agentcompass.runtime.run_reader"}
OLD_PATHS = tuple(DEPRECATED)

#: Old import paths removed before any release (their modules' new names had been announced with them).
REMOVED = {"agentcompass.runtime.providers": "agentcompass.runtime.model_providers",
           "agentcompass.testing.models": "agentcompass.testing.scripted_models"}


def test_old_import_paths_only_hand_names_on_and_the_core_does_not_use_them():
    modules, edges = core_modules(), graph()
    assert [name for name in OLD_PATHS if not only_hands_names_on(modules[name])] == []
    assert sorted(f"{n} imports {old}" for n, targets in edges.items() for old in OLD_PATHS if old in targets) == []


@pytest.mark.parametrize(("old", "new"), sorted(DEPRECATED.items()))
def test_a_deprecated_import_path_warns_naming_the_new_path_and_the_version_it_goes_in(monkeypatch, old, new):
    monkeypatch.delitem(sys.modules, old, raising=False)  # imported afresh, as a user's first import is
    with pytest.warns(DeprecationWarning) as caught:
        module = importlib.import_module(old)
    [warning] = [w for w in caught if w.category is DeprecationWarning]
    assert f"{old} is deprecated" in str(warning.message)
    assert new in str(warning.message) and "0.2.0" in str(warning.message)
    assert {name: getattr(module, name) for name in module.__all__} == {
        name: getattr(importlib.import_module(new), name) for name in module.__all__}


@pytest.mark.parametrize(("old", "new"), sorted(REMOVED.items()))
def test_removed_import_paths_are_gone(old, new):
    assert importlib.util.find_spec(old) is None
    assert importlib.util.find_spec(new) is not None


def test_the_engine_never_imports_the_testing_kit():
    kit = ("agentcompass.testing", "agentcompass.testing.")
    assert sorted(f"{name} imports {target}" for name, targets in graph().items() if not name.startswith(kit)
                  for target in targets if target.startswith(kit)) == []


@pytest.mark.parametrize(("source", "expected"), [
    ("from agentcompass.lifecycle import TaskAttempt\n", ["agentcompass.runtime.sample imports agentcompass.lifecycle"]),
    ("def f():\n    from agentcompass.runner import Runner\n",
     ["agentcompass.runtime.sample imports agentcompass.runner"]),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from agentcompass.resolve import resolve\n",
     ["agentcompass.runtime.sample imports agentcompass.resolve"]),
    ("from agentcompass.errors import UsageError\nfrom agentcompass.runtime.types import TaskSpec\n", []),
])
def test_the_checker_sees_every_kind_of_import(tmp_path, monkeypatch, source, expected):
    package = tmp_path / "agentcompass"
    (package / "runtime").mkdir(parents=True)
    for name in ("lifecycle", "runner", "resolve", "errors"):
        (package / f"{name}.py").write_text("")
    (package / "runtime" / "types.py").write_text("")
    (package / "runtime" / "sample.py").write_text('"""A sample."""\n' + source + "X = 1\n")
    monkeypatch.setattr(f"{__name__}.PACKAGE", package)
    assert layer_violations() == expected


def test_the_cycle_finder_finds_a_loop_through_three_modules():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(edges) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
