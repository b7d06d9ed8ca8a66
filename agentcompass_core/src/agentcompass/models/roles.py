"""Model roles of a run and the clients behind them.

``MODEL`` strings are ``provider/name`` (``mock``, ``openai/gpt-4o-mini``, ``openai-compatible/Qwen3-8B``).
The model under test is the ``agent`` role; a benchmark may also need ``user`` (a simulator) and ``judge``.

A checked request's models are resolved once, by :func:`resolve_models`, into :class:`RunModels`: the value the
clients, the gateway and every attempt's meter are made from. Nothing here validates the request again
(:func:`agentcompass.request_checks.check_request` did).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from agentcompass.errors import UsageError
from agentcompass.models.access import CallSource, ModelGrant
from agentcompass.models.budget import RunBudget
from agentcompass.models.call_sources import call_sources, offline_client, replays_offline
from agentcompass.models.gateway import ModelGateway
from agentcompass.models.metering import CallRecord, MeterPolicy, TaskMeter
from agentcompass.models.prices import Price, PriceTable
from agentcompass.plugins import PluginHost
from agentcompass.runtime.attempt_spec import AttemptSpec
from agentcompass.runtime.harness import AttemptLimits
from agentcompass.runtime.model_providers import ProviderSettings, settings_from_request
from agentcompass.runtime.models import ModelClient
from agentcompass.runtime.types import MODEL_ROLES, RunRequest

ROLES = MODEL_ROLES


def split_model(spec: str) -> tuple[str, str]:
    """``"openai/gpt-4o"`` → ``("openai", "gpt-4o")``; ``"mock"`` → ``("mock", "")``."""
    provider, _, name = spec.partition("/")
    if not provider:
        raise UsageError(f"model {spec!r} has no provider; write it as PROVIDER/NAME, e.g. openai/gpt-4o-mini")
    return provider, name


@attrs.frozen
class RunModels:
    """A run's models, resolved once from its checked request.

    :param roles: the model (``PROVIDER/NAME``) of every configured role.
    :param ids: the model id each role's gateway endpoint advertises: the model string, or the role's name when
        two roles would otherwise share an id.
    :param aliases: ``--model-alias``: model names an agent may ask for, by the role that answers them.
    :param prices: each role's price, ``None`` when unknown.
    :param settings: how each role's client reaches its provider.
    :param options: the options each role's model factory is called with (``--model-arg`` for the agent,
        ``[models.ROLE].args`` for the others).
    """

    roles: Mapping[str, str]
    ids: Mapping[str, str]
    aliases: Mapping[str, str]
    prices: Mapping[str, Price | None]
    settings: Mapping[str, ProviderSettings]
    options: Mapping[str, Mapping[str, Any]]

    @property
    def prices_known(self) -> bool:
        """Whether every role's model has a price (so the cost so far is the run's cost)."""
        return bool(self.prices) and all(p is not None for p in self.prices.values())


def resolve_models(req: RunRequest) -> RunModels:
    """The request's models (the request checked first: an unknown role here is a bug, not the user's)."""
    roles = {"agent": req.model, **{r: m for r, m in req.models.roles.items() if m}}
    agent_provider = req.model.partition("/")[0]
    table = PriceTable.load(req.models.prices)
    values = list(roles.values())
    return RunModels(
        roles=roles,
        ids={role: spec if values.count(spec) == 1 or role == "agent" else role for role, spec in roles.items()},
        aliases=dict(req.models.aliases),
        prices={role: table.lookup(spec) for role, spec in roles.items()},
        settings={role: settings_from_request(req, role=role,
                                              for_agent_provider=spec.partition("/")[0] == agent_provider)
                  for role, spec in roles.items()},
        options={role: dict(req.model_args) if role == "agent"
                 else dict(own.args) if (own := req.models.role_settings.get(role)) is not None else {}
                 for role in roles},
    )


def build_clients(host: PluginHost, req: RunRequest, models: RunModels | None = None) -> dict[str, ModelClient]:
    """One client per configured role (roles naming the same model and arguments share a client).

    Every factory is called as ``factory(name, settings=..., **options)`` (see :class:`ModelClient`);
    ``--model-base-url`` / ``--model-api-key-env`` reach the agent's provider and other roles of that provider
    without settings of their own; ``req.models.role_settings`` gives a role its own (``[models.ROLE]``).
    Every client is built before the run starts, so a missing key or base URL is a usage error up front.
    """
    models = models if models is not None else resolve_models(req)
    clients: dict[str, ModelClient] = {}
    shared: dict[tuple[Any, ...], ModelClient] = {}
    for role, spec in models.roles.items():
        provider, name = split_model(spec)
        settings, options = models.settings[role], dict(models.options[role])
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


@attrs.define
class GatewayModelAccess:
    """Grants each task attempt the run's role clients, in process and through the gateway, each attempt metered
    by a :class:`TaskMeter` made from one :attr:`policy`."""

    clients: Mapping[str, ModelClient]
    gateway: ModelGateway
    base_url: str
    models: RunModels
    #: Shared by every attempt: cost so far, limits, and the run's stop signal.
    budget: RunBudget = attrs.field(factory=RunBudget)
    #: Decorators of each attempt's clients (``--replay``, ``--cache``).
    sources: tuple[CallSource, ...] = ()
    #: The harness's own limits of each attempt (``BaseHarness.attempt_limits()``), if the run has a harness.
    limits: AttemptLimits | None = None
    policy: MeterPolicy = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.gateway.add_secrets(self.clients.values())
        self.policy = MeterPolicy(budget=self.budget, max_tokens=self.budget.max_tokens_per_task,
                                  prices=dict(self.models.prices), redactor=self.gateway.redactor,
                                  limits=self.limits)

    @classmethod
    def for_request(cls, req: RunRequest, models: RunModels, clients: Mapping[str, ModelClient],
                    gateway: ModelGateway, base_url: str, limits: AttemptLimits | None = None
                    ) -> GatewayModelAccess:
        """The access a run of ``req`` grants: its budget (``--max-cost``, ``--max-tokens-per-task``, retried
        attempts), its answer sources (``--replay``, ``--cache``) and the harness's ``limits`` per attempt."""
        budget = RunBudget(max_cost=req.budget.max_cost, max_tokens_per_task=req.budget.max_tokens_per_task,
                           retries=req.schedule.retries)
        return cls(clients, gateway, base_url, models, budget, call_sources(req, models.roles), limits)

    @property
    def prices_known(self) -> bool:
        return self.models.prices_known

    @property
    def stop_reason(self) -> str | None:
        """Why the run stopped scheduling tasks (a budget, a shared one included, or a fatal model error), or
        None."""
        return self.budget.poll()

    def open_meter(self, spec: AttemptSpec, on_call: Callable[[AttemptSpec, CallRecord], None] | None = None
                   ) -> TaskMeter:
        return self.policy.meter(spec, on_call)

    def grant(self, meter: TaskMeter) -> ModelGrant:
        clients: Mapping[str, ModelClient] = self.clients
        for source in self.sources:
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
