"""The runner: one request, run to completion (or interruption) into a run directory.

Library entry point::

    outcome = await Runner(host, request, run_dir=Path("runs/x")).run()
    outcome.summary.status_counts, outcome.exit_code

The runner decides *what* runs and keeps the record; the executor (``--executor``, default ``local``) decides
*where* (:mod:`agentcompass.runtime.executor`). Its jobs, in order:

1. resolve the request (:mod:`agentcompass.resolve`): every name, option and combination is checked before
   anything is written, so bad input never leaves half a run behind;
2. open the run directory as its mode says (:mod:`agentcompass.run_modes`): new, resumed (only tasks without a
   final record run again, with new attempt numbers) or re-scoring another run's results;
3. start the model gateway and the environment provider, hand the attempts to the executor through an
   :class:`~agentcompass.attempts.AttemptQueue`, which records each outcome as it arrives;
4. on every path — Ctrl-C and SIGTERM included (:mod:`agentcompass.interrupts`) — close every environment,
   then write ``summary.json``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from agentcompass.attempts import AttemptQueue
from agentcompass.capacity import SharedCapacity
from agentcompass.errors import ResultsError, RunInterrupted, UsageError
from agentcompass.execution import InProcessContext
from agentcompass.exit_codes import ExitCode
from agentcompass.interrupts import Interrupts
from agentcompass.models.call_sources import provenance
from agentcompass.models.gateway import ModelGateway, is_loopback
from agentcompass.models.metering import CallRecord
from agentcompass.models.roles import GatewayModelAccess, RunModels, build_clients, resolve_models, spent_usd
from agentcompass.plugins import PluginHost
from agentcompass.redaction import Redactor
from agentcompass.request_checks import check_request, raise_problems
from agentcompass.resolve import (
    Resolved,
    environment_specs,
    load_tasks,
    phase_timeouts,
    resolve,
    task_timeouts,
)
from agentcompass.results.run_dir import LOGS, RunDirectory
from agentcompass.results.summary import (
    build_run_info,
    build_summary,
    contract_json,
    earlier_invocations,
    planned_work,
)
from agentcompass.run_log_writer import make_run_logger
from agentcompass.run_modes import NewRun, Rescoring, ResumedRun, RunMode
from agentcompass.runtime.environment import EnvironmentDemand
from agentcompass.runtime.executor import AttemptSource, AttemptSpec
from agentcompass.runtime.known_secrets import known_secrets, missing_secret_env
from agentcompass.runtime.logs import bound_run_logger
from agentcompass.runtime.models import ModelClient
from agentcompass.runtime.records import Invocation, LiveFigures, ModelCallEvent, RunPlan, RunSummary, TaskEvent
from agentcompass.runtime.remote_attempts import scrub_request
from agentcompass.runtime.types import EnvironmentSpec, RunRequest, RunResult, TaskSpec
from agentcompass.serialization import unstructure
from agentcompass.supervision import Supervisor, stall_timeouts


@attrs.define
class RunOutcome:
    run_dir: Path
    summary: RunSummary
    interrupted: bool

    @property
    def exit_code(self) -> ExitCode:
        if self.interrupted:
            return ExitCode.INTERRUPTED
        if any(k != "COMPLETED" for k in self.summary.status_counts) or self.summary.unfinished:
            return ExitCode.TASK_ERRORS
        return ExitCode.OK


def provider_secrets(clients: Mapping[str, ModelClient]) -> frozenset[str]:
    """Every secret the run's model clients hold (what the redactor masks and nothing remote may carry)."""
    return frozenset(s for client in set(clients.values()) for s in client.secrets)


def distinct(specs: Iterable[EnvironmentSpec]) -> list[EnvironmentSpec]:
    """Each spec object once, in first-seen order."""
    return list({id(spec): spec for spec in specs}.values())


def model_call_event(run_id: str, spec: AttemptSpec, record: CallRecord, redactor: Redactor) -> ModelCallEvent:
    """The observers' view of one call record: no messages, the error masked. Fields a record may lack (the
    gateway protocols' ``protocol``, cached and reasoning tokens, time to first token) are ``None`` then."""
    error = record.error
    if error and redactor.active:
        error = redactor.text(error)
    return ModelCallEvent(
        run_id=run_id, task_id=spec.task.task_id, trial=spec.trial, attempt=spec.attempt, role=record.role,
        model=record.model, via=record.via, started_at=record.started_at, latency_s=record.latency_s,
        prompt_tokens=record.prompt_tokens, completion_tokens=record.completion_tokens,
        finish_reason=record.finish_reason, error=error, attempts=record.attempts, cost_usd=record.cost_usd,
        protocol=getattr(record, "protocol", None), cached_tokens=getattr(record, "cached_tokens", None),
        reasoning_tokens=getattr(record, "reasoning_tokens", None), ttft_s=getattr(record, "ttft_s", None),
    )


