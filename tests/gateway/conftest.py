from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from agentcompass.models.gateway import ModelGateway


@pytest.fixture
async def gateway() -> AsyncIterator[ModelGateway]:
    gw = ModelGateway({"agent": "scripted", "judge": "judge"})
    await gw.start()
    try:
        yield gw
    finally:
        await gw.stop()
