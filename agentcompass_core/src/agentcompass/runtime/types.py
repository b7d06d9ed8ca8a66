"""Value types of the public API.

Every type here is a frozen stdlib dataclass, so plugin code can use ``dataclasses.replace`` on it (the
spec does exactly that with ``RunResult``). JSON (un)structuring goes through the one converter in
``agentcompass.serialization``.
"""

from __future__ import annotations

import enum
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentcompass.runtime.models import ModelClient


class TaskStatus(enum.Enum):
    """How a task attempt ended.

    ``COMPLETED`` means the agent ran to the end and the result was scored (the score may be 0).
    Every other status is an error kind, kept apart so that execution failures are never mixed up with
    scoring failures.
    """

    COMPLETED = "COMPLETED"
    PREPARE_ERROR = "PREPARE_ERROR"
    RUN_ERROR = "RUN_ERROR"
    EVAL_ERROR = "EVAL_ERROR"
    CANCELLED = "CANCELLED"
    #: A budget stopped the task (``--max-tokens-per-task``, ``--max-cost``): not a crash, not retried.
    LIMIT_REACHED = "LIMIT_REACHED"

    @property
    def is_error(self) -> bool:
        return self is not TaskStatus.COMPLETED


@dataclass(frozen=True)
class TaskSpec:
    """One task of a benchmark, as ``load_tasks`` yields it."""

    task_id: str
    category: str | None = None
    data: Mapping[str, Any] = field(default_factory=dict)
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PreparedTask:
    """What ``prepare_task`` placed in the environment, for the later phases."""

    task_id: str
    metadata: Mapping[str, Any] = field(default_factory=dict)


#: The values of :attr:`EnvironmentSpec.security`.
SECURITY_PROFILES = ("hardened", "docker")


@dataclass(frozen=True)
class EnvironmentSpec:
    """Where a task runs. ``local`` honours ``workdir``-independent fields only (env, files); ``docker``
    honours all of them.

    :param image: image to run (``docker``); built from ``build_context`` when that is set.
    :param build_context: a directory with a Dockerfile; the image is built once per run, by content hash.
    :param dockerfile: the Dockerfile's name inside ``build_context``.
    :param workdir: working directory inside the container; relative paths resolve against it.
    :param env: extra environment variables for every ``exec``.
    :param network: give the container a network. Off by default: tasks reach models via the gateway.
    :param memory: memory limit (docker syntax, e.g. ``"2g"``); ``None``: no limit.
    :param cpus: CPU limit; ``None``: no limit.
    :param pids_limit: process limit; ``None``: no limit.
    :param user: run as this user inside the container (``None``: the image's default).
    :param read_only: mount the root file system read-only (the working directory stays writable).
    :param security: the container settings the task was written for (:data:`SECURITY_PROFILES`).
        ``"hardened"`` (the default): every capability dropped and ``no-new-privileges``, so even root inside
        cannot change users, own files of others or bind low ports. ``"docker"``: Docker's own defaults, which
        task suites written for a plain ``docker run`` (Harbor, Terminal-Bench) expect: Docker's default
        capability set and working setuid, so ``apt-get install`` as root works. Never privileged either
        way; the environment's own options (``--env-arg security=``) override it.
    :param build_args: build arguments (``--build-arg``) for ``build_context``; part of the image's cache key.
    :param build_timeout: seconds a build of this image may take; ``None``: the environment's default.
    :param gpus: a device request for this many GPUs (``docker``: ``--gpus N``); an environment that cannot give
        them fails to start, saying so. ``None``: none.
    :param storage: a limit on the container's writable layer (docker syntax, e.g. ``"10240m"``), where the
        engine supports it (``docker``: ``--storage-opt size=``, overlay2 on xfs with ``pquota``); where it does
        not, the environment says so in a warning naming it and runs without. ``None``: no limit.
    :param recycle: a task of this spec changes nothing outside its working directory, ``/tmp`` and ``/dev/shm``
        (a benchmark that runs only its own code in the environment, never an agent's commands, can promise
        that), so an environment may hand one task's container, those emptied and every process it left killed,
        to the next task of the same spec instead of starting a new one (``docker``: saves the engine's
        container start and removal per task). ``local`` ignores it.
    """

    image: str = "python:3.11-slim"
    build_context: str | None = None
    dockerfile: str = "Dockerfile"
    workdir: str = "/workspace"
    env: Mapping[str, str] = field(default_factory=dict)
    network: bool = False
    memory: str | None = "2g"
    cpus: float | None = 1.0
    pids_limit: int | None = 512
    user: str | None = None
    read_only: bool = False
    security: str = "hardened"
    build_args: Mapping[str, str] = field(default_factory=dict)
    build_timeout: float | None = None
    gpus: int | None = None
    storage: str | None = None
    recycle: bool = False

    def __post_init__(self) -> None:
        if self.security not in SECURITY_PROFILES:
            raise ValueError(f"EnvironmentSpec.security must be one of {', '.join(SECURITY_PROFILES)}, "
                             f"got {self.security!r}")


