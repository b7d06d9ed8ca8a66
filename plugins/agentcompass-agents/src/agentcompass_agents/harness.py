"""The base of every installed-agent harness: install (under ``--env docker``), run the agent headless against
the run's gateway with a deadline it is stopped at gracefully, keep its own trajectory, map it to the result.

Per task attempt:

1. **check** (``docker``) that the image can run the bundle: ``/bin/sh`` and the bundle's runtime start, else
   ``PREPARE_ERROR`` naming what is missing (no shell, no glibc, a glibc too old);
2. **write** the instruction (``BaseBenchmark.instruction``) and the agent's configuration under a directory
   of its own (``/tmp/agentcompass/agent``: ``HOME`` points into it, so the agent's session files land there);
3. **run** the agent through the supervisor with the gateway's variables (``plan.model_endpoints["agent"]``)
   and the agent's own: at its deadline the supervisor interrupts it (SIGINT to its process group), then
   terminates, then kills it, ``grace`` seconds apart;
4. **collect** stdout, stderr and the agent's directory into ``artifacts/agent/`` and map the agent's
   trajectory to ``result.artifacts["agent"]`` (final message, turns, tool calls, stop reason, its own token
   counts); the gateway's records (``result.usage``) stay the source of truth for tokens, and a difference
   from the agent's own counts is logged (``agents.usage_differs``).

A non-zero exit is ``RUN_ERROR`` with the tail of stderr; the deadline passing is ``RUN_ERROR`` (``time_limit``)
with everything kept; otherwise ``COMPLETED`` and the benchmark scores what the agent left.
"""

from __future__ import annotations

import asyncio
import math
import posixpath
import re
import shlex
import shutil
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from agentcompass.errors import InfrastructureError, UsageError
from agentcompass.runtime import (
    AttemptLimits,
    BaseHarness,
    EnvironmentSession,
    EnvironmentSpec,
    ExecutionPlan,
    PreparedTask,
    RunRequest,
    RunResult,
    TaskSpec,
    TaskStatus,
)
from agentcompass.runtime.harness import LIMIT_OPTIONS, limits_from_options
from agentcompass.runtime.logs import get_logger
from agentcompass.runtime.options import boolean

from agentcompass_agents import task_tools
from agentcompass_agents.bundle.bundle import SUPERVISOR_PY
from agentcompass_agents.catalog import DEFAULT_LIMITS, AgentSpec
from agentcompass_agents.install import DEFAULT_BUILDER, Installer, stderr_progress

log = get_logger(plugin="agents")

COMMON_OPTIONS = ("version", "timeout", "grace", "args", "bin", "progress", "builder", "max_turns", *LIMIT_OPTIONS)
TIME_LIMIT_KEY = "agent_timeout_sec"
AGENT_DIR = "/tmp/agentcompass/agent"
FALLBACK_AGENT_DIR = ".agentcompass/agent"
#: Characters of stderr kept in the result (the files keep everything).
TAIL_CHARS = 4000
#: Seconds kept free before the run phase's own timeout, past the supervisor's three steps.
PHASE_MARGIN = 15.0
#: The variables that switch off telemetry, update checks and colour in every agent.
QUIET_ENV = {
    "DO_NOT_TRACK": "1",
    "NO_UPDATE_NOTIFIER": "1",
    "npm_config_update_notifier": "false",
    "DISABLE_AUTOUPDATER": "1",
    "NO_COLOR": "1",
    "TERM": "dumb",
}
_VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.+_-]{0,63}$")


@dataclass
class Context:
    """What one attempt's agent needs to be configured."""

    agent_dir: str
    home: str
    instruction: str
    instruction_file: str
    workdir: str
    model: str
    gateway: Mapping[str, str]
    max_turns: int | None
    deadline: float | None
    #: The agent's bundle in the environment (``docker``), or None (the agent installed where it runs).
    bundle: str | None = None
    #: MCP servers and a skills directory the task hands the agent (:mod:`agentcompass_agents.task_tools`).
    mcp_servers: tuple[task_tools.McpServer, ...] = ()
    skills_dir: str | None = None


@dataclass
class Summary:
    """The agent's own trajectory, mapped."""

    final_message: str | None = None
    turns: int = 0
    tool_calls: int = 0
    stop_reason: str | None = None
    #: Tokens the agent itself reported (prompt, completion), when it reports them.
    tokens: dict[str, int] = field(default_factory=dict)
    #: Extra facts worth keeping (its session id, its cost estimate, ...).
    extra: dict[str, Any] = field(default_factory=dict)
    #: The agent stopped itself at the deadline it was told (where it supports one).
    out_of_time: bool = False


def tail(text: str, chars: int = TAIL_CHARS) -> str:
    return text if len(text) <= chars else "…" + text[-chars:]


