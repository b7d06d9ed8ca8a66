"""Real runs (made by the real CLI) for the export tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.export.runs import make_runs


@pytest.fixture(scope="session")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_runs(tmp_path_factory.mktemp("export-runs"))
