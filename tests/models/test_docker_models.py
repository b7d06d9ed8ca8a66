"""Real models through the gateway under ``--env docker``: containers without network reach the loopback model
server only through the run's gateway, and never see the provider key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.docker_engine import require_engine
from tests.models.fake_server import FakeModelServer
from tests.models.models_support import (
    API_KEY,
    EXPECTED_SCORES,
    MODEL,
    ProbeBenchmark,
    all_text,
    cli,
    probe,
    read_jsonl,
    run,
)

pytestmark = pytest.mark.docker


@pytest.fixture
def engine() -> None:
    """Skips (with the reason) unless a Docker engine with the test image answers: the check the docker
    tests share."""
    require_engine()


def test_example_interactive_under_docker(engine: None, server: FakeModelServer, tmp_path: Path) -> None:
    out = tmp_path / "run"
    tasks = ["create_basic", "policy_delete_request", "update_two_tasks"]
    proc = cli(["run", "example_interactive", "none", f"openai/{MODEL}", "--env", "docker", "-o", str(out), "--json",
                *(a for t in tasks for a in ("-t", t))],
               env={"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": API_KEY}, timeout=600)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["status_counts"] == {"COMPLETED": len(tasks)}
    scores = {r["task_id"]: r["metrics"]["score"] for r in read_jsonl(out / "results.jsonl")}
    assert scores == {t: EXPECTED_SCORES[t] for t in tasks}
    calls = read_jsonl(out / "trajectories.jsonl")
    assert calls and all(c["via"] == "gateway" for c in calls)
    assert server.requests and all(r["key"] == API_KEY for r in server.requests)
    assert API_KEY not in all_text(out) + proc.stdout + proc.stderr


def test_container_sees_only_the_gateway_token(engine: None, server: FakeModelServer, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_MODEL_KEY", API_KEY)
    ProbeBenchmark.environment_dumps.clear()
    outcome = run(probe(server, environment="docker",
                        benchmark_args={"n_tasks": "2", "calls": "1", "via": "client", "dump_env": "1"}),
                  tmp_path / "run")
    assert outcome.exit_code == 0
    assert len(ProbeBenchmark.environment_dumps) == 2
    for dump in ProbeBenchmark.environment_dumps:
        assert API_KEY not in dump
        assert "OPENAI_API_KEY=acgw-" in dump
