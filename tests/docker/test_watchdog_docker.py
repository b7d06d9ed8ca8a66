"""The stall watchdog on real containers: output of a ``docker exec`` is a sign of life; a quiet one past the
stall timeout is stopped, its container removed, and the attempt retried."""

from __future__ import annotations

import json

import pytest

from tests.harbor.taskdirs import suite
from tests.helpers.cli_processes import read_jsonl, run_cli_subprocess
from tests.helpers.docker_engine import require_engine, run_containers

pytestmark = pytest.mark.docker

#: Quiet for 4 s but for a line every half second, then solves the task.
CHATTY = "for i in 1 2 3 4 5 6 7 8; do echo tick; sleep 0.5; done; echo hello > /app/hello.txt"


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory):
    require_engine()
    return suite(tmp_path_factory.mktemp("watchdog") / "tasks", docker=True)


def run(tasks, run_dir, command: str, *more: str):
    return run_cli_subprocess("run", "harbor", "command", "mock", "-b", f"path={tasks}", "-t", "hello", "--env",
                              "docker", "--harness-arg", f"command={command}", "--stall-timeout", "2.5",
                              "-o", str(run_dir), *more, timeout=600)


def test_a_command_printing_every_half_second_in_a_container_is_not_stopped(tasks, tmp_path):
    done = run(tasks, tmp_path / "run", CHATTY)
    assert done.returncode == 0, done.stderr
    assert read_jsonl(tmp_path / "run" / "attempts.jsonl") == []
    (result,) = read_jsonl(tmp_path / "run" / "results.jsonl")
    assert (result["status"], result["metrics"]["reward"]) == ("COMPLETED", 1.0)


def test_a_silent_command_in_a_container_is_stopped_its_container_removed_and_retried(tasks, tmp_path):
    run_dir = tmp_path / "run"
    done = run(tasks, run_dir, "sleep 600", "--retries", "1")
    assert done.returncode == 1, done.stderr  # both attempts hang: the second is final
    first, = read_jsonl(run_dir / "attempts.jsonl")
    (final,) = read_jsonl(run_dir / "results.jsonl")
    for record, attempt in ((first, 1), (final, 2)):
        assert (record["status"], record["attempt"], record["error_phase"]) == ("RUN_ERROR", attempt, "run")
        assert record["error"].startswith("stalled: no sign of life for 2.5s in the run phase")
        assert "the last: exec " in record["error"]
    run_id = json.loads((run_dir / "run.json").read_text())["request"]["run_id"]
    assert run_containers(run_id) == []  # every container of the run is gone
