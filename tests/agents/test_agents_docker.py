"""Each installed agent end to end under ``--env docker``: installed from its registry once per machine (the
bundle image, cached by tag, so CI builds it once), run in the task's network-less container against the
run's gateway, driven by a scripted model through the agent's own tools. The task scores 1; a script that
does the wrong thing scores 0; the provider's key is in no container; an agent stopped at its deadline keeps
what it did. An agent whose install cannot reach its registry here is skipped with the reason."""

from __future__ import annotations

import json
import os
import secrets
import shlex
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from agentcompass.runtime import TaskStatus
from agentcompass.testing import LoopbackOpenAI, run_benchmark
from agentcompass_agents.catalog import AGENTS
from agentcompass_agents.install import Installer, InstallError
from agentcompass_example_coding import tasks as coding_tasks

from tests.agents.scripts import SUBMIT, Job, aider_whole, tool_agent
from tests.harbor import taskdirs
from tests.harnesses.support import Tiny
from tests.helpers.docker_engine import require_engine

#: A test may wait for its bundle's cold build (several build at once on a fresh machine).
pytestmark = [pytest.mark.docker, pytest.mark.agent_cli, pytest.mark.timeout(1800)]

MODEL = "openai-compatible/loopback"
KEY_VARIABLE = "AGENTCOMPASS_AGENTS_TEST_KEY"
SECRET = "sk-provider-secret-" + secrets.token_hex(8)
#: Agents with a shell tool, checked end to end here (claude-code over the gateway's Messages endpoint, codex
#: over Responses, gemini-cli over the Gemini API, the others chat completions; openhands through its terminal
#: tool). aider, which edits through text and runs no shell tool, has a test of its own below.
TOOL_AGENTS = ("mini-swe-agent", "opencode", "qwen-code", "codex", "claude-code", "gemini-cli", "openhands")
#: Words in a failed install's log that mean the registry was out of reach (a skip, not a failure).
UNREACHABLE = ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ETIMEDOUT", "Temporary failure in name resolution",
               "Could not resolve", "No matching distribution", "Network is unreachable", "ConnectTimeout")


@pytest.fixture(autouse=True)
def engine() -> None:
    require_engine()


#: Bundles at most built at once (downloads overlap; the relinking steps share the machine's cores).
PARALLEL_BUILDS = 3
_BUILDS: dict[str, Future[str]] = {}


@pytest.fixture(scope="module", autouse=True)
def bundles(request: pytest.FixtureRequest) -> Iterator[None]:
    """Start building (or finding) the bundle of every agent the selected tests of this module use, a few at
    once, before the first test needs one: on a fresh machine (CI) the cold builds overlap instead of adding up.
    Each bundle is built once per test session; :func:`bundle` waits for the one a test needs."""
    names = dict.fromkeys(item.callspec.params["name"] for item in request.session.items
                          if item.module is request.module and hasattr(item, "callspec")
                          and "name" in item.callspec.params)
    with ThreadPoolExecutor(PARALLEL_BUILDS, thread_name_prefix="agent-bundle") as pool:
        for name in names:
            if name not in _BUILDS:
                _BUILDS[name] = pool.submit(Installer().ensure_bundle, AGENTS[name], AGENTS[name].version)
        yield
        pool.shutdown(wait=True, cancel_futures=True)


def bundle(name: str) -> None:
    """Wait for ``name``'s bundle; skip when its registry cannot be reached."""
    if name not in _BUILDS:
        _BUILDS[name] = Future()
        try:
            _BUILDS[name].set_result(Installer().ensure_bundle(AGENTS[name], AGENTS[name].version))
        except InstallError as exc:
            _BUILDS[name].set_exception(exc)
    try:
        _BUILDS[name].result()
    except InstallError as exc:
        log = str(exc)
        if not any(word in log for word in UNREACHABLE):
            raise
        pytest.skip(f"installing {name} cannot reach its registry here: {log.splitlines()[0]}")


async def run_agent(name: str, responder: Any, benchmark: Any, run_dir: Path, **kwargs: Any) -> Any:
    bundle(name)
    os.environ[KEY_VARIABLE] = SECRET
    try:
        with LoopbackOpenAI(responder, api_key=SECRET) as server:
            return await run_benchmark(benchmark, name, MODEL, environment="docker", run_dir=run_dir,
                                       model_base_url=server.base_url, model_api_key_env=KEY_VARIABLE,
                                       max_retries=0, **kwargs)
    finally:
        os.environ.pop(KEY_VARIABLE, None)


