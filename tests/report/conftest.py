"""Real run directories (made by the real CLI) and a real headless Chromium for the report's tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.report_runs import plant_hostile
from tests.report.browser import chromium, missing

REQUIRE_BROWSER = "AGENTCOMPASS_REQUIRE_BROWSER"
ARTIFACTS = "AGENTCOMPASS_TEST_ARTIFACTS"


@pytest.fixture(scope="session")
def runs(interactive_runs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The README's main job, an errored run (tasks of 3+ model calls time out; retried once), 3 trials, and a
    hostile copy of the main job."""
    out = dict(interactive_runs)
    out["hostile"] = plant_hostile(out["main"], tmp_path_factory.mktemp("runs") / "hostile")
    return out


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where screenshots go: ``$AGENTCOMPASS_TEST_ARTIFACTS`` (kept by CI) or a temporary directory."""
    given = os.environ.get(ARTIFACTS)
    path = Path(given) / "report" if given else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """One headless Chromium for the session; skipped (with the reason) when none can start here, unless
    ``$AGENTCOMPASS_REQUIRE_BROWSER`` is set (CI), where that is a failure."""
    reason = missing()
    if reason:
        if os.environ.get(REQUIRE_BROWSER):
            pytest.fail(f"{REQUIRE_BROWSER} is set but no browser can start: {reason}")
        pytest.skip(f"no headless browser: {reason}")
    with chromium() as driver:
        yield driver