@attrs.define
class _Run:
    """One run in progress: what its steps share."""

    request: RunRequest
    mode: RunMode
    resolved: Resolved
    models: RunModels
    tasks: list[TaskSpec]
    specs: dict[str, EnvironmentSpec]
    clients: dict[str, ModelClient]
    store: RunDirectory
    interrupts: Interrupts
    #: The request as asked (what ``run.json`` records); ``request`` may run with less concurrency.
    asked: RunRequest = attrs.field(default=attrs.Factory(lambda self: self.request, takes_self=True))
    log: Any = None
    started_at: float = 0.0
    #: Every (task, trial) of the run, and those of them still to run.
    work: list[tuple[TaskSpec, int]] = attrs.field(factory=list)
    todo: list[tuple[TaskSpec, int]] = attrs.field(factory=list)
    #: Final results so far, those an earlier part of the run recorded included.
    final: dict[tuple[str, int], RunResult] = attrs.field(factory=dict)
    n_finished_before: int = 0
    #: The highest attempt number each (task, trial) already used (a resume's).
    attempts_used: dict[tuple[str, int], int] = attrs.field(factory=dict)
    access: GatewayModelAccess | None = None
    context: InProcessContext | None = None
    #: The run's earlier invocations (a resumed run's), whose time its ``duration_s`` adds up.
    earlier: tuple[Invocation, ...] = ()


