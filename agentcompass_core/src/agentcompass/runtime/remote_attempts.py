"""Attempts that cross to another machine, as plain data: what a remote executor sends and gets back.

On the head, which keeps the run directory, the gateway and the provider credentials::

    grant = context.grant_remote(spec, gateway_url)    # a per-attempt gateway token; the meter stays here
    sent = grant.attempt                               # RemoteAttempt: plain data, no secret
    ...                                                # ship it; on the worker:
    worker = AttemptWorker(sent.spec.request)          # plugins from the worker's installed entry points
    await worker.setup(specs)
    returned = await worker.run(sent, on_transition, on_log)  # RemoteOutcome: outcome, artifacts, phases, logs
    ...                                                # each phase change and warning, sent back as it happens:
    grant.phase(previous, new)                         # the head's observers hear it at once
    grant.log(level, event, fields)                    # the run's logs.jsonl has it at once
    ...                                                # ship it back; on the head:
    attempts.report(grant.finish(returned))            # artifacts unpacked, trajectory and usage from the meter

``grant.fail(message)`` turns a lost worker into an infrastructure failure (retryable). What is sent holds no
provider credential: the request loses its base URL (which may carry one) and any value equal to a secret, and
the worker's model clients call the head's gateway with the attempt's token. ``AttemptWorker`` is the engine's
(:mod:`agentcompass.remote_worker`); import both halves from :mod:`agentcompass.runtime.remote`.
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from agentcompass.runtime.attempt_spec import AttemptOutcome, AttemptSpec
from agentcompass.runtime.types import ModelEndpoint, RunRequest


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


#: A log event a worker's attempt raised: its level (``warning``, ``error``), its name and its fields (values
#: JSON-able: others are sent as their ``str``).
RemoteLog = tuple[str, str, dict[str, Any]]


@dataclass(frozen=True)
class RemoteOutcome:
    """What a worker sends back: the outcome, the attempt's artifacts (a tar archive), its phase changes and the
    warnings it logged, in order: each log as ``(phase changes before it, RemoteLog)``."""

    outcome: AttemptOutcome
    artifacts: bytes = b""
    transitions: tuple[tuple[str, str], ...] = ()
    logs: tuple[tuple[int, RemoteLog], ...] = ()


class RemoteGrant(Protocol):
    """One attempt granted its models for a worker elsewhere. Call :meth:`finish` or :meth:`fail` once."""

    @property
    def attempt(self) -> RemoteAttempt:
        """What to send to the worker."""
        ...

    def phase(self, previous: str, new: str) -> None:
        """A phase change (``Phase`` values) the worker reported while the attempt runs, in order: the
        observers hear it at once."""
        ...

    def log(self, level: str, event: str, fields: dict[str, Any]) -> None:
        """A warning (or error) the worker's attempt logged while it runs (:data:`RemoteLog`), in order with
        its phase changes: written to the run's ``logs.jsonl`` now, as a local attempt's is, and not again by
        :meth:`finish`."""
        ...

    def finish(self, remote: RemoteOutcome) -> AttemptOutcome:
        """The outcome to report: the worker's result, with the artifacts written into the run directory, the
        phase changes and warnings not already told through :meth:`phase` and :meth:`log` replayed, and the
        trajectory, usage and budget refusals as the head's meter saw them (every model call went through the
        gateway here)."""
        ...

    def fail(self, message: str, *, retryable: bool = True) -> AttemptOutcome:
        """The outcome of an attempt whose worker was lost (a node or process that died): an infrastructure
        failure, worth a retry under ``--retries``."""
        ...

    def revoke(self) -> None:
        """End the attempt's token (a cancelled attempt, which reports no outcome)."""
        ...


def scrub_request(req: RunRequest, secrets: Iterable[str]) -> RunRequest:
    """``req`` without what may hold a credential: the model base URLs (``https://user:key@...``) and any
    option value that contains one of ``secrets``."""
    values = [s for s in secrets if s]

    def clean(options: Mapping[str, str]) -> dict[str, str]:
        return {k: "***" if any(s in str(v) for s in values) else v for k, v in options.items()}

    roles = {role: replace(s, base_url=None, args=clean(s.args)) for role, s in req.models.role_settings.items()}
    return req.with_options(
        model_base_url=None, model_args=clean(req.model_args), benchmark_args=clean(req.benchmark_args),
        harness_args=clean(req.harness_args), environment_args=clean(req.environment_args),
        executor_args=clean(req.execution.executor_args), role_settings=roles,
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
