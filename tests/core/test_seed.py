"""The spec's code runs as written: its benchmark (run_task and evaluate verbatim) through the real runtime."""

from __future__ import annotations

import json

from agentcompass.cli.main import cli
from agentcompass.runner import Runner
from agentcompass.runtime import RunRequest, TaskStatus
from click.testing import CliRunner


async def test_seed_benchmark_runs_through_the_runtime(host, tmp_path):
    req = RunRequest(benchmark="seed_interactive", harness="none", model="mock",
                     benchmark_args={"runner_timeout": "3"})
    outcome = await Runner(host, req, run_dir=tmp_path / "run").run()
    results = {json.loads(line)["task_id"]: json.loads(line)
               for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()}
    assert set(results) == {"echo-yes", "echo-no", "crash", "hang"}
    # The mock agent echoes the question, so "yes" is found and "banana" is not.
    assert results["echo-yes"]["status"] == "COMPLETED" and results["echo-yes"]["metrics"] == {"score": 1.0}
    assert results["echo-no"]["status"] == "COMPLETED" and results["echo-no"]["metrics"] == {"score": 0.0}
    # The runner's failure is an execution error with its stderr as the message, never a score.
    assert results["crash"]["status"] == "RUN_ERROR"
    assert "crashed on purpose" in results["crash"]["error"]
    assert results["crash"]["metrics"] == {}
    assert results["hang"]["status"] == "RUN_ERROR"  # the exec timeout of 3 s fired
    assert results["hang"]["timings"]["run"] < 30
    summary = outcome.summary
    assert summary.status_counts == {"COMPLETED": 2, "RUN_ERROR": 2}
    assert summary.metrics.overall["score"].mean == 0.25  # errors count as 0
    assert summary.metrics.overall["score"].mean_completed == 0.5
    assert outcome.exit_code == 1
    # The upstream runner's model call went through the gateway and is in the trajectory.
    calls = [json.loads(line) for line in (tmp_path / "run" / "trajectories.jsonl").read_text().splitlines()]
    assert {c["task_id"] for c in calls} == {"echo-yes", "echo-no"}
    assert all(c["via"] == "gateway" and c["role"] == "agent" for c in calls)


def test_seed_benchmark_through_the_cli(host, tmp_path):
    out = tmp_path / "run"
    result = CliRunner().invoke(
        cli, ["run", "seed_interactive", "none", "mock", "-t", "echo-yes", "-o", str(out), "--json"],
        obj={"plugin_host": host},
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["status_counts"] == {TaskStatus.COMPLETED.value: 1}
    assert summary["run_dir"] == str(out)
    assert summary["metrics"]["overall"]["score"]["mean"] == 1.0
