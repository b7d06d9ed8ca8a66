"""The one cattrs converter that turns agentcompass types into JSON-ready data and back."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypeVar

import cattrs

from agentcompass.runtime.types import ExecutionPlan, RunRequest, RunResult, TaskStatus

T = TypeVar("T")

converter = cattrs.Converter(forbid_extra_keys=False)
converter.register_unstructure_hook(TaskStatus, lambda s: s.value)
converter.register_structure_hook(TaskStatus, lambda v, _: TaskStatus(v))
converter.register_unstructure_hook(
    ExecutionPlan,
    lambda p: {
        "run_id": p.run_id,
        "task_id": p.task_id,
        "attempt": p.attempt,
        "harness": p.harness,
        "environment": p.environment,
        "artifacts_dir": p.artifacts_dir,
        "timeouts": dict(p.timeouts),
        "model_roles": sorted(p.model_endpoints),
    },
)


def unstructure(value: Any) -> Any:
    return converter.unstructure(value)


def structure(data: Any, cls: type[T]) -> T:
    return converter.structure(data, cls)


def dumps(value: Any) -> str:
    """One line of JSON (no newline) for any agentcompass value; unknown objects become strings."""
    return json.dumps(unstructure(value), ensure_ascii=False, default=str, separators=(",", ":"))


def result_from_json(data: Mapping[str, Any]) -> RunResult:
    return structure(dict(data), RunResult)


def request_from_json(data: Mapping[str, Any]) -> RunRequest:
    data = dict(data)
    data["task_ids"] = tuple(data.get("task_ids") or ())
    return structure(data, RunRequest)
