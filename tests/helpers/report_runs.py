"""Real run directories for the report's tests, made by the real CLI, and a hostile copy of one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.helpers.cli_processes import run_cli_subprocess

#: A model reply that would run script if the page put text in as HTML.
XSS = ('</script><script>window.__xss = 1</script><img src=x onerror="window.__xss = 2">'
       '<svg onload="window.__xss = 3"></svg>\u2028<!-- & -->')
PLANTED_KEY = "sk-planted-7f3a9c2e41b8d6059e1f"


def make_run(directory: Path, *args: str, env: dict[str, str] | None = None) -> Path:
    """``agentcompass run example_interactive none mock ARGS -o DIRECTORY`` through the real CLI."""
    done = run_cli_subprocess("run", "example_interactive", "none", "mock", "-o", str(directory), *args,
                              testing=False, env=env, timeout=240)
    assert (directory / "summary.json").exists(), done.stderr
    return directory


def make_interactive_runs(base: Path, *extra: str, env: dict[str, str] | None = None) -> dict[str, Path]:
    """The README's main job, an errored run (tasks of 3+ model calls time out; retried once) and 3 trials
    with an error-prone model, each with ``extra`` options, in ``base``. The session fixture
    ``interactive_runs`` (tests/conftest.py) makes them once for the report and export tests."""
    return {
        "main": make_run(base / "main", "--seed", "7", *extra, env=env),
        "errored": make_run(base / "errored", "--seed", "7", "-m", "latency=0.2", "--timeout", "0.5",
                            "--retries", "1", *extra, env=env),
        "trials": make_run(base / "trials", "--seed", "8", "--trials", "3", "-m", "error_rate=0.3", *extra,
                           env=env),
    }


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
