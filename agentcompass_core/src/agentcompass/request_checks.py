"""Whether a :class:`~agentcompass.runtime.RunRequest` can be a run: every option checked once, in one place.

:func:`check_request` returns the problems of a whole request, each keyed by the run option it is about (its
name in :data:`~agentcompass.runtime.types.REQUEST_OPTIONS`), so whoever reads the options spells them its own
way: the command line as flags (``--concurrency must be at least 1``), a config file as its keys
(``run.toml: concurrency must be at least 1``). :func:`raise_problems` turns them into one
:class:`~agentcompass.errors.UsageError`. Nothing here binds a socket or builds a client: the checks read the
request, and the files it names (a price table, a recording to replay) only to say whether they can be used.
"""

from __future__ import annotations

import math
import re
import socket
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import attrs

from agentcompass.errors import UsageError
from agentcompass.runtime.phases import DEFAULT_TIMEOUTS
from agentcompass.runtime.seeds import SEED_LIMIT
from agentcompass.runtime.types import MODEL_ROLES, RunRequest

__all__ = ["FLAGS", "Problem", "check_request", "option_flag", "raise_problems"]

#: Long flags whose spelling is not ``--`` + the option's name with ``-`` for ``_`` (repeatable options are
#: singular; two options of a role's model have flags of their own).
FLAGS = {"environment": "--env", "environment_args": "--env-arg", "benchmark_args": "--benchmark-arg",
         "harness_args": "--harness-arg", "model_args": "--model-arg", "executor_args": "--executor-arg",
         "phase_timeouts": "--phase-timeout", "model_aliases": "--model-alias", "task_ids": "--task-id",
         "role_models": "--user-model/--judge-model", "role_settings": "[models.ROLE]"}

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PHASES = frozenset(DEFAULT_TIMEOUTS)


def option_flag(name: str) -> str:
    """How the command line spells the run option ``name`` (``environment_args`` -> ``--env-arg``)."""
    return FLAGS.get(name) or "--" + name.replace("_", "-")


@attrs.frozen
class Problem:
    """Why one option (or an entry of a table option) cannot be a run.

    :param option: the run option's name (``concurrency``, ``phase_timeouts``).
    :param message: what is wrong, worded to follow the option's spelling (``must be at least 1``), or with
        ``{option}`` where the spelling goes (``unknown phase(s) x in {option}``).
    :param entry: the table entry or list item it is about (a phase, a role, a variable), if any.
    :param related: other options the problem also depends on (``--cache-expiry needs --cache``): a reader of
        one layer of options reports it only when that layer sets them all.
    """

    option: str
    message: str
    entry: str | None = None
    related: tuple[str, ...] = ()

    def text(self, spell: Callable[[str], str] = option_flag, entry_sep: str = " ") -> str:
        """The problem as one line, the option spelled by ``spell`` (the command line's flags by default)."""
        where = spell(self.option) + (f"{entry_sep}{self.entry}" if self.entry is not None else "")
        if "{option}" in self.message:
            return self.message.replace("{option}", where)
        return where + ("" if self.message[:1] in (":", "=") else " ") + self.message

    @property
    def options(self) -> tuple[str, ...]:
        return (self.option, *self.related)


def raise_problems(problems: Iterable[Problem], spell: Callable[[str], str] = option_flag, prefix: str = "",
                   entry_sep: str = " ") -> None:
    """Raise one :class:`UsageError` listing ``problems`` (one per line), or nothing when there are none."""
    lines = [prefix + p.text(spell, entry_sep) for p in problems]
    if lines:
        raise UsageError("\n".join(lines))


def check_request(req: RunRequest) -> list[Problem]:
    """Every problem of ``req``, in the order of its options; ``[]`` when it can be a run. ``benchmark``,
    ``harness`` and ``model`` may be empty (a layer of options, a resume): whoever needs them says so."""
    return [*_what_to_run(req), *_tasks(req), *_schedule(req), *_budget(req), *_models(req), *_answers(req),
            *_execution(req)]


