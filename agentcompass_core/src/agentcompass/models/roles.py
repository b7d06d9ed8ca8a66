"""Model roles of a run and the clients behind them.

``MODEL`` strings are ``provider/name`` (``mock``, ``openai/gpt-4o-mini``, ``openai-compatible/Qwen3-8B``).
The model under test is the ``agent`` role; a benchmark may also need ``user`` (a simulator) and ``judge``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from agentcompass.errors import UsageError
from agentcompass.lifecycle import ModelAccess
from agentcompass.models.gateway import ModelGateway
from agentcompass.models.metering import TaskMeter
from agentcompass.plugins import PluginHost
from agentcompass.runtime.models import ModelClient
from agentcompass.runtime.types import ModelEndpoint, RunRequest

ROLES = ("agent", "user", "judge")


def split_model(spec: str) -> tuple[str, str]:
    """``"openai/gpt-4o"`` → ``("openai", "gpt-4o")``; ``"mock"`` → ``("mock", "")``."""
    provider, _, name = spec.partition("/")
    if not provider:
        raise UsageError(f"model {spec!r} has no provider; write it as PROVIDER/NAME, e.g. openai/gpt-4o-mini")
    return provider, name


def role_models(req: RunRequest) -> dict[str, str]:
    """The model string of every configured role."""
    models = {"agent": req.model, **{r: m for r, m in req.role_models.items() if m}}
    unknown = sorted(set(models) - set(ROLES))
    if unknown:
        raise UsageError(f"unknown model role(s) {', '.join(unknown)}; roles are {', '.join(ROLES)}")
    return models


def build_clients(host: PluginHost, req: RunRequest) -> dict[str, ModelClient]:
    """One client per configured role (roles naming the same model and arguments share a client)."""
    clients: dict[str, ModelClient] = {}
    shared: dict[str, ModelClient] = {}
    for role, spec in role_models(req).items():
        if spec in shared:
            clients[role] = shared[spec]
            continue
        provider, name = split_model(spec)
        factory = host.factory("model", provider)
        options = dict(req.model_args) if role == "agent" else {}
        try:
            client = factory(name, **options)
        except UsageError:
            raise
        except (TypeError, ValueError) as exc:
            raise UsageError(f"model {spec!r} ({role} role) rejected its settings: {exc}") from None
        clients[role] = shared[spec] = client
    return clients


def model_ids(req: RunRequest) -> dict[str, str]:
    """The model id each role's endpoint advertises: the model string, or the role name when two roles
    would otherwise share an id."""
    models = role_models(req)
    ids: dict[str, str] = {}
    for role, spec in models.items():
        ids[role] = spec if list(models.values()).count(spec) == 1 or role == "agent" else role
    return ids


@attrs.define
class GatewayModelAccess(ModelAccess):
    """Grants each task attempt the run's role clients, in process and through the gateway."""

    clients: Mapping[str, ModelClient]
    gateway: ModelGateway
    base_url: str

    def grant(
        self, meter: TaskMeter
    ) -> tuple[dict[str, ModelClient], dict[str, ModelEndpoint], Callable[[], None]]:
        token, endpoints = self.gateway.grant(self.clients, meter, self.base_url)
        return dict(self.clients), endpoints, lambda: self.gateway.revoke(token)


def describe_models(req: RunRequest) -> dict[str, Any]:
    return {role: {"model": spec} for role, spec in role_models(req).items()}
