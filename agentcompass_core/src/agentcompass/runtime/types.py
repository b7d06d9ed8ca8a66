"""Value types of the public API.

Every type here is a frozen stdlib dataclass, so plugin code can use ``dataclasses.replace`` on it (the
spec does exactly that with ``RunResult``). JSON (un)structuring goes through the one converter in
``agentcompass.serialization``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
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

    def __post_init__(self) -> None:
        if self.security not in SECURITY_PROFILES:
            raise ValueError(f"EnvironmentSpec.security must be one of {', '.join(SECURITY_PROFILES)}, "
                             f"got {self.security!r}")


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
class RunRequest:
    """What the user asked for. Recorded in ``run.json``; holds no secret."""

    benchmark: str
    harness: str
    model: str
    environment: str = "local"
    benchmark_args: Mapping[str, str] = field(default_factory=dict)
    harness_args: Mapping[str, str] = field(default_factory=dict)
    model_args: Mapping[str, str] = field(default_factory=dict)
    environment_args: Mapping[str, str] = field(default_factory=dict)
    role_models: Mapping[str, str] = field(default_factory=dict)
    #: ``--model-alias NAME=ROLE``: model names an agent asks the gateway for, by the role that answers them.
    model_aliases: Mapping[str, str] = field(default_factory=dict)
    concurrency: int = 8
    max_environments: int | None = None
    limit: int | None = None
    task_ids: tuple[str, ...] = ()
    retries: int = 0
    timeout: float | None = None
    phase_timeouts: Mapping[str, float] = field(default_factory=dict)
    run_id: str = ""
    # Model connection and budgets (``--model-base-url`` ...). Credentials never go here: the key is read
    # from the environment variable ``model_api_key_env`` names (or a config file) when clients are built.
    model_base_url: str | None = None
    model_api_key_env: str | None = None
    max_retries: int = 5
    max_connections: int = 64
    request_timeout: float = 600.0
    max_tokens_per_task: int | None = None
    max_cost: float | None = None
    prices: str | None = None
    #: Where attempts run (``--executor``), and its options (``--executor-arg``).
    executor: str = "local"
    executor_args: Mapping[str, str] = field(default_factory=dict)
    #: How many times each task runs (``--trials``); the unit of work is the pair (task, trial).
    trials: int = 1
    #: The run's seed (``--seed``); every (task, trial) gets its own seed derived from it. The runner records
    #: the one it chose when none was given, so a resume and another machine reproduce the same seeds.
    seed: int | None = None
    #: The address the run's model gateway listens on (``--gateway-host``). Loopback by default; a remote
    #: executor whose workers run on other machines needs an address they can reach (``0.0.0.0`` or this
    #: machine's), which exposes the gateway's per-attempt-token endpoint to that network.
    gateway_host: str = "127.0.0.1"
    #: Names of environment variables whose values the run masks in everything it writes (``--secret-env``),
    #: besides the provider keys and every credential-named variable (:mod:`agentcompass.runtime.known_secrets`).
    secret_env: tuple[str, ...] = ()
    #: Per-role connection settings (``[models.ROLE]`` of a run config file), by role.
    role_settings: Mapping[str, RoleModelSettings] = field(default_factory=dict)
    #: ``--replay RUN_DIR``: answer every model call from that recorded run (``--replay-miss error|live``: what
    #: a call the recording does not hold does; ``--replay-latency``: wait each call's recorded latency).
    replay: str | None = None
    replay_miss: str = "error"
    replay_latency: bool = False
    #: ``--cache DIR``: a model-answer cache shared across runs; ``--cache-expiry``: how old an entry may be
    #: (seconds, or ``30m``, ``12h``, ``7d``).
    cache: str | None = None
    cache_expiry: str | None = None


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
