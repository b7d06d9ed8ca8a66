"""Hook specifications of agentcompass, and the two markers.

Registration hooks follow one pattern: the hook receives a ``register(name, factory)`` callback and calls it
once per thing it provides. Names are unique across all plugins; registering a name another plugin already
registered is a load error of the second plugin, naming both.

Observer hooks are called for every implementation (none is ``firstresult``); an observer that raises is
logged and ignored, so a broken reporter never breaks a run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pluggy

PROJECT_NAME = "agentcompass"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)

Register = Callable[[str, Callable[..., Any]], None]


@hookspec
def register_benchmarks(register: Register) -> None:
    """Register benchmarks.

    :param register: call ``register(name, factory)`` per benchmark; ``factory(**options)`` returns a
        :class:`~agentcompass.runtime.BaseBenchmark` (the class itself is a fine factory). ``options`` come
        from ``--benchmark-arg key=value``.
    :return: nothing; results are ignored.
    """


@hookspec
def register_harnesses(register: Register) -> None:
    """Register harnesses (agent loops).

    :param register: call ``register(name, factory)`` per harness; ``factory(**options)`` returns a
        :class:`~agentcompass.runtime.BaseHarness`.
    :return: nothing; results are ignored.
    """


@hookspec
def register_environments(register: Register) -> None:
    """Register environment kinds (``local``, ``docker``, ...).

    :param register: call ``register(name, factory)`` per kind; ``factory(**options)`` returns an
        :class:`~agentcompass.runtime.EnvironmentProvider`. Import heavy libraries inside the factory, not at
        module import, so that ``agentcompass plugins list`` stays fast.
    :return: nothing; results are ignored.
    """


@hookspec
def register_metric_contracts(register: Register) -> None:
    """Register named metric contracts that benchmarks may refer to.

    :param register: call ``register(name, factory)``; ``factory()`` returns a
        :class:`~agentcompass.runtime.metrics.MetricContract`.
    :return: nothing; results are ignored.
    """


@hookspec
def register_models(register: Register) -> None:
    """Register model providers.

    :param register: call ``register(provider, factory)``; for ``MODEL`` = ``provider/name`` the runtime
        calls ``factory(name, **options)`` (``options`` from ``--model-arg``) and gets a
        :class:`~agentcompass.runtime.ModelClient`.
    :return: nothing; results are ignored.
    """


@hookspec
def agentcompass_run_started(run_id: str, request: Any, run_dir: str) -> None:
    """Observer: a run is about to schedule its first task.

    :param run_id: the run's id.
    :param request: the :class:`~agentcompass.runtime.RunRequest`.
    :param run_dir: the run directory.
    :return: nothing.
    """


@hookspec
def agentcompass_task_event(event: Mapping[str, Any]) -> None:
    """Observer: a task attempt changed phase, or finished.

    :param event: ``{"event": "task.phase" | "task.finished" | "task.retry", "run_id", "task_id",
        "attempt", "phase", "previous", "status", "error"}``. Keys are stable.
    :return: nothing.
    """


@hookspec
def agentcompass_run_finished(run_id: str, summary: Mapping[str, Any]) -> None:
    """Observer: a run ended (normally or interrupted) and ``summary.json`` is written.

    :param run_id: the run's id.
    :param summary: the content of ``summary.json``.
    :return: nothing.
    """
