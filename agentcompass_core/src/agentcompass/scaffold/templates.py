'''The files of a plugin package, by kind. Placeholders: ``__NAME__`` (the registered name), ``__DIST__`` (the
distribution), ``__PACKAGE__`` (the import package), ``__CLASS__`` (the class), ``__KIND__``, ``__CORE_VERSION__``.

Each implementation imports only the public API (``agentcompass.runtime.PUBLIC_MODULES``) and each test only the
testing kit (``agentcompass.testing``) besides, so that a generated package works as generated.'''

from __future__ import annotations

PYPROJECT = """
[project]
name = "__DIST__"
version = "0.1.0"
description = "An agentcompass __KIND__ plugin: __NAME__."
readme = "README.md"
requires-python = ">=3.11"
dependencies = ["agentcompass-core>=__CORE_VERSION__"]

[project.optional-dependencies]
# The test kit (agentcompass.testing) and its pytest plugin.
test = ["agentcompass-core[testing]>=__CORE_VERSION__"]

# How agentcompass finds the plugin: `pip install` it and `agentcompass plugins list` shows it.
[project.entry-points.agentcompass]
__NAME__ = "__PACKAGE__"

[build-system]
requires = ["hatchling>=1.25"]
build-backend = "hatchling.build"

[tool.hatch.build.targets.wheel]
packages = ["src/__PACKAGE__"]

[tool.pytest.ini_options]
asyncio_mode = "auto"
asyncio_default_fixture_loop_scope = "function"
testpaths = ["tests"]
"""

README_TAIL = """
## Develop

    pip install -e ".[test]"       # or: uv pip install -e ".[test]"
    agentcompass plugins list       # shows __NAME__
    pytest                          # the test in tests/, through the real lifecycle (agentcompass.testing)

Import only the public API (`agentcompass.runtime.PUBLIC_MODULES` lists it: `agentcompass`,
`agentcompass.errors`, `agentcompass.runtime.*`); everything else under `agentcompass` is the engine and may
change. `agentcompass.testing` is for the tests. Reject options you do not know with
`agentcompass.errors.UsageError` (the command line prints it as one line), and never block the event loop:
run programs with `await env.exec(...)`.
"""

COMMON = {
    "pyproject.toml": PYPROJECT,
    ".gitignore": "__pycache__/\n*.egg-info/\n.venv/\nruns/\n",
}

# -- benchmark -------------------------------------------------------------------------------------------

BENCHMARK = '''
"""The ``__NAME__`` benchmark: short questions, each scored 1 when the agent's final answer holds the expected
answer. Replace the tasks (``load_tasks``), what a task puts in its environment (``prepare_task``) and the
scoring (``evaluate``) with your benchmark's."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from agentcompass import hookimpl
from agentcompass.errors import UsageError
from agentcompass.runtime import BaseBenchmark, PreparedTask, RunResult, TaskSpec, TaskStatus
from agentcompass.runtime.metrics import make_metric_contract

#: The bundled tasks; ``-b tasks=FILE.jsonl`` reads others (one ``{"id", "question", "answer"}`` a line).
TASKS = (
    {"id": "add", "question": "What is 2 + 3?", "answer": "5"},
    {"id": "multiply", "question": "What is 6 * 7?", "answer": "42"},
    {"id": "capital", "question": "What is the capital of France?", "answer": "Paris"},
)
OPTIONS = ("tasks",)


class __CLASS__(BaseBenchmark):
    name = "__NAME__"
    metric_contract = make_metric_contract(primary="score", scalar=("score",), labels={"score": "Correct"})

    def __init__(self, **options: Any) -> None:
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise UsageError(f"unknown option(s) {', '.join(unknown)} for benchmark {self.name!r}; "
                             f"valid options: {', '.join(OPTIONS)}")
        super().__init__(**options)

    def load_tasks(self, req):
        rows: Any = TASKS
        if "tasks" in self.options:
            path = Path(self.options["tasks"])
            try:
                rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
            except (OSError, ValueError) as exc:
                raise UsageError(f"benchmark {self.name!r}: cannot read tasks={path}: {exc}") from None
        return [TaskSpec(task_id=str(row["id"]), category=row.get("category"),
                         data={"instruction": f"{row['question']} Reply with the answer only.",
                               "answer": str(row["answer"])})
                for row in rows]

    async def prepare_task(self, task, req, plan, env=None):
        # Idempotent (a retry calls it again); relative paths resolve against the environment's workdir.
        if env is not None:
            await env.write_text("question.txt", task.data["instruction"] + "\\n")
        return PreparedTask(task_id=task.task_id)

    async def evaluate(self, task, prepared, result, req, plan, env=None):
        # Scoring lives here, not in the run: a failed run keeps its status and error, unscored.
        if result.status != TaskStatus.COMPLETED or result.error:
            return replace(result, metrics={})
        correct = task.data["answer"].lower() in (result.final_answer or "").lower()
        return replace(result, metrics={"score": 1.0 if correct else 0.0})

    # The reference solution: `agentcompass run __NAME__ oracle mock` scores 1 on every task.
    async def apply_reference_solution(self, task, prepared, req, plan, env=None):
        return RunResult(task_id=task.task_id, category=task.category, status=TaskStatus.COMPLETED,
                         final_answer=task.data["answer"])


@hookimpl
def register_benchmarks(register):
    register("__NAME__", __CLASS__)
'''

