"""Support for the model-provider tests: a real OpenAI/Anthropic-compatible HTTP server on loopback (in a
thread, so in-process runs and subprocess runs can both reach it) and helpers to build clients and runs.
The fixtures themselves are in conftest.py."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from agentcompass import hookimpl
from agentcompass.plugins import PluginHost, load_plugins
from agentcompass.runner import Runner, RunOutcome
from agentcompass.runtime import (
    EnvironmentSession,
    ExecutionPlan,
    HarnessFreeBenchmark,
    PreparedTask,
    RunRequest,
    RunResult,
    TaskSpec,
    TaskStatus,
)
from agentcompass.runtime.metrics import make_metric_contract
from agentcompass.runtime.model_providers import ProviderSettings

from tests.models.fake_server import FakeModelServer

API_KEY = "sk-test-abcdef123456"
MODEL = "tiny"


def settings(server: FakeModelServer, *, anthropic: bool = False, **kw: Any) -> ProviderSettings:
    values: dict[str, Any] = {
        "base_url": server.root_url if anthropic else server.base_url,
        "api_key_env": "TEST_MODEL_KEY",
        "max_retries": 3,
        "max_connections": 8,
        "request_timeout": 5.0,
        "environ": {"TEST_MODEL_KEY": API_KEY},
    }
    values.update(kw)
    return ProviderSettings(**values)


# -- a small benchmark that calls its models in process and through the gateway ------------------------


class ProbeBenchmark(HarnessFreeBenchmark):
    """``n_tasks`` tasks; each makes ``calls`` agent calls (``via=client`` in process, ``via=gateway`` over
    HTTP with the attempt's token), then a judge call when a judge is configured. Reward 1.0 when every
    call answered."""

    name: ClassVar[str] = "model_probe"
    metric_contract = make_metric_contract(primary="score", scalar=("score",))
    evaluation_environment_mode = "none"
    required_model_roles: ClassVar[tuple[str, ...]] = ("agent",)

    #: What ``env`` printed inside each task's environment (with ``dump_env=1``), for leak checks.
    environment_dumps: ClassVar[list[str]] = []
    #: Every answer the gateway gave the task's code (what code in an environment sees), for leak checks.
    gateway_answers: ClassVar[list[str]] = []
    #: Appended to the first message of every task (a large request body, say).
    first_message_tail: ClassVar[str] = ""

    def __init__(self, n_tasks: str = "3", calls: str = "2", via: str = "client", roles: str = "agent",
                 dump_env: str = "0") -> None:
        super().__init__()
        self.n_tasks, self.calls, self.via = int(n_tasks), int(calls), via
        self.dump_env = dump_env == "1"
        self.roles = tuple(roles.split(","))
        self.required_model_roles = self.roles  # type: ignore[misc]

    def load_tasks(self, req: RunRequest) -> list[TaskSpec]:
        return [TaskSpec(task_id=f"t{i:03d}", category="probe") for i in range(self.n_tasks)]

    async def run_task(self, task: TaskSpec, prepared: PreparedTask, req: RunRequest, plan: ExecutionPlan,
                       env: EnvironmentSession | None = None) -> RunResult:
        if self.dump_env and env is not None:
            shown = await env.exec(["sh", "-c", "env; cat /proc/self/environ 2>/dev/null | tr '\\0' '\\n'"])
            self.environment_dumps.append(shown.stdout)
        messages: list[dict[str, Any]] = [
            {"role": "user", "content": f"hello from {task.task_id}{self.first_message_tail}"}]
        answers = []
        for _ in range(self.calls):
            if self.via == "gateway":
                answers.append(await _gateway_chat(plan, "agent", messages))
            else:
                answers.append((await plan.models["agent"].chat(messages)).content)
            messages.append({"role": "assistant", "content": answers[-1]})
            messages.append({"role": "user", "content": "and again"})
        if "user" in plan.models:
            await plan.models["user"].chat([{"role": "user", "content": "simulate a user"}])
        return RunResult(task_id=task.task_id, category=task.category, final_answer=answers[-1])

    async def evaluate(self, task: TaskSpec, prepared: PreparedTask, result: RunResult, req: RunRequest,
                       plan: ExecutionPlan, env: EnvironmentSession | None = None) -> RunResult:
        if result.status is not TaskStatus.COMPLETED:
            return result
        if "judge" in plan.models:
            await plan.models["judge"].chat([{"role": "user", "content": f"judge {result.final_answer}"}])
        from dataclasses import replace

        return replace(result, metrics={"score": 1.0})


async def _gateway_chat(plan: ExecutionPlan, role: str, messages: Sequence[Mapping[str, Any]]) -> str:
    import aiohttp

    endpoint = plan.model_endpoints[role]
    async with aiohttp.ClientSession() as session, session.post(
        f"{endpoint.base_url}/chat/completions", headers={"Authorization": f"Bearer {endpoint.api_key}"},
        json={"model": endpoint.model, "messages": list(messages)},
    ) as r:
        text = await r.text()
    ProbeBenchmark.gateway_answers.append(text)
    if r.status != 200:
        raise RuntimeError(f"gateway said {r.status}: {text}")
    return str(json.loads(text)["choices"][0]["message"]["content"])


class _ProbePlugin:
    @hookimpl
    def register_benchmarks(self, register):  # type: ignore[no-untyped-def]
        register("model_probe", ProbeBenchmark)


def plugin_host() -> PluginHost:
    host = load_plugins()
    host.add_plugin(_ProbePlugin(), "model_probe_test")
    return host


def run(req: RunRequest, run_dir: Path, *, resume: bool = False) -> RunOutcome:
    return asyncio.run(Runner(plugin_host(), req, run_dir=run_dir, resume=resume, handle_signals=False).run())


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def cli(args: Sequence[str], env: Mapping[str, str], timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """``agentcompass ARGS`` as a real subprocess with exactly ``env`` added to a clean environment."""
    base = {k: v for k, v in os.environ.items()
            if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")}
    return subprocess.run([sys.executable, "-m", "agentcompass.cli.main", *args], env={**base, **env},
                          capture_output=True, text=True, timeout=timeout)


#: What the core's mock policy scores per task; the loopback server answers with the same policy.
EXPECTED_SCORES = {
    "create_basic": 1.0, "create_with_description": 1.0, "update_complete": 1.0, "update_two_tasks": 0.0,
    "policy_unknown_user": 1.0, "policy_reopen_completed": 0.0, "policy_other_users_task": 0.0,
    "policy_delete_request": 1.0, "multi_lookup_then_update": 0.0, "multi_create_and_update": 1.0,
    "multi_create_then_complete": 0.0,
}


def probe(server: FakeModelServer, **kw: object) -> RunRequest:
    values: dict[str, object] = {
        "benchmark": "model_probe", "harness": "none", "model": f"openai-compatible/{MODEL}",
        "model_base_url": server.base_url, "model_api_key_env": "TEST_MODEL_KEY", "concurrency": 2,
        "benchmark_args": {"n_tasks": "4", "calls": "2"},
    }
    values.update(kw)
    return RunRequest("", "", "").with_options(**values)


def all_text(run_dir: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in run_dir.rglob("*") if p.is_file())
