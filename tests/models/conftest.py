"""Fixtures of the model-provider tests (helpers live in models_support.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from agentcompass_models import http as models_http

from tests.models.fake_server import FakeModelServer
from tests.models.models_support import API_KEY, MODEL


@pytest.fixture(autouse=True)
def _no_host_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Tests never see the developer's real keys or credentials file, and back off quickly."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL",
                 "AGENTCOMPASS_PRICES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("AGENTCOMPASS_CREDENTIALS", raising=False)
    monkeypatch.setattr("agentcompass.runtime.model_providers.DEFAULT_CREDENTIALS", tmp_path / "no-credentials.toml")
    monkeypatch.setattr(models_http, "BACKOFF_BASE", 0.01)


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    srv = FakeModelServer(api_keys={API_KEY}, models={MODEL}).start_in_thread()
    try:
        yield srv
    finally:
        srv.stop_thread()
