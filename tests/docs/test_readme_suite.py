"""The README's example suite: its baseline is a cell that scores above 0 with ``mock`` (before, the baseline was
``example_coding-react-e0``, which scores 0, so every paired difference was against nothing)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentcompass.suites.suite_file import load_suite_file

from tests.docs.readme_commands import suite_toml
from tests.helpers.cli_processes import run_cli_subprocess


def _toml_value(value: Any) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, str):
        return json.dumps(value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def test_the_readme_suites_baseline_scores_above_0_with_mock(tmp_path: Path) -> None:
    suite = tmp_path / "suite.toml"
    suite.write_text(suite_toml())
    plan = load_suite_file(suite)
    assert plan.baseline is not None
    cell = next(c for c in plan.cells if c.name == plan.baseline)
    config = tmp_path / "cell.toml"
    config.write_text("".join(f"{k} = {_toml_value(v)}\n" for k, v in cell.options.items()))
    done = run_cli_subprocess("run", "--config", str(config), "-o", str(tmp_path / "run"), "--json",
                              testing=False, timeout=300)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["metrics"]["overall"]
    primary = next(iter(summary["metrics"]["overall"].values()))
    assert primary["mean"] > 0, (plan.baseline, primary)
