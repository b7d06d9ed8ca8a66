"""Unfinished runs and the bill (issue 21, items 3, 4, 6 and the killed run of item 10): the planned total in
run.json; unfinished work counted as unfinished everywhere, never as an error; every model call in the usage;
the run directory named first. The console's progress lines are in test_console.py."""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path

from agentcompass.testing.scripted_models import LoopbackOpenAI

from tests.harnesses.support import assistant_turns, instruction, solver
from tests.helpers.cli_processes import run_cli_subprocess, start_cli


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def _interrupted(tmp_path: Path, sig: int) -> tuple[Path, str, str]:
    out = tmp_path / "run"
    proc = start_cli("run", "example_interactive", "none", "mock", "-m", "latency=0.3", "-c", "2", "--trials", "2",
                     "-o", str(out), testing=False)
    deadline = time.monotonic() + 120
    while len(read_jsonl(out / "results.jsonl")) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=120)
    return out, stdout, stderr


def test_an_interrupted_run_counts_unfinished_work_as_unfinished_everywhere(tmp_path):
    out, stdout, stderr = _interrupted(tmp_path, signal.SIGINT)
    info = json.loads((out / "run.json").read_text())
    assert info["planned"]["n_results"] == 22 and len(info["planned"]["tasks"]) == 11
    summary = json.loads((out / "summary.json").read_text())
    finished = len(read_jsonl(out / "results.jsonl"))
    assert summary["n_planned"] == 22 and summary["n_unfinished"] == 22 - finished == 22 - summary["n_finished"]
    assert "CANCELLED" not in summary["status_counts"]  # not a status: unfinished
    overall = summary["metrics"]["overall"]["score"]
    assert overall["n"] == finished and overall["n_unfinished"] == 22 - finished
    by_category = summary["metrics"]["by_category"]
    assert sum(g["n_unfinished"] for g in by_category.values()) == 22 - finished
    assert f"UNFINISHED: {22 - finished} of 22 planned" in stdout
    assert "errored trials, counted as failures: 0" in stdout and f"over {finished} finished of 22" in stdout
    assert stderr.splitlines()[0].startswith("run directory: ")  # named first


def test_results_show_of_a_killed_run_shows_its_results_so_far(tmp_path):
    out, _, _ = _interrupted(tmp_path, signal.SIGKILL)
    assert not (out / "summary.json").exists()
    shown = run_cli_subprocess("results", "show", str(out), "--tasks", testing=False)
    assert shown.returncode == 0, shown.stderr
    assert "still going or was killed" in shown.stderr and "UNFINISHED:" in shown.stdout
    assert "trial" in shown.stdout.splitlines()[-len(read_jsonl(out / "results.jsonl")) - 2]
    # the report and a live `view` know the planned total and list the unfinished work
    from agentcompass.runtime.run_reader import RunReader
    from agentcompass_report.payload import contract_of, live_summary, rows, summary_of, unfinished_rows

    files = RunReader.open(out)
    summary, live = summary_of(files)
    finished = len(read_jsonl(out / "results.jsonl"))
    assert live and summary["n_planned"] == 22 and summary["n_unfinished"] == 22 - finished
    assert summary == live_summary(files, contract_of(files.info))
    statuses = [r[3] for r in rows(files) + unfinished_rows(files)]
    assert len(statuses) == 22 and statuses.count("UNFINISHED") == 22 - finished
    run_id = json.loads((out / "run.json").read_text())["run_id"]  # what the killed run left
    assert run_cli_subprocess("env", "prune", "--env", "local", "--run-id", run_id, testing=False).returncode == 0


def test_every_model_call_is_in_the_usage_and_the_retried_share_is_apart(tmp_path):
    # The provider answers each task's first call, then fails the second one of the first two tasks (an outage
    # past --max-retries 0): those attempts are cut short after spending tokens, and retried (--retries 1).
    lock = threading.Lock()
    failed: set[str] = set()

    def flaky(request):
        task = instruction(request).splitlines()[0].lstrip("# ").strip()
        with lock:
            if assistant_turns(request) == 1 and task not in failed and len(failed) < 2:
                failed.add(task)
                return 503, {"error": {"message": "overloaded"}}
        return solver(request)

    out = tmp_path / "run"
    with LoopbackOpenAI(flaky, api_key=None) as server:
        done = run_cli_subprocess("run", "example_coding", "react", "openai-compatible/solver", "--model-base-url",
                                  server.base_url, "--max-retries", "0", "--retries", "1", "-c", "2", "-o", str(out),
                                  testing=False)
    assert done.returncode == 0, done.stderr
    calls = read_jsonl(out / "trajectories.jsonl")
    finals = {(r["task_id"], r["trial"], r["attempt"]) for r in read_jsonl(out / "results.jsonl")}
    retried = [c for c in calls if (c["task_id"], c["trial"], c["attempt"]) not in finals]
    assert len(retried) == 4 and sum(c["prompt_tokens"] for c in retried) > 0  # 2 attempts, each 1 answer + 1 error
    summary = json.loads((out / "summary.json").read_text())
    assert summary["usage"]["agent"]["calls"] == len(calls)
    assert summary["usage"]["agent"]["prompt_tokens"] == sum(c["prompt_tokens"] for c in calls)
    assert summary["usage_retried"]["agent"]["calls"] == len(retried)
    assert summary["usage_retried"]["agent"]["prompt_tokens"] == sum(c["prompt_tokens"] for c in retried)
    assert f"of which retried or cut-short attempts: {len(retried)} calls" in done.stdout
