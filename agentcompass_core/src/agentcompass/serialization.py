"""The one cattrs converter that turns agentcompass types into JSON-ready data and back.

Reading is strict: a string field takes only a string, a number field only a number (``"attempt": "one"`` or
``{"task_id": 5}`` is not a record), and every failure is a :class:`RecordError` saying where.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

import cattrs

from agentcompass.runtime.records import SCHEMA_VERSION
from agentcompass.runtime.types import (
    REQUEST_GROUPS,
    REQUEST_OPTIONS,
    ExecutionPlan,
    RunRequest,
    RunResult,
    TaskStatus,
    fold_flat_options,
)

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


def _structure_request(data: Any, _: Any) -> RunRequest:
    """A request as ``run.json`` records it (by option name), or in the request's groups."""
    if not isinstance(data, Mapping):
        raise TypeError(f"expected a table, got {type(data).__name__}")
    known = {f.name: f for f in dataclasses.fields(RunRequest)}
    flat = {k: v for k, v in data.items() if k not in known and k in REQUEST_OPTIONS}
    grouped = {k: v for k, v in data.items() if k in known}
    hints = typing.get_type_hints(RunRequest)
    values = {k: converter.structure(v, hints[k]) for k, v in grouped.items()}
    for name, value in flat.items():
        group, attr = REQUEST_OPTIONS[name]
        assert group is not None
        hint = typing.get_type_hints(REQUEST_GROUPS[group])[attr]
        values[name] = converter.structure(value, hint)
    missing = [k for k in ("benchmark", "harness", "model") if k not in values]
    if missing:
        raise TypeError(f"the request has no {', '.join(missing)}")
    return RunRequest(**fold_flat_options(values))


converter.register_structure_hook(RunRequest, _structure_request)
# ``run.json`` keeps a request by its options' names, as the command line and a run config file name them (and as
# agentcompass 0.1.0 wrote it): one flat table a reader needs no knowledge of the request's groups for.
converter.register_unstructure_hook(
    RunRequest, lambda req: {name: converter.unstructure(req.option(name)) for name in REQUEST_OPTIONS})


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