def job_for(name: str, path: str, content: str, check: str, **kwargs: Any) -> Job:
    return Job(path, content, check, finish=SUBMIT if name == "mini-swe-agent" else None, **kwargs)


def no_secret_in(run_dir: Path) -> None:
    """The provider's key is nowhere in what the run wrote (the agents' own files included)."""
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def harbor_tasks(root: Path) -> Path:
    taskdirs.suite(root)
    return root


@pytest.mark.parametrize("name", TOOL_AGENTS)
async def test_an_agent_solves_a_harbor_task_through_its_own_tools(name: str, tmp_path: Path) -> None:
    # The pattern matches the key but not itself (the agents record the commands they run). No $(...): Gemini
    # CLI refuses a command with a substitution ("Command injection detected").
    check = ("cat /app/hello.txt; env | grep -c provider-secre[t] | sed s/^/key-in-env=/; "
             "grep -rlI provider-secre[t] /tmp /opt /app /root 2>/dev/null | wc -l | sed s/^/key-in-files=/")
    job = job_for(name, "/app/hello.txt", "hello", check)
    run = await run_agent(name, tool_agent(job), "harbor", tmp_path / "run", task_ids=["hello"],
                          benchmark_args={"path": str(harbor_tasks(tmp_path / "tasks"))})
    result = run.result("hello")
    assert result.status is TaskStatus.COMPLETED, result.error
    assert result.metrics["reward"] == 1.0
    record = result.artifacts["agent"]
    assert record["agent"] == name and record["version"] == AGENTS[name].version
    assert record["tool_calls"] >= 2 and record["turns"] >= 1, record  # codex counts one turn per exec
    # It wrote the file, ran the check and read its output: the key was not in its environment.
    assert job.outputs and "hello" in job.outputs[1], job.outputs
    assert "key-in-env=0" in job.outputs[1] and "key-in-files=0" in job.outputs[1], job.outputs
    assert {c["via"] for c in run.trajectories} == {"gateway"}
    assert (run.run_dir / "artifacts").exists()
    no_secret_in(run.run_dir)


@pytest.mark.parametrize("name", TOOL_AGENTS)
async def test_an_agent_solves_example_coding_and_a_wrong_script_scores_0(name: str, tmp_path: Path) -> None:
    reference = coding_tasks.by_id("roman").reference_solution
    good = job_for(name, "solution.py", reference, "python3 -c 'import solution; print(solution.roman(4))'")
    run = await run_agent(name, tool_agent(good), "example_coding", tmp_path / "good", task_ids=["roman"])
    assert run.metric("score") == {"roman": 1.0}, [r.error for r in run.results]
    assert "IV" in good.outputs[1]
    wrong = job_for(name, "solution.py", "def roman(n):\n    return 'I' * n\n", "python3 -c 'import solution'")
    run = await run_agent(name, tool_agent(wrong), "example_coding", tmp_path / "wrong", task_ids=["roman"])
    assert run.result("roman").status is TaskStatus.COMPLETED
    assert run.metric("score") == {"roman": 0.0}


def aider_checks(check: str) -> dict[str, str]:
    """Aider's test command runs ``check`` after its edit; failing on purpose, it shows the model the output."""
    return {"args": shlex.join(["--test-cmd", f"{check}; exit 1", "--auto-test"])}


#: What aider prints when something at its start tried the network (none in the task).
NETWORK_TRIED = ("Failed to resolve", "NameResolutionError", "Max retries exceeded", "HTTPSConnectionPool")


