"""Attempts that run on another machine: the two halves a remote executor joins (``--executor ray``).

On the head, which keeps the run directory, the gateway and the provider credentials::

    grant = context.grant_remote(spec, gateway_url)    # a per-attempt gateway token; the meter stays here
    sent = grant.attempt                               # RemoteAttempt: plain data, no secret
    ...                                                # ship it; on the worker:
    worker = AttemptWorker(sent.spec.request)          # plugins from the worker's installed entry points
    await worker.setup(specs)
    returned = await worker.run(sent)                  # RemoteOutcome: outcome, artifacts, phase changes
    ...                                                # ship it back; on the head:
    attempts.report(grant.finish(returned))            # artifacts unpacked, trajectory and usage from the meter

``grant.fail(message)`` turns a lost worker into an infrastructure failure (retryable). What is sent holds no
provider credential: the request loses its base URL (which may carry one) and any value equal to a secret, and
the worker's model clients call the head's gateway with the attempt's token, over one WebSocket per worker
(:mod:`agentcompass.models.gateway_client`). A worker runs a gateway of its own on its loopback (and Unix
socket) that relays to the head's, so environments there (``local``, ``docker``) reach models as usual.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import shutil
import tarfile
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import attrs

from agentcompass.errors import AgentCompassError, describe
from agentcompass.runtime.executor import AttemptOutcome, AttemptSpec, ExecutionContext, run_attempt
from agentcompass.runtime.types import EnvironmentSpec, ModelEndpoint, RunRequest, RunResult, TaskStatus


@dataclass(frozen=True)
class RemoteAttempt:
    """What a worker needs to run one attempt: plain data, no secret.

    :param spec: the attempt (its request stripped of anything secret).
    :param endpoints: per role, the head's gateway as the worker reaches it, with the attempt's token.
    :param source_artifacts: for ``agentcompass evaluate``: the recorded artifacts, as a tar archive.
    """

    spec: AttemptSpec
    endpoints: Mapping[str, ModelEndpoint]
    source_artifacts: bytes | None = None


@dataclass(frozen=True)
class RemoteOutcome:
    """What a worker sends back: the outcome, the attempt's artifacts (a tar archive) and its phase changes."""

    outcome: AttemptOutcome
    artifacts: bytes = b""
    transitions: tuple[tuple[str, str], ...] = ()


def scrub_request(req: RunRequest, secrets: Iterable[str]) -> RunRequest:
    """``req`` without what may hold a credential: the model base URL (``https://user:key@...``) and any
    option value that contains one of ``secrets``."""
    values = [s for s in secrets if s]

    def clean(options: Mapping[str, str]) -> dict[str, str]:
        return {k: "***" if any(s in str(v) for s in values) else v for k, v in options.items()}

    return replace(
        req, model_base_url=None, model_args=clean(req.model_args), benchmark_args=clean(req.benchmark_args),
        harness_args=clean(req.harness_args), environment_args=clean(req.environment_args),
        executor_args=clean(req.executor_args),
    )


def pack_dir(path: Path) -> bytes:
    """A directory's files as an uncompressed tar archive (empty bytes for a missing or empty directory)."""
    if not path.is_dir() or not any(path.iterdir()):
        return b""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for child in sorted(path.iterdir()):
            archive.add(child, arcname=child.name)
    return buffer.getvalue()


def unpack_dir(data: bytes, path: Path) -> None:
    """Extract what :func:`pack_dir` made into ``path`` (member paths confined to it)."""
    if not data:
        return
    path.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as archive:
        archive.extractall(path, filter="data")


