"""The task-management domain: a small database of users and tasks, the agent's tools, and its policy.

Standard library only: this module is copied into the task environment and run there.

Tools return JSON strings. A tool that refuses (unknown user, invalid status, missing title, bad arguments)
raises :class:`ToolError`; :meth:`TaskDomain.call` turns that into an error result for the agent, so a bad
tool call never crashes the interaction.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

STATUSES = ("pending", "completed")

POLICY = """\
You are the support agent of TaskFlow, a task-management service. You help one user per conversation with \
their tasks, using the tools you are given. Follow this policy:

1. Every task must have a non-empty title.
2. A task's status is either "pending" or "completed".
3. Only existing users can own tasks: never create a task for a user who does not exist.
4. Tasks can never be deleted. If a user asks to delete a task, do not modify it; transfer the user to a \
human agent.
5. Only act on the tasks of the user you are talking to: before changing a task, make sure it belongs to \
that user, and refuse otherwise.
6. A completed task cannot be reopened (set back to "pending"). If a user asks for it, do not modify the \
task; transfer the user to a human agent.
7. Transfer to a human agent only when this policy says so, or when the request is outside what your tools \
can do.

Make one tool call at a time and tell the user the outcome of each change."""

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_user",
            "description": "Get a user's profile, including the ids of their tasks.",
            "parameters": {
                "type": "object",
                "properties": {
                    "user_id": {"type": "string", "description": "The user's id, e.g. user_1."},
                },
                "required": ["user_id"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "list_tasks",
            "description": "List all tasks of a user.",
            "parameters": {
                "type": "object",
                "properties": {
                    "user_id": {"type": "string", "description": "The user's id, e.g. user_1."},
                },
                "required": ["user_id"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "create_task",
            "description": "Create a new pending task for an existing user.",
            "parameters": {
                "type": "object",
                "properties": {
                    "user_id": {"type": "string", "description": "The owner's id, e.g. user_1."},
                    "title": {"type": "string", "description": "The task's title (required)."},
                    "description": {"type": "string", "description": "An optional description."},
                },
                "required": ["user_id", "title"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "update_task_status",
            "description": "Set the status of a task.",
            "parameters": {
                "type": "object",
                "properties": {
                    "task_id": {"type": "string", "description": "The task's id, e.g. task_1."},
                    "status": {"type": "string", "enum": list(STATUSES), "description": "The new status."},
                },
                "required": ["task_id", "status"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "transfer_to_human_agents",
            "description": (
                "Transfer the user to a human agent, with a summary of their issue. Only when the policy says so."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "summary": {"type": "string", "description": "A summary of the user's issue."},
                },
                "required": ["summary"],
                "additionalProperties": False,
            },
        },
    },
]

TOOL_NAMES = tuple(t["function"]["name"] for t in TOOLS)
TRANSFER_TOOL = "transfer_to_human_agents"
_SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
_TASK_ID = re.compile(r"^task_(\d+)$")


class ToolError(Exception):
    """A tool refused the call; the message is shown to the agent."""


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


class TaskDomain:
    """The domain's state machine: a database and the tools that act on it.

    :param db: ``{"users": {user_id: {"user_id", "name", "tasks": [task_id, ...]}},
        "tasks": {task_id: {"task_id", "user_id", "title", "description", "status"}}}``; deep-copied.
    """

    def __init__(self, db: Mapping[str, Any]) -> None:
        self.db: dict[str, Any] = copy.deepcopy(dict(db))
        self.db.setdefault("users", {})
        self.db.setdefault("tasks", {})
        self.transferred = False
        self.transfer_summary: str | None = None

    # -- the agent's entry point ------------------------------------------------------------------

    def call(self, name: str, arguments: Any) -> tuple[str, bool]:
        """Run a tool call as the agent made it. Returns ``(result_json, is_error)``; never raises for
        anything the agent could get wrong."""
        try:
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments) if arguments.strip() else {}
                except ValueError as exc:
                    raise ToolError(f"arguments of {name!r} are not valid JSON: {exc}") from None
            if not isinstance(arguments, dict):
                raise ToolError(f"arguments of {name!r} must be a JSON object")
            result = self.invoke(name, arguments)
        except ToolError as exc:
            return _dumps({"error": str(exc)}), True
        return _dumps(result), False

    def invoke(self, name: str, arguments: Mapping[str, Any]) -> Any:
        """Validate ``arguments`` against the tool's schema and run it. Raises :class:`ToolError`."""
        schema = _SCHEMAS.get(name)
        if schema is None:
            raise ToolError(f"unknown tool {name!r}; available tools: {', '.join(TOOL_NAMES)}")
        props = schema["properties"]
        clean: dict[str, Any] = {}
        for key, value in arguments.items():
            if key not in props:
                raise ToolError(f"unexpected argument {key!r} for {name}")
            if value is None:
                continue
            if not isinstance(value, str):
                raise ToolError(f"argument {key!r} of {name} must be a string")
            clean[key] = value
        missing = [key for key in schema["required"] if key not in clean]
        if missing:
            raise ToolError(f"missing required argument(s) for {name}: {', '.join(missing)}")
        return getattr(self, name)(**clean)

    # -- tools ------------------------------------------------------------------------------------

    def _user(self, user_id: str) -> dict[str, Any]:
        user = self.db["users"].get(user_id)
        if user is None:
            raise ToolError(f"user {user_id!r} not found")
        return user

    def _task(self, task_id: str) -> dict[str, Any]:
        task = self.db["tasks"].get(task_id)
        if task is None:
            raise ToolError(f"task {task_id!r} not found")
        return task

    def get_user(self, user_id: str) -> dict[str, Any]:
        return copy.deepcopy(self._user(user_id))

    def list_tasks(self, user_id: str) -> list[dict[str, Any]]:
        user = self._user(user_id)
        return [copy.deepcopy(self.db["tasks"][t]) for t in user.get("tasks", []) if t in self.db["tasks"]]

    def create_task(self, user_id: str, title: str, description: str = "") -> dict[str, Any]:
        user = self._user(user_id)
        if not title.strip():
            raise ToolError("every task must have a non-empty title")
        task_id = self.next_task_id()
        task = {
            "task_id": task_id,
            "user_id": user_id,
            "title": title,
            "description": description,
            "status": "pending",
        }
        self.db["tasks"][task_id] = task
        user.setdefault("tasks", []).append(task_id)
        return copy.deepcopy(task)

    def update_task_status(self, task_id: str, status: str) -> dict[str, Any]:
        task = self._task(task_id)
        if status not in STATUSES:
            raise ToolError(f"invalid status {status!r}; a status is one of: {', '.join(STATUSES)}")
        task["status"] = status
        return copy.deepcopy(task)

    def transfer_to_human_agents(self, summary: str) -> str:
        self.transferred = True
        self.transfer_summary = summary
        return "Transfer successful"

    # -- helpers ----------------------------------------------------------------------------------

    def next_task_id(self) -> str:
        numbers = [int(m.group(1)) for m in map(_TASK_ID.match, self.db["tasks"]) if m]
        return f"task_{max(numbers, default=0) + 1}"

    def snapshot(self) -> dict[str, Any]:
        return copy.deepcopy(self.db)