# -- the groups ---------------------------------------------------------------------------------------------


def _what_to_run(req: RunRequest) -> Iterator[Problem]:
    if req.model and not req.model.partition("/")[0]:
        yield Problem("model", f"{req.model!r} has no provider; write it as PROVIDER/NAME, e.g. openai/gpt-4o-mini")


def _tasks(req: RunRequest) -> Iterator[Problem]:
    t = req.tasks
    if t.limit is not None and t.limit < 1:
        yield Problem("limit", f"must be at least 1, got {t.limit} (leave it out to run every task)")
    if t.trials < 1:
        yield Problem("trials", f"must be at least 1, got {t.trials}")
    if t.seed is not None and not 0 <= t.seed < SEED_LIMIT:
        yield Problem("seed", f"must be from 0 to {SEED_LIMIT - 1}, got {t.seed}")


def _schedule(req: RunRequest) -> Iterator[Problem]:
    s = req.schedule
    if s.concurrency < 1:
        yield Problem("concurrency", "must be at least 1")
    if s.max_environments is not None and s.max_environments < 1:
        yield Problem("max_environments", "must be at least 1")
    if s.retries < 0:
        yield Problem("retries", "must be 0 or more")
    if s.timeout is not None and not _positive(s.timeout):
        yield Problem("timeout", f"must be a positive number of seconds, got {s.timeout:g}")
    if s.stall_timeout is not None and not _positive(s.stall_timeout):
        yield Problem("stall_timeout", f"must be a positive number of seconds, got {s.stall_timeout:g}")
    for phase, seconds in s.phase_timeouts.items():
        if phase in _PHASES and not _positive(seconds):
            yield Problem("phase_timeouts", f"must be a positive number of seconds, got {seconds:g}", entry=phase)
    unknown = sorted(set(s.phase_timeouts) - _PHASES)
    if unknown:
        yield Problem("phase_timeouts", f"unknown phase(s) {', '.join(unknown)} in {{option}}; phases: "
                                        f"{', '.join(sorted(_PHASES))}")


def _budget(req: RunRequest) -> Iterator[Problem]:
    b = req.budget
    if b.max_tokens_per_task is not None and b.max_tokens_per_task < 1:
        yield Problem("max_tokens_per_task", "must be at least 1")
    if b.max_cost is not None and not _positive(b.max_cost):
        yield Problem("max_cost", "must be a positive number of US dollars")


def _models(req: RunRequest) -> Iterator[Problem]:
    m = req.models
    if m.max_retries < 0:
        yield Problem("max_retries", "must be 0 or more")
    if m.max_connections < 1:
        yield Problem("max_connections", "must be at least 1")
    if not _positive(m.request_timeout):
        yield Problem("request_timeout", "must be a positive number of seconds")
    for role, spec in m.roles.items():
        if role not in MODEL_ROLES:
            yield Problem("role_models", f"is not a model role; roles are {', '.join(MODEL_ROLES)}", entry=role)
        elif spec and not spec.partition("/")[0]:
            yield Problem("role_models", f"{spec!r} has no provider; write it as PROVIDER/NAME", entry=role)
    for role, own in m.role_settings.items():
        if role not in MODEL_ROLES:
            yield Problem("role_settings", f"is not a model role; roles are {', '.join(MODEL_ROLES)}", entry=role)
            continue
        if own.max_connections is not None and own.max_connections < 1:
            yield Problem("role_settings", "max_connections must be at least 1", entry=role)
        if role == "agent" and (own.base_url or own.api_key_env or own.args):
            yield Problem("role_settings", "may set only max_connections: the agent's base_url, api_key_env and "
                                           "args are model_base_url, model_api_key_env and model_args",
                          entry=role)
        if own.api_key_env is not None and not _ENV_NAME.match(own.api_key_env):
            yield Problem("role_settings", _NOT_A_NAME, entry=f"{role}.api_key_env")
    if m.api_key_env is not None and not _ENV_NAME.match(m.api_key_env):
        yield Problem("model_api_key_env", _NOT_A_NAME)
    for name in m.secret_env:
        if not _ENV_NAME.match(name):
            yield Problem("secret_env", _NOT_A_NAME)
    roles = {"agent", *(r for r, spec in m.roles.items() if spec)}
    for name, role in m.aliases.items():
        if role not in roles:
            yield Problem("model_aliases", f"={role}: {role!r} is not a role of this run (it has "
                                           f"{', '.join(sorted(roles))})", entry=name, related=("role_models",))
    yield from _prices(req)


