"""Run options by name: a run config file, a run's recorded request, the command line — one validated request.

Every option of ``agentcompass run`` has a *key*: its long name with ``_`` for ``-`` (``concurrency``, ``env``,
``max_connections``); the repeatable ``KEY=VALUE`` options are tables under the plural name (``benchmark_args``,
``model_args``, ``harness_args``, ``env_args``, ``executor_args``, ``phase_timeouts``, ``model_aliases``), and the
repeatable ones lists (``task_ids``, ``secret_env``). ``benchmark``, ``harness``, ``model``, ``user_model`` and
``judge_model`` are keys too, and ``[models.ROLE]`` tables (``agent``, ``user``, ``judge``) hold a role's
``model``, ``base_url``, ``api_key_env``, ``args`` and ``max_connections``::

    benchmark = "taubench"
    harness = "none"
    concurrency = 4
    benchmark_args = { domain = "retail" }

    [models.agent]
    model = "openai-compatible/Qwen3-8B"
    base_url = "http://127.0.0.1:8000/v1"

    [models.user]
    model = "openai/gpt-4o-mini"
    api_key_env = "OPENAI_API_KEY"

Library use (the ``run`` command and suites build their request exactly so)::

    options = RunOptions.parse(mapping, source="run.toml")        # one layer, checked; errors name key and source
    options = defaults | cell                                     # later layers win; tables merge by key
    request = options.request()                                   # the RunRequest
    given = options.given_fields()                                # for Runner(given=...)

:func:`load_run_config` reads a TOML file, or a run's ``run.json`` (or its directory) to run it again exactly.
The keys are :data:`OPTION_KEYS`; the request (:class:`~agentcompass.runtime.types.RunRequest`) holds the types
and defaults, so the file and the command line cannot drift apart.
"""

from __future__ import annotations

import difflib
import json
import re
import tomllib
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentcompass.errors import UsageError
from agentcompass.models.fault_profiles import BUILTIN_PROFILES
from agentcompass.request_checks import option_flag as request_option_flag
from agentcompass.runtime.types import REQUEST_GROUPS, REQUEST_OPTIONS, RoleModelSettings, RunRequest

__all__ = ["OPTION_KEYS", "ROLE_SETTING_KEYS", "RunConfig", "RunConfigError", "RunOptions", "load_run_config",
           "option_flag", "plugin_version_changes"]


class RunConfigError(UsageError):
    """A run config (file, table or command line) that cannot be a run: the message names the source and key."""


#: Request fields no option sets: the run's id is made per run, roles and role settings have keys of their own.
_NOT_OPTIONS = frozenset({"run_id", "role_models", "role_settings"})
#: Keys spelled other than their request field.
_RENAMED = {"environment": "env", "environment_args": "env_args"}
#: Option key -> the run option's name (:data:`~agentcompass.runtime.types.REQUEST_OPTIONS`), for every option a
#: user sets.
OPTION_KEYS: Mapping[str, str] = {
    _RENAMED.get(name, name): name for name in REQUEST_OPTIONS if name not in _NOT_OPTIONS
}
#: The run option's name -> how a config file spells it (problems name these).
_KEY_OF = {**{name: key for key, name in OPTION_KEYS.items()}, "role_models": "models", "role_settings": "models"}
#: Keys that name a role's model (``--user-model``, ``--judge-model``).
ROLE_MODEL_KEYS: Mapping[str, str] = {"user_model": "user", "judge_model": "judge"}
#: The settings of a ``[models.ROLE]`` table.
ROLE_SETTING_KEYS = ("model", "base_url", "api_key_env", "args", "max_connections")
#: Options of the command line only (how this invocation shows or resumes a run, not what it runs).
CLI_ONLY = {"output": "--output", "resume": "--resume", "json": "--json", "task_lines": "--task-lines",
            "otel": "--otel", "config": "--config", "rerun": "--rerun", "scan": "--scan"}
#: ``[models.agent]`` settings and the option each is the same setting as.
_AGENT_SAME = {"model": "model", "base_url": "model_base_url", "api_key_env": "model_api_key_env",
               "args": "model_args"}
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _option_hints() -> dict[str, Any]:
    """The type of every run option, by name."""
    hints = typing.get_type_hints(RunRequest)
    group_hints = {group: typing.get_type_hints(kind) for group, kind in REQUEST_GROUPS.items()}
    return {name: hints[attr] if group is None else group_hints[group][attr]
            for name, (group, attr) in REQUEST_OPTIONS.items()}


_HINTS = _option_hints()
_DEFAULTS = RunRequest(benchmark="", harness="", model="")


def option_flag(key: str) -> str:
    """The long command-line flag of an option key (``env_args`` -> ``--env-arg``)."""
    return request_option_flag(OPTION_KEYS.get(key, key))


