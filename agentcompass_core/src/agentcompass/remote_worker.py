"""The worker half of running attempts elsewhere (``--executor ray``): one :class:`AttemptWorker` per worker
process builds the run's plugins from that machine's installed entry points and runs each attempt the head
sends through the ordinary lifecycle.

Its model clients call the head's gateway with the attempt's token, over one WebSocket per worker
(:mod:`agentcompass.models.gateway_client`). A worker runs a relay gateway of its own on its loopback (and Unix
socket), so environments there (``local``, ``docker``) reach models as usual: it forwards each request as it
came (any protocol, streamed or not) over that WebSocket to the head's gateway, which serves it as a local
request, and relays the answer back as it arrives.
Public as :mod:`agentcompass.runtime.remote`, beside the data that crosses over.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from agentcompass.errors import AgentCompassError, describe
from agentcompass.execution import InProcessContext
from agentcompass.models.access import ModelGrant
from agentcompass.models.gateway import ModelGateway
from agentcompass.models.gateway_client import GatewayClient, GatewayPool
from agentcompass.models.metering import CallRecord, MeterPolicy, TaskMeter
from agentcompass.models.roles import resolve_models
from agentcompass.plugins import load_plugins
from agentcompass.resolve import resolve
from agentcompass.runtime.attempt_spec import AttemptSpec
from agentcompass.runtime.logs import forwarded_warnings
from agentcompass.runtime.remote_attempts import RemoteAttempt, RemoteLog, RemoteOutcome, pack_dir, unpack_dir
from agentcompass.runtime.types import EnvironmentSpec, ModelEndpoint, RunRequest


def sendable(value: Any) -> Any:
    """A log field's value as it can cross to the head: JSON-able as it is, else its ``str``."""
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return str(value)
    return value


class RelayAccess:
    """A worker's model access for one attempt: clients that call the head's gateway with the attempt's
    token, served to the attempt's environments by the worker's own gateway."""

    def __init__(self, worker: AttemptWorker, endpoints: Mapping[str, ModelEndpoint]) -> None:
        self.worker, self.endpoints = worker, endpoints

    #: The head's meter has every call: recording them here too is waste.
    policy = MeterPolicy(records_calls=False)

    def open_meter(self, spec: AttemptSpec, on_call: Callable[[AttemptSpec, CallRecord], None] | None = None
                   ) -> TaskMeter:
        return self.policy.meter(spec, on_call)

    def grant(self, meter: TaskMeter) -> ModelGrant:
        worker = self.worker
        assert worker.gateway is not None
        token, endpoints = worker.gateway.grant_relay(self.endpoints, worker.base_url)
        direct = {role: GatewayClient(e, worker.pool) for role, e in self.endpoints.items()}
        return ModelGrant(direct, endpoints, lambda: worker.gateway.revoke(token) if worker.gateway else None)

    @property
    def stop_reason(self) -> str | None:
        return None


class AttemptWorker:
    """Runs a run's attempts on this machine for a remote executor: one per worker process, any number of
    attempts at once. Build it from the (scrubbed) request: the benchmark, harness and environment are
    constructed from this machine's installed plugins, so a missing one fails here, by name."""

    def __init__(self, request: RunRequest) -> None:
        self.request = request
        self.host = load_plugins()
        # The executor itself is the head's business: resolve the rest as a local run would.
        resolved = resolve(self.host, request.with_options(executor="local", executor_args={}))
        self.benchmark, self.harness, self.provider = resolved.benchmark, resolved.harness, resolved.provider
        self.pool = GatewayPool(timeout=request.models.request_timeout * (request.models.max_retries + 1) + 60)
        self.gateway: ModelGateway | None = None
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
        req = self.request
        await self.provider.setup(environments, run_id=req.run_id)
        models = resolve_models(req)
        self.gateway = ModelGateway(dict(models.ids), run_id=req.run_id, aliases=dict(models.aliases), relay=self.pool)
        await self.gateway.start()
        self.base_url, self.gateway_env = self.provider.gateway_address(
            host=self.gateway.host, port=self.gateway.port, unix_socket=self.gateway.unix_socket)

    async def run(self, attempt: RemoteAttempt, on_transition: Callable[[str, str], None] | None = None,
                  on_log: Callable[[str, str, dict[str, Any]], None] | None = None) -> RemoteOutcome:
        """Run one attempt through the ordinary lifecycle; its artifacts come back as a tar archive.
        ``on_transition(previous, phase)`` hears each phase change as it happens, ``on_log(level, event,
        fields)`` each warning or error the attempt's code logs (:data:`RemoteLog`: to send them to the head
        while the attempt runs); the outcome carries them all as well."""
        spec = replace(attempt.spec, gateway_env=dict(self.gateway_env))
        key = f"{spec.task.task_id}-{spec.trial}-{spec.attempt}-{id(attempt)}"
        scratch = self._scratch / key
        artifacts, source = scratch / "artifacts", scratch / "source"
        transitions: list[tuple[str, str]] = []
        logs: list[tuple[int, RemoteLog]] = []

        def transition(s: AttemptSpec, prev: Any, new: Any) -> None:
            transitions.append((prev.value, new.value))
            if on_transition is not None:
                on_transition(prev.value, new.value)

        def logged(level: str, event: str, fields: dict[str, Any]) -> None:
            entry: RemoteLog = (level, event, {k: sendable(v) for k, v in fields.items()})
            logs.append((len(transitions), entry))
            if on_log is not None:
                on_log(*entry)

        if attempt.source_artifacts:
            await asyncio.to_thread(unpack_dir, attempt.source_artifacts, source)
        context = InProcessContext(
            request=spec.request, benchmark=self.benchmark, harness=self.harness, provider=self.provider,
            models=RelayAccess(self, attempt.endpoints),
            artifacts_root=lambda task_id, trial, n: artifacts,
            on_transition=transition,
            source_artifacts=(lambda task_id, trial, n: source) if attempt.source_artifacts else None,
            live_sessions=self.live_sessions,
        )
        try:
            with forwarded_warnings(logged):
                outcome = await context.run_attempt(spec)
            packed = await asyncio.to_thread(pack_dir, artifacts) if artifacts.is_dir() else b""
        finally:
            if scratch.exists():
                await asyncio.to_thread(shutil.rmtree, scratch, True)
        # The head's meter has every call; the worker's copy stays here.
        return RemoteOutcome(replace(outcome, trajectory=()), packed, tuple(transitions), tuple(logs))

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