@attrs.define
class RemoteGrant:
    """One attempt granted its models for a worker elsewhere. Call :meth:`finish` or :meth:`fail` once."""

    context: ExecutionContext
    spec: AttemptSpec
    attempt: RemoteAttempt
    meter: Any
    _revoke: Callable[[], None]

    def finish(self, remote: RemoteOutcome) -> AttemptOutcome:
        """The outcome to report: the worker's result, with the artifacts written into the run directory, the
        phase changes replayed to observers, and the trajectory, usage and budget refusals as the head's
        meter saw them (every model call went through the gateway here)."""
        from agentcompass.lifecycle import Phase

        self._revoke()
        spec, outcome = self.spec, remote.outcome
        unpack_dir(remote.artifacts, self.context.artifacts_root(spec.task.task_id, spec.trial, spec.attempt))
        for previous, new in remote.transitions:
            self.context.on_transition(spec, Phase(previous), Phase(new))
        meter = self.meter
        result = outcome.result
        if meter.limit_reached and result.status is not TaskStatus.LIMIT_REACHED:
            result = replace(result, status=TaskStatus.LIMIT_REACHED, error=meter.limit_reached,
                             error_phase="run", metrics={})
        elif meter.fatal_error and result.status is TaskStatus.RUN_ERROR:
            result = replace(result, error=f"model call failed: {meter.fatal_error}")
        retryable = outcome.retryable and not (meter.limit_reached or meter.fatal_error)
        return AttemptOutcome(self._metered(result), retryable, self._trajectory(), outcome.prepared)

    def fail(self, message: str, *, retryable: bool = True) -> AttemptOutcome:
        """The outcome of an attempt whose worker was lost (a node or process that died): an infrastructure
        failure, worth a retry under ``--retries``."""
        self._revoke()
        spec = self.spec
        result = RunResult(task_id=spec.task.task_id, category=spec.task.category, status=TaskStatus.RUN_ERROR,
                           error=message, error_phase="run")
        return AttemptOutcome(self._metered(result), retryable, self._trajectory(), None)

    def revoke(self) -> None:
        """End the attempt's token (a cancelled attempt, which reports no outcome)."""
        self._revoke()

    def _metered(self, result: RunResult) -> RunResult:
        usage = {k: v for k, v in result.usage.items() if k != "models"}
        if self.meter.calls:
            usage["models"] = self.meter.totals()
        spec = self.spec
        return replace(result, usage=usage, attempt=spec.attempt, trial=spec.trial, seed=spec.seed)

    def _trajectory(self) -> tuple[Mapping[str, Any], ...]:
        from agentcompass.serialization import unstructure

        return tuple(unstructure(c) for c in self.meter.calls)


_last_scrubbed: list[tuple[RunRequest, frozenset[str], RunRequest]] = []


def _scrubbed(req: RunRequest, secrets: frozenset[str]) -> RunRequest:
    """:func:`scrub_request`, once per request (every attempt of a run carries the same one)."""
    for original, given, scrubbed in _last_scrubbed:
        if original is req and given == secrets:
            return scrubbed
    scrubbed = scrub_request(req, secrets)
    _last_scrubbed[:] = [(req, secrets, scrubbed)]
    return scrubbed


def grant_remote(context: ExecutionContext, spec: AttemptSpec, gateway_url: str) -> RemoteGrant:
    """See :meth:`ExecutionContext.grant_remote`."""
    from agentcompass.models.metering import TaskMeter

    meter = TaskMeter(spec.task.task_id, spec.attempt, seed=spec.seed)
    _clients, endpoints, revoke = context.models.grant(meter)
    remote_endpoints = {role: replace(e, base_url=gateway_url) for role, e in endpoints.items()}
    source = None
    if spec.rescore is not None and context.source_artifacts is not None:
        recorded = spec.rescore.result
        source = pack_dir(context.source_artifacts(spec.task.task_id, recorded.trial, recorded.attempt))
    sent = replace(spec, request=_scrubbed(spec.request, context.secrets), gateway_env={})
    return RemoteGrant(context, spec, RemoteAttempt(sent, remote_endpoints, source), meter, revoke)


class _RelayAccess:
    """A worker's model access for one attempt: clients that call the head's gateway with the attempt's
    token, served to the attempt's environments by the worker's own gateway."""

    def __init__(self, worker: AttemptWorker, endpoints: Mapping[str, ModelEndpoint]) -> None:
        self.worker, self.endpoints = worker, endpoints

    def grant(self, meter: Any) -> tuple[dict[str, Any], dict[str, ModelEndpoint], Callable[[], None]]:
        from agentcompass.models.gateway_client import GatewayClient

        worker = self.worker
        assert worker.gateway is not None
        meter.records_calls = False  # the head's meter has every call: recording them here too is waste
        relayed = {role: GatewayClient(e, worker.pool) for role, e in self.endpoints.items()}
        token, endpoints = worker.gateway.grant(relayed, meter, worker.base_url)
        direct = {role: GatewayClient(e, worker.pool, via="client") for role, e in self.endpoints.items()}
        return dict(direct), endpoints, lambda: worker.gateway.revoke(token) if worker.gateway else None

    @property
    def stop_reason(self) -> str | None:
        return None