BENCHMARK_TEST = '''
import json

import pytest
from agentcompass.errors import UsageError
from agentcompass.testing import check_benchmark, run_benchmark, scripted, text

from __PACKAGE__ import __CLASS__


async def test_the_reference_answers_score_1():
    run = await run_benchmark(__CLASS__, "oracle")  # prepare → run → collect → evaluate, for real
    assert run.exit_code == 0
    assert run.metric("score") == {"add": 1.0, "multiply": 1.0, "capital": 1.0}


async def test_an_agent_scores_its_answers():
    answers = {"2 + 3": "5", "6 * 7": "41", "France": "Paris."}

    def agent(request):  # a scripted model: the answer to the question it was asked
        question = request["messages"][-1]["content"]
        return text(next(a for q, a in answers.items() if q in question))

    run = await run_benchmark(__CLASS__, _answer_with_the_model, agent)
    assert run.metric("score") == {"add": 1.0, "multiply": 0.0, "capital": 1.0}


async def _answer_with_the_model(task, prepared, req, plan, env):
    # A one-call harness: what an agent harness does, in a few lines.
    from agentcompass.runtime import RunResult, TaskStatus

    response = await plan.models["agent"].chat([{"role": "user", "content": task.data["instruction"]}])
    return RunResult(task_id=task.task_id, category=task.category, status=TaskStatus.COMPLETED,
                     final_answer=response.content)


async def test_tasks_from_a_file(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps({"id": "q1", "question": "Two plus two?", "answer": "4"}) + "\\n")
    run = await run_benchmark(__CLASS__, "oracle", benchmark_args={"tasks": str(path)})
    assert run.metric("score") == {"q1": 1.0}


def test_an_unknown_option_is_refused():
    with pytest.raises(UsageError, match="unknown option"):
        __CLASS__(nope="1")


async def test_installed_plugin(agentcompass_run):  # by entry-point name, as `agentcompass run` finds it
    run = await agentcompass_run("__NAME__", "nop", task_ids=["add"])
    assert run.summary["status_counts"] == {"COMPLETED": 1}
    assert run.metric("score") == {"add": 0.0}  # no answer, no score


async def test_contract():  # prepare_task is idempotent, evaluate keeps errors, collect never scores
    await check_benchmark(__CLASS__())
'''

# -- harness ---------------------------------------------------------------------------------------------