@attrs.define
class Runner:
    """Runs one request to completion (or interruption) into a run directory.

    How the run begins is its :meth:`mode` (:mod:`agentcompass.run_modes`): new, resumed (``resume=True``) or
    re-scoring another run's results (``rescore_from``). Everything a run announces (its start, each task's
    phases and end, warnings for the user, the signals it receives, its end) goes to the observer hooks
    (:mod:`agentcompass.hookspecs`); the CLI's console output is one such observer
    (:class:`agentcompass.cli.progress.ConsoleReporter`).
    """

    host: PluginHost
    request: RunRequest
    run_dir: Path | None = None
    resume: bool = False
    #: Install SIGINT/SIGTERM handlers while running (the CLI does; library callers may not want it).
    handle_signals: bool = True
    #: Request fields the user gave explicitly (the CLI says which): on resume they override the saved ones.
    given: frozenset[str] = frozenset()
    #: ``agentcompass evaluate``: the run directory whose recorded results are scored again (into ``run_dir``).
    rescore_from: Path | None = None
    #: ``agentcompass evaluate --exclude-flagged``: the scanners whose flagged attempts are not scored again.
    exclude_flagged: tuple[str, ...] = ()
    #: Limits shared with other runs of this process (a suite's cells, :mod:`agentcompass.capacity`): attempt
    #: slots, environment slots and a cost pool. ``None``: the run's own ``--max-environments`` and budget.
    capacity: SharedCapacity | None = None
    #: Serve ``agentcompass ctl`` from the run directory while the run runs (:mod:`agentcompass.control`; the CLI
    #: does).
    control: bool = False

    def mode(self) -> RunMode:
        """How this run begins: resumed, re-scoring another run, or new."""
        if self.resume:
            assert self.run_dir is not None, "resume=True needs the run_dir to resume"
            return ResumedRun(self.run_dir, self.given)
        if self.rescore_from is not None:
            return Rescoring(self.rescore_from, self.run_dir, self.given, self.exclude_flagged)
        return NewRun(self.run_dir)

    async def run(self) -> RunOutcome:
        interrupts = Interrupts(enabled=self.handle_signals, on_signal=self._signalled)
        with interrupts:
            try:
                return await self._run(interrupts)
            except asyncio.CancelledError:
                if not interrupts.interrupted:
                    raise
                current = asyncio.current_task()
                if current is not None:
                    current.uncancel()
                raise RunInterrupted("interrupted before the run started; nothing was recorded") from None

    def _signalled(self, name: str, count: int) -> None:
        self.host.notify("agentcompass_run_signal", signal=name, count=count)

    async def _run(self, interrupts: Interrupts) -> RunOutcome:
        raise_problems(check_request(self.request))
        mode = self.mode()
        req = mode.request(self.request)
        models = resolve_models(req)
        resolved = resolve(self.host, req, models)
        tasks = mode.tasks(resolved.benchmark, await load_tasks(resolved.benchmark, req))
        all_specs = environment_specs(resolved.benchmark, req, tasks, resolved.harness)
        clients = build_clients(self.host, req, models)
        executor = resolved.executor
        try:
            # Before anything is written: an executor that cannot run this here says so now.
            secrets = provider_secrets(clients)
            await executor.check(scrub_request(req, secrets), distinct(all_specs.values()), secrets=secrets)
            missing = missing_secret_env(req.models.secret_env)
            if missing:
                raise UsageError(f"--secret-env names {', '.join('$' + m for m in missing)}, which is not set; "
                                 "set it or leave it out")
            redactor = Redactor()
            redactor.add(*secrets, *known_secrets([unstructure(req)]))  # what the report masks, masked on write
            store = mode.open_store(req, redactor)
            try:
                return await self._execute(_Run(req, mode, resolved, models, tasks, all_specs, clients, store,
                                                       interrupts))
            except Exception:
                if mode.creates_directory:  # a set-up failure (no engine, ...) leaves no empty run directory
                    store.close()
                    store.remove_if_nothing_recorded()
                raise
            finally:
                store.close()
        finally:
            with contextlib.suppress(Exception):
                await asyncio.shield(executor.close())
            for client in set(clients.values()):
                with contextlib.suppress(Exception):
                    await client.aclose()

    async def _execute(self, run: _Run) -> RunOutcome:
        store = run.store
        run.log = make_run_logger(store.stream(LOGS), store.redactor, run_id=run.request.run_id)
        with bound_run_logger(run.log):
            run.started_at = time.time()
            run.earlier = self._earlier_invocations(run)
            self._plan_work(run)
            host = run.request.execution.gateway_host
            gateway = ModelGateway(dict(run.models.ids), run_id=run.request.run_id, host=host,
                                   aliases=dict(run.models.aliases), faults=bool(run.request.answers.faults))
            try:
                await gateway.start()
                if not is_loopback(host):
                    run.log.warning("gateway.exposed", host=host, port=gateway.port)
                await self._attempt_all(run, gateway)
            except asyncio.CancelledError:
                if not run.interrupts.interrupted:
                    raise
                current = asyncio.current_task()
                if current is not None:
                    current.uncancel()
                run.log.warning("run.interrupted", finished=len(run.final))
            finally:
                await self._tear_down(run, gateway)
            return self._finish(run)

    @staticmethod
    def _earlier_invocations(run: _Run) -> tuple[Invocation, ...]:
        """What a resumed run's ``summary.json`` lists of its earlier invocations (none for a new run, or
        when it has no readable summary: a run killed before writing one)."""
        if not isinstance(run.mode, ResumedRun):
            return ()
        try:
            previous = run.store.read_summary()
        except ResultsError:
            return ()
        return earlier_invocations(previous, run.mode.previous)

    def _plan_work(self, run: _Run) -> None:
        """What the run is to do: its work, what of it is done, and the concurrency it can use."""
        req, store, mode = run.request, run.store, run.mode
        finished = mode.finished(store)
        run.attempts_used = mode.attempts_used(store)
        for warning in mode.warnings(store):  # what reading the records (above) met
            run.log.warning("results.damaged_line", detail=warning)
            self._warn(req, warning)
        run.work = mode.work(req, run.tasks)
        run.todo = [(t, trial) for t, trial in run.work if (t.task_id, trial) not in finished]
        run.final, run.n_finished_before = dict(finished), len(finished)
        if req.schedule.concurrency > max(len(run.todo), 1):  # more workers than attempts only costs start-up time
            used = max(len(run.todo), 1)
            run.log.warning("run.concurrency_capped", requested=req.schedule.concurrency, used=used)
            if "concurrency" in self.given:
                self._warn(req, f"--concurrency {req.schedule.concurrency} is more than this run can use "
                                f"({len(run.todo)} attempts to run): using {used}")
            run.request = req.with_options(concurrency=used)  # ``run.json`` records what was asked

    def _warn(self, req: RunRequest, message: str) -> None:
        self.host.notify("agentcompass_run_warning", run_id=req.run_id, message=message)

    async def _attempt_all(self, run: _Run, gateway: ModelGateway) -> None:
        """Set up the environments and models, record the start, and hand every attempt to the executor."""
        req, resolved, store, mode, todo = run.request, run.resolved, run.store, run.mode, run.todo
        specs = {t.task_id: run.specs[t.task_id] for t, _ in todo}
        gateway_env: Mapping[str, str] = {}
        provider = resolved.provider
        if resolved.executor.remote:  # environments open on the workers, not here
            base_url = gateway.base_url
        else:
            await provider.setup(distinct(specs.values()), run_id=req.run_id)
            await provider.plan(EnvironmentDemand(
                opens=tuple(specs[t.task_id] for t, _ in todo), concurrency=req.schedule.concurrency,
                max_environments=req.schedule.max_environments,
            ))
            base_url, gateway_env = provider.gateway_address(
                host=gateway.host, port=gateway.port, unix_socket=gateway.unix_socket
            )
        limits = resolved.harness.attempt_limits() if resolved.harness is not None else None
        access = run.access = GatewayModelAccess.for_request(req, run.models, run.clients, gateway, base_url, limits)
        capacity = self.capacity
        if capacity is not None:
            access.budget.pool = capacity.cost
        # A resume carries what was spent, retried attempts included.
        access.budget.add_cost(spent_usd([*run.final.values(), *store.attempt_results()]))
        run.context = InProcessContext(
            request=req, benchmark=resolved.benchmark, harness=resolved.harness, provider=provider,
            models=access, artifacts_root=store.artifacts_dir,
            environment_slots=capacity.environment_slots if capacity is not None else
            asyncio.Semaphore(req.schedule.max_environments) if req.schedule.max_environments else None,
            attempt_slots=capacity.attempt_slots if capacity is not None else None,
            on_transition=self._transition_observer(req, run.log),
            on_model_call=self._model_call_observer(req, store.redactor),
            source_artifacts=mode.source_artifacts,
            gateway_host=gateway.host, gateway_port=gateway.port,
            secrets=provider_secrets(run.clients),
        )
        queue = AttemptQueue(
            request=req, store=store, host=self.host, log=run.log, timeouts=phase_timeouts(req),
            task_timeouts=task_timeouts(resolved.benchmark, req, run.tasks), specs=specs, gateway_env=gateway_env,
            final=run.final, stop_reason=lambda: access.stop_reason, stop=access.budget.stop,
        )
        queue.add(todo, run.attempts_used, mode.rescores())
        supervisor = Supervisor(stall_timeouts(req), run.context.live_meters, on_stalled=self._stall_logger(run.log))
        supervisor.observe(run.context)
        store.write_run_info(build_run_info(run.asked, self._plan(req, resolved, run.models), resolved.plugin_versions,
                                            mode.previous, run.started_at, mode.derived_from,
                                            planned_work(req, run.work), provenance(req)))
        run.log.info("run.started", benchmark=req.benchmark, harness=req.harness, model=req.model,
                     environment=req.environment, executor=req.execution.executor, n_tasks=len(run.tasks),
                     trials=req.tasks.trials, seed=req.tasks.seed, n_todo=len(todo), **mode.log_fields())
        budget, in_flight = access.budget, queue.in_flight

        def figures() -> LiveFigures:
            return LiveFigures(in_flight(), budget.spent_usd if access.prices_known else None, supervisor.stalled)

        self.host.notify("agentcompass_run_started", run_id=req.run_id, request=req, run_dir=str(store.path),
                         n_work=len(run.work), n_finished=run.n_finished_before, figures=figures)
        # Attempts that run elsewhere hold the shared slots while the executor has them (here: in run_attempt).
        held = capacity.hold(queue) if capacity is not None and resolved.executor.remote else None
        watchdog = asyncio.create_task(supervisor.watch())
        try:
            async with self._steered(run, held or queue, queue, supervisor) as source:
                await resolved.executor.execute(source, run.context)
        finally:
            watchdog.cancel()
            if held is not None:
                held.release()
            # Attempts an interruption (or a broken executor) left unreported, with the calls they made.
            queue.record_cancelled(run.context.live_meters)

    def _steered(self, run: _Run, source: AttemptSource, queue: AttemptQueue,
                 supervisor: Supervisor) -> contextlib.AbstractAsyncContextManager[AttemptSource]:
        """``source`` as the executor gets it: steered by ``agentcompass ctl`` when :attr:`control` is on (a drained
        run ends interrupted)."""
        if not self.control:
            return contextlib.nullcontext(source)
        from agentcompass.control.live import steered

        @contextlib.asynccontextmanager
        async def steering() -> AsyncIterator[AttemptSource]:
            req, access = run.request, run.access
            assert access is not None
            async with steered(run.store.path, run_id=req.run_id, source=source, queue=queue,
                               supervisor=supervisor, budget=access.budget,
                               tasks={t.task_id: t for t in run.tasks}, trials=req.tasks.trials,
                               n_work=len(run.work), concurrency=req.schedule.concurrency, log=run.log,
                               notify=self.host.notify) as steering:
                try:
                    yield steering.attempts
                finally:
                    run.interrupts.drained = steering.drained

        return steering()

    @staticmethod
    def _stall_logger(log: Any) -> Callable[[AttemptSpec, str], None]:
        def on_stalled(spec: AttemptSpec, reason: str) -> None:
            log.warning("task.stalled", task_id=spec.task.task_id, trial=spec.trial, attempt=spec.attempt,
                        reason=reason)

        return on_stalled

    async def _tear_down(self, run: _Run, gateway: ModelGateway) -> None:
        """Close every environment an attempt left open, the provider and the gateway: on every path, and never
        cut short by another signal."""
        run.interrupts.shield_cleanup()
        provider = run.resolved.provider
        if run.context is not None:
            for session in list(run.context.live_sessions):
                with contextlib.suppress(BaseException):
                    await asyncio.shield(provider.close(session))
        if not run.resolved.executor.remote:
            with contextlib.suppress(BaseException):
                await asyncio.shield(provider.teardown())
        with contextlib.suppress(BaseException):
            await gateway.stop()

    def _finish(self, run: _Run) -> RunOutcome:
        """Write ``summary.json`` and announce the end."""
        req, store, access = run.request, run.store, run.access
        summary = build_summary(
            req, run.resolved.contract, run.work, run.final, interrupted=run.interrupts.interrupted,
            # A budget or a fatal model error (bad credentials) stops scheduling; unrun tasks stay resumable.
            stopped_reason=access.stop_reason if access is not None else None,
            duration_s=time.time() - run.started_at, run_dir=str(store.path), attempts=store.attempt_results(),
            started_at=run.started_at, earlier=run.earlier,
        )
        store.write_summary(summary, run.final)
        for source in access.sources or () if access is not None else ():
            for warning in source.warnings():  # what a call source met (a cache missing only by the seed)
                self._warn(req, warning)
        run.log.info("run.finished", status_counts=dict(summary.status_counts), interrupted=summary.interrupted,
                     duration_s=summary.duration_s, stopped_reason=summary.stopped_reason)
        self.host.notify("agentcompass_run_finished", run_id=req.run_id, summary=summary)
        return RunOutcome(store.path, summary, summary.interrupted)

    def _transition_observer(self, req: RunRequest, log: object) -> Callable[[AttemptSpec, object, object], None]:
        notify, run_id = self.host.notify, req.run_id
        debug = log.debug  # type: ignore[attr-defined]
        observed = bool(self.host.pm.hook.agentcompass_task_event.get_hookimpls())  # else no event is made

        def on_transition(spec: AttemptSpec, prev: object, new: object) -> None:
            previous, phase = prev.value, new.value  # type: ignore[attr-defined]
            task_id, trial, attempt = spec.task.task_id, spec.trial, spec.attempt
            debug("task.phase", task_id=task_id, trial=trial, attempt=attempt, previous=previous, phase=phase)
            if observed:
                notify("agentcompass_task_event", event=TaskEvent(
                    event="task.phase", run_id=run_id, task_id=task_id, attempt=attempt, trial=trial, phase=phase,
                    previous=previous))

        return on_transition

    def _model_call_observer(self, req: RunRequest, redactor: Redactor
                             ) -> Callable[[AttemptSpec, CallRecord], None] | None:
        """What tells the ``agentcompass_model_call`` observers of each call; ``None`` (no cost at all) when no
        plugin implements that hook."""
        if not self.host.pm.hook.agentcompass_model_call.get_hookimpls():
            return None
        notify, run_id = self.host.notify, req.run_id

        def on_model_call(spec: AttemptSpec, record: CallRecord) -> None:
            notify("agentcompass_model_call", event=model_call_event(run_id, spec, record, redactor))

        return on_model_call

    @staticmethod
    def _plan(req: RunRequest, resolved: Resolved, run_models: RunModels) -> RunPlan:
        return RunPlan(
            benchmark_class=type(resolved.benchmark).__qualname__,
            harness_class=type(resolved.harness).__qualname__ if resolved.harness else None,
            environment_class=type(resolved.provider).__qualname__,
            executor=req.execution.executor,
            evaluation_environment_mode=resolved.benchmark.evaluation_environment_mode,
            metric_contract=contract_json(resolved.contract),
            model_roles=dict(run_models.ids),
        )