class InstalledAgent(BaseHarness):
    """An agent CLI as a harness. Subclasses set :attr:`agent` and implement :meth:`argv` and
    :meth:`summarize`; they may add :meth:`files` (configuration to write) and :meth:`env`."""

    agent: ClassVar[AgentSpec]
    #: Options of this agent beyond :data:`COMMON_OPTIONS`.
    agent_options: ClassVar[tuple[str, ...]] = ()
    #: Exit statuses by which the agent says it ran out of the time it was told.
    out_of_time_statuses: ClassVar[tuple[int, ...]] = ()
    default_limits: ClassVar[AttemptLimits] = DEFAULT_LIMITS

    def __init__(self, **options: Any) -> None:
        known = COMMON_OPTIONS + self.agent_options
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise UsageError(f"unknown option(s) {', '.join(map(repr, unknown))} for harness {self.name!r}; "
                             f"valid options: {', '.join(known)}")
        super().__init__(**options)
        self.version = str(options.get("version") or self.agent.version)
        if not _VERSION.match(self.version):
            raise UsageError(f"harness {self.name!r}: version={self.version!r} is not a version")
        self.timeout = _positive(self.name, "timeout", options.get("timeout"))
        self.grace = _positive(self.name, "grace", options.get("grace")) or 10.0
        max_turns = _positive(self.name, "max_turns", options.get("max_turns"))
        self.max_turns = int(max_turns) if max_turns else None
        try:
            self.extra_args = shlex.split(str(options.get("args") or ""))
        except ValueError as exc:
            raise UsageError(f"harness {self.name!r}: args={options.get('args')!r}: {exc}") from None
        self.bin = str(options.get("bin") or "")
        self.limits = limits_from_options(self.name, options, self.default_limits)
        self.progress = boolean(f"harness {self.name!r}: option", "progress", options.get("progress", "true"))
        self.installer = Installer(builder=str(options.get("builder") or DEFAULT_BUILDER),
                                   progress=stderr_progress if self.progress else None)

    def attempt_limits(self) -> AttemptLimits:
        return self.limits

    # -- what subclasses provide ----------------------------------------------------------------------

    def own_deadline(self, ctx: Context) -> int | None:
        """Whole seconds to tell an agent that supports a deadline of its own: short of the supervisor's by
        two ``grace`` periods, so that it stops itself first and keeps its own records."""
        if ctx.deadline is None:
            return None
        return max(1, int(ctx.deadline - 2 * self.grace))

    def argv(self, ctx: Context) -> list[str]:
        """The agent's arguments (after its executable) for a headless run of ``ctx.instruction``."""
        raise NotImplementedError

    def env(self, ctx: Context) -> dict[str, str]:
        """Variables of the agent's own (its base URL, model, switches), beside the gateway's."""
        return {}

    def files(self, ctx: Context) -> dict[str, str]:
        """Files to write before the run, by absolute path in the environment (configuration)."""
        return {}

    def summarize(self, stdout: str, files: Path | None) -> Summary:
        """Map the agent's output and its directory (downloaded to ``files``) to a :class:`Summary`."""
        raise NotImplementedError

    # -- install --------------------------------------------------------------------------------------

    def environment_spec(self, spec: EnvironmentSpec, task: TaskSpec, req: RunRequest) -> EnvironmentSpec:
        """Under ``docker``: the task's image with the agent's bundle copied in (built first when this machine
        has none). Elsewhere the agent must be installed where the environment runs it (``--env local``: this
        machine's ``PATH``, or ``bin=``)."""
        if req.environment == "docker":
            tag = self.installer.ensure_bundle(self.agent, self.version)
            return self.installer.derive(spec, self.agent, self.version, tag)
        if req.environment == "local" and not self._host_executable():
            raise UsageError(
                f"harness {self.name!r} under --env local runs the agent installed on this machine, but "
                f"{self.agent.command!r} is not on PATH: install {self.agent.package} "
                f"({'npm i -g' if self.agent.runtime == 'node' else 'pip install'} {self.agent.package}), "
                "pass --harness-arg bin=PATH, or use --env docker (installed for you)"
            )
        return spec

    def _host_executable(self) -> str | None:
        return shutil.which(self.bin or self.agent.command)

    # -- run ------------------------------------------------------------------------------------------

    async def run(
        self,
        task: TaskSpec,
        prepared: PreparedTask,
        req: RunRequest,
        plan: ExecutionPlan,
        env: EnvironmentSession | None = None,
    ) -> RunResult:
        if env is None:
            raise RuntimeError(f"the {self.name} harness needs the task's environment")
        if self.benchmark is None:
            raise RuntimeError("the harness runs only after the runtime bound it to a benchmark")
        bundled = plan.environment == "docker"
        if bundled:
            missing = await self._check_image(env)
            if missing:
                return RunResult(task_id=task.task_id, category=task.category, status=TaskStatus.PREPARE_ERROR,
                                 error_phase="prepare", error=f"the image cannot run {self.name}: {missing}")
        instruction = self.benchmark.instruction(task, prepared)
        endpoint = plan.model_endpoints.get("agent")
        if endpoint is None:
            raise RuntimeError(f"the {self.name} harness needs the agent model's endpoint")
        agent_dir = await self._agent_dir(env, bundled)
        deadline, why = self._deadline(task, plan)
        ctx = Context(agent_dir=agent_dir, home=posixpath.join(agent_dir, "home"), instruction=instruction,
                      instruction_file=posixpath.join(agent_dir, "instruction.md"), workdir=str(env.workdir),
                      model=endpoint.model, gateway=endpoint.env(), max_turns=self.max_turns, deadline=deadline,
                      bundle=self.agent.bundle_dir(self.version) if bundled else None,
                      mcp_servers=task_tools.mcp_servers(task.data),
                      skills_dir=str(task.data["skills_dir"]) if task.data.get("skills_dir") else None)
        await env.write_text(ctx.instruction_file, instruction)
        await env.write_text(posixpath.join(ctx.home, ".agentcompass"), "")
        for path, text in self.files(ctx).items():
            await env.write_text(path, text)
        copy_skills = task_tools.skills_command(self.name, ctx.skills_dir, ctx.home)
        if copy_skills is not None:
            await env.exec(["sh", "-c", copy_skills], timeout=120)
        marker = posixpath.join(agent_dir, "stopped")
        variables = {**QUIET_ENV, **ctx.gateway, "HOME": ctx.home, **self.env(ctx)}
        budget = f"{deadline:g}" if deadline is not None else "inf"
        if bundled:
            bindir = posixpath.join(self.agent.bundle_dir(self.version), "bin")
            argv = [posixpath.join(bindir, "agentcompass-supervise"), budget, f"{self.grace:g}", marker,
                    posixpath.join(bindir, self.agent.command)]
        else:
            executable = self._host_executable() or self.bin or self.agent.command
            argv = [sys.executable, "-I", "-c", SUPERVISOR_PY, budget, f"{self.grace:g}", marker, executable]
        argv += self.argv(ctx) + self.extra_args
        backstop = deadline + 3 * self.grace + PHASE_MARGIN if deadline is not None else None
        started = time.perf_counter()
        log.info("agents.started", agent=self.name, version=self.version, task_id=task.task_id,
                 deadline=deadline)
        outcome = await env.exec(argv, timeout=backstop, env=variables)
        seconds = time.perf_counter() - started
        stopped = await _read(env, marker)
        files_dir = await self._collect(env, plan, agent_dir, outcome.stdout, outcome.stderr)
        try:
            summary = self.summarize(outcome.stdout, files_dir)
        except Exception as exc:  # an agent's format changed: keep the run, say so
            summary = Summary(extra={"summary_error": f"{type(exc).__name__}: {exc}"})
        record = {
            "agent": self.name,
            "version": self.version,
            "returncode": outcome.returncode,
            "seconds": round(seconds, 3),
            "deadline_s": deadline,
            "stopped": stopped.split() if stopped else [],
            "final_message": summary.final_message,
            "turns": summary.turns,
            "tool_calls": summary.tool_calls,
            "stop_reason": summary.stop_reason,
            "agent_tokens": summary.tokens,
            **summary.extra,
            "stderr_tail": tail(outcome.stderr),
            "files": "agent/" if files_dir is not None else None,
        }
        self._compare_usage(plan, task, summary)
        log.info("agents.finished", agent=self.name, task_id=task.task_id, returncode=outcome.returncode,
                 seconds=round(seconds, 3), stopped=bool(stopped), turns=summary.turns)
        error = None
        if stopped or outcome.timed_out or summary.out_of_time or (
                deadline is not None and outcome.returncode in self.out_of_time_statuses):
            record["stop_reason"] = "time_limit"
            error = (f"{self.name} ran past its time limit of {deadline:g} s ({why}) and was stopped "
                     f"({', then '.join(stopped.split()) if stopped else 'killed'}); what it did is kept")
        elif outcome.returncode != 0:
            error = (f"{self.name} exited with status {outcome.returncode}: "
                     f"{_last_lines(outcome.stderr or outcome.stdout) or '(no output)'}")
        if error:
            return RunResult(task_id=task.task_id, category=task.category, status=TaskStatus.RUN_ERROR,
                             error=error, error_phase="run", artifacts={"agent": record})
        return RunResult(task_id=task.task_id, category=task.category, status=TaskStatus.COMPLETED,
                         final_answer=summary.final_message, artifacts={"agent": record})

    async def _check_image(self, env: EnvironmentSession) -> str | None:
        """What the image lacks to run the bundle, or None."""
        try:
            shell = await env.exec(["/bin/sh", "-c", "exit 0"], timeout=60)
        except InfrastructureError:
            raise
        except Exception as exc:
            return f"no /bin/sh ({exc})"
        if shell.returncode != 0:
            return f"no working /bin/sh (exit status {shell.returncode}: {_last_lines(shell.stderr)})"
        runtime = posixpath.join(self.agent.bundle_dir(self.version), "bin", "agentcompass-runtime")
        probe = await env.exec([runtime, "--version"], timeout=60)
        if probe.returncode == 0:
            return None
        text = probe.stderr + probe.stdout
        if "GLIBC_" in text:
            found = re.findall(r"GLIBC_[\d.]+", text)
            return (f"its glibc is older than the agent's {self.agent.runtime} runtime needs "
                    f"({', '.join(sorted(set(found)))} not found)")
        loader = await env.exec(["/bin/sh", "-c", "test -e /lib64/ld-linux-x86-64.so.2"], timeout=60)
        if loader.returncode != 0:
            return ("no glibc: the dynamic loader /lib64/ld-linux-x86-64.so.2 is missing (a musl image such as "
                    "Alpine cannot run the bundle)")
        return f"the bundle's {self.agent.runtime} runtime does not start: {_last_lines(text) or probe.returncode}"

    async def _agent_dir(self, env: EnvironmentSession, bundled: bool) -> str:
        candidates = [AGENT_DIR, FALLBACK_AGENT_DIR] if bundled else [FALLBACK_AGENT_DIR]
        for path in candidates:
            try:
                await env.write_text(posixpath.join(path, ".keep"), "")
            except InfrastructureError:
                raise
            except Exception:
                continue
            return path if path.startswith("/") else posixpath.join(str(env.workdir), path)
        raise RuntimeError(f"cannot create the agent's directory ({', '.join(candidates)})")

    def _deadline(self, task: TaskSpec, plan: ExecutionPlan) -> tuple[float | None, str]:
        limits: list[tuple[float, str]] = []
        if self.timeout:
            limits.append((self.timeout, "timeout"))
        task_limit = task.data.get(TIME_LIMIT_KEY)
        if task_limit is not None:
            limits.append((float(task_limit), f"the task's time limit (task.data[{TIME_LIMIT_KEY!r}])"))
        phase = plan.timeouts.get("run")
        if phase:
            limits.append((max(1.0, float(phase) - 3 * self.grace - PHASE_MARGIN), "the run phase's timeout"))
        return min(limits, key=lambda x: x[0]) if limits else (None, "")

    async def _collect(self, env: EnvironmentSession, plan: ExecutionPlan, agent_dir: str, stdout: str,
                       stderr: str) -> Path | None:
        if not plan.artifacts_dir:
            return None
        root = Path(plan.artifacts_dir) / "agent"
        await asyncio.to_thread(_save, root, stdout, stderr)
        try:
            await env.download(agent_dir, root / "files")
        except InfrastructureError:
            raise
        except Exception as exc:
            log.warning("agents.collect_failed", agent=self.name, path=agent_dir, error=str(exc))
            return root
        return root

    def _compare_usage(self, plan: ExecutionPlan, task: TaskSpec, summary: Summary) -> None:
        meter = getattr(plan.models.get("agent"), "meter", None)
        if meter is None or not summary.tokens:
            return
        totals = meter.totals().get("agent", {})
        gateway = {"prompt_tokens": int(totals.get("prompt_tokens", 0)),
                   "completion_tokens": int(totals.get("completion_tokens", 0))}
        own = {k: v for k, v in summary.tokens.items() if k in gateway}
        if any(own[k] != gateway[k] for k in own):
            log.info("agents.usage_differs", agent=self.name, task_id=task.task_id, agent_reported=own,
                     gateway=gateway)


def _positive(harness: str, name: str, value: Any) -> float | None:
    if value in (None, ""):
        return None
    try:
        number = float(str(value))
    except ValueError:
        raise UsageError(f"harness {harness!r}: option {name!r} must be a number, got {value!r}") from None
    if not (math.isfinite(number) and number > 0):
        raise UsageError(f"harness {harness!r}: option {name!r} must be positive, got {value!r}")
    return number


def _last_lines(text: str, lines: int = 5) -> str:
    kept = [line for line in text.strip().splitlines() if line.strip()][-lines:]
    return tail(" | ".join(kept), 1000)


def _save(root: Path, stdout: str, stderr: str) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "stdout.txt").write_text(stdout, encoding="utf-8")
    (root / "stderr.txt").write_text(stderr, encoding="utf-8")


async def _read(env: EnvironmentSession, path: str) -> str:
    try:
        return (await env.read_bytes(path)).decode("utf-8", "replace").strip()
    except InfrastructureError:
        raise
    except Exception:
        return ""
