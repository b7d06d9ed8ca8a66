"""How a task attempt is granted its models: the seam between the lifecycle and the model machinery."""

from __future__ import annotations

from collections.abc import Callable

from agentcompass.models.metering import TaskMeter
from agentcompass.runtime.models import ModelClient
from agentcompass.runtime.types import ModelEndpoint


class ModelAccess:
    """Issues a task attempt its model clients (in-process) and endpoints (through the gateway).

    This base grants nothing; the runner uses :class:`~agentcompass.models.roles.GatewayModelAccess`.
    """

    def grant(self, meter: TaskMeter) -> tuple[dict[str, ModelClient], dict[str, ModelEndpoint], Callable[[], None]]:
        """The attempt's clients by role, its endpoints by role, and a function that revokes both."""
        return {}, {}, lambda: None

    @property
    def stop_reason(self) -> str | None:
        """Why no further task should start (a spent budget, rejected credentials), or None."""
        return None
