"""Every README example command that uses the ``mock`` model runs, as a user types it, and finishes within a
minute (a subprocess timeout: a bound, not a benchmark). Before, the agents' example (``example_coding
mini-swe-agent mock --env docker``) ran until stopped. The commands are collected from the READMEs, so a new
example is checked without being listed here; the ones that cannot run from this repository alone are named,
with why, in :data:`NEEDS_MORE`."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from agentcompass.exit_codes import ExitCode
from agentcompass_agents.catalog import AGENTS

from tests.docs.readme_commands import ROOT, Command, commands

#: Seconds every example with ``mock`` must finish in.
LIMIT = 60.0
#: Examples that need what the repository does not ship (a download), by a piece of their text: why.
NEEDS_MORE = {
    "dataset=terminal-bench@": "Harbor's registry and Terminal-Bench 2's repository, fetched over the network",
    "run swebench ": "SWE-bench's dataset files and instance images, downloaded first",
    "--executor-arg address=": "a Ray cluster (and a registry) started as its README's set-up shows",
    "run harbor human ": "a person at a terminal (tests/harnesses/test_human.py drives one through tmux)",
}


def mock_examples() -> list[Command]:
    return [c for c in commands() if c.argv[:1] == ["run"] and len(c.argv) > 3 and c.argv[3] == "mock"]


def marks(command: Command) -> list[pytest.MarkDecorator]:
    argv = command.argv
    found = []
    if "docker" in argv:
        found.append(pytest.mark.docker)
    if argv[2] in AGENTS:
        found.append(pytest.mark.agent_cli)
    if "ray" in argv:
        found.append(pytest.mark.ray)
    if argv[1] == "taubench":
        found.append(pytest.mark.slow)  # 114 tasks: about 35 s on a loaded machine
    return found


def params() -> list:  # type: ignore[type-arg]
    out = []
    for command in mock_examples():
        why = next((reason for piece, reason in NEEDS_MORE.items() if piece in command.text), None)
        # One that cannot run here is skipped in every run, not marked for a group (docker, ...) whose tests CI
        # requires to run rather than skip.
        chosen = [pytest.mark.skip(reason=f"needs {why}")] if why else marks(command)
        out.append(pytest.param(command, id=f"{command.readme}:{command.line}", marks=chosen))
    return out


def test_the_examples_are_collected() -> None:
    texts = [c.text for c in mock_examples()]
    assert "uv run agentcompass run example_interactive none mock" in texts
    assert any("mini-swe-agent mock --env docker" in t for t in texts)
    assert any("harbor oracle mock -b path=docs/examples/harbor-tasks --env docker" in t for t in texts)
    for piece in NEEDS_MORE:  # every exemption still matches an example
        assert any(piece in t for t in texts), piece


def prebuilt_agent(argv: list[str]) -> None:
    """An installed agent's bundle built before the clock starts (a once-per-machine build, minutes long)."""
    if argv[2] in AGENTS and "docker" in argv:
        from agentcompass_agents.install import Installer

        Installer().ensure_bundle(AGENTS[argv[2]], AGENTS[argv[2]].version)


@pytest.mark.parametrize("command", params())
def test_a_readme_example_with_mock_finishes_within_a_minute(command: Command, tmp_path: Path) -> None:
    if "docker" in command.argv:
        from tests.helpers.docker_engine import require_engine

        require_engine()
    prebuilt_agent(command.argv)
    argv = [sys.executable, "-m", "agentcompass.cli.main", *command.argv, "-o", str(tmp_path / "run")]
    started = time.monotonic()
    try:
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=LIMIT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{command.readme}:{command.line}: `{command.text}` ran past {LIMIT:g} s")
    seconds = time.monotonic() - started
    assert done.returncode in (ExitCode.OK, ExitCode.TASK_ERRORS), (command.text, done.stderr[-2000:])
    assert (tmp_path / "run" / "summary.json").is_file(), command.text
    assert seconds < LIMIT
