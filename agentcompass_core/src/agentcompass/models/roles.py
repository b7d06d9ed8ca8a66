"""Model roles of a run and the clients behind them.

``MODEL`` strings are ``provider/name`` (``mock``, ``openai/gpt-4o-mini``, ``openai-compatible/Qwen3-8B``).
The model under test is the ``agent`` role; a benchmark may also need ``user`` (a simulator) and ``judge``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from agentcompass.errors import UsageError
from agentcompass.models.access import CallSource, ModelGrant
from agentcompass.models.budget import RunBudget
from agentcompass.models.call_sources import call_sources, offline_client, replays_offline
from agentcompass.models.gateway import ModelGateway
from agentcompass.models.metering import TaskMeter
from agentcompass.models.prices import Price, PriceTable
from agentcompass.plugins import PluginHost
from agentcompass.runtime.model_providers import settings_from_request
from agentcompass.runtime.models import ModelClient
from agentcompass.runtime.types import RunRequest

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


def model_aliases(req: RunRequest) -> dict[str, str]:
    """``--model-alias NAME=ROLE`` checked: each ROLE is a role this run has."""
    roles = role_models(req)
    for name, role in req.model_aliases.items():
        if role not in roles:
            have = ", ".join(roles)
            raise UsageError(f"--model-alias {name}={role}: {role!r} is not a role of this run (it has {have})")
    return dict(req.model_aliases)


def build_clients(host: PluginHost, req: RunRequest) -> dict[str, ModelClient]:
    """One client per configured role (roles naming the same model and arguments share a client).

    Every factory is called as ``factory(name, settings=..., **options)`` (see :class:`ModelClient`);
    ``--model-base-url`` / ``--model-api-key-env`` reach the agent's provider and other roles of that provider
    without settings of their own; ``req.role_settings`` gives a role its own (``[models.ROLE]``).
    Every client is built before the run starts, so a missing key or base URL is a usage error up front.
    """
    clients: dict[str, ModelClient] = {}
    shared: dict[tuple[Any, ...], ModelClient] = {}
    agent_provider = split_model(req.model)[0] if req.model else ""
    settings_from_request(req)  # validates the knobs even when no factory takes them
    model_aliases(req)
    role_prices(req)  # a bad price file, or --max-cost without prices, is a usage error up front
    for role, spec in role_models(req).items():
        provider, name = split_model(spec)
        settings = settings_from_request(req, for_agent_provider=provider == agent_provider, role=role)
        options: dict[str, Any] = dict(role_options(req, role))
        key = (spec, settings, tuple(sorted(options.items())))
        if key in shared:
            clients[role] = shared[key]
            continue
        factory = host.factory("model", provider)
        try:
            client = factory(name, settings=settings, **options)
        except UsageError as exc:
            if replays_offline(req):  # a replay that never asks the live model needs no key or address
                client = offline_client(req, role, name, str(exc))
            elif role == "agent":
                raise
            else:
                raise UsageError(f"{exc} — for the {role} role: give it its own in a --config file's "
                                 f"[models.{role}] (base_url, api_key_env)") from None
        except (TypeError, ValueError) as exc:
            raise UsageError(f"model {spec!r} ({role} role) rejected its settings: {exc}") from None
        clients[role] = shared[key] = client
    return clients


def role_options(req: RunRequest, role: str) -> dict[str, str]:
    """The options a role's model factory is called with: ``--model-arg`` for the agent, ``[models.ROLE].args``
    for the others."""
    if role == "agent":
        return dict(req.model_args)
    own = req.role_settings.get(role)
    return dict(own.args) if own is not None else {}


def role_prices(req: RunRequest) -> dict[str, Price | None]:
    """The price of every role's model (``--prices`` / ``$AGENTCOMPASS_PRICES`` extend the built-in table)."""
    table = PriceTable.load(req.prices)
    prices = {role: table.lookup(spec) for role, spec in role_models(req).items()}
    if req.max_cost is not None:
        unpriced = [f"{role} ({role_models(req)[role]})" for role, p in prices.items() if p is None and role != "judge"]
        if unpriced:
            raise UsageError(
                f"--max-cost needs a price for every model it limits; none is known for {', '.join(unpriced)}. "
                "Add one with --prices FILE (USD per 1M tokens: {\"MODEL\": {\"input\": X, \"output\": Y}})"
            )
    return prices


def model_ids(req: RunRequest) -> dict[str, str]:
    """The model id each role's endpoint advertises: the model string, or the role name when two roles
    would otherwise share an id."""
    models = role_models(req)
    ids: dict[str, str] = {}
    for role, spec in models.items():
        ids[role] = spec if list(models.values()).count(spec) == 1 or role == "agent" else role
    return ids


@attrs.define
class GatewayModelAccess:
    """Grants each task attempt the run's role clients, in process and through the gateway."""

    clients: Mapping[str, ModelClient]
    gateway: ModelGateway
    base_url: str
    request: RunRequest | None = None
    #: Shared by every attempt: cost so far, limits, and the run's stop signal.
    budget: RunBudget = attrs.field(factory=RunBudget)
    prices: dict[str, Price | None] = attrs.field(factory=dict)
    #: Decorators of each attempt's clients (``--replay``, ``--cache``); by default those the request asks for.
    sources: tuple[CallSource, ...] | None = None

    def __attrs_post_init__(self) -> None:
        if self.sources is None:
            self.sources = call_sources(self.request, role_models(self.request)) if self.request is not None else ()
        if self.request is not None:
            self.budget.max_cost = self.request.max_cost
            self.budget.max_tokens_per_task = self.request.max_tokens_per_task
            self.budget.retries = self.request.retries
            if not self.prices:
                self.prices = role_prices(self.request)

    @property
    def prices_known(self) -> bool:
        """Whether every role's model has a price (so the cost so far is the run's cost)."""
        return bool(self.prices) and all(p is not None for p in self.prices.values())

    @property
    def stop_reason(self) -> str | None:
        """Why the run stopped scheduling tasks (a budget, a shared one included, or a fatal model error), or
        None."""
        return self.budget.poll()

    def grant(self, meter: TaskMeter) -> ModelGrant:
        meter.budget = self.budget
        meter.max_tokens = self.budget.max_tokens_per_task
        meter.prices = dict(self.prices)
        clients: Mapping[str, ModelClient] = self.clients
        for source in self.sources or ():
            clients = source.decorate(clients, meter)
        token, endpoints = self.gateway.grant(clients, meter, self.base_url)
        return ModelGrant(dict(clients), endpoints, lambda: self.gateway.revoke(token))


def spent_usd(results: Any) -> float:
    """The summed model cost recorded in finished results (to carry a ``--max-cost`` budget over a resume)."""
    total = 0.0
    for r in results:
        for totals in ((getattr(r, "usage", None) or {}).get("models") or {}).values():
            total += float(totals.get("cost_usd") or 0.0)
    return total
