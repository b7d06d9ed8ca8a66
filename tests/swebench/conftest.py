from __future__ import annotations

from pathlib import Path

import pytest

from tests.swebench.instances import Suite, suite


@pytest.fixture(scope="session")
def swebench_rows(tmp_path_factory: pytest.TempPathFactory) -> Suite:
    """The local instances without images (for tests that need no engine)."""
    return suite(tmp_path_factory.mktemp("swebench-rows"), go=True, build=False)


@pytest.fixture(scope="session")
def swebench_suite(tmp_path_factory: pytest.TempPathFactory) -> Suite:
    """The local instances with their images built (once per session, cached by tag across sessions)."""
    from tests.helpers.docker_engine import require_engine

    require_engine()
    return suite(tmp_path_factory.mktemp("swebench-suite"), go=True, build=True)


@pytest.fixture
def dataset_dir(tmp_path: Path) -> Path:
    return tmp_path
