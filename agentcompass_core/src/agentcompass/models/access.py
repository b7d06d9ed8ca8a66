"""How a task attempt is granted its models: the seam between the lifecycle and the model machinery."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from agentcompass.models.metering import CallRecord, TaskMeter
from agentcompass.runtime.attempt_spec import AttemptSpec
from agentcompass.runtime.models import ModelClient
from agentcompass.runtime.types import ModelEndpoint


def _nothing_to_revoke() -> None:
    return None


@dataclass(frozen=True)
class ModelGrant:
    """What one attempt was granted.

    :param clients: the in-process model clients by role (``plan.models``).
    :param endpoints: the gateway endpoints by role (``plan.model_endpoints``).
    :param revoke: ends both: called once, when the attempt ends.
    """

    clients: Mapping[str, ModelClient] = field(default_factory=dict)
    endpoints: Mapping[str, ModelEndpoint] = field(default_factory=dict)
    revoke: Callable[[], None] = _nothing_to_revoke


class CallSource(Protocol):
    """Where model calls are answered from besides the live model: a decorator of the role clients, installed
    for the run by :func:`agentcompass.models.call_sources.call_sources` (``--replay``, ``--cache``).

    Each attempt's clients pass through :meth:`decorate` before they are metered, in process and behind the
    gateway alike, so what it returns sees every call — ``chat``, ``stream`` and ``native`` (passthrough) —
    and tells the trajectory where an answer came from (``metadata={"source": ...}``).
    """

    def decorate(self, clients: Mapping[str, ModelClient], meter: TaskMeter) -> dict[str, ModelClient]:
        """The clients one attempt (``meter.task_id``, ``meter.trial``) uses instead of ``clients``."""
        ...

    def provenance(self) -> dict[str, object]:
        """What ``run.json`` records of this source (``{"replay": {"run_dir", "run_id", ...}}``)."""
        ...

    def warnings(self) -> list[str]:
        """What the user should read at the run's end (one line each; the console prints ``warning: ...``)."""
        ...


class ModelAccess(Protocol):
    """Issues a task attempt its model clients (in-process) and endpoints (through the gateway).

    The runner uses :class:`~agentcompass.models.roles.GatewayModelAccess`; a remote worker relays to the head's
    gateway (:mod:`agentcompass.remote_worker`).
    """

    def open_meter(self, spec: AttemptSpec, on_call: Callable[[AttemptSpec, CallRecord], None] | None = None
                   ) -> TaskMeter:
        """The meter of one attempt, made from the run's :class:`~agentcompass.models.metering.MeterPolicy`."""
        ...

    def grant(self, meter: TaskMeter) -> ModelGrant:
        """The attempt's clients and endpoints by role, and how to revoke both."""
        ...

    @property
    def stop_reason(self) -> str | None:
        """Why no further task should start (a spent budget, rejected credentials), or None."""
        ...