HARNESS = '''
"""The ``__NAME__`` harness: an agent loop. It gives the agent model the task's instruction and one tool,
``bash``, run in the task's environment; the first reply without a tool call is the final answer. Replace the
prompt, the tools and the stopping rule with your agent's."""

from __future__ import annotations

import json
from typing import Any

from agentcompass import hookimpl
from agentcompass.errors import UsageError
from agentcompass.runtime import RunResult, TaskStatus
from agentcompass.runtime.harness import LIMIT_OPTIONS, AttemptLimits, BaseHarness, limits_from_options

SYSTEM_PROMPT = ("You solve tasks. Run shell commands with the bash tool when they help; when you are done, "
                 "reply with the final answer and no tool call.")
BASH = {"type": "function", "function": {
    "name": "bash", "description": "Run a shell command in the task's working directory.",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}


def _positive(options: dict[str, Any], key: str, default: float) -> float:
    try:
        value = float(options.get(key, default))
    except ValueError:
        value = -1.0
    if value <= 0:
        raise UsageError(f"harness '__NAME__': option {key!r} must be a positive number, got {options[key]!r}")
    return value


class __CLASS__(BaseHarness):
    name = "__NAME__"
    known_options = ("max_turns", "command_timeout", *LIMIT_OPTIONS)
    #: What one attempt may spend; `--harness-arg max_calls=N` / `max_tokens=N` change it (0: no limit).
    default_limits = AttemptLimits(max_calls=50)

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)  # refuses options not in known_options, in one line
        self.max_turns = int(_positive(options, "max_turns", 10))
        self.command_timeout = _positive(options, "command_timeout", 60)
        self.limits = limits_from_options(self.name, options, self.default_limits)

    def attempt_limits(self) -> AttemptLimits:
        return self.limits

    async def run(self, task, prepared, req, plan, env=None):
        model = plan.models.get("agent")
        if model is None or env is None:
            raise RuntimeError("the __NAME__ harness needs the agent model and the task's environment")
        instruction = self.benchmark.instruction(task, prepared) if self.benchmark else task.data["instruction"]
        messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM_PROMPT},
                                          {"role": "user", "content": instruction}]
        commands = 0
        for turn in range(1, self.max_turns + 1):
            response = await model.chat(messages, tools=[BASH])  # metered, limited, recorded by the runtime
            calls = list(response.tool_calls)
            if not calls:
                return RunResult(task_id=task.task_id, category=task.category, status=TaskStatus.COMPLETED,
                                 final_answer=response.content or None,
                                 artifacts={"agent": {"turns": turn, "commands": commands}})
            messages.append({"role": "assistant", "content": response.content or None, "tool_calls": calls})
            for call in calls:
                commands += 1
                messages.append({"role": "tool", "tool_call_id": call.get("id"),
                                 "content": await self._bash(env, call)})
        return RunResult(task_id=task.task_id, category=task.category, status=TaskStatus.COMPLETED,
                         artifacts={"agent": {"turns": self.max_turns, "commands": commands,
                                              "stopped": "max_turns"}})

    async def _bash(self, env: Any, call: dict[str, Any]) -> str:
        function = call.get("function") or {}
        try:
            command = json.loads(function.get("arguments") or "{}")["command"]
        except (ValueError, KeyError, TypeError):
            return "error: call bash with a JSON object holding 'command'"
        if function.get("name") != "bash":
            return f"error: there is no tool {function.get('name')!r}; use bash"
        result = await env.exec(["sh", "-c", str(command)], timeout=self.command_timeout)
        if result.timed_out:
            return f"error: the command timed out after {self.command_timeout:g} s"
        return f"exit code {result.returncode}\\n{result.stdout}{result.stderr}"[-16000:]


@hookimpl
def register_harnesses(register):
    register("__NAME__", __CLASS__)
'''

