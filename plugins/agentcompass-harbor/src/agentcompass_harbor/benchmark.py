"""``harbor``: Harbor task directories (the format of Terminal-Bench 2 and many adapted datasets) as an
agentcompass benchmark.

    agentcompass run harbor react openai/MODEL -b dataset=terminal-bench@2.0 --env docker
    agentcompass run harbor react openai/MODEL -b path=TASKS --env docker

Where the tasks come from: ``-b dataset=`` (:mod:`agentcompass_harbor.datasets`: Harbor's registry, a git
repository; fetched and cached by content) or ``-b path=``.

Per task (:mod:`agentcompass_harbor.config` reads the directory):

* **environment** — ``environment/Dockerfile`` is the image (``docker`` builds it once per run, cached by
  content and base image; each task starts when its own image is ready), else ``[environment] docker_image``;
  ``cpus``, ``memory_mb`` (no limit when not given), the network (``network_mode``/``allow_internet``: on
  unless ``no-network``), ``workdir`` (else the Dockerfile's ``WORKDIR``, else ``/app``), ``env``,
  ``build_timeout_sec`` and ``[agent] user`` become the :class:`~agentcompass.runtime.EnvironmentSpec`, with
  Harbor's container settings (``security="docker"``: Docker's default capabilities, no process limit);
* **timeouts** — ``[agent] timeout_sec`` and ``[verifier] timeout_sec`` set the run and evaluate phases'
  timeouts (:meth:`HarborBenchmark.task_timeouts`), unless ``--timeout`` / ``--phase-timeout`` say otherwise;
* **prepare** — creates ``/logs/agent``, ``/logs/verifier``, ``/logs/artifacts`` and runs the
  ``[environment.healthcheck]``. The agent gets ``instruction.md`` (``instruction()``) and
  ``task.data["agent_timeout_sec"]`` (``[agent] timeout_sec``), the time limit the ``react`` and ``command``
  harnesses honour. It never sees ``tests/`` or ``solution/``;
* **oracle** — copies ``solution/`` to ``/solution`` and runs ``solve.sh`` (with ``[solution] env``) within the
  agent's time limit; ``nop`` does nothing;
* **collect** — copies the agent's declared outputs (``artifacts = [...]``, ``/logs/artifacts``) and
  ``/logs/agent`` into the attempt's artifacts;
* **evaluate** — clears ``/logs/verifier``, copies ``tests/`` to ``/tests`` (only now), runs ``tests/test.sh``
  in the working directory with ``[verifier] env`` and its ``timeout_sec``, and reads the reward
  (:mod:`agentcompass_harbor.rewards`): ``reward`` is the primary metric, every key of ``reward.json`` is a
  metric. No reward file, an invalid one, a verifier that times out or dies without a reward: ``EVAL_ERROR``,
  the verifier's output kept (the error's tail, ``artifacts/.../verifier/``). The test script's exit status
  alone decides nothing, as in Harbor.

Verification runs in the agent's environment (Harbor's ``shared`` mode), or — for tasks whose ``[verifier]``
says ``environment_mode = "separate"``, or every task with ``-b verify=fresh`` — in a fresh environment from
the same spec holding only the agent's declared outputs, for tasks where the agent could tamper with the
verifier.

Multi-step tasks (``[[steps]]``, :mod:`agentcompass_harbor.steps`): the harness runs once per step
(:meth:`HarborBenchmark.next_step` verifies each step and gives the next); the reward is Harbor's combination.
Each phase's network policy (:mod:`agentcompass_harbor.network`) is switched to before it runs
(``EnvironmentSession.set_network``); ``gpus`` (:mod:`agentcompass_harbor.gpus`) are a device request, checked
before the agent starts.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

from agentcompass.errors import UsageError
from agentcompass.runtime import (
    BaseBenchmark,
    EnvironmentSession,
    EnvironmentSpec,
    ExecutionPlan,
    PreparedTask,
    RunRequest,
    RunResult,
    TaskSpec,
    TaskStatus,
)
from agentcompass.runtime.benchmark import EvaluationEnvironmentMode
from agentcompass.runtime.logs import get_logger
from agentcompass.runtime.metrics import MetricContract, make_metric_contract
from agentcompass.runtime.types import NetworkPolicy

from agentcompass_harbor import catalog, datasets, gpus, scripts
from agentcompass_harbor import config as config_module
from agentcompass_harbor import steps as steps_module
from agentcompass_harbor.config import HarborTask
from agentcompass_harbor.layout import CONTAINER, WORKDIR, Layout
from agentcompass_harbor.rewards import PRIMARY, RewardError, read_rewards
from agentcompass_harbor.transfer import put_tree

log = get_logger(plugin="harbor")

VALID_OPTIONS = ("path", "dataset", "registry", "verify", "category", "image", "default_image", "workdir", "network",
                 "pass_env", "metrics", "layout")
VERIFY_MODES = ("task", "shared", "fresh")
IMAGE_MODES = ("auto", "build", "prebuilt")
NETWORK_MODES = ("task", "on", "off")
LAYOUTS = ("auto", CONTAINER, WORKDIR)
DEFAULT_WORKDIR = "/app"
DEFAULT_IMAGE = "python:3.11-slim"
#: Environments that run tasks without their images (so cannot build a task's Dockerfile).
IMAGELESS_ENVIRONMENTS = frozenset({"local"})
#: The verifier's time is cut this much short of the evaluate phase's timeout, so that a verifier that runs
#: too long ends as a verifier timeout with its output kept, not as a phase timeout without it.
EVALUATE_SLACK = 15.0
#: Seconds a phase gets beyond the limit the task declares for what runs in it (copying files in and out).
PHASE_MARGIN = 45.0
#: Characters of the verifier's output kept in ``result.artifacts`` and in error messages.
OUTPUT_TAIL = 4000
#: Where the fresh evaluation environment holds the collected outputs (under the runtime's ``artifacts/``).
OUTPUTS = "outputs"
VERIFIER_OUTPUT = "verifier-output.txt"
#: ``/logs/agent`` under ``outputs/``: collected for the record, not put back for a fresh verification.
AGENT_LOGS = "logs/agent"

def _choice(option: str, value: Any, choices: tuple[str, ...]) -> str:
    text = str(value).strip().lower()
    if text not in choices:
        raise UsageError(f"harbor: option {option}={value!r}: expected one of {', '.join(choices)}")
    return text


def _names(value: Any) -> tuple[str, ...]:
    return tuple(dict.fromkeys(v.strip() for v in str(value or "").split(",") if v.strip()))


def _source(options: dict[str, Any]) -> str:
    """``path`` or ``dataset``: where the tasks come from (exactly one is given)."""
    if options.get("path") and options.get("dataset"):
        raise UsageError("harbor: give -b path=DIR or -b dataset=NAME[@VERSION], not both")
    if options.get("dataset"):
        return "dataset"
    if options.get("registry"):
        raise UsageError("harbor: -b registry= names where -b dataset=NAME[@VERSION] is looked up: add -b dataset=")
    if not options.get("path"):
        raise UsageError("benchmark 'harbor' needs -b dataset=NAME[@VERSION] (a dataset of Harbor's registry, or "
                         "git+URL[@REV][#PATH]) or -b path=DIR (a Harbor task directory or a directory of them)")
    return "path"


#: Harbor's dataset metrics the summary computes (``harbor.metrics``): ``mean`` is every scalar's mean; ``sum``,
#: ``min`` and ``max`` are the metric contract's ``aggregates``, over every trial as Harbor's are (a trial
#: without a reward counting 0). ``uv-script`` (a script run with ``uv``) is not computed.
COMPUTED_METRICS = ("mean", "sum", "min", "max")


def dataset_metrics(dataset: datasets.Dataset) -> dict[str, Any]:
    """How the dataset's declared metrics are honoured: ``mean`` (Harbor's default) is the summary's mean
    reward, ``sum``, ``min`` and ``max`` the summary's figures of the same name (:data:`COMPUTED_METRICS`);
    ``uv-script`` is recorded with the tasks and said in the log, as the summary does not compute it."""
    declared = [{"type": m.type, "kwargs": dict(m.kwargs)} for m in dataset.metrics] or [{"type": "mean",
                                                                                           "kwargs": {}}]
    honoured = [m["type"] for m in declared if m["type"] in COMPUTED_METRICS]
    for metric in declared:
        if metric["type"] not in COMPUTED_METRICS:
            log.warning("harbor.dataset_metric_not_computed", dataset=dataset.label, metric=metric["type"],
                        note="the summary reports the mean reward")
    return {"declared": declared, "honoured": honoured}


class HarborBenchmark(BaseBenchmark):
    """Harbor task directories. See the module's documentation; options in the plugin's README."""

    name: ClassVar[str] = "harbor"
    metric_contract: MetricContract = make_metric_contract(primary=PRIMARY, labels={PRIMARY: "Reward"}, binary=True)
    evaluation_environment_mode: EvaluationEnvironmentMode = "reuse"
    evaluate_needs_live_environment: bool = True

    def __init__(self, **options: Any) -> None:
        unknown = sorted(set(options) - set(VALID_OPTIONS))
        if unknown:
            raise UsageError(f"unknown option(s) {', '.join(repr(o) for o in unknown)} for benchmark 'harbor'; "
                             f"valid options: {', '.join(VALID_OPTIONS)}")
        super().__init__(**options)
        source = _source(options)
        self.dataset: datasets.Dataset | None = None
        self.path: Path | None = None
        if source == "dataset":
            try:
                self.dataset = datasets.resolve(str(options["dataset"]), registry=options.get("registry") or None)
            except datasets.DatasetError as exc:
                raise UsageError(f"harbor: {exc}") from None
            self.where = f"dataset {self.dataset.label}"
        else:
            self.path = Path(str(options["path"])).expanduser()
            if not self.path.is_dir():
                raise UsageError(f"harbor: -b path={options['path']}: no such directory")
            self.where = str(self.path)
        self.verify = _choice("verify", options.get("verify", "task"), VERIFY_MODES)
        self.category_key = str(options.get("category", "difficulty")).strip()
        # A registry's tasks name the images Harbor runs them in (pulled when missing), as Harbor does.
        self.image_mode = _choice("image", options.get("image", "prebuilt" if self.dataset else "auto"), IMAGE_MODES)
        self.default_image = str(options.get("default_image") or DEFAULT_IMAGE)
        self.default_workdir = str(options.get("workdir") or DEFAULT_WORKDIR)
        if not self.default_workdir.startswith("/"):
            raise UsageError(f"harbor: option workdir={self.default_workdir!r} must be an absolute path")
        self.network = _choice("network", options.get("network", "task"), NETWORK_MODES)
        self.pass_env = frozenset(_names(options.get("pass_env")))
        self.layout_option = _choice("layout", options.get("layout", "auto"), LAYOUTS)
        extra = tuple(m for m in _names(options.get("metrics")) if m != PRIMARY)
        if self.dataset is not None:
            self._tasks = catalog.load_dirs([(t.task_id, t.directory) for t in self.dataset.tasks], self.where,
                                            pass_env=self.pass_env, default_workdir=self.default_workdir,
                                            builds=self._builds)
            self._sources = {t.task_id: dict(t.source) for t in self.dataset.tasks}
            self.dataset_metrics = dataset_metrics(self.dataset)
        else:
            assert self.path is not None
            self._tasks = catalog.load(self.path, pass_env=self.pass_env, default_workdir=self.default_workdir,
                                       builds=self._builds)
            self._sources = {}
            self.dataset_metrics = {}
        self.metric_contract = make_metric_contract(
            primary=PRIMARY, scalar=(PRIMARY, *extra), labels={PRIMARY: "Reward"}, binary=True,
            aggregates=[m for m in self.dataset_metrics.get("honoured", ()) if m != "mean"])
        self.evaluation_environment_mode = catalog.verification_mode(self._tasks, self.verify, self.where)
        self.evaluate_needs_live_environment = self.evaluation_environment_mode == "reuse"

    # -- tasks ---------------------------------------------------------------------------------------

    def load_tasks(self, req: RunRequest) -> Iterator[TaskSpec]:
        _ = req
        for task_id, resolved in self._tasks.items():
            config = resolved.task.config
            data: dict[str, Any] = {"instruction": resolved.task.instruction,
                                    "verifier_timeout_sec": config.verifier_timeout_sec}
            agent_limit = config.agent_timeout_sec
            if config.steps:  # the harness's limit: the task's, else the longest a step allows
                data["steps"] = [step.name for step in config.steps]
                step_limits = [step.agent_timeout_sec for step in config.steps if step.agent_timeout_sec]
                agent_limit = agent_limit or (max(step_limits) if step_limits else None)
            if agent_limit is not None:
                data["agent_timeout_sec"] = agent_limit
            if config.mcp_servers:  # handed to the installed agents that take them (agentcompass-agents)
                data["mcp_servers"] = [dict(server) for server in config.mcp_servers]
            if config.skills_dir:
                data["skills_dir"] = config.skills_dir
            category = config.metadata.get(self.category_key) if self.category_key else None
            yield TaskSpec(
                task_id=task_id,
                category=str(category) if category not in (None, "") else None,
                data=data,
                metadata={"harbor": {
                    "name": config.name,
                    "schema_version": config.schema_version,
                    "source": config.source,
                    "metadata": catalog.json_safe(config.metadata),
                    "verifier_mode": config.verifier_mode,
                    "unsupported": catalog.unsupported(resolved.task),
                    **({"dataset": {"name": self.dataset.label, **self._sources.get(task_id, {}),
                                    "metrics": self.dataset_metrics}} if self.dataset else {}),
                }},
            )

    def _task(self, task: TaskSpec) -> catalog.Resolved:
        try:
            return self._tasks[task.task_id]
        except KeyError:
            raise RuntimeError(f"harbor: unknown task {task.task_id!r} (not in {self.where})") from None

    def _builds(self, task: HarborTask) -> bool:
        if task.dockerfile is None:
            return False
        return not (self.image_mode == "prebuilt" and task.config.docker_image)

    def needs_image(self, task: HarborTask) -> str | None:
        """Why ``task`` cannot run without its image (its Dockerfile puts something into it, or it names a
        prebuilt image), or ``None``."""
        if self._builds(task):
            assert task.dockerfile is not None
            filled = config_module.dockerfile_fills_image(task.dockerfile)
            return f"environment/Dockerfile runs {', '.join(dict.fromkeys(filled))}" if filled else None
        if task.config.docker_image:
            return f"it runs in the image {task.config.docker_image}"
        return None

    def _refuse_imageless(self, req: RunRequest) -> None:
        """On an environment without images (``local``): a usage error naming every selected task that needs
        its image, before any work — never a task run without it that scores 0."""
        wanted = set(req.tasks.task_ids) if req.tasks.task_ids else None
        needing = [(task_id, why) for task_id, resolved in self._tasks.items()
                   if (wanted is None or task_id in wanted) and (why := self.needs_image(resolved.task))]
        if not needing:
            return
        named = "; ".join(f"{task_id} ({why})" for task_id, why in needing[:5])
        more = f"; and {len(needing) - 5} more" if len(needing) > 5 else ""
        raise UsageError(
            f"harbor: {len(needing)} task(s) need their image, which --env {req.environment} cannot build: "
            f"{named}{more}. Run them with --env docker (or leave them out with -t TASK_ID)")

    def environment_spec(self, task: TaskSpec, req: RunRequest) -> EnvironmentSpec:
        if req.environment in IMAGELESS_ENVIRONMENTS:
            self._refuse_imageless(req)
        resolved = self._task(task)
        harbor, config = resolved.task, resolved.task.config
        # The container starts with the agent phase's network (an allowlist starts without one; prepare_task
        # puts the proxy in front), unless -b network= says on or off for every phase.
        network = config.network.agent.mode == "public" if self.network == "task" else self.network == "on"
        fields: dict[str, Any] = {"workdir": resolved.workdir, "env": dict(resolved.env), "network": network}
        if self._builds(harbor):
            fields.update(build_context=str(harbor.environment_dir.resolve()), dockerfile="Dockerfile")
        elif config.docker_image:
            fields["image"] = config.docker_image
        elif self.image_mode == "build":
            raise ValueError(f"task {task.task_id!r} has no environment/Dockerfile to build")
        else:
            fields["image"] = self.default_image
        # Harbor's container settings: Docker's defaults (its capability set, setuid working), the limits
        # task.toml gives and no others, the declared build timeout.
        fields.update(security="docker", pids_limit=None, build_timeout=config.build_timeout_sec,
                      cpus=config.cpus, memory=f"{config.memory_mb}m" if config.memory_mb is not None else None)
        if config.agent_user is not None:
            fields["user"] = config.agent_user
        if config.gpus:
            fields["gpus"] = config.gpus
        if config.storage_mb:
            fields["storage"] = f"{config.storage_mb}m"
        return EnvironmentSpec(**fields)

    def task_timeouts(self, task: TaskSpec, req: RunRequest) -> dict[str, float]:
        """The phases a task's declared limits need: ``[verifier] timeout_sec`` (and the time to put the tests
        in and bring the reward out) for ``evaluate``, ``[agent] timeout_sec`` (and the time to put the
        solution in) for ``run``. ``--timeout`` and ``--phase-timeout`` still win."""
        _ = req
        config = self._task(task).task.config
        timeouts = {"evaluate": config.verifier_timeout_sec + EVALUATE_SLACK + PHASE_MARGIN}
        if config.steps:
            # Each step's agent run, and each step's verification, is bounded by the run phase's timeout.
            limits = [s.agent_timeout_sec or config.agent_timeout_sec for s in config.steps]
            verifiers = [s.verifier_timeout_sec or config.verifier_timeout_sec for s in config.steps]
            if all(limit is not None for limit in limits):
                timeouts["run"] = max([*(lim for lim in limits if lim is not None), *verifiers]) + PHASE_MARGIN
            return timeouts
        if config.agent_timeout_sec is not None:
            timeouts["run"] = config.agent_timeout_sec + PHASE_MARGIN
        return timeouts

    # -- layout --------------------------------------------------------------------------------------

    def _layout(self, plan: ExecutionPlan, env: EnvironmentSession, resolved: catalog.Resolved) -> Layout:
        kind = self.layout_option
        if kind == "auto":
            kind = WORKDIR if plan.environment == "local" else CONTAINER
        return Layout(kind, str(env.workdir), resolved.workdir)

    def instruction(self, task: TaskSpec, prepared: PreparedTask) -> str:
        """``instruction.md``; in the workdir layout (``local``) with the task's paths mapped."""
        text = str(task.data["instruction"])
        if "step" in prepared.metadata:
            text = self._task(task).task.step_instructions[int(prepared.metadata["step"])]
        layout = prepared.metadata.get("layout")
        if isinstance(layout, Mapping) and layout.get("kind") == WORKDIR:
            return Layout(WORKDIR, str(layout["workdir"]), str(layout["task_workdir"])).rewrite(text)
        return text

    # -- phases --------------------------------------------------------------------------------------

    async def prepare_task(
        self, task: TaskSpec, req: RunRequest, plan: ExecutionPlan, env: EnvironmentSession | None = None
    ) -> PreparedTask:
        """Create Harbor's log directories and run the healthcheck. Idempotent."""
        resolved, env = self._task(task), _require(env, "prepare_task")
        layout = self._layout(plan, env, resolved)
        made = await env.exec(["mkdir", "-p", layout.agent_dir, layout.verifier_dir, layout.artifacts_dir],
                              timeout=120)
        if made.returncode != 0 or made.timed_out:
            raise RuntimeError(f"cannot create {layout.logs}/agent, verifier, artifacts in the environment "
                               f"(as its user): {_one_line(made.stderr or made.stdout)}")
        config = resolved.task.config
        if config.gpus:
            await gpus.require(env, config.gpus, config.gpu_types)
        if self.network == "task" and config.network.agent.mode == "allowlist":
            await _switch_network(env, config.network.agent, task.task_id, "agent")
        check = config.healthcheck
        if check is not None:
            await _healthcheck(env, check.command, check.retries, check.interval_sec, check.timeout_sec,
                               check.start_period_sec, check.start_interval_sec)
        if config.steps:
            await _stage_step(env, layout, resolved, 0)
        return PreparedTask(task_id=task.task_id, metadata={
            "layout": {"kind": layout.kind, "workdir": layout.workdir, "task_workdir": layout.task_workdir},
            "verify": self.evaluation_environment_mode,
            # A multi-step task: the step under way, and each finished step's record (a list they append to).
            **({"step": 0, "steps": []} if config.steps else {}),
        })

    async def apply_reference_solution(
        self,
        task: TaskSpec,
        prepared: PreparedTask,
        req: RunRequest,
        plan: ExecutionPlan,
        env: EnvironmentSession | None = None,
    ) -> RunResult:
        """The oracle: ``solution/`` to ``/solution``, then ``solve.sh`` within the agent's time limit. Its
        exit status is recorded; the verifier decides the reward."""
        resolved, env = self._task(task), _require(env, "apply_reference_solution")
        harbor = resolved.task
        solution_dir, limit = harbor.solution_dir, harbor.config.agent_timeout_sec
        which = "[agent] timeout_sec"
        if "step" in prepared.metadata:  # a multi-step task: the step's solution/ (else the task's), its limit
            index = int(prepared.metadata["step"])
            solution_dir = harbor.step_solution_dir(index)
            if harbor.config.steps[index].agent_timeout_sec:
                limit, which = harbor.config.steps[index].agent_timeout_sec, "[steps.agent] timeout_sec"
            which = f"step {harbor.config.steps[index].name!r}, {which}"
        if not (solution_dir / "solve.sh").is_file():
            raise RuntimeError(f"task {task.task_id!r} has no {solution_dir.relative_to(harbor.directory)}/solve.sh, "
                               "so the oracle cannot run it")
        layout = self._layout(plan, env, resolved)
        staging = _staging(layout, "solution")
        with tempfile.TemporaryDirectory(prefix="agentcompass-harbor-") as scratch:
            staged = await asyncio.to_thread(layout.staged_copy, solution_dir, Path(scratch))
            executables = await put_tree(env, staged, staging)
        started = time.perf_counter()
        solved = await env.exec(
            ["sh", "-c", scripts.move_in_and_run(staging, layout.solution, "solve.sh", executables), "solve"],
            timeout=limit, env={**resolved.solution_env, "DEBIAN_FRONTEND": "noninteractive"},
        )
        seconds = time.perf_counter() - started
        output = solved.stdout + solved.stderr
        if solved.returncode == scripts.SETUP_FAILED and not solved.timed_out:
            raise RuntimeError(f"cannot put the solution in place: {_one_line(output)}")
        if plan.artifacts_dir:
            name = f"oracle-{harbor.config.steps[int(prepared.metadata['step'])].name}.txt" \
                if "step" in prepared.metadata else "oracle.txt"
            await asyncio.to_thread(_write, Path(plan.artifacts_dir) / "agent" / name, output)
        record = {"returncode": None if solved.timed_out else solved.returncode, "seconds": round(seconds, 6),
                  "output_tail": _tail(output)}
        if solved.timed_out:
            return RunResult(task_id=task.task_id, category=task.category, status=TaskStatus.RUN_ERROR,
                             error=f"the reference solution timed out after {limit:g} s ({which})",
                             error_phase="run", artifacts={"oracle": record})
        return RunResult(task_id=task.task_id, category=task.category, status=TaskStatus.COMPLETED,
                         artifacts={"oracle": record})

    async def next_step(
        self,
        task: TaskSpec,
        prepared: PreparedTask,
        result: RunResult,
        req: RunRequest,
        plan: ExecutionPlan,
        env: EnvironmentSession | None = None,
    ) -> PreparedTask | None:
        """A multi-step task: verify the step the agent just finished (its ``tests/`` over the task's, its
        verifier's limit and variables), record it, and give the next step — unless this was the last, its
        verifier failed, or its reward is under its ``min_reward`` (Harbor stops there too). A step whose agent
        failed (``result`` a ``RUN_ERROR``: a harness error, its time limit) is verified all the same and the
        steps go on when it has a reward, as Harbor's ``MultiStepTrial`` does; the failure is in its record."""
        resolved = self._task(task)
        harbor = resolved.task
        if not harbor.config.steps:
            return None
        env = _require(env, "next_step")
        index = int(prepared.metadata["step"])
        step = harbor.config.steps[index]
        layout = self._layout(plan, env, resolved)
        phases = harbor.config.network
        switching = self.network == "task" and phases.verifier != phases.agent
        if switching:
            await _switch_network(env, phases.verifier, task.task_id, "verifier")
        timeout = step.verifier_timeout_sec or harbor.config.verifier_timeout_sec
        with tempfile.TemporaryDirectory(prefix="agentcompass-harbor-") as scratch:
            tests = await asyncio.to_thread(_merged_tests, harbor, index, Path(scratch))
            try:
                verified = await self._verify(env, layout, plan, tests, timeout, "the step's verifier timeout_sec",
                                              {**resolved.verifier_env, **step.verifier_env},
                                              f"steps/{step.name}/verifier", [], [])
                record: dict[str, Any] = {"name": step.name, "rewards": verified["rewards"], "verifier": verified}
            except RuntimeError as exc:
                record = {"name": step.name, "error": str(exc)}
        if result.status is not TaskStatus.COMPLETED:
            record["agent_error"] = result.error or result.status.value
        records = prepared.metadata["steps"]
        records.append(record)
        stop = steps_module.stop_reason(record, step.min_reward)
        if stop is not None:
            record["stopped"] = stop
            log.info("harbor.steps_stopped", task_id=task.task_id, step=step.name, reason=stop)
        if stop is not None or index + 1 == len(harbor.config.steps):
            return None
        if switching:
            await _switch_network(env, phases.agent, task.task_id, "agent")
        await _stage_step(env, layout, resolved, index + 1)
        return PreparedTask(task_id=task.task_id, metadata={**prepared.metadata, "step": index + 1})

    async def collect_artifacts(
        self,
        task: TaskSpec,
        prepared: PreparedTask,
        result: RunResult,
        req: RunRequest,
        plan: ExecutionPlan,
        env: EnvironmentSession | None = None,
    ) -> RunResult:
        """Copy the agent's declared outputs (``artifacts``, ``/logs/artifacts``) and ``/logs/agent`` into
        ``plan.artifacts_dir``: under ``outputs/`` by their path in the environment. Never scores."""
        resolved, env = self._task(task), _require(env, "collect_artifacts")
        layout = self._layout(plan, env, resolved)
        sources = {layout.agent_dir: AGENT_LOGS, layout.artifacts_dir: "logs/artifacts"}
        for artifact in resolved.task.config.artifacts:
            placed = layout.place(artifact.source)
            sources[placed] = _relative(artifact.source, resolved.workdir)
        listing = await env.exec(["sh", "-c", scripts.LIST, "list", *sources], timeout=120)
        if listing.returncode != 0 or listing.timed_out:
            raise RuntimeError(f"cannot look for the agent's outputs: {_one_line(listing.stderr)}")
        present = [line[2:] for line in listing.stdout.splitlines() if line[:2] in ("f ", "d ")]
        collected = []
        if present and not plan.artifacts_dir:
            raise RuntimeError("plan.artifacts_dir is not set; cannot save the agent's outputs")
        for path in present:
            if path not in sources:
                continue
            target = Path(plan.artifacts_dir) / OUTPUTS / sources[path]
            await asyncio.to_thread(target.parent.mkdir, parents=True, exist_ok=True)
            await env.download(path, target)
            collected.append(sources[path])
        return replace(result, artifacts={**result.artifacts, "outputs": collected})

    async def evaluate(
        self,
        task: TaskSpec,
        prepared: PreparedTask,
        result: RunResult,
        req: RunRequest,
        plan: ExecutionPlan,
        env: EnvironmentSession | None = None,
    ) -> RunResult:
        """Run ``tests/test.sh`` and read the reward (see the module's documentation); a multi-step task's
        reward comes from its steps' (verified after each, :meth:`next_step`) as Harbor computes it."""
        resolved = self._task(task)
        if resolved.task.config.steps:
            records = list(prepared.metadata.get("steps") or [])
            if result.status is TaskStatus.COMPLETED and not result.error:
                rewards = steps_module.combine(records, resolved.task.config.reward_strategy)
                return replace(result, metrics=rewards, artifacts={**result.artifacts, "steps": records})
            if not records:
                return replace(result, metrics={})
            # A step's agent failed: the attempt stays a RUN_ERROR, unscored, as a single-step task's agent
            # failure is; what Harbor scores the trial (it verified each step all the same) is kept beside.
            try:
                harbor_reward: dict[str, float] | None = steps_module.combine(
                    records, resolved.task.config.reward_strategy)
            except steps_module.NoStepReward:
                harbor_reward = None
            return replace(result, metrics={},
                           artifacts={**result.artifacts, "steps": records, "harbor_reward": harbor_reward})
        if result.status is not TaskStatus.COMPLETED or result.error:
            return replace(result, metrics={})
        env = _require(env, "evaluate")
        harbor = resolved.task
        layout = self._layout(plan, env, resolved)
        fresh = self.evaluation_environment_mode == "fresh"
        outputs = list(result.artifacts.get("outputs") or []) if fresh else []
        placed_back = [(f"artifacts/{OUTPUTS}/{rel}", layout.place("/" + rel)) for rel in outputs
                       if rel != AGENT_LOGS]
        uploaded = await asyncio.to_thread(_entries, plan.artifacts_dir) if fresh else []
        phases = harbor.config.network
        # What the environment has now: the agent's policy, or — a fresh one — what it started with.
        current = NetworkPolicy("public" if phases.agent.mode == "public" else "no-network") if fresh \
            else phases.agent
        if self.network == "task" and phases.verifier != current:
            await _switch_network(env, phases.verifier, task.task_id, "verifier")
        timeout, why = self._verifier_timeout(harbor, plan)
        verified = await self._verify(env, layout, plan, harbor.tests_dir, timeout, why, resolved.verifier_env,
                                      "verifier", placed_back, uploaded)
        return replace(
            result,
            metrics=verified["rewards"],
            artifacts={**result.artifacts, "verifier": {**verified, "environment": "fresh" if fresh else "shared"}},
        )

    async def _verify(self, env: EnvironmentSession, layout: Layout, plan: ExecutionPlan, tests_dir: Path,
                      timeout: float, why: str, verifier_env: Mapping[str, str], where: str,
                      placed_back: list[tuple[str, str]], uploaded: list[str]) -> dict[str, Any]:
        """Run the verifier of ``tests_dir`` (its ``test.sh``) and read its reward; ``/logs/verifier`` and its
        output are kept under the attempt's artifacts at ``where``."""
        staging = _staging(layout, "tests")
        with tempfile.TemporaryDirectory(prefix="agentcompass-harbor-") as scratch:
            staged = await asyncio.to_thread(layout.staged_copy, tests_dir, Path(scratch))
            executables = await put_tree(env, staged, staging)
        script = scripts.verify(layout, staging, placed_back, [f"artifacts/{name}" for name in uploaded],
                                executables)
        started = time.perf_counter()
        run = await env.exec(["sh", "-c", script, "verify"], timeout=timeout, env=dict(verifier_env))
        seconds = time.perf_counter() - started
        report = scripts.parse_report(run.stderr)
        output = run.stdout + (("\n" + report.stderr) if report.stderr.strip() else "")
        if run.returncode == scripts.SETUP_FAILED and not run.timed_out:
            raise RuntimeError(f"cannot set up the verification: {_one_line(output)}")
        with tempfile.TemporaryDirectory(prefix="agentcompass-harbor-") as scratch:
            host_dir = Path(plan.artifacts_dir) / where if plan.artifacts_dir else Path(scratch) / "verifier"
            if not run.timed_out:
                await self._keep_verifier_dir(env, layout, report, host_dir)
            await asyncio.to_thread(_write, host_dir / VERIFIER_OUTPUT, output)
            saved = f"; its output is in the attempt's artifacts ({where}/{VERIFIER_OUTPUT})" \
                if plan.artifacts_dir else ""
            if run.timed_out:
                raise RuntimeError(f"the verifier timed out after {timeout:g} s ({why}){saved}; "
                                   f"output: {_one_line(output)}")
            try:
                rewards, source = await asyncio.to_thread(read_rewards, host_dir)
            except RewardError as exc:
                status = f"exit status {run.returncode}" if run.returncode >= 0 else f"killed ({run.returncode})"
                raise RuntimeError(f"{exc} (the verifier's {status}){saved}; output: {_one_line(output)}") from None
        return {"reward_file": source, "rewards": rewards, "returncode": run.returncode,
                "seconds": round(seconds, 6), "output_tail": _tail(output)}

    def _verifier_timeout(self, task: HarborTask, plan: ExecutionPlan) -> tuple[float, str]:
        own = task.config.verifier_timeout_sec
        phase = plan.timeouts.get("evaluate")
        if phase is not None and phase - EVALUATE_SLACK < own:
            bound = max(phase - EVALUATE_SLACK, phase * 0.5)
            return bound, (f"the evaluate phase's timeout of {phase:g} s, less a margin; the task allows "
                           f"{own:g} s: raise it with --phase-timeout evaluate={own + EVALUATE_SLACK + PHASE_MARGIN:g}"
                           " or leave it out")
        return own, "the task's [verifier] timeout_sec"

    @staticmethod
    async def _keep_verifier_dir(env: EnvironmentSession, layout: Layout, report: scripts.Report,
                                 target: Path) -> None:
        """``/logs/verifier`` to the host: the reward files from the verification's report, the whole directory
        when the verifier left more (or the report is incomplete); nothing when the verifier removed it."""
        if report.complete and not report.others:
            for name, data in report.files.items():
                await asyncio.to_thread(_write_bytes, target / name, data)
            await asyncio.to_thread(target.mkdir, parents=True, exist_ok=True)
            return
        try:
            await env.download(layout.verifier_dir, target)
        except Exception as exc:  # gone: no reward file, reported as such
            log.info("harbor.verifier_dir_missing", error=str(exc)[:200])
            await asyncio.to_thread(target.mkdir, parents=True, exist_ok=True)


