"""The ``taubench`` benchmark: tau2-bench's mock, airline, retail and telecom domains, run and scored as tau2
does.

* ``prepare_task`` uploads the staging directory (the stdlib runner package, the domain's policy and
  databases, the user simulator's guidelines) into the task's environment — under docker an image built once
  holds them instead — and writes the request;
* ``run_task`` execs ``python3 -m taubench_runner run``: the conversation between the agent (role ``agent``)
  and the user simulator (role ``user``), both reached through the run's model gateway;
  ``apply_reference_solution`` (the ``oracle`` harness) execs ``... oracle`` instead, which replays the gold
  actions with no model;
* ``collect_artifacts`` saves the trajectory as ``trajectory.json`` in the attempt's artifacts;
* ``evaluate`` execs ``... evaluate`` in the same environment (``reuse``): tau2's reward and its breakdown
  (the judge role ``judge`` for NL assertions).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

from agentcompass.errors import InfrastructureError, UsageError
from agentcompass.runtime import (
    EnvironmentSession,
    EnvironmentSpec,
    ExecutionPlan,
    HarnessFreeBenchmark,
    PreparedTask,
    RunRequest,
    RunResult,
    TaskSpec,
    TaskStatus,
)
from agentcompass.runtime.metrics import MetricContract, make_metric_contract
from agentcompass.runtime.options import boolean, positive_int
from taubench_runner import tasks as task_fields
from taubench_runner.domains import DOMAINS, policy_variants

from agentcompass_taubench import data

SPLITS = ("base", "train", "test")
NL_POLICIES = ("judge", "exclude")
TRAJECTORY_FILE = "trajectory.json"
#: Runner exit statuses (``taubench_runner.__main__``).
EXIT_MODEL_ERROR, EXIT_PROTOCOL_ERROR, EXIT_MISSING_INPUT = 3, 4, 5
#: Metric names of the reward's components (tau2's ``RewardType``).
COMPONENTS = {"DB": "db", "ENV_ASSERTION": "env_assertion", "ACTION": "action", "COMMUNICATE": "communicate",
              "NL_ASSERTION": "nl_assertion"}
#: How option errors begin.
OPTION = "taubench option"
ORACLE_NO_JUDGE = "not judged: the oracle harness calls no model (give --judge-model to judge them)"


def _number(name: str, value: Any, *, positive: bool = False) -> float:
    try:
        number = float(str(value).strip())
    except ValueError:
        raise UsageError(f"taubench option {name!r} must be a number, got {value!r}") from None
    if number != number or number in (float("inf"), float("-inf")) or (positive and number <= 0) or number < 0:
        kind = "a positive number" if positive else "a number of 0 or more"
        raise UsageError(f"taubench option {name!r} must be {kind}, got {value!r}")
    return number


def _file_name(name: str, value: Any) -> str:
    text = str(value).strip()
    if not text or "/" in text or "\\" in text or text in (".", ".."):
        raise UsageError(f"taubench option {name!r} must be a file name in the domain directory (such as "
                         f"tasks.json or tasks_small.json), got {value!r}")
    return text


def _choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    text = str(value).strip()
    if text not in choices:
        raise UsageError(f"taubench option {name!r} must be one of {', '.join(choices)}, got {value!r}")
    return text


class TauBenchBenchmark(HarnessFreeBenchmark):
    """tau2-bench's half-duplex conversations: see the module docstring and the plugin's README.

    Options (``-b key=value``): ``domain`` (``mock``, ``airline``, ``retail``, ``telecom`` or a comma list;
    default ``mock``), ``split`` (``base``, ``train``, ``test``; default ``base``), ``data_dir`` (another copy
    of tau2's ``data/tau2``), ``task_set`` (the task file in each domain's directory; default ``tasks.json``,
    telecom's ``tasks_small.json``), ``policy`` (a policy variant: telecom's ``manual``, its default, or
    ``workflow``, upstream's ``telecom-workflow``), ``max_steps`` (200), ``max_errors`` (10), ``nl_assertions``
    (``judge``, or ``exclude`` to leave out the tasks whose reward needs the judge), ``user_temperature`` (0),
    ``timeout`` (seconds for the runner; default: the run phase's), ``enforce_communication_protocol`` (false),
    ``bake`` (true: under docker the runner and the data are built into the image).
    """

    name: ClassVar[str] = "taubench"
    evaluation_environment_mode = "reuse"
    metric_contract: MetricContract = make_metric_contract(
        "reward",
        # ``nl_assertion`` is in a result's metrics only when it was judged (tau2 judges it only when it is in
        # the task's basis), so it is not averaged over the run.
        scalar=("reward", "db", "env_assertion", "action", "communicate"),
        labels={"reward": "Reward", "db": "DB", "env_assertion": "Env assertions", "action": "Actions",
                "communicate": "Communicate"},
        binary=True,
        bounds=(0, 1),
    )
    OPTIONS: ClassVar[tuple[str, ...]] = (
        "domain", "split", "data_dir", "task_set", "policy", "max_steps", "max_errors", "nl_assertions",
        "user_temperature", "timeout", "enforce_communication_protocol", "bake",
    )

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        unknown = sorted(set(options) - set(self.OPTIONS))
        if unknown:
            raise UsageError(
                f"unknown option(s) for benchmark {self.name!r}: {', '.join(unknown)}; "
                f"valid options: {', '.join(self.OPTIONS)}"
            )
        raw_domains = str(options.get("domain", "mock"))
        self.domains = tuple(dict.fromkeys(d.strip() for d in raw_domains.split(",") if d.strip()))
        if not self.domains:
            raise UsageError(f"taubench option 'domain' names no domain; domains: {', '.join(DOMAINS)}")
        bad = [d for d in self.domains if d not in DOMAINS]
        if bad:
            raise UsageError(
                f"taubench option 'domain': unknown domain(s) {', '.join(map(repr, bad))}; domains: "
                f"{', '.join(DOMAINS)}"
            )
        self.split = _choice("split", options.get("split", "base"), SPLITS)
        self.root = data.resolve_root(options.get("data_dir"))
        self.task_set = None if options.get("task_set") is None else _file_name("task_set", options["task_set"])
        self.policy = None if options.get("policy") is None else str(options["policy"]).strip()
        for domain in self.domains if self.policy is not None else ():
            variants = policy_variants(domain)
            if self.policy not in variants:
                raise UsageError(f"taubench option 'policy': domain {domain!r} has no policy variant "
                                 f"{self.policy!r}; variants: {', '.join(variants)}")
        self.max_steps = positive_int(OPTION, "max_steps", options.get("max_steps", 200))
        self.max_errors = positive_int(OPTION, "max_errors", options.get("max_errors", 10))
        self.nl_policy = _choice("nl_assertions", options.get("nl_assertions", "judge"), NL_POLICIES)
        self.user_temperature = _number("user_temperature", options.get("user_temperature", 0))
        raw_timeout = options.get("timeout")
        self.timeout = None if raw_timeout is None else _number("timeout", raw_timeout, positive=True)
        self.enforce_protocol = boolean(OPTION, "enforce_communication_protocol",
                                      options.get("enforce_communication_protocol", False))
        self.bake = boolean(OPTION, "bake", options.get("bake", True))
        self.staging = data.Staging(self.policy)

    # -- tasks ------------------------------------------------------------------------------------

    def load_tasks(self, req: RunRequest) -> Iterator[TaskSpec]:
        specs = []
        for domain in self.domains:
            for task in data.load_tasks(self.root, domain, self.split, self.task_set, self.policy):
                needs = task_fields.needs_judge(task)
                if needs and self.nl_policy == "exclude":
                    continue
                specs.append(TaskSpec(
                    task_id=f"{domain}/{task['id']}",
                    category=domain,
                    data={"domain": domain, "task": task},
                    metadata={"upstream_id": task["id"], "split": self.split, "needs_judge": needs},
                ))
        if req.harness:  # a run (``tasks list`` asks with no harness)
            self._check_roles(req, specs)
            for domain in self.domains:  # a malformed database is a usage error before any task starts
                self.staging.get(self.root, domain)
        return iter(specs)

    def _check_roles(self, req: RunRequest, specs: list[TaskSpec]) -> None:
        roles = {r for r, m in req.models.roles.items() if m}
        if req.harness != "oracle" and "user" not in roles:
            raise UsageError(
                "benchmark 'taubench' needs a user simulator: set --user-model MODEL (the oracle harness needs none)"
            )
        selected = specs
        if req.tasks.task_ids:
            wanted = set(req.tasks.task_ids)
            selected = [s for s in specs if s.task_id in wanted]
        if req.tasks.limit is not None:
            selected = selected[: req.tasks.limit]
        judged = [s for s in selected if s.metadata["needs_judge"]]
        if judged and "judge" not in roles and req.harness != "oracle":
            raise UsageError(
                f"{len(judged)} of the {len(selected)} selected taubench tasks score NL assertions with an LLM "
                "judge: set --judge-model MODEL, or leave those tasks out with -b nl_assertions=exclude"
            )

    def environment_spec(self, task: TaskSpec, req: RunRequest) -> EnvironmentSpec:
        """``python:3.11-slim`` with no network. Under docker (unless ``-b bake=false``) an image built from it
        holds the runner and the data, so that a task's container only needs its request; and since only the
        runner runs there (the agent's tools are the runner's own code, never commands), writing nothing but its
        request and outputs in the working directory, a container goes on to the next task once reset
        (``recycle``)."""
        if self._baked(req.environment):
            return EnvironmentSpec(image=data.BASE_IMAGE, recycle=True,
                                   build_context=str(self.staging.context(self.root, self.domains)))
        return EnvironmentSpec(image=data.BASE_IMAGE)

    def _baked(self, environment: str) -> bool:
        return self.bake and environment == "docker"

    # -- lifecycle --------------------------------------------------------------------------------

    def _request(self, task: TaskSpec, req: RunRequest, plan: ExecutionPlan) -> dict[str, Any]:
        domain = task.data["domain"]
        paths = data.env_paths(domain, self._baked(plan.environment))
        has_judge = "judge" in plan.model_endpoints
        skip_nl = None
        if task.metadata.get("needs_judge") and not has_judge:
            skip_nl = ORACLE_NO_JUDGE if plan.harness == "oracle" else "not judged: no judge model was configured"
        return {
            "domain": domain,
            "task": _plain(task.data["task"]),
            "data_dir": paths["data_dir"],
            "guidelines_dir": paths["guidelines_dir"],
            "trusted_db": True,
            "policy": self.policy,
            "max_steps": self.max_steps,
            "max_errors": self.max_errors,
            "enforce_communication_protocol": self.enforce_protocol,
            "agent": {"model": "agent", "params": {"temperature": 0.0}},
            "user": {"model": "user", "params": {"temperature": self.user_temperature}},
            "judge": {"model": "judge", "params": {"temperature": 0.0}} if has_judge else None,
            "skip_nl": skip_nl,
            "request_timeout": req.models.request_timeout,
        }

    async def _place(self, task: TaskSpec, req: RunRequest, plan: ExecutionPlan, env: EnvironmentSession) -> None:
        """The request, and the runner with the domain's data unless the image holds them."""
        domain = task.data["domain"]
        if not self._baked(plan.environment):
            staging = await asyncio.to_thread(self.staging.get, self.root, domain)
            await env.upload(staging, data.ENV_ROOT)
        request = self._request(task, req, plan)
        await env.write_text(data.env_paths(domain)["request"], json.dumps(request, ensure_ascii=False))

    async def prepare_task(
        self, task: TaskSpec, req: RunRequest, plan: ExecutionPlan, env: EnvironmentSession | None = None
    ) -> PreparedTask:
        """Upload the runner, the domain data and the request. The same files each time, so a retry can call
        it again; the runner removes a stale output before it starts."""
        if env is None:
            raise RuntimeError("taubench requires an EnvironmentSession")
        await self._place(task, req, plan, env)
        paths = data.env_paths(task.data["domain"], self._baked(plan.environment))
        return PreparedTask(task_id=task.task_id, metadata={
            "official_runner": {
                "package_dir": paths["root"], "request_path": paths["request"], "result_path": paths["trajectory"],
                "evaluation_path": paths["evaluation"], "timeout_seconds": self.timeout,
            },
            "domain": task.data["domain"],
            "upstream_id": task.metadata.get("upstream_id"),
        })

    async def run_task(
        self, task: TaskSpec, prepared: PreparedTask, req: RunRequest, plan: ExecutionPlan,
        env: EnvironmentSession | None = None,
    ) -> RunResult:
        if env is None:
            raise RuntimeError("taubench requires an EnvironmentSession")
        return await self._converse("run", task, prepared, plan, env)

    async def apply_reference_solution(
        self, task: TaskSpec, prepared: PreparedTask, req: RunRequest, plan: ExecutionPlan,
        env: EnvironmentSession | None = None,
    ) -> RunResult:
        """The gold actions replayed by the runner, through the same orchestrator, with no model."""
        if env is None:
            raise RuntimeError("taubench requires an EnvironmentSession")
        return await self._converse("oracle", task, prepared, plan, env)

    async def _converse(
        self, command: str, task: TaskSpec, prepared: PreparedTask, plan: ExecutionPlan, env: EnvironmentSession
    ) -> RunResult:
        runner = prepared.metadata["official_runner"]
        execution = await env.exec(
            ["python3", "-S", "-m", "taubench_runner", command, "--request", runner["request_path"],
             "--output", runner["result_path"], "--stdout"],
            timeout=runner["timeout_seconds"], env={"PYTHONPATH": runner["package_dir"]},
        )
        detail = (execution.stderr or execution.stdout).strip()
        if execution.timed_out:
            return self._failed(task, f"the taubench runner timed out after {runner['timeout_seconds']}s"
                                + (f": {detail}" if detail else ""))
        if execution.returncode in (0, EXIT_MODEL_ERROR, EXIT_PROTOCOL_ERROR):
            payload = await _output(env, execution.stdout, runner["result_path"])
            if execution.returncode == 0:
                return RunResult(task_id=task.task_id, category=task.category, status=TaskStatus.COMPLETED,
                                 final_answer=payload.get("final_answer"), artifacts={"official_result": payload})
            await asyncio.to_thread(_save_trajectory, plan, payload, "trajectory.partial.json")
            message = detail.splitlines()[-1] if detail else "the taubench runner failed"
            if execution.returncode == EXIT_PROTOCOL_ERROR:
                # tau2 fails such a simulation and retries it: worth an attempt again (--retries).
                raise InfrastructureError(message)
            return self._failed(task, message, artifacts={"official_result": _summary(payload)})
        return self._failed(task, detail or f"the taubench runner exited with status {execution.returncode}")

    @staticmethod
    def _failed(task: TaskSpec, error: str, artifacts: Mapping[str, Any] | None = None) -> RunResult:
        return RunResult(task_id=task.task_id, category=task.category, status=TaskStatus.RUN_ERROR, error=error,
                         artifacts=dict(artifacts or {}))

    async def collect_artifacts(
        self, task: TaskSpec, prepared: PreparedTask, result: RunResult, req: RunRequest, plan: ExecutionPlan,
        env: EnvironmentSession | None = None,
    ) -> RunResult:
        """Save the trajectory as ``trajectory.json`` among the attempt's artifacts; the result keeps its
        summary. Never scores."""
        payload = result.artifacts.get("official_result")
        if result.status is not TaskStatus.COMPLETED or not isinstance(payload, dict) or "messages" not in payload:
            return result
        await asyncio.to_thread(_save_trajectory, plan, payload, TRAJECTORY_FILE)
        return replace(result, artifacts={**result.artifacts, "official_result": _summary(payload)})

    async def evaluate(
        self, task: TaskSpec, prepared: PreparedTask, result: RunResult, req: RunRequest, plan: ExecutionPlan,
        env: EnvironmentSession | None = None,
    ) -> RunResult:
        """tau2's reward, by the runner's ``evaluate`` in the task's environment. A failure of the verifier
        raises (the runtime records ``EVAL_ERROR``)."""
        if result.status is not TaskStatus.COMPLETED or result.error:
            return replace(result, metrics={})
        if env is None:
            raise RuntimeError("taubench evaluation requires the task's environment")
        paths = data.env_paths(task.data["domain"], self._baked(plan.environment))
        runner = prepared.metadata.get("official_runner") or {}
        trajectory = runner.get("result_path", paths["trajectory"])
        execution = await self._verify(env, paths, trajectory)
        if execution.returncode == EXIT_MISSING_INPUT or "No module named taubench_runner" in execution.stderr:
            # A fresh environment (``agentcompass evaluate``): the runner, the data and the request again, and
            # the trajectory from the collected artifacts.
            await self._place(task, req, plan, env)
            trajectory = f"artifacts/{TRAJECTORY_FILE}"
            execution = await self._verify(env, paths, trajectory)
        if execution.timed_out or execution.returncode != 0:
            detail = (execution.stderr or execution.stdout).strip()
            raise RuntimeError(f"the taubench verifier failed (exit {execution.returncode}): "
                               f"{detail.splitlines()[-1] if detail else 'no output'}")
        evaluation = await _output(env, execution.stdout, paths["evaluation"])
        metrics = {"reward": float(evaluation["reward"])}
        for name, value in (evaluation.get("components") or {}).items():
            if name in COMPONENTS and value is not None:
                metrics[COMPONENTS[name]] = float(value)
        return replace(result, metrics=metrics, artifacts={**result.artifacts, "evaluation": evaluation})

    @staticmethod
    async def _verify(env: EnvironmentSession, paths: Mapping[str, str], trajectory: str) -> Any:
        return await env.exec(
            ["python3", "-S", "-m", "taubench_runner", "evaluate", "--request", paths["request"], "--trajectory",
             trajectory, "--output", paths["evaluation"], "--stdout"],
            env={"PYTHONPATH": paths["root"]},
        )


async def _output(env: EnvironmentSession, stdout: str, path: str) -> Any:
    """The runner's output JSON: from its stdout, or from the file when stdout was cut short."""
    try:
        return json.loads(stdout)
    except ValueError:
        return json.loads(await env.read_text(path))


def _plain(value: Any) -> Any:
    """``value`` with every mapping a dict and every sequence a list, ready for ``json.dumps``."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _summary(payload: Mapping[str, Any]) -> dict[str, Any]:
    """What a result keeps of a trajectory (the whole of it is ``trajectory.json``)."""
    keys = ("termination_reason", "steps", "num_errors", "mode", "model_calls", "runner",
            "duration_seconds", "error")
    out = {k: payload[k] for k in keys if k in payload}
    out["messages"] = len(payload.get("messages") or ())
    out["trajectory_file"] = TRAJECTORY_FILE
    return out


def _save_trajectory(plan: ExecutionPlan, payload: Mapping[str, Any], name: str) -> None:
    if not plan.artifacts_dir:
        return
    directory = Path(plan.artifacts_dir)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text(json.dumps(payload, ensure_ascii=False, indent=1), encoding="utf-8")
