"""Tool-call sequences derived from the tasks' gold actions, for comparing the tools with upstream's.

Standard library only: ``upstream/derive_snapshot.py`` imports this module too, runs every sequence through
tau2-bench's own ``Environment`` and records each result; ``test_tb_upstream_fidelity.py`` runs the same
sequences through the runner's tools and compares. Per task, each gold action is preceded by variants of it
(an argument dropped, an extra argument, a wrong id, a wrong type, an enum value that does not exist) and then
run as is, so the sequence exercises the error paths and the state stays on the gold path.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterator
from typing import Any

SENTINEL_ID = "does_not_exist_0"


def digest(content: Any) -> str:
    return hashlib.sha256(str(content).encode()).hexdigest()[:16]


def _variants(action: dict[str, Any]) -> Iterator[dict[str, Any]]:
    args = action.get("arguments") or {}
    name = action["name"]
    for key in list(args)[:3]:
        yield {k: v for k, v in args.items() if k != key}
    yield {**args, "unexpected_argument": 1}
    for key, value in list(args.items())[:4]:
        if isinstance(value, str):
            yield {**args, key: SENTINEL_ID}
            yield {**args, key: 12345}
            yield {**args, key: None}
        elif isinstance(value, bool):
            yield {**args, key: "maybe"}
        elif isinstance(value, int):
            yield {**args, key: str(value)}
            yield {**args, key: value + 0.5}
            yield {**args, key: "many"}
        elif isinstance(value, list):
            yield {**args, key: "not a list"}
            if value and isinstance(value[0], dict):
                broken = copy.deepcopy(value)
                first_key = next(iter(broken[0]), None)
                if first_key is not None:
                    broken[0].pop(first_key)
                yield {**args, key: broken}
                yield {**args, key: [*copy.deepcopy(value), "loose string"]}
                retyped = copy.deepcopy(value)
                for k, v in retyped[0].items():
                    if isinstance(v, int) and not isinstance(v, bool):
                        retyped[0][k] = v + 0.25
                        break
                    if isinstance(v, str):
                        retyped[0][k] = 7
                        break
                yield {**args, key: retyped}
            elif value:
                yield {**args, key: [*value, value[0]]}
                yield {**args, key: [SENTINEL_ID]}
            yield {**args, key: []}
    if name in ("calculate",):
        yield {"expression": "2 * (3 + 4) / 3"}
        yield {"expression": "1/0"}
        yield {"expression": "import os"}


def sequences(domain: str, tasks: list[dict[str, Any]]) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """``(task_id, calls)`` per task: calls are ``{"id", "name", "arguments", "requestor"}``."""
    extra_reads = {
        "airline": [("list_all_airports", {}), ("search_onestop_flight", {"origin": "JFK", "destination": "SEA",
                                                                           "date": "2024-05-20"}),
                    ("get_flight_status", {"flight_number": "HAT001", "date": "2024-05-16"}),
                    ("calculate", {"expression": "(120 + 80) * 2"})],
        "retail": [("list_all_product_types", {}), ("get_item_details", {"item_id": "1008292230"}),
                   ("find_user_id_by_email", {"email": "NOBODY@example.com"}),
                   ("calculate", {"expression": "10 / 4"})],
        "mock": [("get_users", {})],
    }.get(domain, [])
    for task in tasks:
        calls: list[dict[str, Any]] = []

        def add(name: str, arguments: Any, requestor: str = "assistant", calls: list[dict[str, Any]] = calls) -> None:
            calls.append({"id": f"fz{len(calls) + 1}", "name": name, "arguments": arguments, "requestor": requestor})

        for name, arguments in extra_reads:
            add(name, arguments)
        add("no_such_tool", {"x": 1})
        for action in (task.get("evaluation_criteria") or {}).get("actions") or ():
            requestor = action.get("requestor", "assistant")
            for variant in _variants(action):
                add(action["name"], variant, requestor)
            add(action["name"], copy.deepcopy(action.get("arguments") or {}), requestor)
        if domain == "mock":
            add("check_notifications", {}, "user")
            add("dismiss_notification", {"notification_id": "notif_1"}, "user")
            add("dismiss_notification", {"notification_id": SENTINEL_ID}, "user")
            add("check_notifications", {}, "user")
        yield task["id"], calls


def record(response: dict[str, Any]) -> list[Any]:
    """What a snapshot keeps of one tool message: the digest of its content, the error flag, and the content
    itself when short (errors are)."""
    content = response["content"]
    return [digest(content), bool(response["error"]), content if len(str(content)) <= 400 else None]


def dumps(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True)
