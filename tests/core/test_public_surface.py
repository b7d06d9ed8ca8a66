"""The public boundary: the bundled plugins import only the modules of ``agentcompass.runtime.PUBLIC_MODULES``, as a
third-party plugin must — never an engine module, and never the test kit from their own code. Every import counts
(at the top, inside functions, under ``TYPE_CHECKING``); a violation names the file, the line and the module."""

from __future__ import annotations

import ast
import importlib
import re
import warnings
from pathlib import Path

import agentcompass
import agentcompass.runtime as runtime
import pytest
from agentcompass.runtime import PUBLIC_MODULES, TESTING_MODULES

from tests.helpers.cli_processes import ROOT

PACKAGE = Path(agentcompass.__file__).resolve().parent

#: Of the top-level package ``agentcompass``, the names a plugin may take.
PUBLIC_TOP_LEVEL = {"hookimpl", "__version__"}

#: ``(file relative to the repository, module) -> why`` for an import of an engine module a bundled plugin cannot
#: do without. Empty: every facility a plugin needs has a public seam. An entry must say why it is needed.
EXCEPTIONS: dict[tuple[str, str], str] = {}


def core_modules() -> set[str]:
    names = set()
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        names.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def is_public_module(module: str) -> bool:
    return module in PUBLIC_MODULES


def core_imports(path: Path) -> list[tuple[int, str, str | None]]:
    """``(line, module, name)`` for every import of an agentcompass module in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and (
                node.module == "agentcompass" or node.module.startswith("agentcompass.")):
            found += [(node.lineno, node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name, None) for a in node.names if a.name.split(".")[0] == "agentcompass"]
    return sorted(found, key=lambda item: item[0])


def problem(module: str, name: str | None, modules: set[str]) -> str | None:
    """What is wrong with importing ``name`` from ``module`` (``import module`` when ``name`` is None), if anything."""
    if name is not None and f"{module}.{name}" in modules:  # `from agentcompass.runtime import chat_client`
        module, name = f"{module}.{name}", None
    if module in TESTING_MODULES:
        return f"imports {module}, the test kit: test support stays out of a plugin's own code"
    if not is_public_module(module):
        return f"imports {module}, an engine module (not in agentcompass.runtime.PUBLIC_MODULES)"
    if module == "agentcompass" and name is not None and name not in PUBLIC_TOP_LEVEL:
        return f"imports agentcompass.{name}, which is not public (of the top-level package: hookimpl, __version__)"
    if name is not None and name.startswith("_"):
        return f"imports {module}.{name}, which is private"
    return None


def violations(root: Path = ROOT) -> list[str]:
    modules = core_modules()
    bad = []
    for path in sorted((root / "plugins").glob("*/src/**/*.py")):
        relative = path.relative_to(root).as_posix()
        for line, module, name in core_imports(path):
            found = problem(module, name, modules)
            if found and (relative, module) not in EXCEPTIONS:
                bad.append(f"{relative}:{line}: {found}")
    return list(dict.fromkeys(bad))  # one line per (place, problem), however many names it takes


def test_bundled_plugins_import_only_the_public_api():
    assert violations() == []


def test_the_checker_catches_internal_and_private_imports(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("from agentcompass.lifecycle import TaskAttempt\nfrom agentcompass.runtime import _x\n"
                      "import agentcompass.plugins\nfrom agentcompass.runtime.types import RunResult\n")
    found = core_imports(sample)
    assert [not is_public_module(m) or (n or "").startswith("_") for _, m, n in found] == [True, True, True, False]


def test_the_checker_names_the_file_the_line_and_the_module(tmp_path):
    source = tmp_path / "plugins" / "agentcompass-x" / "src" / "agentcompass_x" / "plugin.py"
    source.parent.mkdir(parents=True)
    source.write_text(
        "from agentcompass import hookimpl\n"
        "from agentcompass.protocols import CODECS\n"
        "def f():\n"
        "    from agentcompass.testing import MockModel\n"
        "from agentcompass import plugins\n"
        "from agentcompass.runtime import chat_client, RunResult\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    import agentcompass.results.reader\n"
        "from agentcompass.run_directory import RunReader\n")
    where = "plugins/agentcompass-x/src/agentcompass_x/plugin.py"
    assert violations(tmp_path) == [
        f"{where}:2: imports agentcompass.protocols, an engine module (not in agentcompass.runtime.PUBLIC_MODULES)",
        f"{where}:4: imports agentcompass.testing, the test kit: test support stays out of a plugin's own code",
        f"{where}:5: imports agentcompass.plugins, an engine module (not in agentcompass.runtime.PUBLIC_MODULES)",
        f"{where}:9: imports agentcompass.results.reader, an engine module (not in agentcompass.runtime.PUBLIC_MODULES)",
        f"{where}:10: imports agentcompass.run_directory, an engine module (not in agentcompass.runtime.PUBLIC_MODULES)",
    ]


def test_every_public_runtime_name_is_importable():
    for name in runtime.__all__:
        assert getattr(runtime, name) is not None


@pytest.mark.parametrize("module", sorted(PUBLIC_MODULES | TESTING_MODULES))
def test_every_public_module_exists_and_imports_without_a_deprecation_warning(module):
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        importlib.import_module(module)


def test_every_module_of_runtime_and_the_kit_is_listed_or_deprecated():
    listed = PUBLIC_MODULES | TESTING_MODULES | {"agentcompass.runtime.comparison"}
    under = sorted(m for m in core_modules() if m.startswith(("agentcompass.runtime.", "agentcompass.testing.")))
    assert [m for m in under if m not in listed] == []


def test_the_runtime_docstring_and_the_readme_name_every_public_module():
    documented = set(re.findall(r":mod:`(agentcompass[a-z_.]*)`", runtime.__doc__ or ""))
    assert sorted(PUBLIC_MODULES - {"agentcompass", "agentcompass.runtime"} - documented) == []
    text = (ROOT / "README.md").read_text()
    section = text[text.index("### The public API"):].split("\n## ", 1)[0]
    in_readme = set(re.findall(r"`(agentcompass(?:\.[a-z_]+)*)`", section))
    assert sorted(PUBLIC_MODULES - in_readme) == [], "public modules the README's public API section leaves out"
    deprecated = {"agentcompass.run_directory", "agentcompass.runtime.comparison"}  # named as such
    assert sorted(in_readme - PUBLIC_MODULES - {"agentcompass.testing"} - deprecated) == [], "not public"
