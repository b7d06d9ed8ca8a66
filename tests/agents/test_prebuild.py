"""Bundles built ahead of the runs (``python -m agentcompass_agents.prebuild``), once per machine: a build another
process holds is waited for, not repeated."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from agentcompass_agents.catalog import AGENTS
from agentcompass_agents.install import Installer, machine_lock
from agentcompass_agents.prebuild import main, prebuild

from tests.helpers.docker_engine import require_engine

HOLDER = """
import sys, time
from pathlib import Path
from agentcompass_agents.install import machine_lock
with machine_lock(Path(sys.argv[1])):
    Path(sys.argv[2]).write_text("held")
    time.sleep(1.5)
    Path(sys.argv[2]).write_text("released")
"""


def test_a_lock_another_process_holds_is_waited_for(tmp_path: Path) -> None:
    lock, state = tmp_path / "locks" / "x.lock", tmp_path / "state"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock), str(state)])
    try:
        deadline = time.monotonic() + 30
        while not state.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert state.read_text() == "held"
        said: list[str] = []
        with machine_lock(lock, lambda: said.append("waiting")):
            seen = state.read_text()
        assert said == ["waiting"] and seen == "released"  # in only once the other process let go
        with machine_lock(lock, lambda: said.append("again")):  # free: no wait
            pass
        assert said == ["waiting"]
    finally:
        holder.wait(timeout=30)


def test_an_unknown_agent_is_named_with_the_agents_there_are(capsys: pytest.CaptureFixture[str]) -> None:
    assert prebuild(["no-such-agent"]) == [
        f"unknown agent 'no-such-agent' (agents: {', '.join(sorted(AGENTS))})"]
    assert main(["no-such-agent"]) == 1
    assert "unknown agent 'no-such-agent'" in capsys.readouterr().err


@pytest.mark.docker
@pytest.mark.agent_cli
@pytest.mark.timeout(1800)
def test_a_prebuilt_bundle_is_what_a_run_then_finds() -> None:
    require_engine()
    assert main(["aider"]) == 0  # built now, or found
    installer = Installer(progress=None)
    tag = installer.bundle_tag(AGENTS["aider"], AGENTS["aider"].version)
    assert subprocess.run(["docker", "image", "inspect", tag], capture_output=True).returncode == 0
    started = time.monotonic()
    assert installer.ensure_bundle(AGENTS["aider"], AGENTS["aider"].version) == tag
    assert time.monotonic() - started < 60  # found, not built again
