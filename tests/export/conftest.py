"""Real runs (made by the real CLI) for the export tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.export.runs import make_react_run


@pytest.fixture(scope="session")
def runs(interactive_runs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The runs of :func:`tests.export.runs.make_runs`: the shared ``interactive_runs`` and the react run."""
    return {**interactive_runs, "react": make_react_run(tmp_path_factory.mktemp("export-runs"))}