async def _stage_step(env: EnvironmentSession, layout: Layout, resolved: catalog.Resolved, index: int) -> None:
    """Before a step's agent runs, as Harbor does: ``steps/NAME/workdir/`` copied into the working directory,
    then its ``setup.sh`` (when there is one) run there; a setup that fails fails the step."""
    harbor = resolved.task
    source = harbor.step_dir(index) / "workdir"
    if not source.is_dir():
        return
    name = harbor.config.steps[index].name
    workdir = layout.place(resolved.workdir)
    staging = _staging(layout, "workdir")
    with tempfile.TemporaryDirectory(prefix="agentcompass-harbor-") as scratch:
        staged = await asyncio.to_thread(layout.staged_copy, source, Path(scratch))
        await put_tree(env, staged, staging)
    setup = 'if [ -f setup.sh ]; then bash setup.sh; fi' if (source / "setup.sh").is_file() else "true"
    done = await env.exec(["sh", "-c", f'mkdir -p "$1" && cp -a "$2/." "$1/" && rm -rf "$2" && cd "$1" && {setup}',
                           "stage", workdir, staging], timeout=600)
    if done.returncode != 0 or done.timed_out:
        raise RuntimeError(f"step {name!r}: its workdir/ or setup.sh failed: {_one_line(done.stderr or done.stdout)}")


