"""The one cattrs converter that turns agentcompass types into JSON-ready data and back.

Reading is strict: a string field takes only a string, a number field only a number (``"attempt": "one"`` or
``{"task_id": 5}`` is not a record), and every failure is a :class:`RecordError` saying where.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypeVar

import cattrs

from agentcompass.runtime.records import SCHEMA_VERSION
from agentcompass.runtime.types import ExecutionPlan, RunRequest, RunResult, TaskStatus

T = TypeVar("T")


class RecordError(ValueError):
    """Data that is not a valid record of the expected type; the message says which fields are wrong."""


def _strict(kind: type) -> Any:
    def structure(value: Any, _: Any) -> Any:
        if isinstance(value, bool) and kind is not bool:
            raise TypeError(f"expected {kind.__name__}, got a boolean")
        if kind is float and isinstance(value, int):
            return float(value)
        if not isinstance(value, kind):
            raise TypeError(f"expected {kind.__name__}, got {type(value).__name__} {value!r:.40}")
        return value

    return structure


converter = cattrs.Converter(forbid_extra_keys=False)
for _kind in (str, int, float, bool):
    converter.register_structure_hook(_kind, _strict(_kind))
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


def read_record(data: Any, cls: type[T]) -> T:
    """``data`` as a ``cls``, validated; a :class:`RecordError` naming the wrong fields otherwise. A record
    written by a newer agentcompass (a higher ``schema_version``) is refused."""
    if isinstance(data, Mapping):
        version = data.get("schema_version", SCHEMA_VERSION)
        if isinstance(version, int) and version > SCHEMA_VERSION:
            raise RecordError(
                f"schema_version {version} is newer than this agentcompass reads ({SCHEMA_VERSION}); upgrade it"
            )
    try:
        return converter.structure(data, cls)
    except Exception as exc:  # cattrs wraps every field's failure; say which fields, briefly
        details = cattrs.transform_error(exc) if isinstance(exc, cattrs.BaseValidationError) else [str(exc)]
        raise RecordError("; ".join(details[:3])) from None


def dumps(value: Any) -> str:
    """One line of JSON (no newline) for any agentcompass value; unknown objects become strings."""
    return json.dumps(unstructure(value), ensure_ascii=False, default=str, separators=(",", ":"))


def dumps_record(value: Any, indent: int | None = None) -> str:
    """A record as JSON text (``indent`` for files people read)."""
    return json.dumps(unstructure(value), ensure_ascii=False, default=str, indent=indent)


def result_to_json(result: RunResult) -> dict[str, Any]:
    """A ``results.jsonl`` / ``attempts.jsonl`` line: the result plus ``schema_version``."""
    return {"schema_version": SCHEMA_VERSION, **converter.unstructure(result)}


def result_from_json(data: Mapping[str, Any]) -> RunResult:
    return read_record(data, RunResult)


def request_from_json(data: Mapping[str, Any]) -> RunRequest:
    return read_record(data, RunRequest)