#: The network policies an environment session may be switched to (:meth:`EnvironmentSession.set_network`).
NETWORK_MODES = ("public", "no-network", "allowlist")


@dataclass(frozen=True)
class NetworkPolicy:
    """What a session may reach from now on: ``public`` (the environment's network), ``no-network`` (no route at
    all) or ``allowlist`` (only ``allowed_hosts``: host names, ``*.`` wildcards, IP addresses and CIDR ranges,
    through an egress proxy the environment starts; ``HTTP_PROXY``/``HTTPS_PROXY`` point at it)."""

    mode: str = "public"
    allowed_hosts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.mode not in NETWORK_MODES:
            raise ValueError(f"NetworkPolicy.mode must be one of {', '.join(NETWORK_MODES)}, got {self.mode!r}")
        if self.allowed_hosts and self.mode != "allowlist":
            raise ValueError("NetworkPolicy.allowed_hosts is only valid with mode='allowlist'")


@dataclass(frozen=True)
class ExecResult:
    """Outcome of ``EnvironmentSession.exec``. ``returncode`` is -9 style negative for a killed process."""

    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False


@dataclass(frozen=True)
class ModelEndpoint:
    """An endpoint for one model role, served by the run's model gateway in every protocol it speaks.

    ``api_key`` is a token the gateway issued for this task attempt; it is not a provider credential and it
    stops working when the attempt ends.
    """

    base_url: str
    api_key: str
    model: str

    def env(self) -> dict[str, str]:
        """Environment variables that point each vendor's SDKs and CLIs at this endpoint, with the attempt's
        token as their key:

        * OpenAI (SDKs, Codex, OpenCode, aider, mini-swe-agent): ``OPENAI_BASE_URL`` / ``OPENAI_API_BASE`` (the
          URL, ending in ``/v1``) and ``OPENAI_API_KEY``;
        * Anthropic (SDKs, Claude Code): ``ANTHROPIC_BASE_URL`` (the root, without ``/v1``) and
          ``ANTHROPIC_API_KEY``;
        * Gemini (SDK, Gemini CLI): ``GOOGLE_GEMINI_BASE_URL`` / ``GEMINI_BASE_URL`` (the root) and
          ``GEMINI_API_KEY``;
        * ``AGENTCOMPASS_MODEL``: the model name to ask for (any name works: see ``--model-alias``).
        """
        root = self.base_url.rstrip("/").removesuffix("/v1")
        return {
            "OPENAI_BASE_URL": self.base_url,
            "OPENAI_API_BASE": self.base_url,
            "OPENAI_API_KEY": self.api_key,
            "ANTHROPIC_BASE_URL": root,
            "ANTHROPIC_API_KEY": self.api_key,
            "GOOGLE_GEMINI_BASE_URL": root,
            "GEMINI_BASE_URL": root,
            "GEMINI_API_KEY": self.api_key,
            "AGENTCOMPASS_MODEL": self.model,
        }


#: The model roles a run may have: the model under test, a user simulator, a judge.
MODEL_ROLES = ("agent", "user", "judge")


@dataclass(frozen=True)
class RoleModelSettings:
    """How one model role reaches its provider: ``[models.user]`` / ``[models.judge]`` in a run config file.

    Unset fields fall back to the run's: ``max_connections`` to ``--max-connections``; ``base_url`` and
    ``api_key_env`` to ``--model-base-url`` / ``--model-api-key-env`` when the role uses the agent's provider.
    The agent's own settings are the request's ``model_base_url``, ``model_api_key_env`` and ``model_args``, so
    ``role_settings["agent"]`` may set only ``max_connections``. Holds no secret: only the key's variable *name*.
    """

    base_url: str | None = None
    api_key_env: str | None = None
    #: Options of the role's model (as ``--model-arg`` for the agent): values are strings, JSON where they parse.
    args: Mapping[str, str] = field(default_factory=dict)
    max_connections: int | None = None


@dataclass(frozen=True)
class TaskSelection:
    """Which work a run is: ``--task-id``, ``--limit``, ``--trials`` and ``--seed``."""

    task_ids: tuple[str, ...] = ()
    limit: int | None = None
    #: How many times each task runs; the unit of work is the pair (task, trial).
    trials: int = 1
    #: The run's seed; every (task, trial) gets its own seed derived from it. The runner records the one it
    #: chose when none was given, so a resume and another machine reproduce the same seeds.
    seed: int | None = None


