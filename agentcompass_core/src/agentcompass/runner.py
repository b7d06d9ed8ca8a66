"""The runner: one request, run to completion (or interruption) into a run directory.

Library entry point::

    outcome = await Runner(host, request, run_dir=Path("runs/x")).run()
    outcome.summary.status_counts, outcome.exit_code

The runner decides *what* runs and keeps the record; the executor (``--executor``, default ``local``) decides
*where* (:mod:`agentcompass.runtime.executor`). Its jobs, in order:

1. resolve the request (:mod:`agentcompass.resolve`): every name, option and combination is checked before
   anything is written, so bad input never leaves half a run behind;
2. open the run directory, new or resumed (only tasks without a final record run again, with new attempt
   numbers);
3. start the model gateway and the environment provider, hand the attempts to the executor through an
   :class:`~agentcompass.attempts.AttemptQueue`, which records each outcome as it arrives;
4. on every path — Ctrl-C and SIGTERM included (:mod:`agentcompass.interrupts`) — close every environment,
   then write ``summary.json``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import fields as dataclass_fields
from dataclasses import replace
from pathlib import Path

import attrs

from agentcompass.attempts import AttemptQueue, ResultCallback
from agentcompass.errors import ResultsError, RunInterrupted, UsageError
from agentcompass.execution import InProcessContext
from agentcompass.exit_codes import ExitCode
from agentcompass.interrupts import Interrupts
from agentcompass.logging import make_run_logger
from agentcompass.models.gateway import ModelGateway, is_loopback, prune_socket_dirs
from agentcompass.models.metering import CallRecord
from agentcompass.models.roles import GatewayModelAccess, build_clients, model_aliases, model_ids, spent_usd
from agentcompass.plugins import PluginHost
from agentcompass.redaction import Redactor
from agentcompass.rescoring import RescoreSource
from agentcompass.resolve import (
    Resolved,
    check_request,
    environment_specs,
    load_tasks,
    new_run_id,
    phase_timeouts,
    resolve,
    task_timeouts,
)
from agentcompass.results.run_dir import LOGS, RunDirectory
from agentcompass.results.summary import build_run_info, build_summary, contract_json, planned_work
from agentcompass.runtime.environment import EnvironmentDemand
from agentcompass.runtime.executor import AttemptSpec
from agentcompass.runtime.known_secrets import known_secrets, missing_secret_env
from agentcompass.runtime.logs import bound_run_logger
from agentcompass.runtime.models import ModelClient
from agentcompass.runtime.records import ModelCallEvent, RunInfo, RunPlan, RunSummary, TaskEvent
from agentcompass.runtime.remote_attempts import scrub_request
from agentcompass.runtime.seeds import new_run_seed
from agentcompass.runtime.types import EnvironmentSpec, RoleModelSettings, RunRequest, TaskSpec
from agentcompass.serialization import unstructure


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


#: Fields a resumed run may change: how it is scheduled, connected, timed and budgeted, never what defines its
#: tasks or scores (``trials`` only grows, ``seed`` stays; both are checked apart).
RESUMABLE_FIELDS = (
    "concurrency", "max_environments", "retries", "max_retries", "max_connections", "request_timeout",
    "executor", "executor_args", "gateway_host", "secret_env", "timeout", "phase_timeouts", "model_base_url",
    "model_api_key_env", "max_cost", "prices",
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
class Runner:
    """Runs one request to completion (or interruption) into a run directory."""

    host: PluginHost
    request: RunRequest
    run_dir: Path | None = None
    resume: bool = False
    on_result: ResultCallback | None = None
    #: Told, before any attempt starts: the planned total, how many of it are already finished (a resume), the
    #: trials per task, the run directory, and a function giving (attempts in flight, cost so far or None).
    on_start: Callable[..., None] | None = None
    #: Install SIGINT/SIGTERM handlers while running (the CLI does; library callers may not want it).
    handle_signals: bool = True
    #: Told of every signal the run receives: its name and how many have arrived.
    on_signal: Callable[[str, int], None] | None = None
    #: Request fields the user gave explicitly (the CLI says which): on resume they override the saved ones.
    given: frozenset[str] = frozenset()
    #: Told of every damaged line the run directory's records had (file and line), as they are skipped.
    on_warning: Callable[[str], None] | None = None
    #: ``agentcompass evaluate``: the run directory whose recorded results are scored again (into ``run_dir``).
    rescore_from: Path | None = None

    async def run(self) -> RunOutcome:
        interrupts = Interrupts(enabled=self.handle_signals, on_signal=self.on_signal)
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

    async def _run(self, interrupts: Interrupts) -> RunOutcome:
        req = self.request
        check_request(req)
        store: RunDirectory | None = None
        previous: RunInfo | None = None
        source: RescoreSource | None = None
        if self.resume:
            assert self.run_dir is not None
            store = RunDirectory.open_existing(self.run_dir)
            previous = store.read_run_info()
            req = self._merge_resumed_request(store, previous.request)
        elif self.rescore_from is not None:
            source = RescoreSource.open(self.rescore_from)
            req = source.request(self.request, new_run_id(), self.given)
        else:
            req = replace(req, run_id=req.run_id or new_run_id(),
                          seed=req.seed if req.seed is not None else new_run_seed())
        resolved = resolve(self.host, req)
        tasks = await load_tasks(resolved.benchmark, req)
        if source is not None:
            tasks = source.check(resolved.benchmark, tasks)
        all_specs = environment_specs(resolved.benchmark, req, tasks, resolved.harness)
        clients = build_clients(self.host, req)
        executor = resolved.executor
        try:
            # Before anything is written: an executor that cannot run this here says so now.
            secrets = provider_secrets(clients)
            await executor.check(scrub_request(req, secrets), distinct(all_specs.values()), secrets=secrets)
            missing = missing_secret_env(req.secret_env)
            if missing:
                raise UsageError(f"--secret-env names {', '.join('$' + m for m in missing)}, which is not set; "
                                 "set it or leave it out")
            redactor = Redactor()
            redactor.add(*secrets, *known_secrets([unstructure(req)]))  # what the report masks, masked on write
            created = store is None
            if store is None:
                store = RunDirectory.create(self.run_dir or Path("runs") / req.run_id, redactor)
            else:
                store.prepare_to_append()
            store.redactor = redactor
            try:
                return await self._execute(req, resolved, tasks, all_specs, clients, store, previous, interrupts,
                                           source)
            except Exception:
                if created:  # a set-up failure (no engine, ...) leaves no empty run directory behind
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

    def _merge_resumed_request(self, store: RunDirectory, old: RunRequest) -> RunRequest:
        new = self.request
        for field in ("benchmark", "harness", "model"):
            given = getattr(new, field)
            if given and given != getattr(old, field):
                raise ResultsError(
                    f"{store.path} belongs to a run of {field} {getattr(old, field)!r}, not {given!r}; "
                    "resume it with the same benchmark, harness and model (or leave them out)"
                )
        # Library callers say nothing of what was given: a field that differs from the default was.
        given = self.given or frozenset(f.name for f in dataclass_fields(RunRequest)
                                        if getattr(new, f.name) != getattr(_DEFAULT_REQUEST, f.name))
        fixed = ("benchmark", "harness", "model", "run_id", "trials", "seed")
        roles = resumed_role_settings(old.role_settings, new.role_settings) if "role_settings" in given else None
        changed = sorted(f for f in given if f not in RESUMABLE_FIELDS and f not in fixed
                         and getattr(new, f) != getattr(old, f) and not (f == "role_settings" and roles is not None))
        if changed:
            names = ", ".join(OPTION_NAMES.get(f, "--" + f.replace("_", "-")) for f in changed)
            raise UsageError(f"--resume cannot change {names}: they define {store.path}'s tasks or scores. Resume "
                             "with the options it was run with (leave them out), or start a new run (-o NEW_DIR); "
                             "a resume may change only concurrency, timeouts, retries, connections, the budget and "
                             "--trials (to add trials)")
        trials = old.trials
        if "trials" in given:
            if new.trials < old.trials:
                raise UsageError(f"{store.path} has {old.trials} trials per task; --resume can add trials "
                                 f"(--trials {old.trials + 1} or more), not drop them (--trials {new.trials})")
            trials = new.trials
        if "seed" in given and new.seed != old.seed:
            raise UsageError(f"{store.path} was run with --seed {old.seed}; a resume keeps it (leave --seed out)")
        return replace(old, **{f: getattr(new, f) for f in RESUMABLE_FIELDS if f in given}, trials=trials,
                       role_settings=old.role_settings if roles is None else roles)

    async def _execute(
        self,
        req: RunRequest,
        resolved: Resolved,
        tasks: list[TaskSpec],
        all_specs: dict[str, EnvironmentSpec],
        clients: dict[str, ModelClient],
        store: RunDirectory,
        previous: RunInfo | None,
        interrupts: Interrupts,
        source: RescoreSource | None,
    ) -> RunOutcome:
        log = make_run_logger(store.stream(LOGS), store.redactor, run_id=req.run_id)
        with bound_run_logger(log):
            started_at = time.time()
            finished = store.final_results() if self.resume else {}
            attempts_used = store.attempt_counts() if self.resume else {}
            for warning in [*store.warnings, *(source.store.warnings if source else ())]:
                log.warning("results.damaged_line", detail=warning)
                if self.on_warning is not None:
                    self.on_warning(warning)
            if source is not None:
                by_id = {t.task_id: t for t in tasks}
                work = [(by_id[tid], trial) for tid, trial in source.records]
            else:
                work = [(t, trial) for trial in range(1, req.trials + 1) for t in tasks]
            todo = [(t, trial) for t, trial in work if (t.task_id, trial) not in finished]
            asked = req  # what run.json records; ``req`` below runs with the concurrency the run can use
            if req.concurrency > max(len(todo), 1):  # more workers than attempts only costs start-up time
                used = max(len(todo), 1)
                log.warning("run.concurrency_capped", requested=req.concurrency, used=used)
                if self.on_warning is not None and "concurrency" in self.given:
                    self.on_warning(f"--concurrency {req.concurrency} is more than this run can use ({len(todo)} "
                                    f"attempts to run): using {used}")
                req = replace(req, concurrency=used)
            final = dict(finished)
            provider = resolved.provider
            if self.resume:
                prune_socket_dirs(req.run_id)  # what a killed earlier part of this run left
            gateway = ModelGateway(model_ids(req), run_id=req.run_id, host=req.gateway_host, aliases=model_aliases(req))
            remote = resolved.executor.remote  # environments open on the workers, not here
            access: GatewayModelAccess | None = None
            context: InProcessContext | None = None
            try:
                await gateway.start()
                if not is_loopback(req.gateway_host):
                    log.warning("gateway.exposed", host=req.gateway_host, port=gateway.port)
                specs = {t.task_id: all_specs[t.task_id] for t, _ in todo}
                gateway_env: Mapping[str, str] = {}
                if remote:
                    base_url = gateway.base_url
                else:
                    await provider.setup(distinct(specs.values()), run_id=req.run_id)
                    await provider.plan(EnvironmentDemand(
                        opens=tuple(specs[t.task_id] for t, _ in todo), concurrency=req.concurrency,
                        max_environments=req.max_environments,
                    ))
                    base_url, gateway_env = provider.gateway_address(
                        host=gateway.host, port=gateway.port, unix_socket=gateway.unix_socket
                    )
                access = GatewayModelAccess(clients, gateway, base_url, request=req)
                # A resume carries what was spent, retried attempts included.
                access.budget.add_cost(spent_usd([*finished.values(), *store.attempt_results()]))
                context = InProcessContext(
                    request=req, benchmark=resolved.benchmark, harness=resolved.harness, provider=provider,
                    models=access, artifacts_root=store.artifacts_dir,
                    environment_slots=asyncio.Semaphore(req.max_environments) if req.max_environments else None,
                    on_transition=self._transition_observer(req, log),
                    on_model_call=self._model_call_observer(req, store.redactor),
                    source_artifacts=source.store.artifacts_dir if source else None,
                    gateway_host=gateway.host, gateway_port=gateway.port,
                    secrets=provider_secrets(clients),
                )
                queue = AttemptQueue(
                    request=req, store=store, host=self.host, log=log, timeouts=phase_timeouts(req),
                    task_timeouts=task_timeouts(resolved.benchmark, req, tasks), specs=specs, gateway_env=gateway_env,
                    final=final, total=len(work), stop_reason=lambda: access.stop_reason if access else None,
                    stop=access.budget.stop,
                    on_result=self.on_result,
                )
                queue.add(todo, attempts_used, source.rescores() if source else None)
                store.write_run_info(build_run_info(asked, self._plan(req, resolved), resolved.plugin_versions,
                                                    previous, started_at, source.derived_from() if source else None,
                                                    planned_work(req, work)))
                log.info("run.started", benchmark=req.benchmark, harness=req.harness, model=req.model,
                         environment=req.environment, executor=req.executor, n_tasks=len(tasks),
                         trials=req.trials, seed=req.seed, n_todo=len(todo), resumed=self.resume,
                         rescoring=str(source.path) if source else None)
                self.host.notify("agentcompass_run_started", run_id=req.run_id, request=req,
                                 run_dir=str(store.path))
                if self.on_start:
                    budget, in_flight = access.budget, queue.in_flight
                    self.on_start(len(work), len(finished), req.trials, str(store.path),
                                  lambda: (in_flight(), budget.spent_usd if access.prices_known else None))
                try:
                    await resolved.executor.execute(queue, context)
                finally:
                    queue.record_cancelled()  # attempts an interruption (or a broken executor) left unreported
            except asyncio.CancelledError:
                if not interrupts.interrupted:
                    raise
                current = asyncio.current_task()
                if current is not None:
                    current.uncancel()
                log.warning("run.interrupted", finished=len(final))
            finally:
                interrupts.shield_cleanup()
                if context is not None:
                    for session in list(context.live_sessions):
                        with contextlib.suppress(BaseException):
                            await asyncio.shield(provider.close(session))
                if not remote:
                    with contextlib.suppress(BaseException):
                        await asyncio.shield(provider.teardown())
                with contextlib.suppress(BaseException):
                    await gateway.stop()
            summary = build_summary(
                req, resolved.contract, work, final, interrupted=interrupts.interrupted,
                # A budget or a fatal model error (bad credentials) stops scheduling; unrun tasks stay resumable.
                stopped_reason=access.stop_reason if access is not None else None,
                duration_s=time.time() - started_at, run_dir=str(store.path), attempts=store.attempt_results(),
            )
            store.write_summary(summary, final)
            log.info("run.finished", status_counts=dict(summary.status_counts), interrupted=summary.interrupted,
                     duration_s=summary.duration_s, stopped_reason=summary.stopped_reason)
            self.host.notify("agentcompass_run_finished", run_id=req.run_id, summary=summary)
            return RunOutcome(store.path, summary, summary.interrupted)

    def _transition_observer(self, req: RunRequest, log: object) -> Callable[[AttemptSpec, object, object], None]:
        notify, run_id = self.host.notify, req.run_id
        debug = log.debug  # type: ignore[attr-defined]

        def on_transition(spec: AttemptSpec, prev: object, new: object) -> None:
            previous, phase = prev.value, new.value  # type: ignore[attr-defined]
            task_id, trial, attempt = spec.task.task_id, spec.trial, spec.attempt
            debug("task.phase", task_id=task_id, trial=trial, attempt=attempt, previous=previous, phase=phase)
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
    def _plan(req: RunRequest, resolved: Resolved) -> RunPlan:
        return RunPlan(
            benchmark_class=type(resolved.benchmark).__qualname__,
            harness_class=type(resolved.harness).__qualname__ if resolved.harness else None,
            environment_class=type(resolved.provider).__qualname__,
            executor=req.executor,
            evaluation_environment_mode=resolved.benchmark.evaluation_environment_mode,
            metric_contract=contract_json(resolved.contract),
            model_roles=model_ids(req),
        )