def all_keys() -> list[str]:
    return sorted([*OPTION_KEYS, *ROLE_MODEL_KEYS, "models"])


# -- one value ---------------------------------------------------------------------------------------------


def _kind(hint: Any) -> tuple[str, bool]:
    """``(kind, nullable)`` of a request field's type: str, int, float, str_table, float_table, str_list."""
    args = typing.get_args(hint)
    nullable = type(None) in args
    if nullable and (typing.get_origin(hint) in (typing.Union, types.UnionType)):
        hint = next(a for a in args if a is not type(None))
    origin = typing.get_origin(hint)
    if origin is tuple:
        return "str_list", nullable
    if origin is not None and issubclass(origin, Mapping):
        return ("float_table" if typing.get_args(hint)[1] is float else "str_table"), nullable
    return hint.__name__, nullable


_WHAT = {"bool": "true or false", "str": "a string", "int": "an integer", "float": "a number",
         "str_table": "a table of KEY = VALUE", "float_table": "a table of NAME = SECONDS",
         "str_list": "a list of strings"}


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return {str: "a string", int: "an integer", float: "a number", list: "a list", dict: "a table"}.get(
        type(value), type(value).__name__)


class _Check:
    """Type checks of one layer's values; every error says where (``source: key``) and never shows a value."""

    def __init__(self, source: str, spell: Callable[[str], str] | None) -> None:
        self.source = source
        self.spell = spell or (lambda key: key)
        self.flags = spell is not None

    def fail(self, key: str, message: str, entry: str | None = None) -> RunConfigError:
        shown = self.spell(key) if entry is None else f"{self.spell(key)}{' ' if self.flags else '.'}{entry}"
        return RunConfigError(f"{_at(self.source)}{shown} {message}")

    def value(self, key: str, value: Any, kind: str, nullable: bool, json_args: bool = False) -> Any:
        if value is None:
            if nullable:
                return None
            raise self.fail(key, f"must be {_WHAT[kind]}, not null")
        bad = self.fail(key, f"must be {_WHAT[kind]}, not {_type_name(value)}")
        if kind == "str":
            if not isinstance(value, str):
                raise bad
            return value
        if kind == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                raise bad
            return value
        if kind == "float":
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise bad
            return float(value)
        if kind == "bool":
            if not isinstance(value, bool):
                raise bad
            return value
        if kind == "str_list":
            if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
                raise bad
            return tuple(value)
        if not isinstance(value, Mapping):
            raise bad
        out: dict[str, Any] = {}
        for name, item in value.items():
            if kind == "float_table":
                out[str(name)] = self._seconds(key, str(name), item)
            else:
                out[str(name)] = self._arg(key, str(name), item, json_args)
        return out

    def _seconds(self, key: str, name: str, item: Any) -> float:
        if isinstance(item, str):  # the command line's PHASE=SECONDS
            try:
                item = float(item)
            except ValueError:
                raise self.fail(key, "must be a number of seconds", name) from None
        if isinstance(item, bool) or not isinstance(item, int | float):
            raise self.fail(key, f"must be a number of seconds, not {_type_name(item)}", name)
        return float(item)

    def _arg(self, key: str, name: str, item: Any, json_args: bool) -> str:
        """An option value as the command line would give it: a string. Model options (JSON where they parse)
        keep their type as JSON; other plugins' lists join with ``,`` (as a repeated ``KEY=VALUE`` does)."""
        if isinstance(item, str):
            return item
        if isinstance(item, dict) and not json_args:
            raise self.fail(key, "must be a string, number, boolean or list, not a table", name)
        if isinstance(item, list) and not json_args:
            if not all(isinstance(v, str | int | float | bool) and not isinstance(v, dict) for v in item):
                raise self.fail(key, "must be a list of strings, numbers or booleans", name)
            return ",".join(v if isinstance(v, str) else json.dumps(v) for v in item)
        try:
            return json.dumps(item)
        except (TypeError, ValueError):
            raise self.fail(key, f"cannot be {_type_name(item)}", name) from None


# -- options ------------------------------------------------------------------------------------------------


def _at(source: str) -> str:
    return f"{source}: " if source else ""