def _merged_tests(task: HarborTask, index: int, scratch: Path) -> Path:
    """A step's tests as Harbor gives them: the task's ``tests/`` with the step's ``tests/`` copied over it."""
    target = scratch / "tests"
    target.mkdir()
    for source in (task.tests_dir, task.step_tests_dir(index)):
        if source is not None and source.is_dir():
            shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True)
    return target


def _staging(layout: Layout, what: str) -> str:
    """Where a directory of the task goes before a script moves it into place."""
    return f"{layout.root or '/tmp'}/agentcompass-harbor-{what}-{os.urandom(6).hex()}"

async def _healthcheck(env: EnvironmentSession, command: str, retries: int, interval: float, timeout: float,
                       start_period: float, start_interval: float) -> None:
    """Harbor's healthcheck: ``retries`` consecutive failures (after the start period) fail the task."""
    started = time.monotonic()
    failures = 0
    while True:
        check = await env.exec(["sh", "-c", command], timeout=timeout)
        if check.returncode == 0 and not check.timed_out:
            return
        in_start = time.monotonic() - started < start_period
        if not in_start:
            failures += 1
            if failures >= retries:
                raise RuntimeError(f"the environment's healthcheck failed {failures} times: "
                                   f"{_one_line(check.stderr or check.stdout)}")
        await asyncio.sleep(start_interval if in_start else interval)