#: Never echo the value: a key pasted where its variable's name belongs must not reach a terminal or log.
_NOT_A_NAME = ("must name an environment variable (e.g. OPENAI_API_KEY), not hold a secret itself; the value is "
               "not shown")


def _prices(req: RunRequest) -> Iterator[Problem]:
    from agentcompass.models.prices import PriceTable

    try:
        table = PriceTable.load(req.models.prices)
    except UsageError as exc:
        yield Problem("prices", f": {exc}")
        return
    if req.budget.max_cost is None or not req.model:
        return
    specs = {"agent": req.model, **{r: s for r, s in req.models.roles.items() if s and r != "judge"}}
    unpriced = [f"{role} ({spec})" for role, spec in specs.items() if table.lookup(spec) is None]
    if unpriced:
        yield Problem("max_cost", f"needs a price for every model it limits; none is known for "
                                  f"{', '.join(unpriced)}. Add one with --prices FILE (USD per 1M tokens: "
                                  "{\"MODEL\": {\"input\": X, \"output\": Y}})", related=("model", "prices"))


def _answers(req: RunRequest) -> Iterator[Problem]:
    from agentcompass.models.call_cache import parse_expiry
    from agentcompass.models.replay import MISS_MODES, Recording

    a = req.answers
    if a.replay_miss not in MISS_MODES:
        yield Problem("replay_miss", f"{a.replay_miss!r}: use one of {', '.join(MISS_MODES)}")
    try:
        parse_expiry(a.cache_expiry)
    except UsageError as exc:
        yield Problem("cache_expiry", _after_flag(str(exc), "cache_expiry"))
    if a.replay:
        try:
            Recording.open(Path(a.replay))
        except UsageError as exc:
            yield Problem("replay", _after_flag(str(exc), "replay"))
    elif a.replay_miss != "error" or a.replay_latency:
        given = "replay_miss" if a.replay_miss != "error" else "replay_latency"
        yield Problem(given, "needs --replay RUN_DIR (the run whose model calls answer this one)",
                      related=("replay",))
    if a.cache_expiry is not None and not a.cache:
        yield Problem("cache_expiry", "needs --cache DIR", related=("cache",))
    if a.faults:
        from agentcompass.models.fault_profiles import load_profile

        try:
            load_profile(a.faults)
        except UsageError as exc:
            yield Problem("faults", _after_flag(str(exc), "faults"))


def _execution(req: RunRequest) -> Iterator[Problem]:
    host = req.execution.gateway_host
    try:  # resolvable is all that is checked here: the gateway's own start says if it cannot listen there
        socket.getaddrinfo(host, 0, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        yield Problem("gateway_host", f"{host!r} is not an address or host name this machine can resolve ({exc}); "
                                      "give one of its addresses (127.0.0.1, 0.0.0.0, or an interface's)")


# -- helpers ------------------------------------------------------------------------------------------------


def _positive(value: float) -> bool:
    return math.isfinite(value) and value > 0


def _after_flag(message: str, option: str) -> str:
    """A message that begins with the option's flag, without it (the reader spells the option itself)."""
    flag = option_flag(option)
    return message[len(flag):].lstrip() if message.startswith(flag) else f": {message}"