@dataclass(frozen=True)
class Schedule:
    """How attempts are scheduled and timed: ``--concurrency``, ``--max-environments``, ``--retries``,
    ``--timeout`` (the run phase), ``--phase-timeout`` (any phase, by name) and ``--stall-timeout`` (seconds an
    attempt may show no sign of life before the watchdog stops it; ``None``: each phase's default,
    :data:`agentcompass.supervision.STALL_DEFAULTS`)."""

    concurrency: int = 8
    max_environments: int | None = None
    retries: int = 0
    timeout: float | None = None
    phase_timeouts: Mapping[str, float] = field(default_factory=dict)
    stall_timeout: float | None = None


@dataclass(frozen=True)
class Budget:
    """What a run may spend: ``--max-tokens-per-task`` (agent and user tokens of one attempt) and ``--max-cost``
    (US dollars for the whole run; needs a price for every model it limits)."""

    max_tokens_per_task: int | None = None
    max_cost: float | None = None


@dataclass(frozen=True)
class ModelAccess:
    """How the run reaches its models. Credentials never go here: the key is read from the environment
    variable ``api_key_env`` names (or a credentials file) when the clients are built.

    :param roles: the model (``PROVIDER/NAME``) of each role besides the agent's (``--user-model``,
        ``--judge-model``); the agent's is :attr:`RunRequest.model`.
    :param aliases: ``--model-alias NAME=ROLE``: model names an agent asks the gateway for, by the role that
        answers them.
    :param base_url: ``--model-base-url``, the agent provider's endpoint.
    :param api_key_env: ``--model-api-key-env``, the variable holding the agent provider's key.
    :param role_settings: per-role connection settings (``[models.ROLE]`` of a run config file).
    :param prices: ``--prices``, a JSON price table extending the built-in one.
    :param secret_env: names of variables whose values the run masks in everything it writes, besides the
        provider keys and every credential-named variable (:mod:`agentcompass.runtime.known_secrets`).
    """

    roles: Mapping[str, str] = field(default_factory=dict)
    aliases: Mapping[str, str] = field(default_factory=dict)
    base_url: str | None = None
    api_key_env: str | None = None
    role_settings: Mapping[str, RoleModelSettings] = field(default_factory=dict)
    max_retries: int = 5
    max_connections: int = 64
    request_timeout: float = 600.0
    prices: str | None = None
    secret_env: tuple[str, ...] = ()


@dataclass(frozen=True)
class AnswerSources:
    """Where model answers may come from besides the live model.

    ``replay``: a recorded run's directory that answers every call (``replay_miss``: what a call it does not
    hold does, ``"error"`` or ``"live"``; ``replay_latency``: wait each call's recorded latency). ``cache``: a
    model-answer cache directory shared across runs (``cache_expiry``: how old an entry may be, in seconds or
    ``30m``, ``12h``, ``7d``).
    """

    replay: str | None = None
    replay_miss: str = "error"
    replay_latency: bool = False
    cache: str | None = None
    cache_expiry: str | None = None
    #: ``--faults PROFILE``: a fault profile (TOML file or built-in name) injected into every model call
    #: (:mod:`agentcompass.models.faults`).
    faults: str | None = None


@dataclass(frozen=True)
class Execution:
    """Where attempts run (``--executor`` and its ``--executor-arg`` options) and where the run's model gateway
    listens (``--gateway-host``: loopback by default; a remote executor whose workers run on other machines
    needs an address they can reach, which exposes the gateway's per-attempt-token endpoint to that network)."""

    executor: str = "local"
    executor_args: Mapping[str, str] = field(default_factory=dict)
    gateway_host: str = "127.0.0.1"


#: The groups of a :class:`RunRequest`, by attribute.
REQUEST_GROUPS: Mapping[str, type] = {
    "tasks": TaskSelection, "schedule": Schedule, "budget": Budget, "models": ModelAccess,
    "answers": AnswerSources, "execution": Execution,
}

