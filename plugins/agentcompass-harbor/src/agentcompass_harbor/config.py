"""A Harbor task directory and its ``task.toml``, read the way Harbor 0.25 reads them.

::

    task/
    ├── instruction.md      what the agent is told
    ├── task.toml           [metadata] [agent] [verifier] [environment] [solution], artifacts = [...]
    ├── environment/        Dockerfile (and its build context)
    ├── solution/solve.sh   the reference solution (the oracle only)
    └── tests/test.sh       the verifier: writes /logs/verifier/reward.txt or reward.json

The fields and defaults follow Harbor's ``TaskConfig`` (``harbor.models.task.config``): ``[agent] timeout_sec``
(none), ``user``; ``[verifier] timeout_sec`` (600), ``env``, ``user``, ``environment_mode`` (``shared`` or
``separate``; ``separate`` when a ``[verifier.environment]`` is given); ``[environment] build_timeout_sec``
(600), ``docker_image``, ``cpus``, ``memory_mb``, ``storage_mb``, ``gpus``, ``network_mode`` (``public``,
``no-network``, ``allowlist``; default ``public``), ``workdir``, ``env``, ``os``, ``healthcheck``; ``[solution]
env``; the top-level ``artifacts`` (paths, or ``{source, destination, exclude}`` tables); and the legacy
spellings Harbor still accepts (``version``, ``memory = "2G"``, ``storage``, ``allow_internet``). Keys Harbor
does not know are ignored, as Harbor ignores them; a value of the wrong type is an error naming the file and
the key.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from agentcompass.runtime.types import NetworkPolicy

from agentcompass_harbor import network as network_module
from agentcompass_harbor.network import PhasePolicies

CONFIG = "task.toml"
INSTRUCTION = "instruction.md"
NETWORK_MODES = ("public", "no-network", "allowlist")


class HarborFormatError(ValueError):
    """A task directory or its ``task.toml`` is not valid Harbor."""


@dataclass(frozen=True)
class Healthcheck:
    command: str
    interval_sec: float = 5.0
    timeout_sec: float = 30.0
    start_period_sec: float = 0.0
    start_interval_sec: float = 5.0
    retries: int = 3


@dataclass(frozen=True)
class Artifact:
    """An output the agent declares (``artifacts = [...]``): a path in the environment."""

    source: str
    destination: str | None = None
    exclude: tuple[str, ...] = ()


@dataclass(frozen=True)
class Step:
    """One ``[[steps]]`` entry: its own instruction (``steps/NAME/instruction.md``), agent time limit, verifier
    (``steps/NAME/tests/``, over the task's ``tests/``), and the reward it must reach for the next to run."""

    name: str
    agent_timeout_sec: float | None = None
    verifier_timeout_sec: float | None = None
    verifier_env: Mapping[str, str] = field(default_factory=dict)
    #: ``reward`` at least this (a number), or each named key at least its value (a table); else the steps after
    #: this one do not run.
    min_reward: float | Mapping[str, float] | None = None


STEP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
REWARD_STRATEGIES = ("mean", "final")


@dataclass(frozen=True)
class TaskConfig:
    schema_version: str = "1.0"
    name: str | None = None
    description: str = ""
    source: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    agent_timeout_sec: float | None = None
    agent_user: str | None = None
    verifier_timeout_sec: float = 600.0
    verifier_env: Mapping[str, str] = field(default_factory=dict)
    verifier_user: str | None = None
    #: ``shared`` (the agent's environment) or ``separate`` (a fresh one).
    verifier_mode: str = "shared"
    #: A ``[verifier.environment]`` table was given (Harbor builds a separate verifier image from it).
    verifier_environment: bool = False
    build_timeout_sec: float = 600.0
    docker_image: str | None = None
    cpus: float | None = None
    memory_mb: int | None = None
    storage_mb: int | None = None
    gpus: int | None = None
    gpu_types: tuple[str, ...] = ()
    #: ``[[environment.mcp_servers]]``: ``{name, transport, url | command, args}`` each (headers left out).
    mcp_servers: tuple[Mapping[str, Any], ...] = ()
    #: ``[environment] skills_dir``: a directory in the environment whose skills the agent gets.
    skills_dir: str | None = None
    #: An ``[environment.tpu]`` table was given.
    tpu: bool = False
    network_mode: str = "public"
    allowed_hosts: tuple[str, ...] = ()
    #: What the agent and the verifier may reach (:mod:`agentcompass_harbor.network`).
    network: PhasePolicies = field(default_factory=lambda: network_module.phases(NetworkPolicy(), None, None))
    workdir: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    os: str = "linux"
    healthcheck: Healthcheck | None = None
    solution_env: Mapping[str, str] = field(default_factory=dict)
    artifacts: tuple[Artifact, ...] = ()
    multi_step: bool = False
    steps: tuple[Step, ...] = ()
    #: How a multi-step task's reward comes from its steps' (``multi_step_reward_strategy``, default ``mean``).
    reward_strategy: str = "mean"
    #: Fields the task declares that are read but not honoured here (named as ``section.key``, with why).
    not_honoured: tuple[str, ...] = ()


class _Reader:
    """Typed reads from one table of ``task.toml``, with errors that name the file and the key."""

    def __init__(self, path: Path, table: Any, where: str) -> None:
        if table is None:
            table = {}
        if not isinstance(table, dict):
            raise HarborFormatError(f"{path}: [{where}] must be a table")
        self.path, self.table, self.where = path, table, where

    def _key(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def _bad(self, key: str, expected: str) -> HarborFormatError:
        return HarborFormatError(f"{self.path}: {self._key(key)} must be {expected}, got {self.table[key]!r}")

    def has(self, key: str) -> bool:
        return self.table.get(key) is not None

    def number(self, key: str, default: float | None = None) -> float | None:
        value = self.table.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise self._bad(key, "a positive number")
        return float(value)

    def integer(self, key: str, default: int | None = None, minimum: int = 1) -> int | None:
        value = self.table.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self._bad(key, f"a whole number of at least {minimum}")
        return value

    def string(self, key: str, default: str | None = None) -> str | None:
        value = self.table.get(key)
        if value is None:
            return default
        if not isinstance(value, str):
            raise self._bad(key, "a string")
        return value

    def user(self, key: str) -> str | None:
        value = self.table.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise self._bad(key, "a user name or id")
        return str(value)

    def boolean(self, key: str) -> bool | None:
        value = self.table.get(key)
        if value is None:
            return None
        if not isinstance(value, bool):
            raise self._bad(key, "true or false")
        return value

    def strings(self, key: str) -> dict[str, str]:
        value = self.table.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise self._bad(key, "a table of strings")
        out = {}
        for k, v in value.items():
            if isinstance(v, bool) or not isinstance(v, (str, int, float)):
                raise HarborFormatError(f"{self.path}: {self._key(key)}.{k} must be a string, got {v!r}")
            out[k] = str(v)
        return out

    def table_of(self, key: str) -> _Reader:
        return _Reader(self.path, self.table.get(key), self._key(key))


def _size_mb(path: Path, key: str, value: Any) -> int:
    """Harbor's legacy sizes: ``"2G"``, ``"512M"``, ``"1024K"``."""
    text = str(value).strip().upper()
    try:
        if text.endswith("G"):
            return int(float(text[:-1]) * 1024)
        if text.endswith("M"):
            return int(float(text[:-1]))
        if text.endswith("K"):
            return int(float(text[:-1]) / 1024)
    except ValueError:
        pass
    raise HarborFormatError(f"{path}: environment.{key} must be a size like '2G' or '512M', got {value!r}")


def _artifacts(path: Path, value: Any) -> tuple[Artifact, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise HarborFormatError(f"{path}: artifacts must be a list")
    out = []
    for entry in value:
        if isinstance(entry, str):
            artifact = Artifact(entry)
        elif isinstance(entry, dict) and isinstance(entry.get("source"), str):
            exclude = entry.get("exclude") or []
            if not isinstance(exclude, list) or not all(isinstance(e, str) for e in exclude):
                raise HarborFormatError(f"{path}: artifacts[].exclude must be a list of strings")
            destination = entry.get("destination")
            artifact = Artifact(entry["source"], destination if isinstance(destination, str) else None,
                                tuple(exclude))
        else:
            raise HarborFormatError(f"{path}: an artifacts entry must be a path or a table with a 'source'")
        if not artifact.source.strip() or ".." in PurePosixPath(artifact.source).parts:
            raise HarborFormatError(f"{path}: artifact source {artifact.source!r} is empty or contains '..'")
        out.append(artifact)
    return tuple(out)


def _healthcheck(reader: _Reader) -> Healthcheck | None:
    if not reader.table:
        return None
    command = reader.string("command")
    if not command:
        raise HarborFormatError(f"{reader.path}: environment.healthcheck needs a 'command'")
    return Healthcheck(
        command=command,
        interval_sec=reader.number("interval_sec", 5.0) or 5.0,
        timeout_sec=reader.number("timeout_sec", 30.0) or 30.0,
        start_period_sec=float(reader.table.get("start_period_sec") or 0.0),
        start_interval_sec=reader.number("start_interval_sec", 5.0) or 5.0,
        retries=reader.integer("retries", 3) or 3,
    )


def parse_config(path: Path) -> TaskConfig:
    """Read ``task.toml`` (``path``)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise HarborFormatError(f"{path}: cannot read it ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise HarborFormatError(f"{path}: not valid TOML ({exc})") from None
    top = _Reader(path, data, "")
    task = top.table_of("task")
    metadata = data.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise HarborFormatError(f"{path}: [metadata] must be a table")
    agent = top.table_of("agent")
    verifier = top.table_of("verifier")
    environment = top.table_of("environment")
    solution = top.table_of("solution")

    mode = verifier.string("environment_mode")
    if mode is not None and mode not in ("shared", "separate"):
        raise HarborFormatError(f"{path}: verifier.environment_mode must be 'shared' or 'separate', got {mode!r}")
    has_verifier_env = isinstance(verifier.table.get("environment"), dict)
    if mode == "shared" and has_verifier_env:
        raise HarborFormatError(f"{path}: verifier.environment_mode='shared' is incompatible with "
                                "[verifier.environment]")
    mode = mode or ("separate" if has_verifier_env else "shared")

    memory_mb = environment.integer("memory_mb")
    if memory_mb is None and environment.has("memory"):
        memory_mb = _size_mb(path, "memory", environment.table["memory"])
    storage_mb = environment.integer("storage_mb")
    if storage_mb is None and environment.has("storage"):
        storage_mb = _size_mb(path, "storage", environment.table["storage"])
    network_mode = environment.string("network_mode")
    if network_mode is None:
        allow_internet = environment.boolean("allow_internet")
        network_mode = "public" if allow_internet in (None, True) else "no-network"
    if network_mode not in NETWORK_MODES:
        raise HarborFormatError(f"{path}: environment.network_mode must be one of {', '.join(NETWORK_MODES)}, "
                                f"got {network_mode!r}")
    hosts = _hosts(path, environment, "environment")
    try:
        baseline = network_module.policy(network_mode, hosts)
        phases = network_module.phases(baseline, _phase_policy(path, agent, "agent"),
                                       _phase_policy(path, verifier, "verifier"))
    except network_module.NetworkConfigError as exc:
        raise HarborFormatError(f"{path}: {exc}") from None
    gpu_types = environment.table.get("gpu_types") or []
    if not isinstance(gpu_types, list) or not all(isinstance(t, str) and t.strip() for t in gpu_types):
        raise HarborFormatError(f"{path}: environment.gpu_types must be a list of GPU type names, got {gpu_types!r}")
    mcp_servers, mcp_notes = _mcp_servers(path, environment.table.get("mcp_servers"))
    skills_dir = environment.string("skills_dir")
    os_name = (environment.string("os") or "linux").lower()
    if os_name not in ("linux", "windows"):
        raise HarborFormatError(f"{path}: environment.os must be 'linux' or 'windows', got {os_name!r}")
    workdir = environment.string("workdir")
    if workdir is not None and not workdir.startswith("/"):
        raise HarborFormatError(f"{path}: environment.workdir must be an absolute path, got {workdir!r}")
    not_honoured = _not_honoured(data, agent, verifier, environment)
    steps, step_notes = _steps(path, data.get("steps"))
    strategy = data.get("multi_step_reward_strategy") or "mean"
    if strategy not in REWARD_STRATEGIES:
        raise HarborFormatError(f"{path}: multi_step_reward_strategy must be one of {', '.join(REWARD_STRATEGIES)}, "
                                f"got {strategy!r}")
    return TaskConfig(
        schema_version=str(data.get("schema_version") or data.get("version") or "1.0"),
        name=task.string("name"),
        description=task.string("description") or "",
        source=top.string("source"),
        metadata=dict(metadata),
        agent_timeout_sec=agent.number("timeout_sec"),
        agent_user=agent.user("user"),
        verifier_timeout_sec=verifier.number("timeout_sec", 600.0) or 600.0,
        verifier_env=verifier.strings("env"),
        verifier_user=verifier.user("user"),
        verifier_mode=mode,
        verifier_environment=has_verifier_env,
        build_timeout_sec=environment.number("build_timeout_sec", 600.0) or 600.0,
        docker_image=environment.string("docker_image") or None,
        cpus=environment.number("cpus"),
        memory_mb=memory_mb,
        storage_mb=storage_mb,
        gpus=environment.integer("gpus", minimum=0),
        gpu_types=tuple(t.strip() for t in gpu_types),
        tpu=bool(environment.table.get("tpu")),
        mcp_servers=mcp_servers,
        skills_dir=skills_dir or None,
        network_mode=network_mode,
        allowed_hosts=baseline.allowed_hosts,
        network=phases,
        workdir=workdir,
        env=environment.strings("env"),
        os=os_name,
        healthcheck=_healthcheck(environment.table_of("healthcheck")),
        solution_env=solution.strings("env"),
        artifacts=_artifacts(path, data.get("artifacts")),
        multi_step=bool(steps),
        steps=steps,
        reward_strategy=strategy,
        not_honoured=not_honoured + step_notes + mcp_notes,
    )


#: Fields of a step that no run here honours, and why.
STEP_NOT_HONOURED = {
    "agent.user": "a step runs as the task's agent user",
    "agent.network_mode": "a step runs with the task's agent network policy",
    "verifier.user": "a step's verifier runs as the environment's user",
    "verifier.network_mode": "a step's verifier runs with the task's verifier network policy",
    "verifier.environment": "a step is verified in the agent's environment",
    "healthcheck": "a step's own healthcheck is not run (the task's runs once)",
    "artifacts": "a step's own artifacts are not collected (the task's are, after the last step)",
}


def _steps(path: Path, value: Any) -> tuple[tuple[Step, ...], tuple[str, ...]]:
    if not value:
        return (), ()
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise HarborFormatError(f"{path}: steps must be an array of tables ([[steps]])")
    steps, notes, seen = [], [], set()
    for i, row in enumerate(value):
        reader = _Reader(path, row, f"steps[{i}]")
        name = reader.string("name")
        if not name or not STEP_NAME.match(name):
            raise HarborFormatError(f"{path}: steps[{i}].name must be a portable directory name, got {name!r}")
        if name.lower() in seen:
            raise HarborFormatError(f"{path}: step names must be unique: {name!r}")
        seen.add(name.lower())
        agent, verifier = reader.table_of("agent"), reader.table_of("verifier")
        min_reward = row.get("min_reward")
        if min_reward is not None:
            if isinstance(min_reward, dict):
                if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in min_reward.values()):
                    raise HarborFormatError(f"{path}: steps[{i}].min_reward must map reward keys to numbers")
                min_reward = {str(k): float(v) for k, v in min_reward.items()}
            elif isinstance(min_reward, (int, float)) and not isinstance(min_reward, bool):
                min_reward = float(min_reward)
            else:
                raise HarborFormatError(f"{path}: steps[{i}].min_reward must be a number or a table of numbers")
        steps.append(Step(name=name, agent_timeout_sec=agent.number("timeout_sec"),
                          verifier_timeout_sec=verifier.number("timeout_sec"), verifier_env=verifier.strings("env"),
                          min_reward=min_reward))
        given = {f"agent.{k}" for k in agent.table} | {f"verifier.{k}" for k in verifier.table} | set(row)
        notes += [f"steps[{name}].{key} ({why})" for key, why in STEP_NOT_HONOURED.items()
                  if key in given and key.split(".")[-1] != "allowed_hosts"]
    return tuple(steps), tuple(notes)


MCP_TRANSPORTS = ("stdio", "sse", "streamable-http")


def _mcp_servers(path: Path, value: Any) -> tuple[tuple[dict[str, Any], ...], tuple[str, ...]]:
    """Harbor's ``MCPServerConfig`` checks: ``url`` for ``sse``/``streamable-http`` (``http`` is its alias),
    ``command`` for ``stdio``; ``headers`` are recorded as not honoured."""
    if not value:
        return (), ()
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise HarborFormatError(f"{path}: environment.mcp_servers must be an array of tables")
    servers, notes = [], []
    for i, row in enumerate(value):
        where = f"environment.mcp_servers[{i}]"
        name, transport = row.get("name"), row.get("transport") or "sse"
        transport = "streamable-http" if transport == "http" else transport
        if not isinstance(name, str) or not name:
            raise HarborFormatError(f"{path}: {where}.name must be a string")
        if transport not in MCP_TRANSPORTS:
            raise HarborFormatError(f"{path}: {where}.transport must be one of {', '.join(MCP_TRANSPORTS)}, "
                                    f"got {transport!r}")
        if transport != "stdio" and not isinstance(row.get("url"), str):
            raise HarborFormatError(f"{path}: {where}: 'url' is required for transport '{transport}'")
        if transport == "stdio" and not isinstance(row.get("command"), str):
            raise HarborFormatError(f"{path}: {where}: 'command' is required for transport 'stdio'")
        args = row.get("args") or []
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise HarborFormatError(f"{path}: {where}.args must be a list of strings")
        if row.get("headers"):
            notes.append(f"environment.mcp_servers[{name}].headers (HTTP headers are not passed to the agent)")
        servers.append({"name": name, "transport": transport, "url": row.get("url"),
                        "command": row.get("command"), "args": list(args)})
    return tuple(servers), tuple(notes)


def _hosts(path: Path, reader: _Reader, where: str) -> list[str] | None:
    hosts = reader.table.get("allowed_hosts")
    if hosts is not None and (not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts)):
        raise HarborFormatError(f"{path}: {where}.allowed_hosts must be a list of host names")
    return hosts


def _phase_policy(path: Path, reader: _Reader, where: str) -> NetworkPolicy | None:
    """``[agent]`` / ``[verifier]``'s own policy, when it gives a ``network_mode``."""
    mode, hosts = reader.string("network_mode"), _hosts(path, reader, where)
    if mode is None:
        if hosts is not None:
            raise HarborFormatError(f"{path}: {where}.allowed_hosts is only valid when network_mode='allowlist'")
        return None
    if mode not in NETWORK_MODES:
        raise HarborFormatError(f"{path}: {where}.network_mode must be one of {', '.join(NETWORK_MODES)}, "
                                f"got {mode!r}")
    try:
        return network_module.policy(mode, hosts)
    except network_module.NetworkConfigError as exc:
        raise HarborFormatError(f"{path}: {where}: {exc}") from None


#: Fields Harbor knows that no run here honours, and why (the plugin's README lists every field).
NOT_HONOURED = {
    "verifier.collect": "collect hooks run in docker compose services, which environments here do not have",
}


def _not_honoured(data: Mapping[str, Any], agent: _Reader, verifier: _Reader, environment: _Reader) -> tuple[str, ...]:
    present = {f"agent.{k}" for k in agent.table} | {f"verifier.{k}" for k in verifier.table} | \
        {f"environment.{k}" for k in environment.table}
    out = [f"{name} ({why})" for name, why in NOT_HONOURED.items() if name in present and _given(data, name)]
    given = data.get("artifacts")
    artifacts: list[Any] = given if isinstance(given, list) else []
    if any(isinstance(a, dict) and a.get("service") not in (None, "main") for a in artifacts):
        out.append("artifacts[].service (there are no compose services: artifacts come from the main container)")
    if any(isinstance(a, dict) and a.get("destination") for a in artifacts):
        out.append("artifacts[].destination (collected under outputs/ by their path in the environment)")
    return tuple(out)


def _given(data: Mapping[str, Any], dotted: str) -> bool:
    section, _, key = dotted.partition(".")
    value = (data.get(section) or {}).get(key)
    return value not in (None, [], {}, "")


@dataclass(frozen=True)
class HarborTask:
    """One task directory, read."""

    task_id: str
    directory: Path
    config: TaskConfig
    instruction: str
    #: A multi-step task's instructions, one per step (``steps/NAME/instruction.md``).
    step_instructions: tuple[str, ...] = ()

    def step_dir(self, index: int) -> Path:
        return self.directory / "steps" / self.config.steps[index].name

    def step_tests_dir(self, index: int) -> Path | None:
        """The step's ``tests/``, when it has one (copied over the task's ``tests/`` for its verifier)."""
        path = self.step_dir(index) / "tests"
        return path if path.is_dir() else None

    def step_test_script(self, index: int) -> Path | None:
        tests = self.step_tests_dir(index)
        if tests is not None and (tests / "test.sh").is_file():
            return tests / "test.sh"
        return self.test_script

    def step_solution_dir(self, index: int) -> Path:
        """The step's ``solution/`` when it has one, else the task's."""
        path = self.step_dir(index) / "solution"
        return path if path.is_dir() else self.solution_dir

    @property
    def environment_dir(self) -> Path:
        return self.directory / "environment"

    @property
    def dockerfile(self) -> Path | None:
        path = self.environment_dir / "Dockerfile"
        return path if path.is_file() else None

    @property
    def tests_dir(self) -> Path:
        return self.directory / "tests"

    @property
    def solution_dir(self) -> Path:
        return self.directory / "solution"

    @property
    def test_script(self) -> Path | None:
        path = self.tests_dir / "test.sh"
        return path if path.is_file() else None

    @property
    def solve_script(self) -> Path | None:
        path = self.solution_dir / "solve.sh"
        return path if path.is_file() else None


def _read_instruction(instruction_path: Path) -> str:
    try:
        instruction = instruction_path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise HarborFormatError(f"{instruction_path.parent}: no {INSTRUCTION}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise HarborFormatError(f"{instruction_path}: cannot read it ({exc})") from None
    if not instruction.strip():
        raise HarborFormatError(f"{instruction_path} is empty")
    return instruction


def read_task(directory: Path, task_id: str) -> HarborTask:
    config = parse_config(directory / CONFIG)
    if config.steps:
        step_instructions = tuple(_read_instruction(directory / "steps" / s.name / INSTRUCTION)
                                  for s in config.steps)
        return HarborTask(task_id=task_id, directory=directory, config=config, instruction=step_instructions[0],
                          step_instructions=step_instructions)
    instruction_path = directory / INSTRUCTION
    try:
        instruction = instruction_path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise HarborFormatError(f"{directory}: no {INSTRUCTION}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise HarborFormatError(f"{instruction_path}: cannot read it ({exc})") from None
    if not instruction.strip():
        raise HarborFormatError(f"{instruction_path} is empty")
    return HarborTask(task_id=task_id, directory=directory, config=config, instruction=instruction)


def find_task_dirs(path: Path) -> list[tuple[str, Path]]:
    """``(task_id, directory)`` of the task directories at ``path``: ``path`` itself when it holds a
    ``task.toml``, else every directory under it that does (not looking inside a task directory). A task's id
    is its path relative to ``path`` (its directory name, for a flat dataset)."""
    if (path / CONFIG).is_file():
        return [(path.resolve().name, path)]
    found: list[tuple[str, Path]] = []

    def walk(directory: Path) -> None:
        for child in sorted(p for p in directory.iterdir() if p.is_dir() and not p.name.startswith(".")):
            if (child / CONFIG).is_file():
                found.append((child.relative_to(path).as_posix(), child))
            else:
                walk(child)

    walk(path)
    return found


#: Dockerfile instructions that put something into the image: a task whose Dockerfile has one needs its image.
IMAGE_CONTENT_INSTRUCTIONS = frozenset({"RUN", "COPY", "ADD", "ONBUILD"})


def dockerfile_fills_image(dockerfile: Path) -> list[str]:
    """The instructions of ``dockerfile`` that put something into its image (``RUN``, ``COPY``, ``ADD``), each
    as its first word, in order: empty when the Dockerfile only names a base image and settings (``FROM``,
    ``WORKDIR``, ``ENV``, ...), which an environment without images can stand in for."""
    try:
        lines = dockerfile.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    found: list[str] = []
    continued = False
    for raw in lines:
        line = raw.strip()
        was_continued, continued = continued, line.endswith("\\")
        if not line or line.startswith("#") or was_continued:
            continue
        word = line.split(None, 1)[0].upper()
        if word in IMAGE_CONTENT_INSTRUCTIONS:
            found.append(word)
    return found


def dockerfile_workdir(dockerfile: Path) -> str | None:
    """The working directory the Dockerfile's final stage sets (its last ``WORKDIR``), when it can be known
    without building: ``None`` for a stage that sets none or uses a variable."""
    try:
        lines = dockerfile.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    workdir: str | None = None
    for raw in lines:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        word = word.upper()
        if word == "FROM":
            workdir = None
        elif word == "WORKDIR":
            value = rest.strip().strip('"').strip("'")
            if not value or "$" in value:
                workdir = None
                continue
            base = workdir or "/"
            workdir = str(PurePosixPath(base) / value) if not value.startswith("/") else value
    if workdir is None:
        return None
    normalized = str(PurePosixPath(workdir))
    return normalized if normalized.startswith("/") else None
