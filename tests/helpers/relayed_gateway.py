"""A remote worker's model access, in one process: the head's :class:`ModelGateway` and a worker's relay
gateway joined by the worker's :class:`GatewayPool` (one WebSocket over loopback), as ``--executor ray`` joins
them across machines. Granting gives a token at the relay; calls made there are served by the head."""

from __future__ import annotations

from collections.abc import Mapping

import attrs
from agentcompass.models.gateway import ModelGateway
from agentcompass.models.gateway_client import GatewayPool
from agentcompass.models.metering import TaskMeter
from agentcompass.runtime.models import ModelClient
from agentcompass.runtime.types import ModelEndpoint


@attrs.define
class RelayedGateway:
    head: ModelGateway
    node: ModelGateway
    pool: GatewayPool

    @classmethod
    async def start(cls, model_ids: Mapping[str, str]) -> RelayedGateway:
        head = ModelGateway(dict(model_ids))
        await head.start()
        pool = GatewayPool(timeout=60)
        node = ModelGateway(dict(model_ids), relay=pool)
        await node.start()
        return cls(head, node, pool)

    async def stop(self) -> None:
        await self.node.stop()
        await self.pool.aclose()
        await self.head.stop()

    @property
    def base_url(self) -> str:
        return self.node.base_url

    def grant(self, clients: Mapping[str, ModelClient], meter: TaskMeter, base_url: str = ""
              ) -> tuple[str, dict[str, ModelEndpoint]]:
        """Grant ``clients`` at the head (metered by ``meter`` there) and relay the attempt's token."""
        _, endpoints = self.head.grant(clients, meter, self.head.base_url)
        return self.node.grant_relay(endpoints, self.node.base_url)