#: Every run option by its name (the ``agentcompass run`` flag's, ``_`` for ``-``; the name a flat request had in
#: 0.1.0) and where it lives in a request: ``(group, field)``, group ``None`` for a field of the request itself.
REQUEST_OPTIONS: Mapping[str, tuple[str | None, str]] = {
    **{name: (None, name) for name in ("benchmark", "harness", "model", "environment", "benchmark_args",
                                       "harness_args", "model_args", "environment_args", "run_id")},
    **{name: ("tasks", name) for name in ("task_ids", "limit", "trials", "seed")},
    **{name: ("schedule", name) for name in ("concurrency", "max_environments", "retries", "timeout",
                                             "phase_timeouts", "stall_timeout")},
    **{name: ("budget", name) for name in ("max_tokens_per_task", "max_cost")},
    "role_models": ("models", "roles"), "model_aliases": ("models", "aliases"),
    "model_base_url": ("models", "base_url"), "model_api_key_env": ("models", "api_key_env"),
    **{name: ("models", name) for name in ("role_settings", "max_retries", "max_connections", "request_timeout",
                                           "prices", "secret_env")},
    **{name: ("answers", name) for name in ("replay", "replay_miss", "replay_latency", "cache", "cache_expiry",
                                            "faults")},
    **{name: ("execution", name) for name in ("executor", "executor_args", "gateway_host")},
}

#: The release in which reading a 0.1.0 flat name off a request (``req.concurrency``) stops working.
FLAT_NAMES_REMOVED_IN = "0.3.0"