async def _switch_network(env: EnvironmentSession, policy: NetworkPolicy, task_id: str, phase: str) -> None:
    """The ``phase``'s network policy from now on; an environment that cannot switch says so in the log (the
    phase then runs with the environment's network as it is)."""
    try:
        await env.set_network(policy)
    except NotImplementedError as exc:
        log.warning("harbor.network_policy_not_enforced", task_id=task_id, phase=phase, mode=policy.mode,
                    error=str(exc))


def _require(env: EnvironmentSession | None, phase: str) -> EnvironmentSession:
    if env is None:
        raise RuntimeError(f"harbor needs an environment in {phase}")
    return env


def _relative(source: str, workdir: str) -> str:
    """Where a declared output goes under ``outputs/``: its absolute path without the leading ``/``."""
    path = source if source.startswith("/") else f"{workdir.rstrip('/')}/{source}"
    return path.lstrip("/") or "."


def _entries(directory: str) -> list[str]:
    """The names in ``directory`` (none when it is not one)."""
    return sorted(os.listdir(directory)) if directory and os.path.isdir(directory) else []


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _tail(text: str) -> str:
    return text if len(text) <= OUTPUT_TAIL else "…" + text[-OUTPUT_TAIL:]


def _one_line(text: str, limit: int = 600) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    joined = " | ".join(lines)
    return (joined if len(joined) <= limit else "…" + joined[-limit:]) or "(no output)"