@pytest.mark.parametrize("name", ["aider"])
async def test_aider_edits_through_its_edit_format_and_scores_1_or_0(name: str, tmp_path: Path) -> None:
    check = ("cat /app/hello.txt; echo key-in-env=$(env | grep -c provider-secre[t]); "
             "echo key-in-files=$(grep -rlI provider-secre[t] /tmp /opt /app /root 2>/dev/null | wc -l)")
    job = Job("hello.txt", "hello", check)
    run = await run_agent("aider", aider_whole(job), "harbor", tmp_path / "run", task_ids=["hello"],
                          benchmark_args={"path": str(harbor_tasks(tmp_path / "tasks"))},
                          harness_args=aider_checks(check))
    result = run.result("hello")
    assert result.status is TaskStatus.COMPLETED, result.error
    assert result.metrics["reward"] == 1.0
    record = result.artifacts["agent"]
    assert record["agent"] == "aider" and record["version"] == AGENTS["aider"].version
    # One edit, then the test's output back to the model: its linter (flake8, in the bundle) found nothing.
    assert record["turns"] == 2 and record["tool_calls"] == 1, record
    assert record["agent_tokens"]["prompt_tokens"] > 0, record  # its own "Tokens: N sent, M received."
    assert job.outputs and "hello" in job.outputs[0], job.outputs
    assert "key-in-env=0" in job.outputs[0] and "key-in-files=0" in job.outputs[0], job.outputs
    agent_output = "".join(p.read_text() for p in run.run_dir.rglob("agent/std*.txt"))
    assert not [word for word in NETWORK_TRIED if word in agent_output], agent_output
    assert {c["via"] for c in run.trajectories} == {"gateway"}
    no_secret_in(run.run_dir)

    reference = coding_tasks.by_id("roman").reference_solution
    good = Job("solution.py", reference, "python3 -c 'import solution; print(solution.roman(4))'")
    run = await run_agent("aider", aider_whole(good), "example_coding", tmp_path / "good", task_ids=["roman"],
                          harness_args=aider_checks(good.check))
    assert run.metric("score") == {"roman": 1.0}, [r.error for r in run.results]
    assert "IV" in good.outputs[0]
    wrong = Job("solution.py", "def roman(n):\n    return 'I' * n\n", "python3 -c 'import solution'")
    run = await run_agent("aider", aider_whole(wrong), "example_coding", tmp_path / "wrong", task_ids=["roman"])
    assert run.result("roman").status is TaskStatus.COMPLETED
    assert run.metric("score") == {"roman": 0.0}


@pytest.mark.parametrize("name", ["openhands"])
async def test_openhands_at_its_iteration_limit_is_a_run_error_naming_it(name: str, tmp_path: Path) -> None:
    # Two commands to run, one iteration allowed (max_turns): OpenHands stops itself with its own error event;
    # the driver says how the conversation ended, and everything it did is kept.
    job = Job("/app/hello.txt", "hello", "cat /app/hello.txt")
    run = await run_agent(name, tool_agent(job), "harbor", tmp_path / "run", task_ids=["hello"],
                          benchmark_args={"path": str(harbor_tasks(tmp_path / "tasks"))},
                          harness_args={"max_turns": "1"})
    result = run.result("hello")
    assert result.status is TaskStatus.RUN_ERROR, result.error
    assert "openhands exited with status 1" in (result.error or "")
    verdicts = [json.loads(p.read_text()) for p in (run.run_dir / "artifacts").rglob("result.json")]
    assert any(v.get("status") == "error" for v in verdicts), verdicts  # the driver's own verdict, kept
    record = result.artifacts["agent"]
    assert record["stop_reason"] == "error" and record["tool_calls"] == 1, record
    assert any("maximum iterations limit (1)" in e for e in record["agent_errors"]), record
    assert len(job.outputs) == 0  # the model was asked once: the limit came before a second call
    no_secret_in(run.run_dir)


@pytest.mark.parametrize("name", ["opencode"])
async def test_an_agent_past_its_deadline_is_stopped_and_keeps_what_it_did(name: str, tmp_path: Path) -> None:
    job = Job("/tmp/late.txt", "late", "true", before=["echo started > /workspace/progress.txt; sleep 600"])
    run = await run_agent(name, tool_agent(job), Tiny, tmp_path / "run", benchmark_args={"limit": "20"},
                          harness_args={"grace": "3"})
    result = run.result("t1")
    assert result.status is TaskStatus.RUN_ERROR
    assert "time limit of 20 s" in (result.error or "") and "interrupt" in (result.error or "")
    record = result.artifacts["agent"]
    assert record["stop_reason"] == "time_limit" and record["stopped"][0] == "interrupt"
    kept = run.run_dir / "artifacts"
    assert any(p.name == "stdout.txt" for p in kept.rglob("*")), "the agent's output is kept"
    assert any(p.name == "instruction.md" for p in kept.rglob("*")), "the agent's directory is kept"