def _unknown(source: str, key: str, where: list[str]) -> RunConfigError:
    if key in CLI_ONLY:
        return RunConfigError(f"{_at(source)}{key!r} is not a run config key: give {CLI_ONLY[key]} on the command line")
    close = difflib.get_close_matches(key, where, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else " (see 'Run config files' in the README)"
    return RunConfigError(f"{_at(source)}unknown key {key!r}{hint}")


def _merge(base: Mapping[str, Any], over: Mapping[str, Any], depth: int) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if depth and isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merge(out[key], value, depth - 1)
        else:
            out[key] = value
    return out


#: How deep each table merges: option tables by key; ``models`` by role, setting, then args key.
_MERGE_DEPTH = {"models": 2}


@dataclass(frozen=True)
class RunOptions:
    """Checked run options by key (see the module's docstring). Build with :meth:`parse`; ``a | b`` is ``a``
    overridden by ``b`` (tables merge by key); :meth:`request` is the run request."""

    values: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, data: Mapping[str, Any], source: str, spell: Callable[[str], str] | None = None,
              base_dir: Path | None = None) -> RunOptions:
        """Check one layer of options: every key known, every value of its type and range. ``source`` names
        where they come from in errors (a file, ``suite.toml [[run]] 'x'``); ``spell`` how a key is shown
        (default: the key; the command line passes its flags). ``[models.agent]`` folds into ``model``,
        ``model_base_url``, ``model_api_key_env``, ``model_args`` (giving both, differing, is an error), and
        ``[models.user|judge].model`` into ``user_model`` / ``judge_model``. A relative ``prices`` path is
        taken from ``base_dir`` (a config file's directory; default: the current one)."""
        check = _Check(source, spell)
        if not isinstance(data, Mapping):
            raise RunConfigError(f"{_at(source)}run options must be a table of KEY = VALUE, not {_type_name(data)}")
        values: dict[str, Any] = {}
        for key, raw in data.items():
            if key in OPTION_KEYS:
                kind, nullable = _kind(_HINTS[OPTION_KEYS[key]])
                values[key] = check.value(key, raw, kind, nullable, json_args=key == "model_args")
            elif key in ROLE_MODEL_KEYS:
                values[key] = check.value(key, raw, "str", True)
            elif key != "models":
                raise _unknown(source, str(key), all_keys())
        if "models" in data:  # after the options it may repeat
            values.update(_fold_models(check, data["models"], values))
        for key in ("prices", "replay", "cache", "faults"):  # paths, from where they were written
            if values.get(key) and not (key == "faults" and values[key] in BUILTIN_PROFILES):
                values[key] = str(((base_dir or Path.cwd()) / Path(values[key]).expanduser()).resolve())
        options = cls(values)
        options._check(check)
        return options

    def _check(self, check: _Check) -> None:
        """The problems of these options alone (:func:`~agentcompass.request_checks.check_request` on the request
        they make), each spelled as this layer spells its keys; a problem that also depends on options this
        layer does not set is left to the whole request's check."""
        from agentcompass.request_checks import check_request  # imported late: the CLI starts fast

        given = self.given_fields()
        problems = [p for p in check_request(self.request()) if set(p.options) <= given]
        if problems:
            sep = " " if check.flags else "."
            raise RunConfigError("\n".join(_at(check.source) + p.text(lambda name: check.spell(_KEY_OF[name]), sep)
                                           for p in problems))

    def __or__(self, other: RunOptions) -> RunOptions:
        merged = dict(self.values)
        for key, value in other.values.items():
            if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
                merged[key] = _merge(merged[key], value, _MERGE_DEPTH.get(key, 0))
            else:
                merged[key] = value
        return RunOptions(merged)

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def given_fields(self) -> frozenset[str]:
        """The request fields these options set (``Runner(given=...)``: on resume they override the saved ones)."""
        given = {OPTION_KEYS[k] for k in self.values if k in OPTION_KEYS}
        if any(k in self.values for k in ROLE_MODEL_KEYS):
            given.add("role_models")
        if self.values.get("models"):
            given.add("role_settings")
        return frozenset(given)

    def request(self) -> RunRequest:
        """The run request (unset options at the request's defaults; ``benchmark``/``harness``/``model`` may be
        empty: the caller says whether it needs them)."""
        options = {OPTION_KEYS[k]: v for k, v in self.values.items() if k in OPTION_KEYS}
        role_models = {role: self.values[k] for k, role in ROLE_MODEL_KEYS.items() if self.values.get(k)}
        settings = {role: RoleModelSettings(**s) for role, s in (self.values.get("models") or {}).items()
                    if any(v not in (None, {}) for v in s.values())}  # a role that sets nothing is no setting
        return _DEFAULTS.with_options(**options, role_models=role_models, role_settings=settings)

    @classmethod
    def from_request(cls, req: RunRequest, source: str = "the request") -> RunOptions:
        """The options that make ``req`` again (all of them, its seed included; not its run id)."""
        data: dict[str, Any] = {key: req.option(name) for key, name in OPTION_KEYS.items()}
        data = {k: list(v) if isinstance(v, tuple) else v for k, v in data.items()}
        for key, role in ROLE_MODEL_KEYS.items():
            if req.models.roles.get(role):
                data[key] = req.models.roles[role]
        models = {role: {k: v for k, v in (("base_url", s.base_url), ("api_key_env", s.api_key_env),
                                            ("args", dict(s.args)), ("max_connections", s.max_connections))
                         if v not in (None, {})}
                  for role, s in req.models.role_settings.items()}
        if any(models.values()):
            data["models"] = {r: s for r, s in models.items() if s}
        return cls.parse(_drop_nulls(data), source)