HARNESS_TEST = '''
from dataclasses import replace

import pytest
from agentcompass.errors import UsageError
from agentcompass.runtime import BaseBenchmark, TaskSpec, TaskStatus
from agentcompass.testing import ScriptedModel, run_benchmark, scripted, text, tool_call

from __PACKAGE__ import __CLASS__


class Questions(BaseBenchmark):
    """A one-task benchmark to run the harness on: the answer is 42."""

    name = "questions"

    def load_tasks(self, req):
        return [TaskSpec(task_id="q1", data={"instruction": "What is 6 * 7?"})]

    async def evaluate(self, task, prepared, result, req, plan, env=None):
        if result.status != TaskStatus.COMPLETED:
            return replace(result, metrics={})
        return replace(result, metrics={"score": float("42" in (result.final_answer or ""))})


async def test_the_reply_without_a_tool_call_is_the_answer():
    run = await run_benchmark(Questions, __CLASS__, scripted(text("42")))
    assert run.exit_code == 0
    assert run.result("q1").final_answer == "42" and run.metric("score") == {"q1": 1.0}


async def test_commands_run_in_the_task_environment():
    model = ScriptedModel(scripted(tool_call("bash", command="echo $((6 * 7)) > answer.txt && cat answer.txt"),
                                   text("42")))
    run = await run_benchmark(Questions, __CLASS__, model)
    assert run.metric("score") == {"q1": 1.0}
    tool_reply = model.requests[1]["messages"][-1]
    assert tool_reply["role"] == "tool" and tool_reply["content"] == "exit code 0\\n42\\n"
    assert run.result("q1").artifacts["agent"] == {"turns": 2, "commands": 1}


async def test_max_turns_ends_the_loop():
    model = ScriptedModel(scripted(then=tool_call("bash", command="true")))
    run = await run_benchmark(Questions, __CLASS__, model, harness_args={"max_turns": "3"})
    assert run.result("q1").artifacts["agent"]["stopped"] == "max_turns" and len(model.requests) == 3


def test_an_unknown_option_is_refused():
    with pytest.raises(UsageError, match="unknown option"):
        __CLASS__(nope="1")


async def test_installed_plugin(agentcompass_run):  # by entry-point name, with the offline mock model
    run = await agentcompass_run(Questions, "__NAME__", "mock")
    assert run.exit_code == 0 and run.summary["status_counts"] == {"COMPLETED": 1}
'''

# -- environment -----------------------------------------------------------------------------------------

