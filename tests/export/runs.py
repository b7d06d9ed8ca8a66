"""Real run directories for the export and OpenTelemetry tests, made through the real CLI in child processes:
the README's main job, an errored run with retries, a 3-trial run, and a ``react`` run with tool calls on
``example_coding`` against an OpenAI-compatible server on loopback that demands a planted key."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agentcompass.testing import LoopbackOpenAI

from tests.harnesses.support import assistant_turns, instruction, solver
from tests.helpers.cli_processes import run_cli_subprocess
from tests.helpers.report_runs import make_interactive_runs

#: The API key the loopback model server demands: it must reach the server and nothing that is exported.
PLANTED_KEY = "sk-h27planted-4c1d9e7a2b6f80135e"
KEY_ENV = "H27_EXPORT_TEST_KEY"
REACT_MODEL = "openai-compatible/loopback"


#: The ``react`` task whose second model call the server fails (a RUN_ERROR with calls recorded, one failed).
FAILING_TASK = "roman"


def flaky_solver(request: dict[str, Any]) -> Any:
    """:func:`solver`, except that the second call of :data:`FAILING_TASK` is refused (HTTP 400: not an outage, so the run goes on)."""
    if FAILING_TASK in instruction(request).splitlines()[0] and assistant_turns(request) == 1:
        return 400, {"error": {"message": "the loopback server refused this request on purpose", "type": "invalid_request_error"}}
    return solver(request)


def run_cli(*args: str, env: dict[str, str] | None = None) -> Any:
    done = run_cli_subprocess(*args, env=env, testing=False, timeout=240)
    return done


def make_run(directory: Path, benchmark: str, harness: str, model: str, *args: str,
             env: dict[str, str] | None = None) -> Path:
    done = run_cli("run", benchmark, harness, model, "-o", str(directory), *args, env=env)
    assert (directory / "summary.json").exists(), done.stderr
    return directory


def make_runs(base: Path, *extra: str, env: dict[str, str] | None = None) -> dict[str, Path]:
    """The four runs, each with ``extra`` options (``--otel``) and ``env``."""
    return {**make_interactive_runs(base, *extra, env=env), "react": make_react_run(base, *extra, env=env)}


def make_react_run(base: Path, *extra: str, env: dict[str, str] | None = None) -> Path:
    """The ``react`` run on example_coding against the loopback server that demands :data:`PLANTED_KEY`."""
    with LoopbackOpenAI(flaky_solver, api_key=PLANTED_KEY) as server:
        react = make_run(
            base / "react", "example_coding", "react", REACT_MODEL, "--seed", "3", "-t", "fizzbuzz", "-t", FAILING_TASK, "-t", "flatten",
            "--model-base-url", server.base_url, "--model-api-key-env", KEY_ENV, "--max-retries", "0", *extra,
            env={**(env or {}), KEY_ENV: PLANTED_KEY})
        assert server.requests, "the react run never called the model"
    return react


def jsonl(path: Path) -> Iterator[dict[str, Any]]:
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            yield json.loads(line)


def final_calls(run_dir: Path) -> dict[tuple[str, int], list[dict[str, Any]]]:
    """The calls of each (task, trial)'s final attempt, read straight from the files."""
    final = {(r["task_id"], r["trial"]): r["attempt"] for r in jsonl(run_dir / "results.jsonl")}
    out: dict[tuple[str, int], list[dict[str, Any]]] = {key: [] for key in final}
    for call in jsonl(run_dir / "trajectories.jsonl"):
        key = (call["task_id"], call["trial"])
        if final.get(key) == call["attempt"]:
            out[key].append(call)
    return out
