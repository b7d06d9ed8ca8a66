"""``--resume`` refuses options that would change the run, naming them, and accepts those that cannot
(issue 21, item 7)."""

from __future__ import annotations

import json

import pytest

from tests.helpers.cli_processes import run_cli_subprocess


@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("resume") / "run"
    done = run_cli_subprocess("run", "example_interactive", "none", "mock", "-n", "2", "-o", str(out),
                              testing=False)
    assert done.returncode == 0, done.stderr
    return out


@pytest.mark.parametrize(("args", "named"), [
    (["--env", "docker"], "--env"),
    (["-m", "error_rate=1.0"], "-m/--model-arg"),
    (["-b", "foo=bar"], "-b/--benchmark-arg"),
    (["-n", "5"], "-n/--limit"),
    (["--user-model", "mock"], "--user-model/--judge-model"),
])
def test_resume_refuses_an_option_that_changes_the_run_and_names_it(stopped_run, args, named):
    before = (stopped_run / "results.jsonl").read_text()
    done = run_cli_subprocess("run", "--resume", str(stopped_run), *args, testing=False)
    assert done.returncode == 2, done.stderr
    assert f"--resume cannot change {named}" in done.stderr and "Traceback" not in done.stderr
    assert (stopped_run / "results.jsonl").read_text() == before


def test_resume_accepts_scheduling_timeouts_and_retries_and_keeps_them(stopped_run):
    done = run_cli_subprocess("run", "--resume", str(stopped_run), "-c", "3", "--timeout", "50", "--retries", "2",
                              "--phase-timeout", "prepare=30", testing=False)
    assert done.returncode == 0, done.stderr
    request = json.loads((stopped_run / "run.json").read_text())["request"]
    assert (request["concurrency"], request["timeout"], request["retries"]) == (3, 50.0, 2)
    assert request["phase_timeouts"] == {"prepare": 30.0} and request["limit"] == 2