ENVIRONMENT = '''
"""The ``__NAME__`` environment: each task attempt gets a fresh directory on this machine and runs its
commands there as subprocesses. Replace the subprocess and file calls with your backend's (a VM, a remote
sandbox, ...); keep what the checks in the test ask: commands run in ``workdir``, a timeout kills every process
a command started, and paths never lead outside the environment."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import signal
import tempfile
from pathlib import Path
from typing import Any

from agentcompass import hookimpl
from agentcompass.errors import InfrastructureError, UsageError
from agentcompass.runtime import EnvironmentProvider, EnvironmentSession, ExecResult

#: Set in every process of a session, so that a timeout finds them all (even one that left the process group).
MARKER = "AGENTCOMPASS___PACKAGE___SESSION"
#: Host variables a command inherits; everything else it gets is explicit.
INHERITED = ("PATH", "LANG", "LC_ALL", "TZ", "HOME")
OPTIONS = ("root",)


def _kill_marked(token: str) -> None:
    """SIGKILL every process of this machine that carries the session's marker."""
    needle = f"{MARKER}={token}".encode()
    proc = Path("/proc")
    if not proc.is_dir():
        return
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\\0")
        except OSError:
            continue
        if needle in environ:
            with contextlib.suppress(OSError):
                os.kill(int(entry.name), signal.SIGKILL)


class __CLASS__Session(EnvironmentSession):
    def __init__(self, root: Path, base_env: dict[str, str]) -> None:
        self.root = root
        self.workdir = str(root)
        self.base_env = base_env
        self.token = secrets.token_hex(8)

    def _path(self, path: str) -> Path:
        target = (self.root / path).resolve()  # follows symlinks: a link pointing out is caught too
        if not target.is_relative_to(self.root):
            raise PermissionError(f"path {path!r} leads outside the environment's working directory {self.root}")
        return target

    def _kill(self, process: asyncio.subprocess.Process) -> None:
        with contextlib.suppress(OSError):
            os.killpg(process.pid, signal.SIGKILL)
        _kill_marked(self.token)

    async def exec(self, argv, *, timeout=None, env=None, cwd=None):
        variables = {**self.base_env, **(env or {}), MARKER: self.token}
        try:
            process = await asyncio.create_subprocess_exec(
                *argv, cwd=self._path(cwd or "."), env=variables, stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True)
        except FileNotFoundError as exc:
            return ExecResult(returncode=127, stdout="", stderr=str(exc))
        timed_out = False
        try:
            try:
                stdout, stderr = await asyncio.wait_for(process.communicate(), timeout)
            except TimeoutError:
                timed_out = True
                await asyncio.to_thread(self._kill, process)
                stdout, stderr = await process.communicate()
        finally:
            if process.returncode is None:  # cancelled: leave nothing running
                await asyncio.to_thread(self._kill, process)
        return ExecResult(returncode=process.returncode if process.returncode is not None else -9,
                          stdout=stdout.decode(errors="replace"), stderr=stderr.decode(errors="replace"),
                          timed_out=timed_out)

    async def read_bytes(self, path):
        return await asyncio.to_thread(self._path(path).read_bytes)

    async def write_bytes(self, path, data):
        target = self._path(path)
        await asyncio.to_thread(target.parent.mkdir, parents=True, exist_ok=True)
        await asyncio.to_thread(target.write_bytes, data)

    async def upload(self, local_path, path):
        source, target = Path(local_path), self._path(path)
        if source.is_dir():
            await asyncio.to_thread(shutil.copytree, source, target, dirs_exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            await asyncio.to_thread(shutil.copy2, source, target)

    async def download(self, path, local_path):
        source, target = self._path(path), Path(local_path)
        if source.is_dir():
            await asyncio.to_thread(shutil.copytree, source, target, dirs_exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            await asyncio.to_thread(shutil.copy2, source, target)


class __CLASS__(EnvironmentProvider):
    name = "__NAME__"

    def __init__(self, **options: Any) -> None:
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise UsageError(f"unknown option(s) {', '.join(unknown)} for environment {self.name!r}; "
                             f"valid options: {', '.join(OPTIONS)}")
        self.base = Path(options.get("root") or tempfile.gettempdir())
        self.sessions: set[__CLASS__Session] = set()

    async def open(self, spec, *, run_id, task_id, base_env):
        try:
            root = Path(tempfile.mkdtemp(prefix=f"__NAME__-{run_id}-", dir=self.base)).resolve()
        except OSError as exc:
            raise InfrastructureError(f"environment {self.name!r}: cannot make a directory in {self.base}: "
                                      f"{exc}") from exc
        inherited = {k: os.environ[k] for k in INHERITED if k in os.environ}
        session = __CLASS__Session(root, {**inherited, **spec.env, **base_env})
        self.sessions.add(session)
        return session

    async def close(self, session):
        if session in self.sessions:  # safe to call more than once
            self.sessions.discard(session)
            await asyncio.to_thread(_kill_marked, session.token)
            await asyncio.to_thread(shutil.rmtree, session.root, True)

    async def teardown(self):
        for session in list(self.sessions):
            await self.close(session)


@hookimpl
def register_environments(register):
    register("__NAME__", __CLASS__)
'''

