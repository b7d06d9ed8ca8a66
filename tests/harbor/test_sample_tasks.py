"""The sample Harbor tasks the READMEs' commands use (``docs/examples/harbor-tasks``): the oracle scores 1 on
both and ``nop`` 0 (their verifiers check), through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agentcompass.exit_codes import ExitCode

from tests.helpers.cli_processes import ROOT, run_cli_subprocess
from tests.helpers.docker_engine import require_engine

SAMPLES = ROOT / "docs" / "examples" / "harbor-tasks"


def rewards(run_dir: Path) -> dict[str, float | None]:
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    return {r["task_id"]: r["metrics"].get("reward") for r in map(json.loads, lines)}


def test_two_sample_tasks_ship_in_harbor_format() -> None:
    tasks = sorted(p.parent.name for p in SAMPLES.glob("*/task.toml"))
    assert tasks == ["count-words", "hello-file"]
    for name in tasks:
        for part in ("instruction.md", "environment/Dockerfile", "tests/test.sh", "solution/solve.sh"):
            assert (SAMPLES / name / part).is_file(), (name, part)
        assert (SAMPLES / name / "environment" / "Dockerfile").read_text().startswith("FROM python:3.11-slim")


def test_on_local_the_task_that_needs_its_image_is_refused_and_the_other_scores_1(tmp_path: Path) -> None:
    refused = run_cli_subprocess("run", "harbor", "oracle", "mock", "-b", f"path={SAMPLES}", "-o",
                                 str(tmp_path / "all"), testing=False)
    assert refused.returncode == ExitCode.USAGE
    assert "count-words (environment/Dockerfile runs COPY)" in refused.stderr and "--env docker" in refused.stderr
    done = run_cli_subprocess("run", "harbor", "oracle", "mock", "-b", f"path={SAMPLES}", "-t", "hello-file",
                              "-o", str(tmp_path / "one"), testing=False)
    assert done.returncode == 0, done.stderr
    assert rewards(tmp_path / "one") == {"hello-file": 1.0}


@pytest.mark.docker
@pytest.mark.parametrize(("harness", "reward"), [("oracle", 1.0), ("nop", 0.0)])
def test_on_docker_the_oracle_scores_1_on_both_and_nop_0(tmp_path: Path, harness: str, reward: float) -> None:
    require_engine()
    done = run_cli_subprocess("run", "harbor", harness, "mock", "-b", f"path={SAMPLES}", "--env", "docker",
                              "-o", str(tmp_path / "run"), testing=False, timeout=600)
    assert done.returncode == 0, done.stderr
    assert rewards(tmp_path / "run") == {"count-words": reward, "hello-file": reward}
