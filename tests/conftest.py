from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agentcompass.plugins import PluginHost, load_plugins
from hypothesis import settings

from tests.helpers import testing_plugin
from tests.helpers.examples import FULL, QUICK
from tests.helpers.report_runs import make_interactive_runs

#: The hypothesis profiles (tests.helpers.examples) have no deadline: speed is measured by the bench/ scripts,
#: never by tests (on a loaded machine one example's time says nothing about the code, and a deadline only makes
#: property tests flaky). The quick one is loaded until pytest_configure picks.
settings.load_profile(QUICK)


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


@pytest.fixture(scope="session")
def interactive_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``main``, ``errored`` and ``trials``: real runs of example_interactive made through the real CLI once per
    session for the report and export tests (:func:`tests.helpers.report_runs.make_interactive_runs`). Shared:
    read them, or copy one before changing it."""
    return make_interactive_runs(tmp_path_factory.mktemp("interactive-runs"))


#: The slow groups: left out of a default ``uv run pytest`` (see :func:`pytest_collection_modifyitems`).
SLOW_MARKERS = ("docker", "ray", "browser", "slow", "agent_cli")
ALL_TESTS_ENV = "AGENTCOMPASS_ALL_TESTS"
#: These keep forcing their group to run (and fail, not skip, without an engine or a browser).
REQUIRE_ENV = {"docker": "AGENTCOMPASS_REQUIRE_DOCKER", "browser": "AGENTCOMPASS_REQUIRE_BROWSER"}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--all-tests", action="store_true", default=False,
                     help=f"Also run the slow groups ({', '.join(SLOW_MARKERS)}); also ${ALL_TESTS_ENV}=1. "
                          "CI (.ci/run) sets it.")


def pytest_configure(config: pytest.Config) -> None:
    """The hypothesis profile: every example in a full run (``--all-tests``, CI), fewer in a default run
    (:mod:`tests.helpers.examples`); ``--hypothesis-profile NAME`` still picks one by name."""
    if config.getoption("hypothesis_profile", None):
        return
    full = config.getoption("--all-tests") or os.environ.get(ALL_TESTS_ENV)
    settings.load_profile(FULL if full else QUICK)


def _slow_groups_wanted(config: pytest.Config) -> set[str]:
    if config.getoption("--all-tests") or os.environ.get(ALL_TESTS_ENV) or config.getoption("-m"):
        return set(SLOW_MARKERS)  # everything, or the user's own marker expression decides
    return {group for group, env in REQUIRE_ENV.items() if os.environ.get(env)}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A default run leaves the slow groups out (docker, ray, browser, slow, agent_cli), except in test files
    or tests named on the command line; ``--all-tests`` or ``$AGENTCOMPASS_ALL_TESTS=1`` runs them all, and
    ``$AGENTCOMPASS_REQUIRE_DOCKER`` / ``$AGENTCOMPASS_REQUIRE_BROWSER`` always run their group."""
    wanted = _slow_groups_wanted(config)
    named = {Path(a.split("::")[0]).resolve() for a in config.args if Path(a.split("::")[0]).is_file()}
    kept, left_out = [], []
    for item in items:
        groups = {m.name for m in item.iter_markers()} & set(SLOW_MARKERS)
        if groups - wanted and Path(str(item.path)).resolve() not in named:
            left_out.append(item)
        else:
            kept.append(item)
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = kept
        config.stash[_LEFT_OUT] = len(left_out)


_LEFT_OUT = pytest.StashKey[int]()


def pytest_report_header(config: pytest.Config) -> str:
    return (f"slow groups ({', '.join(SLOW_MARKERS)}) are left out unless --all-tests or {ALL_TESTS_ENV}=1"
            if not _slow_groups_wanted(config) >= set(SLOW_MARKERS) else "")


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    left_out = config.stash.get(_LEFT_OUT, 0)
    if left_out:
        terminalreporter.write_line(f"{left_out} slow tests ({', '.join(SLOW_MARKERS)}) were left out; "
                                    f"run them with: uv run pytest --all-tests")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):  # type: ignore[no-untyped-def]
    """With AGENTCOMPASS_REQUIRE_DOCKER=1 (CI), a docker test that skips is a failure, not a silent pass."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and item.get_closest_marker("docker") and os.environ.get("AGENTCOMPASS_REQUIRE_DOCKER"):
        report.outcome = "failed"
        report.longrepr = f"docker test skipped although AGENTCOMPASS_REQUIRE_DOCKER is set: {report.longrepr}"