ENVIRONMENT_TEST = '''
from dataclasses import replace

import pytest
from agentcompass.errors import UsageError
from agentcompass.runtime import HarnessFreeBenchmark, RunResult, TaskSpec, TaskStatus
from agentcompass.testing import check_environment_provider, run_benchmark

from __PACKAGE__ import __CLASS__


class Arithmetic(HarnessFreeBenchmark):
    """A benchmark whose task runs a program in the environment: its output is the answer."""

    name = "arithmetic"

    def load_tasks(self, req):
        return [TaskSpec(task_id="t1", data={"program": "print(6 * 7)"})]

    async def run_task(self, task, prepared, req, plan, env=None):
        await env.write_text("task.py", task.data["program"])
        result = await env.exec(["python3", "task.py"], timeout=60)
        return RunResult(task_id=task.task_id, status=TaskStatus.COMPLETED, final_answer=result.stdout.strip())

    async def evaluate(self, task, prepared, result, req, plan, env=None):
        return replace(result, metrics={"score": float(result.final_answer == "42")})


async def test_conformance():  # exec in workdir, a timeout kills the whole tree (setsid too), confined paths
    await check_environment_provider(__CLASS__)


async def test_a_run_in_the_environment():
    run = await run_benchmark(Arithmetic, environment=__CLASS__)
    assert run.exit_code == 0 and run.metric("score") == {"t1": 1.0}


async def test_installed_plugin(agentcompass_run, tmp_path):  # by entry-point name, as `--env __NAME__` does
    root = tmp_path / "sessions"
    root.mkdir()
    run = await agentcompass_run(Arithmetic, environment="__NAME__", environment_args={"root": str(root)})
    assert run.metric("score") == {"t1": 1.0}
    assert list(root.iterdir()) == []  # every session's directory is gone


def test_an_unknown_option_is_refused():
    with pytest.raises(UsageError, match="unknown option"):
        __CLASS__(nope="1")
'''


def _readme(what: str, run: str, files: str) -> str:
    return f"""
# __DIST__

An agentcompass __KIND__ plugin: {what}

    pip install .
    {run}

{files}
""" + README_TAIL


FILES: dict[str, dict[str, str]] = {
    "benchmark": {
        "src/__PACKAGE__/__init__.py": BENCHMARK,
        "tests/test___NAME__.py": BENCHMARK_TEST,
        "README.md": _readme(
            "the benchmark `__NAME__`, short questions scored 1 when the agent's final answer holds the expected "
            "answer (a starting point: replace the tasks and the scoring with yours).",
            "agentcompass run __NAME__ oracle mock        # the reference answers: every task scores 1\n"
            "    agentcompass run __NAME__ react openai/gpt-4o-mini   # an agent (react: agentcompass-harnesses)",
            "`src/__PACKAGE__/__init__.py` holds `__CLASS__` (tasks in `load_tasks`, the environment's material "
            "in `prepare_task`, the score in `evaluate`, the `oracle` harness's answer in "
            "`apply_reference_solution`) and the `register_benchmarks` hook. Options: `-b tasks=FILE.jsonl` (one "
            '`{"id", "question", "answer"}` object a line).'),
    },
    "harness": {
        "src/__PACKAGE__/__init__.py": HARNESS,
        "tests/test___NAME__.py": HARNESS_TEST,
        "README.md": _readme(
            "the harness `__NAME__`, an agent loop that gives the model a `bash` tool in the task's environment and "
            "takes its first reply without a tool call as the final answer.",
            "agentcompass run BENCHMARK __NAME__ mock               # any installed benchmark, the offline mock model\n"
            "    agentcompass run BENCHMARK __NAME__ openai/gpt-4o-mini --harness-arg max_turns=20",
            "`src/__PACKAGE__/__init__.py` holds `__CLASS__` (`run`: the loop; `plan.models['agent']` is the "
            "run's metered agent model) and the `register_harnesses` hook. Options (`--harness-arg`): `max_turns` "
            "(10), `command_timeout` seconds (60), `max_calls` (50) and `max_tokens` per attempt (0: no limit)."),
    },
    "environment": {
        "src/__PACKAGE__/__init__.py": ENVIRONMENT,
        "tests/test___NAME__.py": ENVIRONMENT_TEST,
        "README.md": _readme(
            "the environment `__NAME__`, a fresh directory on this machine per task attempt, commands run there as "
            "subprocesses (a starting point for a sandbox of your own).",
            "agentcompass run BENCHMARK HARNESS mock --env __NAME__ [--env-arg root=DIR]",
            "`src/__PACKAGE__/__init__.py` holds `__CLASS__` (the provider: `open` and `close` one session per "
            "attempt), `__CLASS__Session` (`exec`, file reads and writes, `upload`, `download`) and the "
            "`register_environments` hook. `check_environment_provider` in the test is the contract: commands run "
            "in `workdir`, a timeout kills every process a command started, paths stay inside the environment."),
    },
}
