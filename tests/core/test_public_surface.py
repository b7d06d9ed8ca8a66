"""The bundled plugins use only the documented public surface of the core, as a third-party plugin must."""

from __future__ import annotations

import ast
from pathlib import Path

import agentcompass.runtime as runtime

from tests.helpers.cli_processes import ROOT

#: Modules a plugin may import from agentcompass, and for the top-level package the names it may take.
PUBLIC_MODULES = {"agentcompass.errors", "agentcompass.hookspecs", "agentcompass.testing", "agentcompass.run_directory",
                  "agentcompass.protocols"}
PUBLIC_TOP_LEVEL = {"hookimpl", "__version__"}


def is_public_module(module: str) -> bool:
    return module in PUBLIC_MODULES or module == "agentcompass.runtime" or module.startswith(
        ("agentcompass.runtime.", "agentcompass.testing.", "agentcompass.protocols."))


def core_imports(path: Path) -> list[tuple[int, str, str | None]]:
    """``(line, module, name)`` for every import of an agentcompass module in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and (
                node.module == "agentcompass" or node.module.startswith("agentcompass.")):
            found += [(node.lineno, node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name, None) for a in node.names if a.name.split(".")[0] == "agentcompass"]
    return found


def violations() -> list[str]:
    bad = []
    for path in sorted((ROOT / "plugins").glob("*/src/**/*.py")):
        for line, module, name in core_imports(path):
            where = f"{path.relative_to(ROOT)}:{line}"
            if module == "agentcompass":
                if name not in PUBLIC_TOP_LEVEL:
                    bad.append(f"{where}: agentcompass.{name} is not public")
            elif not is_public_module(module):
                bad.append(f"{where}: {module} is an internal module")
            elif name is not None and name.startswith("_"):
                bad.append(f"{where}: {module}.{name} is private")
    return bad


def test_bundled_plugins_import_only_the_public_api():
    assert violations() == []


def test_the_checker_catches_internal_and_private_imports(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("from agentcompass.lifecycle import TaskAttempt\nfrom agentcompass.runtime import _x\n"
                      "import agentcompass.plugins\nfrom agentcompass.runtime.types import RunResult\n")
    found = core_imports(sample)
    assert [not is_public_module(m) or (n or "").startswith("_") for _, m, n in found] == [True, True, True, False]


def test_every_public_runtime_name_is_importable():
    for name in runtime.__all__:
        assert getattr(runtime, name) is not None
