"""The checks are defined once, in ``noxfile.py``: CI's ``.ci/run`` calls its sessions (the documentation site's
``docs`` among them, and by default), and the ``tests`` session hands the arguments after ``--`` to pytest."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def ci_nox_command() -> list[str]:
    """The words of the line of ``.ci/run`` that calls nox."""
    lines = [line for line in (ROOT / ".ci" / "run").read_text().splitlines()
             if not line.lstrip().startswith("#") and " nox " in f" {line} "]
    assert len(lines) == 1, f".ci/run should call nox once, found {lines}"
    return shlex.split(lines[0])


def test_ci_runs_lint_typecheck_the_docs_and_every_test_through_nox():
    words = ci_nox_command()
    assert words[:2] == ["AGENTCOMPASS_REQUIRE_DOCKER=1", "AGENTCOMPASS_REQUIRE_BROWSER=1"]
    sessions = words[words.index("-s") + 1:words.index("--")]
    assert sessions == ["lint", "typecheck", "docs", "tests"]
    assert "--all-tests" in words[words.index("--"):]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "uv run pytest" not in ci and "uv run ruff" not in ci, "CI runs the checks through nox only"


def test_the_docs_session_builds_the_site_strictly_and_runs_by_default():
    import noxfile

    assert "docs" in noxfile.nox.options.sessions
    assert "--strict" in (ROOT / "noxfile.py").read_text().split("def docs", 1)[1].split("@nox.session", 1)[0]


def test_the_tests_session_passes_its_arguments_to_pytest():
    chosen = "tests/core/test_typing.py::test_the_workspace_holds_the_core_and_the_plugins"
    done = subprocess.run([sys.executable, "-m", "nox", "-s", "tests", "--", "-n", "0", "-p", "no:randomly",
                           "-q", chosen], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout, done.stdout
