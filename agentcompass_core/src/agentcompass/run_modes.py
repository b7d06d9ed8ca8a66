"""How a run begins: a new run, a resumed one, or the re-scoring of a finished run (``agentcompass evaluate``).

Each is a small :class:`RunMode`; the runner asks its mode at the few points where they differ (the request the
run uses, where it is recorded, which (task, trial) pairs are its work and which of them are already done, what
``run.json`` says it came from) and does everything else the same way, so no step of the runner branches on the
mode. :meth:`agentcompass.runner.Runner.mode` picks one from the runner's ``resume`` / ``rescore_from``.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import attrs

from agentcompass.errors import ResultsError, UsageError
from agentcompass.models.call_sources import default_seed
from agentcompass.models.gateway import prune_socket_dirs
from agentcompass.redaction import Redactor
from agentcompass.rescoring import RescoreSource
from agentcompass.resolve import new_run_id
from agentcompass.results.run_dir import RunDirectory
from agentcompass.runtime.attempt_spec import Rescore
from agentcompass.runtime.benchmark import BaseBenchmark
from agentcompass.runtime.records import RunInfo
from agentcompass.runtime.types import REQUEST_OPTIONS, RoleModelSettings, RunRequest, RunResult, TaskSpec

#: (task id, trial).
Key = tuple[str, int]

#: Fields a resumed run may change: how it is scheduled, connected, timed and budgeted, never what defines its
#: tasks or scores (``trials`` only grows, ``seed`` stays; both are checked apart).
RESUMABLE_FIELDS = (
    "concurrency", "max_environments", "retries", "max_retries", "max_connections", "request_timeout",
    "executor", "executor_args", "gateway_host", "secret_env", "timeout", "phase_timeouts", "model_base_url",
    "model_api_key_env", "max_cost", "prices", "stall_timeout",
)
#: How the CLI spells the request fields a resume refuses to change.
OPTION_NAMES = {
    "environment": "--env", "environment_args": "--env-arg", "benchmark_args": "-b/--benchmark-arg",
    "harness_args": "--harness-arg", "model_args": "-m/--model-arg", "role_models": "--user-model/--judge-model",
    "limit": "-n/--limit", "task_ids": "-t/--task-id", "max_tokens_per_task": "--max-tokens-per-task",
    "role_settings": "[models.ROLE] args (--config)",
}
_DEFAULT_REQUEST = RunRequest(benchmark="", harness="", model="")


def resumed_role_settings(old: Mapping[str, RoleModelSettings], new: Mapping[str, RoleModelSettings]
                          ) -> dict[str, RoleModelSettings] | None:
    """The role settings a resume runs with: a role's connection (``base_url``, ``api_key_env``,
    ``max_connections``: those given win) may change, as ``--model-base-url`` may; its ``args`` (what its model
    is asked) may not — ``None`` when they would."""
    merged = dict(old)
    for role, settings in new.items():
        before = old.get(role, RoleModelSettings())
        if settings.args and dict(settings.args) != dict(before.args):  # none given: the recorded ones
            return None
        merged[role] = replace(before, **{k: v for k in ("base_url", "api_key_env", "max_connections")
                                          if (v := getattr(settings, k)) is not None})
    return merged


class RunMode(abc.ABC):
    """What differs between the ways a run begins. The runner calls :meth:`request` first, then :meth:`tasks`,
    then :meth:`open_store` (only once nothing is left to refuse), then the rest."""

    #: The run directory is made by this mode (a set-up failure removes it again when nothing was recorded).
    creates_directory: bool = True

    @abc.abstractmethod
    def request(self, given: RunRequest) -> RunRequest:
        """The request the run uses (with its run id and seed)."""

    def tasks(self, benchmark: BaseBenchmark, tasks: list[TaskSpec]) -> list[TaskSpec]:
        """The tasks the run is about, from those the benchmark loaded."""
        return tasks

    @abc.abstractmethod
    def open_store(self, req: RunRequest, redactor: Redactor) -> RunDirectory:
        """The run directory to record into, ready for appending, masking with ``redactor``."""

    def work(self, req: RunRequest, tasks: Sequence[TaskSpec]) -> list[tuple[TaskSpec, int]]:
        """Every (task, trial) of the run, done or not."""
        return [(t, trial) for trial in range(1, req.tasks.trials + 1) for t in tasks]

    def finished(self, store: RunDirectory) -> dict[Key, RunResult]:
        """The final results already recorded (not run again, and counted in the summary)."""
        return {}

    def attempts_used(self, store: RunDirectory) -> dict[Key, int]:
        """The highest attempt number each (task, trial) already used."""
        return {}

    def warnings(self, store: RunDirectory) -> list[str]:
        """The damaged lines reading the records met (file and line each). Call after :meth:`finished` and
        :meth:`attempts_used`, which read them."""
        return list(store.warnings)

    def rescores(self) -> Mapping[Key, Rescore] | None:
        """What each attempt scores again, when the run only evaluates."""
        return None

    @property
    def source_artifacts(self) -> Callable[[str, int, int], Path] | None:
        """Where the recorded artifacts of a re-scored attempt are."""
        return None

    @property
    def previous(self) -> RunInfo | None:
        """The ``run.json`` an earlier part of this run wrote."""
        return None

    @property
    def derived_from(self) -> dict[str, str] | None:
        """The run this one scores again (for ``run.json``)."""
        return None

    def log_fields(self) -> dict[str, Any]:
        """What ``run.started`` in ``logs.jsonl`` says of the mode."""
        return {"resumed": False, "rescoring": None}


@attrs.define
class NewRun(RunMode):
    """A run from scratch, into ``run_dir`` (default ``runs/RUN_ID``)."""

    run_dir: Path | None = None

    def request(self, given: RunRequest) -> RunRequest:
        return given.with_options(run_id=given.run_id or new_run_id(),
                                  seed=given.tasks.seed if given.tasks.seed is not None else default_seed(given))

    def open_store(self, req: RunRequest, redactor: Redactor) -> RunDirectory:
        return RunDirectory.create(self.run_dir or Path("runs") / req.run_id, redactor)


@attrs.define
class ResumedRun(RunMode):
    """``--resume RUN_DIR``: the saved request, with the fields the user gave now where a resume may change
    them (others are refused); only (task, trial) pairs without a final record run, each under a new attempt
    number."""

    run_dir: Path
    #: Request fields the user gave explicitly (the CLI says which); empty: those that differ from the defaults.
    given: frozenset[str] = frozenset()
    creates_directory = False
    _store: RunDirectory | None = None
    _previous: RunInfo | None = None

    def request(self, given: RunRequest) -> RunRequest:
        self._store = RunDirectory.open_existing(self.run_dir)
        self._previous = self._store.read_run_info()
        return self._merge(given, self._previous.request)

    def open_store(self, req: RunRequest, redactor: Redactor) -> RunDirectory:
        assert self._store is not None, "request() first"
        self._store.prepare_to_append()
        self._store.redactor = redactor
        prune_socket_dirs(req.run_id)  # what a killed earlier part of this run left
        return self._store

    def finished(self, store: RunDirectory) -> dict[Key, RunResult]:
        return store.final_results()

    def attempts_used(self, store: RunDirectory) -> dict[Key, int]:
        return store.attempt_counts()

    @property
    def previous(self) -> RunInfo | None:
        return self._previous

    def log_fields(self) -> dict[str, Any]:
        return {"resumed": True, "rescoring": None}

    def _merge(self, new: RunRequest, old: RunRequest) -> RunRequest:
        path = self.run_dir
        for field in ("benchmark", "harness", "model"):
            value = getattr(new, field)
            if value and value != getattr(old, field):
                raise ResultsError(
                    f"{path} belongs to a run of {field} {getattr(old, field)!r}, not {value!r}; "
                    "resume it with the same benchmark, harness and model (or leave them out)"
                )
        # Library callers say nothing of what was given: a field that differs from the default was.
        given = self.given or frozenset(name for name in REQUEST_OPTIONS
                                        if new.option(name) != _DEFAULT_REQUEST.option(name))
        fixed = ("benchmark", "harness", "model", "run_id", "trials", "seed")
        roles = (resumed_role_settings(old.models.role_settings, new.models.role_settings)
                 if "role_settings" in given else None)
        changed = sorted(f for f in given if f not in RESUMABLE_FIELDS and f not in fixed
                         and new.option(f) != old.option(f) and not (f == "role_settings" and roles is not None))
        if changed:
            names = ", ".join(OPTION_NAMES.get(f, "--" + f.replace("_", "-")) for f in changed)
            raise UsageError(f"--resume cannot change {names}: they define {path}'s tasks or scores. Resume "
                             "with the options it was run with (leave them out), or start a new run (-o NEW_DIR); "
                             "a resume may change only concurrency, timeouts, retries, connections, the budget and "
                             "--trials (to add trials)")
        trials = old.tasks.trials
        if "trials" in given:
            if new.tasks.trials < old.tasks.trials:
                raise UsageError(f"{path} has {old.tasks.trials} trials per task; --resume can add trials "
                                 f"(--trials {old.tasks.trials + 1} or more), not drop them "
                                 f"(--trials {new.tasks.trials})")
            trials = new.tasks.trials
        if "seed" in given and new.tasks.seed != old.tasks.seed:
            raise UsageError(f"{path} was run with --seed {old.tasks.seed}; a resume keeps it (leave --seed out)")
        return old.with_options(**{f: new.option(f) for f in RESUMABLE_FIELDS if f in given}, trials=trials,
                                role_settings=old.models.role_settings if roles is None else roles)


@attrs.define
class Rescoring(RunMode):
    """``agentcompass evaluate SOURCE``: the source's final results scored again by the benchmark as installed
    now, into a new run directory; the source is only read."""

    source_dir: Path
    run_dir: Path | None = None
    #: Request fields the user gave explicitly (the judge, the environment, scheduling).
    given: frozenset[str] = frozenset()
    #: ``--exclude-flagged``: leave out the attempts these scanners flagged (``scans.jsonl``).
    exclude_flagged: tuple[str, ...] = ()
    _source: RescoreSource | None = None

    @property
    def source(self) -> RescoreSource:
        assert self._source is not None, "request() first"
        return self._source

    def request(self, given: RunRequest) -> RunRequest:
        self._source = RescoreSource.open(self.source_dir, self.exclude_flagged)
        return self._source.request(given, new_run_id(), self.given)

    def tasks(self, benchmark: BaseBenchmark, tasks: list[TaskSpec]) -> list[TaskSpec]:
        return self.source.check(benchmark, tasks)

    def open_store(self, req: RunRequest, redactor: Redactor) -> RunDirectory:
        return RunDirectory.create(self.run_dir or Path("runs") / req.run_id, redactor)

    def work(self, req: RunRequest, tasks: Sequence[TaskSpec]) -> list[tuple[TaskSpec, int]]:
        by_id = {t.task_id: t for t in tasks}
        return [(by_id[tid], trial) for tid, trial in self.source.records]

    def warnings(self, store: RunDirectory) -> list[str]:
        return [*store.warnings, *self.source.store.warnings]

    def rescores(self) -> Mapping[Key, Rescore] | None:
        return self.source.rescores()

    @property
    def source_artifacts(self) -> Callable[[str, int, int], Path] | None:
        return self.source.store.artifacts_dir

    @property
    def derived_from(self) -> dict[str, str] | None:
        return self.source.derived_from()

    def log_fields(self) -> dict[str, Any]:
        return {"resumed": False, "rescoring": str(self.source.path)}
