from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from agentcompass.models.gateway import ModelGateway

from tests.helpers.relayed_gateway import RelayedGateway


@pytest.fixture
async def gateway() -> AsyncIterator[ModelGateway]:
    gw = ModelGateway({"agent": "scripted", "judge": "judge"})
    await gw.start()
    try:
        yield gw
    finally:
        await gw.stop()


@pytest.fixture(params=["local", "relayed"])
async def gateway_anywhere(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    """The gateway itself, or a remote worker's relay of it (the calls reach the head's over the worker's
    WebSocket): the same test must hold on both."""
    model_ids = {"agent": "scripted", "judge": "judge"}
    if request.param == "local":
        gw = ModelGateway(model_ids)
        await gw.start()
        try:
            yield gw
        finally:
            await gw.stop()
        return
    relayed = await RelayedGateway.start(model_ids)
    try:
        yield relayed
    finally:
        await relayed.stop()
