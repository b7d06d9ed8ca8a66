"""Real run directories (made by the real CLI) and a real headless Chromium for the report's tests."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli_subprocess
from tests.report.browser import chromium, missing

REQUIRE_BROWSER = "AGENTCOMPASS_REQUIRE_BROWSER"
ARTIFACTS = "AGENTCOMPASS_TEST_ARTIFACTS"
#: A model reply that would run script if the page put text in as HTML.
XSS = ('</script><script>window.__xss = 1</script><img src=x onerror="window.__xss = 2">'
       '<svg onload="window.__xss = 3"></svg>\u2028<!-- & -->')
PLANTED_KEY = "sk-planted-7f3a9c2e41b8d6059e1f"


def make_run(directory: Path, *args: str) -> Path:
    """``agentcompass run example_interactive none mock ARGS -o DIRECTORY`` through the real CLI."""
    done = run_cli_subprocess("run", "example_interactive", "none", "mock", "-o", str(directory), *args,
                              testing=False)
    assert (directory / "summary.json").exists(), done.stderr
    return directory


@pytest.fixture(scope="session")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The README's main job, an errored run (tasks of 3+ model calls time out; retried once) and 3 trials."""
    base = tmp_path_factory.mktemp("runs")
    out = {
        "main": make_run(base / "main", "--seed", "7"),
        "errored": make_run(base / "errored", "--seed", "7", "-m", "latency=0.2", "--timeout", "0.5",
                            "--retries", "1"),
        "trials": make_run(base / "trials", "--seed", "8", "--trials", "3", "-m", "error_rate=0.3"),
    }
    out["hostile"] = plant_hostile(out["main"], base / "hostile")
    return out


def plant_hostile(source: Path, target: Path) -> Path:
    """A copy of ``source`` whose first task's reply and final answer hold :data:`XSS`, and whose trajectory
    holds :data:`PLANTED_KEY` (as a credential in the environment would be) in a user message."""
    shutil.copytree(source, target)
    lines = (target / "results.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["final_answer"] = XSS
    lines[0] = json.dumps(first)
    (target / "results.jsonl").write_text("\n".join(lines) + "\n")
    (target / "scores.json").unlink()
    out = []
    for line in (target / "trajectories.jsonl").read_text().splitlines():
        call = json.loads(line)
        if call["task_id"] == first["task_id"]:
            call["response"] = {"role": "assistant", "content": XSS}
            call["messages"][-1] = {"role": "user", "content": f"my key is {PLANTED_KEY}, the task is task_4"}
        out.append(json.dumps(call))
    (target / "trajectories.jsonl").write_text("\n".join(out) + "\n")
    return target


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

