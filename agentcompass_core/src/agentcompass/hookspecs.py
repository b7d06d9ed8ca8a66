"""Hook specifications of agentcompass, and the two markers.

Registration hooks follow one pattern: the hook receives a ``register(name, factory)`` callback and calls it
once per thing it provides. Names are unique across all plugins; registering a name another plugin already
registered is a load error of the second plugin, naming both. Each plugin's registration hooks are called
through pluggy for that plugin alone (``subset_hook_caller``), so ``tryfirst``/``trylast`` and wrappers hold
and one plugin's failure is recorded against it, never against the others.

Observer hooks are called through pluggy for every implementation (none is ``firstresult``), so ordering
markers and ``wrapper=True`` implementations work as in any pluggy project. An observer that raises is
logged (``plugin.observer_failed`` in ``logs.jsonl``) and the other observers still run: a broken reporter
never breaks a run. Observers are called on the run's event loop: keep them quick, and never block.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pluggy

PROJECT_NAME = "agentcompass"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)

if TYPE_CHECKING:
    import click

    from agentcompass.runtime.records import LiveFigures, ModelCallEvent, RecordedResult, RunSummary, TaskEvent
    from agentcompass.runtime.types import RunRequest

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
def register_executors(register: Register) -> None:
    """Register executors: where a run's attempts run (``--executor NAME``; the default is ``local``).

    :param register: call ``register(name, factory)`` per executor; ``factory(**options)`` (``options`` from
        ``--executor-arg key=value``) returns an :class:`~agentcompass.runtime.executor.Executor`.
    :return: nothing; results are ignored.
    """


@hookspec
def register_scanners(register: Register) -> None:
    """Register transcript scanners (``agentcompass scan --scanner NAME``, ``run --scan NAME``).

    :param register: call ``register(name, factory)`` per scanner; ``factory()`` — or ``factory(ARG)`` for
        ``--scanner NAME:ARG`` — returns a :class:`~agentcompass.runtime.scanning.Scanner`: an object with a
        ``name`` and ``scan(transcript)`` returning the :class:`~agentcompass.runtime.scanning.Finding` objects of
        one attempt (or an awaitable of them). A bad ``ARG`` is a :class:`~agentcompass.errors.UsageError`.
    :return: nothing; results are ignored.
    """


@hookspec
def register_commands(cli: click.Group) -> None:
    """Add commands to the ``agentcompass`` command line.

    Called once when the command line starts, for each plugin on its own: a plugin whose hook raises is
    reported by ``agentcompass plugins list`` and its commands are left out; the others keep theirs.

    :param cli: the top-level click group; call ``cli.add_command(command)`` or decorate with ``@cli.command()``.
        A command name that is already taken is a load error of the plugin. Keep imports inside the command
        functions, so that every start of ``agentcompass`` stays fast.
    :return: nothing; results are ignored.
    """


@hookspec
def agentcompass_run_started(run_id: str, request: RunRequest, run_dir: str, n_work: int, n_finished: int,
                             figures: Callable[[], LiveFigures]) -> None:
    """Observer: a run is about to schedule its first attempt (``run.json`` is written).

    An implementation may take any subset of these arguments (pluggy passes those it names).

    :param run_id: the run's id.
    :param request: the run's :class:`~agentcompass.runtime.RunRequest` (resolved: a resumed run's own, with the
        concurrency the run can use).
    :param run_dir: the run directory.
    :param n_work: how many (task, trial) results the run plans in all.
    :param n_finished: how many of them were final before this start (a resumed run's; else 0). The run's
        progress is ``n_finished`` plus the ``task.finished`` events that follow, out of ``n_work``.
    :param figures: call it (cheap; on the run's event loop) for the run's live figures, a
        :class:`~agentcompass.runtime.records.LiveFigures`: attempts in flight and the cost so far.
    :return: nothing.
    """


@hookspec
def agentcompass_run_warning(run_id: str, message: str) -> None:
    """Observer: something the user should read before the run's results (the console prints it as
    ``warning: MESSAGE``): a damaged line of the run's records that was skipped (its task runs again), or a
    ``--concurrency`` larger than the run can use (called before ``agentcompass_run_started``); or, before
    ``agentcompass_run_finished``, a ``--cache`` that missed only because the requests' seed differs. Also
    written to ``logs.jsonl`` (``results.damaged_line``, ``run.concurrency_capped``, ``cache.seed_miss``).

    :param run_id: the run's id.
    :param message: one line, naming what is wrong (the file and line of a damaged record).
    :return: nothing.
    """


@hookspec
def agentcompass_run_signal(signal: str, count: int) -> None:
    """Observer: the run received SIGINT or SIGTERM (only when the runner handles signals, as the CLI's does).
    The first stops scheduling, cancels the attempts in flight and keeps what finished; later ones are only
    reported here and never cut the clean-up short. May come before ``agentcompass_run_started`` (a signal
    while the run is set up) and is called from the run's event loop, never from inside a signal handler.

    :param signal: the signal's name (``SIGINT``, ``SIGTERM``).
    :param count: how many signals the run has received, this one included.
    :return: nothing.
    """


@hookspec
def agentcompass_run_control(run_id: str, action: str, uid: int, message: str) -> None:
    """Observer: ``agentcompass ctl`` steered the run (pause, resume, cancel, requeue, set, drain); the console
    prints it. Called on the run's event loop once the action took effect (``logs.jsonl`` records it as
    ``control.action``).

    :param run_id: the run's id.
    :param action: the action's name.
    :param uid: the user id of the process that asked.
    :param message: what it did, in words (``paused: no attempt starts; 2 running go on``).
    :return: nothing.
    """


@hookspec
def agentcompass_task_event(event: TaskEvent) -> None:
    """Observer: a task attempt changed phase, was retried, or the task finished.

    :param event: a :class:`~agentcompass.runtime.records.TaskEvent`; ``event.event`` is ``"task.phase"``
        (with ``phase`` and ``previous``), ``"task.retry"`` (with ``status`` and ``error``) or
        ``"task.finished"`` (with ``status``, ``error`` and ``metrics``). The error is masked of the run's
        secrets, as ``results.jsonl`` is.
    :return: nothing.
    """


@hookspec
def agentcompass_model_call(event: ModelCallEvent) -> None:
    """Observer: a model call of a task attempt ended (answered or failed), in-process or through the gateway.

    Called once per call, right after its record joined the attempt's trajectory, on the run's event loop
    (so between the attempt's ``task.phase`` events: a call made while the attempt was ``RUNNING`` arrives
    before the attempt's next phase event). When no installed plugin implements this hook the runner does not
    build the events at all.

    :param event: a :class:`~agentcompass.runtime.records.ModelCallEvent`: who called (task, trial, attempt,
        role, via), when and for how long, tokens, finish reason, error (masked of the run's secrets), cost;
        never the messages.
    :return: nothing.
    """


@hookspec
def agentcompass_result_recorded(record: RecordedResult) -> None:
    """Observer: a (task, trial)'s final attempt was written (``results.jsonl``, ``trajectories.jsonl``), right
    before its ``task.finished`` event; on the run's event loop. When no installed plugin implements this hook
    the runner builds nothing for it. ``run --scan`` scans each attempt from it, without reading the files back.

    :param record: a :class:`~agentcompass.runtime.records.RecordedResult`: the attempt's result line and model
        call lines as written (masked of the run's secrets; shared with the run, so read-only).
    :return: nothing.
    """


@hookspec
def agentcompass_run_finished(run_id: str, summary: RunSummary) -> None:
    """Observer: a run ended (normally, stopped early or interrupted) and ``summary.json`` is written.

    :param run_id: the run's id.
    :param summary: the :class:`~agentcompass.runtime.records.RunSummary` that ``summary.json`` holds.
    :return: nothing.
    """
