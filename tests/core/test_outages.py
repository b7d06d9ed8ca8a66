"""A model provider that goes down or rejects the key (issue 21, item 1): tasks in flight stay unfinished
(recorded as attempts, resumable), never final errors; an outage is an infrastructure failure ``--retries``
covers; an outage then ``--resume`` gives the figures of a run that never saw the outage."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

import pytest
from agentcompass.testing.scripted_models import LoopbackOpenAI

from tests.harnesses.support import solver
from tests.helpers.cli_processes import run_cli_subprocess

RUN = ["run", "example_coding", "react", "openai-compatible/solver", "--max-retries", "0"]


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The figures of a run that never saw an outage (made once for the module)."""
    tmp_path = tmp_path_factory.mktemp("reference")
    with LoopbackOpenAI(solver, api_key=None) as server:
        done = run_cli_subprocess(*RUN, "--model-base-url", server.base_url, "-o", str(tmp_path / "ref"),
                                  testing=False)
    assert done.returncode == 0, done.stderr
    return summary(tmp_path / "ref")


def same_figures(a: dict, b: dict) -> None:
    assert a["status_counts"] == b["status_counts"] == {"COMPLETED": 6}
    for name, m in a["metrics"]["overall"].items():
        other = b["metrics"]["overall"][name]
        assert (m["mean"], m["ci95"], m["n"]) == (other["mean"], other["ci95"], other["n"])


def test_an_endpoint_that_is_down_leaves_every_task_unfinished_and_resume_gives_the_true_figures(tmp_path, reference):
    out = tmp_path / "run"
    down = f"http://127.0.0.1:{free_port()}/v1"
    first = run_cli_subprocess(*RUN, "--model-base-url", down, "-c", "2", "-o", str(out), testing=False)
    assert first.returncode == 1, first.stderr
    assert read_jsonl(out / "results.jsonl") == []  # nothing final: no RUN_ERROR counted against the model
    attempts = read_jsonl(out / "attempts.jsonl")
    assert attempts and all("connection refused" in a["error"] for a in attempts)
    assert summary(out)["stopped_reason"] and "RUN_ERROR" not in summary(out)["status_counts"]
    assert "--resume" in first.stderr
    with LoopbackOpenAI(solver, api_key=None) as server:
        resumed = run_cli_subprocess("run", "--resume", str(out), "--model-base-url", server.base_url,
                                     testing=False)
    assert resumed.returncode == 0, resumed.stderr
    same_figures(summary(out), reference)
    finals = read_jsonl(out / "results.jsonl")
    assert sorted(r["task_id"] for r in finals) == sorted({r["task_id"] for r in finals})  # once each
    assert all(r["attempt"] > 1 for r in finals if r["task_id"] in {a["task_id"] for a in attempts})


def test_a_rejected_key_fails_no_task_in_flight(tmp_path):
    out = tmp_path / "run"
    with LoopbackOpenAI(solver, api_key="the-right-key-123") as server:
        first = run_cli_subprocess(*RUN, "--model-base-url", server.base_url, "--model-api-key-env", "K21",
                                   "-c", "3", "-o", str(out), env={"K21": "a-wrong-key-456"}, testing=False)
        assert first.returncode == 1, first.stderr
        assert read_jsonl(out / "results.jsonl") == []
        assert summary(out)["stopped_reason"] and "invalid api key" in first.stderr.lower() + json.dumps(
            summary(out)).lower()
        resumed = run_cli_subprocess("run", "--resume", str(out), env={"K21": "the-right-key-123"},
                                     testing=False)
    assert resumed.returncode == 0, resumed.stderr
    assert summary(out)["status_counts"] == {"COMPLETED": 6}


def test_an_outage_is_an_infrastructure_failure_that_retries_cover(tmp_path, reference):
    lock = threading.Lock()
    seen = {"n": 0}

    def flaky(request):
        with lock:
            seen["n"] += 1
            if seen["n"] <= 4:  # down for the first four requests
                return 503, {"error": {"message": "service unavailable"}}
        return solver(request)

    out = tmp_path / "run"
    with LoopbackOpenAI(flaky, api_key=None) as server:
        done = run_cli_subprocess(*RUN, "--model-base-url", server.base_url, "-c", "2", "--retries", "3",
                                  "-o", str(out), testing=False)
    assert done.returncode == 0, done.stderr
    same_figures(summary(out), reference)
    assert len(read_jsonl(out / "attempts.jsonl")) >= 1
