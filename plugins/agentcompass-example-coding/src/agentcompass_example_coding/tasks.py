"""The tasks of example_coding, shipped as package data under ``data/``.

* ``data/tasks.json`` — one entry per task: ``task_id``, ``category``, ``entry_point``, ``signature``,
  ``description``;
* ``data/solutions/<task_id>.py`` — the known-good reference solution;
* ``data/hidden_tests/<task_id>.py`` — the hidden tests: ``test_*(solution)`` functions that get the
  submitted module and use plain ``assert`` (standard library only: they run inside the environment);
* ``data/run_tests.py`` — the verifier that runs hidden tests against a submission.

Reference solutions and hidden tests never go into a ``TaskSpec``: a harness sees the spec, so they are read
from here by task id only when ``apply_reference_solution`` or ``evaluate`` needs them.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable

SOLUTION_FILE = "solution.py"
PROMPT_FILE = "PROMPT.md"


@dataclass(frozen=True)
class CodingTask:
    task_id: str
    category: str
    entry_point: str
    signature: str
    description: str

    @property
    def prompt(self) -> str:
        return (
            f"# {self.task_id}\n\n"
            f"Write a Python file `{SOLUTION_FILE}` in the current working directory that defines:\n\n"
            f"    def {self.signature}\n\n"
            f"{self.description}\n\n"
            "Use only the Python standard library. The file is imported as a module and checked by hidden "
            "tests, so keep its top level free of side effects (no input(), no printing).\n"
        )

    @property
    def reference_solution(self) -> str:
        return _data().joinpath("solutions", f"{self.task_id}.py").read_text(encoding="utf-8")

    @property
    def hidden_tests(self) -> str:
        return _data().joinpath("hidden_tests", f"{self.task_id}.py").read_text(encoding="utf-8")


def _data() -> Traversable:
    return resources.files("agentcompass_example_coding").joinpath("data")


@functools.cache
def load_all() -> tuple[CodingTask, ...]:
    """Every task, in the order of ``tasks.json``."""
    raw = json.loads(_data().joinpath("tasks.json").read_text(encoding="utf-8"))
    return tuple(CodingTask(**entry) for entry in raw)


def by_id(task_id: str) -> CodingTask:
    for task in load_all():
        if task.task_id == task_id:
            return task
    raise KeyError(f"example_coding has no task {task_id!r}")


def verifier_source() -> str:
    return _data().joinpath("run_tests.py").read_text(encoding="utf-8")
