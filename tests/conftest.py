from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from agentcompass.plugins import PluginHost, load_plugins

from tests.support import testing_plugin

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def host() -> Iterator[PluginHost]:
    """The installed plugins plus the testing plugin, registered for this test only."""
    plugin_host = load_plugins()
    record = plugin_host.add_plugin(testing_plugin, "testing")
    assert record.error is None, record.error
    try:
        yield plugin_host
    finally:
        plugin_host.remove_plugin("testing")


def run_cli_subprocess(*args: str, timeout: float = 120, env: dict[str, str] | None = None,
                       testing: bool = True) -> subprocess.CompletedProcess[str]:
    """The real CLI in a child process (with the testing plugin when ``testing``)."""
    argv = [sys.executable, "-m", "tests.support.cli", *args] if testing else [
        sys.executable, "-m", "agentcompass.cli.main", *args]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, preexec_fn=_default_signals)


def _default_signals() -> None:
    # A test suite started as a background job has SIGINT ignored, and a child inherits that: reset it, so that
    # interrupting the child behaves as Ctrl-C in a terminal does.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def start_cli(*args: str, env: dict[str, str] | None = None, testing: bool = True) -> subprocess.Popen[str]:
    """The real CLI in a child process that keeps running (with the testing plugin when ``testing``)."""
    argv = [sys.executable, "-m", "tests.support.cli" if testing else "agentcompass.cli.main", *args]
    return subprocess.Popen(argv, cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, **(env or {})}, preexec_fn=_default_signals)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):  # type: ignore[no-untyped-def]
    """With AGENTCOMPASS_REQUIRE_DOCKER=1 (CI), a docker test that skips is a failure, not a silent pass."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and item.get_closest_marker("docker") and os.environ.get("AGENTCOMPASS_REQUIRE_DOCKER"):
        report.outcome = "failed"
        report.longrepr = f"docker test skipped although AGENTCOMPASS_REQUIRE_DOCKER is set: {report.longrepr}"