# -- databases, golden replay and the DB check ---------------------------------------------------


def apply_patch(db: Mapping[str, Any], patch: Mapping[str, Any] | None) -> dict[str, Any]:
    """A copy of ``db`` with ``patch`` applied: ``{table: {key: record | None}}`` replaces (or, for
    ``None``, removes) whole records."""
    out = copy.deepcopy(dict(db))
    for table, records in (patch or {}).items():
        target = out.setdefault(table, {})
        for key, record in records.items():
            if record is None:
                target.pop(key, None)
            else:
                target[key] = copy.deepcopy(record)
    return out


def replay(db: Mapping[str, Any], actions: Sequence[Mapping[str, Any]], *, strict: bool = True) -> TaskDomain:
    """Run ``actions`` (``{"name", "arguments"}``) on a fresh domain over ``db``.

    :param strict: raise :class:`ToolError` when an action fails (a golden action must not fail).
    """
    domain = TaskDomain(db)
    for action in actions:
        try:
            domain.invoke(action["name"], action.get("arguments") or {})
        except ToolError:
            if strict:
                raise
    return domain


def canonical(db: Any) -> str:
    """Canonical JSON of a database: key order never matters."""
    return json.dumps(db, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def db_hash(db: Any) -> str:
    return hashlib.sha256(canonical(db).encode("utf-8")).hexdigest()


def db_equal(a: Any, b: Any) -> bool:
    return canonical(a) == canonical(b)


def db_diff(expected: Mapping[str, Any], actual: Mapping[str, Any]) -> list[str]:
    """Human-readable differences between two databases, record by record."""
    lines: list[str] = []
    for table in sorted(set(expected) | set(actual)):
        exp, act = expected.get(table) or {}, actual.get(table) or {}
        for key in sorted(set(exp) | set(act)):
            if key not in act:
                lines.append(f"{table}.{key}: missing")
            elif key not in exp:
                lines.append(f"{table}.{key}: unexpected {canonical(act[key])}")
            elif canonical(exp[key]) != canonical(act[key]):
                lines.append(f"{table}.{key}: expected {canonical(exp[key])}, got {canonical(act[key])}")
    return lines