class AttemptWorker:
    """Runs a run's attempts on this machine for a remote executor: one per worker process, any number of
    attempts at once. Build it from the (scrubbed) request: the benchmark, harness and environment are
    constructed from this machine's installed plugins, so a missing one fails here, by name."""

    def __init__(self, request: RunRequest) -> None:
        from agentcompass.plugins import load_plugins
        from agentcompass.resolve import resolve

        self.request = request
        self.host = load_plugins()
        # The executor itself is the head's business: resolve the rest as a local run would.
        resolved = resolve(self.host, replace(request, executor="local", executor_args={}))
        self.benchmark, self.harness, self.provider = resolved.benchmark, resolved.harness, resolved.provider
        from agentcompass.models.gateway_client import GatewayPool

        self.pool = GatewayPool(timeout=request.request_timeout * (request.max_retries + 1) + 60)
        self.gateway: Any = None
        self.base_url = ""
        self.gateway_env: Mapping[str, str] = {}
        self.live_sessions: set[Any] = set()
        self._scratch = Path(tempfile.mkdtemp(prefix="agentcompass-worker-"))

    @staticmethod
    def problems(request: RunRequest) -> list[str]:
        """Why this machine cannot run ``request``'s attempts (a missing plugin, an option it rejects), or
        nothing. Never raises."""
        try:
            AttemptWorker(request).discard()
        except AgentCompassError as exc:
            return [str(exc)]
        except Exception as exc:
            return [describe(exc)]
        return []

    def discard(self) -> None:
        shutil.rmtree(self._scratch, ignore_errors=True)

    async def setup(self, environments: list[EnvironmentSpec]) -> None:
        """Set up the environment provider (images built once per machine) and the relay gateway."""
        from agentcompass.models.gateway import ModelGateway
        from agentcompass.models.roles import model_ids

        req = self.request
        await self.provider.setup(environments, run_id=req.run_id)
        self.gateway = ModelGateway(model_ids(req), run_id=req.run_id)
        await self.gateway.start()
        self.base_url, self.gateway_env = self.provider.gateway_address(
            host=self.gateway.host, port=self.gateway.port, unix_socket=self.gateway.unix_socket)

    async def run(self, attempt: RemoteAttempt) -> RemoteOutcome:
        """Run one attempt through the ordinary lifecycle; its artifacts come back as a tar archive."""
        spec = replace(attempt.spec, gateway_env=dict(self.gateway_env))
        key = f"{spec.task.task_id}-{spec.trial}-{spec.attempt}-{id(attempt)}"
        scratch = self._scratch / key
        artifacts, source = scratch / "artifacts", scratch / "source"
        transitions: list[tuple[str, str]] = []
        if attempt.source_artifacts:
            await asyncio.to_thread(unpack_dir, attempt.source_artifacts, source)
        context = ExecutionContext(
            request=spec.request, benchmark=self.benchmark, harness=self.harness, provider=self.provider,
            models=_RelayAccess(self, attempt.endpoints),  # type: ignore[arg-type]
            artifacts_root=lambda task_id, trial, n: artifacts,
            on_transition=lambda s, prev, new: transitions.append((prev.value, new.value)),
            source_artifacts=(lambda task_id, trial, n: source) if attempt.source_artifacts else None,
            live_sessions=self.live_sessions,
        )
        try:
            outcome = await run_attempt(context, spec)
            packed = await asyncio.to_thread(pack_dir, artifacts) if artifacts.is_dir() else b""
        finally:
            if scratch.exists():
                await asyncio.to_thread(shutil.rmtree, scratch, True)
        # The head's meter has every call; the worker's copy stays here.
        return RemoteOutcome(replace(outcome, trajectory=()), packed, tuple(transitions))

    async def close(self) -> None:
        """Close what attempts left open, tear the provider down, stop the relay gateway."""
        for session in list(self.live_sessions):
            with contextlib.suppress(BaseException):
                await asyncio.shield(self.provider.close(session))
        self.live_sessions.clear()
        with contextlib.suppress(BaseException):
            await asyncio.shield(self.provider.teardown())
        if self.gateway is not None:
            with contextlib.suppress(BaseException):
                await self.gateway.stop()
            self.gateway = None
        await self.pool.aclose()
        self.discard()