def _drop_nulls(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if v is not None}


def _fold_models(check: _Check, raw: Any, values: Mapping[str, Any]) -> dict[str, Any]:
    """``[models.ROLE]`` tables as options: the agent's settings and the roles' models become the options they
    are the same setting as; what remains goes to ``models`` (role settings)."""
    if not isinstance(raw, Mapping):
        raise check.fail("models", f"must be a table of roles ([models.agent], ...), not {_type_name(raw)}")
    from agentcompass.models.roles import ROLES

    out: dict[str, Any] = {}
    models: dict[str, dict[str, Any]] = {}
    for role, table in raw.items():
        where = f"models.{role}"
        if role not in ROLES:
            raise RunConfigError(f"{_at(check.source)}unknown model role {role!r} in [models]; roles are "
                                 f"{', '.join(ROLES)}")
        if not isinstance(table, Mapping):
            raise check.fail(where, f"must be a table of settings ({', '.join(ROLE_SETTING_KEYS)})")
        own: dict[str, Any] = {}
        for name, value in table.items():
            key = f"{where}.{name}"
            if name not in ROLE_SETTING_KEYS:
                raise _unknown(check.source, key, [f"{where}.{k}" for k in ROLE_SETTING_KEYS])
            if name == "args":
                value = check.value(key, value, "str_table", False, json_args=True)
            elif name == "max_connections":
                value = check.value(key, value, "int", False)
                if value < 1:
                    raise check.fail(key, "must be at least 1")
            else:
                value = check.value(key, value, "str", False)
            same = _AGENT_SAME.get(name) if role == "agent" else (f"{role}_model" if name == "model" else None)
            if same is None:
                own[name] = value
                continue
            if same in values:
                if values[same] != value:
                    raise RunConfigError(f"{_at(check.source)}{check.spell(same)} and {key} are the same setting and "
                                         "differ; give one of them")
            out[same] = value
        if own:
            models[role] = own
    if models:
        out["models"] = models
    return out


# -- files --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunConfig:
    """A run config as read from a file: its options, and for a run's ``run.json`` the plugin versions it ran
    with (to warn when the installed ones differ)."""

    path: Path
    options: RunOptions
    plugins: Mapping[str, str | None] | None = None

    @property
    def is_recorded_run(self) -> bool:
        return self.plugins is not None


def load_run_config(path: Path) -> RunConfig:
    """Read a run config: a TOML file of options, or a run's ``run.json`` (or the run directory holding it),
    whose recorded request — seed included — becomes the options that run it again."""
    path = Path(path)
    if path.is_dir():
        if not (path / "run.json").is_file():
            raise RunConfigError(f"{path} is a directory without a run.json; give a run config file (TOML) or a "
                                 "run directory")
        path = path / "run.json"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RunConfigError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RunConfigError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    if path.suffix == ".json":
        return _recorded_run(path, text)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RunConfigError(f"{path} is not valid TOML: {exc}") from None
    return RunConfig(path, RunOptions.parse(data, str(path), base_dir=path.parent))


def _recorded_run(path: Path, text: str) -> RunConfig:
    from agentcompass.serialization import RecordError, request_from_json

    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RunConfigError(f"{path} is not valid JSON: {exc}") from None
    request = data.get("request") if isinstance(data, dict) else None
    if not isinstance(request, dict):
        raise RunConfigError(f"{path} is not a run's run.json (it has no request); a run config file is TOML")
    try:
        recorded = request_from_json(request)
    except RecordError as exc:
        raise RunConfigError(f"{path}: its request cannot be read ({exc})") from None
    plugins = data.get("plugins") if isinstance(data.get("plugins"), dict) else {}
    return RunConfig(path, RunOptions.from_request(recorded, f"{path} (request)"), dict(plugins))


def plugin_version_changes(recorded: Mapping[str, str | None], installed: Mapping[str, str | None]) -> list[str]:
    """How the installed plugins differ from those a run recorded (``name 1.0 -> 1.1``, ``name 1.0 -> missing``)."""
    changes = []
    for name, version in sorted(recorded.items()):
        if name not in installed:
            changes.append(f"{name} {version or '?'} -> not installed")
        elif installed[name] != version:
            changes.append(f"{name} {version or '?'} -> {installed[name] or '?'}")
    return changes