def fold_flat_options(values: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments of :class:`RunRequest` from options by name (:data:`REQUEST_OPTIONS`), grouped:
    ``{"concurrency": 4, "model": "mock"}`` -> ``{"schedule": Schedule(concurrency=4), "model": "mock"}``.
    Groups given whole in ``values`` are the base the named options change. An unknown name is a TypeError."""
    out: dict[str, Any] = {}
    grouped: dict[str, dict[str, Any]] = {}
    for name, value in values.items():
        if name in REQUEST_GROUPS:
            out[name] = value
            continue
        where = REQUEST_OPTIONS.get(name)
        if where is None:
            raise TypeError(f"RunRequest has no option {name!r}")
        group, attr = where
        if group is None:
            out[attr] = value
        else:
            grouped.setdefault(group, {})[attr] = value
    for group, changes in grouped.items():
        base = out.get(group) or REQUEST_GROUPS[group]()
        out[group] = replace(base, **changes)
    return out


@dataclass(frozen=True, init=False)
class RunRequest:
    """What the user asked for. Recorded in ``run.json``; holds no secret.

    What to run is on the request itself (``benchmark``, ``harness``, ``model``, ``environment`` and each one's
    options); the rest comes in groups: :attr:`tasks` (which work), :attr:`schedule` (concurrency, retries,
    timeouts), :attr:`budget` (token and cost limits), :attr:`models` (roles, aliases, connection, prices),
    :attr:`answers` (replay, cache) and :attr:`execution` (executor, gateway address).

    Every run option also has a name (:data:`REQUEST_OPTIONS`, the ``agentcompass run`` flag's): read one with
    :meth:`option`, change some with :meth:`with_options`. The flat names of 0.1.0 (``req.concurrency``,
    ``RunRequest(..., concurrency=4)``) still work, with a :class:`DeprecationWarning` naming the new place,
    until :data:`FLAT_NAMES_REMOVED_IN`.
    """

    benchmark: str
    harness: str
    model: str
    environment: str = "local"
    benchmark_args: Mapping[str, str] = field(default_factory=dict)
    harness_args: Mapping[str, str] = field(default_factory=dict)
    model_args: Mapping[str, str] = field(default_factory=dict)
    environment_args: Mapping[str, str] = field(default_factory=dict)
    run_id: str = ""
    tasks: TaskSelection = field(default_factory=TaskSelection)
    schedule: Schedule = field(default_factory=Schedule)
    budget: Budget = field(default_factory=Budget)
    models: ModelAccess = field(default_factory=ModelAccess)
    answers: AnswerSources = field(default_factory=AnswerSources)
    execution: Execution = field(default_factory=Execution)

    def __init__(self, benchmark: str, harness: str, model: str, environment: str = "local",
                 benchmark_args: Mapping[str, str] | None = None, harness_args: Mapping[str, str] | None = None,
                 model_args: Mapping[str, str] | None = None, environment_args: Mapping[str, str] | None = None,
                 run_id: str = "", tasks: TaskSelection | None = None, schedule: Schedule | None = None,
                 budget: Budget | None = None, models: ModelAccess | None = None,
                 answers: AnswerSources | None = None, execution: Execution | None = None,
                 **flat_options: Any) -> None:
        groups: dict[str, Any] = {"tasks": tasks, "schedule": schedule, "budget": budget, "models": models,
                                  "answers": answers, "execution": execution}
        if flat_options:
            unknown = sorted(n for n in flat_options if n not in REQUEST_OPTIONS)
            if unknown:
                raise TypeError(f"RunRequest has no option {unknown[0]!r}")
            _warn_flat(f"RunRequest({', '.join(f'{n}=...' for n in flat_options)})",
                       "pass the groups instead (" + ", ".join(_path(n) for n in flat_options) + ")", 2)
            folded = fold_flat_options({**{k: v for k, v in groups.items() if v is not None}, **flat_options})
            for name in list(folded):
                if name in groups:
                    groups[name] = folded.pop(name)
            if folded:
                raise TypeError(f"RunRequest got {', '.join(folded)} both by name and as a 0.1.0 option")
        set_ = object.__setattr__
        set_(self, "benchmark", benchmark)
        set_(self, "harness", harness)
        set_(self, "model", model)
        set_(self, "environment", environment)
        set_(self, "benchmark_args", {} if benchmark_args is None else benchmark_args)
        set_(self, "harness_args", {} if harness_args is None else harness_args)
        set_(self, "model_args", {} if model_args is None else model_args)
        set_(self, "environment_args", {} if environment_args is None else environment_args)
        set_(self, "run_id", run_id)
        for name, kind in REQUEST_GROUPS.items():
            value = groups[name]
            set_(self, name, kind() if value is None else value)

    if not TYPE_CHECKING:  # type checkers flag the 0.1.0 names; at run time they still work, with a warning

        def __getattr__(self, name: str) -> Any:
            # Only called for names the request does not have: the flat option names of 0.1.0.
            where = REQUEST_OPTIONS.get(name)
            if where is None or where[0] is None or name.startswith("__"):
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            _warn_flat(f"RunRequest.{name}", f"read it as req.{_path(name)}", 2)
            return getattr(object.__getattribute__(self, where[0]), where[1])

    def option(self, name: str) -> Any:
        """The value of the run option ``name`` (:data:`REQUEST_OPTIONS`: ``"concurrency"``, ``"max_cost"``)."""
        group, attr = _where(name)
        return getattr(self if group is None else getattr(self, group), attr)

    def with_options(self, **values: Any) -> RunRequest:
        """A copy with the run options ``values`` changed, by name (``req.with_options(concurrency=4)``)."""
        for name in values:
            _where(name)
        return replace(self, **fold_flat_options({
            **{g: getattr(self, g) for g in {REQUEST_OPTIONS[n][0] for n in values} if g is not None}, **values}))


def _where(name: str) -> tuple[str | None, str]:
    try:
        return REQUEST_OPTIONS[name]
    except KeyError:
        raise KeyError(f"no run option {name!r}; options: {', '.join(sorted(REQUEST_OPTIONS))}") from None


def _path(name: str) -> str:
    group, attr = REQUEST_OPTIONS[name]
    return attr if group is None else f"{group}.{attr}"


def _warn_flat(what: str, instead: str, stacklevel: int) -> None:
    warnings.warn(f"{what} is the flat request of agentcompass 0.1.0, deprecated and removed in "
                  f"{FLAT_NAMES_REMOVED_IN}: {instead}", DeprecationWarning, stacklevel=stacklevel + 1)


@dataclass(frozen=True)
class ExecutionPlan:
    """How one task attempt is executed: identifiers, timeouts and the models it may use.

    ``model_endpoints[role]`` serves code inside the environment over HTTP; ``models[role]`` is the
    in-process async client for Python harnesses and benchmarks. Both are metered into the trajectory.
    """

    run_id: str
    task_id: str
    attempt: int = 1
    #: Which trial of the task this is (1..``--trials``), and its seed: use it for anything random.
    trial: int = 1
    seed: int = 0
    harness: str = "none"
    environment: str = "local"
    artifacts_dir: str = ""
    timeouts: Mapping[str, float | None] = field(default_factory=dict)
    model_endpoints: Mapping[str, ModelEndpoint] = field(default_factory=dict, repr=False)
    models: Mapping[str, ModelClient] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class RunResult:
    """The result of one task attempt; the last attempt's is the task's final record.

    Construct with keywords, as the spec does. ``metrics`` is filled by ``evaluate`` only.
    """

    task_id: str
    category: str | None = None
    status: TaskStatus = TaskStatus.COMPLETED
    final_answer: Any = None
    error: str | None = None
    artifacts: Mapping[str, Any] = field(default_factory=dict)
    metrics: Mapping[str, float] = field(default_factory=dict)
    attempt: int = 1
    trial: int = 1
    #: The (task, trial)'s seed (``plan.seed``), recorded so a run can show it used the same seeds as another.
    seed: int | None = None
    error_phase: str | None = None
    timings: Mapping[str, float] = field(default_factory=dict)
    usage: Mapping[str, Any] = field(default_factory=dict)
