"""A ``none`` run of taubench (the benchmark drives agent, user and judge itself) recorded against a scripted
loopback model, then replayed through the CLI with no provider reachable: identical results and calls of
every role, and ``results compare`` shows no difference."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tb_support as s

from tests.helpers.replay_runs import agentcompass, calls, dead_base_url, record, results, sources, summary

pytestmark = pytest.mark.timeout(900)

TASKS = ("mock/create_task_1", "airline/14", "retail/2", "retail/5")


def run_args(out: Path, base_url: str | None = None) -> list[str]:
    args = ["run", "taubench", "none", "openai-compatible/agent-model", "--user-model",
            "openai-compatible/user-model", "--judge-model", "openai-compatible/judge-model",
            "-b", "domain=mock,airline,retail", "-o", str(out), "--json"]
    for task in TASKS:
        args += ["-t", task]
    return args + (["--model-base-url", base_url] if base_url else [])


@pytest.mark.slow  # a long end-to-end run; CI runs it (--all-tests)
def test_a_taubench_run_replays_every_role_offline(tmp_path: Path) -> None:
    live = tmp_path / "live"
    proc, requests = record(s.role_responder(judge=s.approving_judge, among=TASKS), *run_args(live))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert {s.role_of(r) for r in requests} == {"agent", "user", "judge"}
    assert summary(live)["status_counts"] == {"COMPLETED": len(TASKS)}

    replayed = tmp_path / "replayed"
    proc = agentcompass(*run_args(replayed, dead_base_url()), "--replay", str(live))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert results(replayed) == results(live)
    assert calls(replayed) == calls(live)
    assert {c[2] for c in calls(replayed)} == {"agent", "user", "judge"}
    assert set(sources(replayed)) == {"replay"}
    compared = agentcompass("results", "compare", str(live), str(replayed), "--json")
    assert compared.returncode == 0, compared.stderr
    [comparison] = json.loads(compared.stdout)
    for row in comparison["metrics"]:
        assert row["difference"] == 0 and row["b_better"] == row["b_worse"] == 0, row
