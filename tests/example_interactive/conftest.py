"""Fixtures of the example_interactive tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from ei_support import copy_runner


@pytest.fixture
def runner_dir(tmp_path: Path) -> Path:
    """A working directory holding a copy of the runner package, as prepare_task leaves it."""
    copy_runner(tmp_path)
    return tmp_path


@pytest.fixture(scope="session")
def task_doc() -> dict:
    from example_interactive.benchmark import load_task_file

    return load_task_file()


@pytest.fixture(scope="session")
def resolved_tasks(task_doc: dict) -> dict[str, dict]:
    from example_interactive.runner import resolve_task

    return {t["id"]: resolve_task(t, task_doc["default_db"]) for t in task_doc["tasks"]}
