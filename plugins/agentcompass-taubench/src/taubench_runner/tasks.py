"""Tasks as tau2 defines them (``data/tau2/domains/<domain>/tasks.json``): checking, defaults, rendering.

A task is kept as the JSON object of the task file; :func:`check_task` refuses what tau2's ``Task`` model
would refuse (naming the task and the field), and the helpers read it with tau2's defaults.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

REWARD_TYPES = ("DB", "ENV_ASSERTION", "NL_ASSERTION", "ACTION", "COMMUNICATE")
#: tau2's default ``reward_basis`` (the original tau-bench's).
DEFAULT_REWARD_BASIS = ("DB", "COMMUNICATE")
REQUESTORS = ("assistant", "user")


class TaskError(ValueError):
    """A task that tau2 would not load."""


def _expect(condition: bool, task_id: Any, where: str, what: str) -> None:
    if not condition:
        raise TaskError(f"task {task_id!r}: {where} {what}")


def _optional_list(value: Any) -> bool:
    return value is None or isinstance(value, list)


def check_task(task: Any) -> None:
    """Raise :class:`TaskError` when ``task`` lacks what tau2's ``Task`` requires."""
    _expect(isinstance(task, Mapping), "?", "the task", "must be a JSON object")
    task_id = task.get("id")
    _expect(isinstance(task_id, str) and bool(task_id), task_id, "'id'", "must be a non-empty string")
    scenario = task.get("user_scenario")
    _expect(isinstance(scenario, Mapping), task_id, "'user_scenario'", "must be an object")
    _expect(scenario.get("persona") is None or isinstance(scenario.get("persona"), str), task_id,
            "'user_scenario.persona'", "must be a string or null")
    instructions = scenario.get("instructions")
    if isinstance(instructions, Mapping):
        for key in ("domain", "reason_for_call", "task_instructions"):
            _expect(isinstance(instructions.get(key), str), task_id, f"'user_scenario.instructions.{key}'",
                    "must be a string")
        for key in ("known_info", "unknown_info"):
            _expect(instructions.get(key) is None or isinstance(instructions.get(key), str), task_id,
                    f"'user_scenario.instructions.{key}'", "must be a string or null")
    else:
        _expect(isinstance(instructions, str), task_id, "'user_scenario.instructions'",
                "must be a string or an object")
    state = task.get("initial_state")
    if state is not None:
        _expect(isinstance(state, Mapping), task_id, "'initial_state'", "must be an object or null")
        data = state.get("initialization_data")
        _expect(data is None or isinstance(data, Mapping), task_id, "'initial_state.initialization_data'",
                "must be an object or null")
        for key in ("agent_data", "user_data"):
            _expect(data is None or data.get(key) is None or isinstance(data.get(key), Mapping), task_id,
                    f"'initial_state.initialization_data.{key}'", "must be an object or null")
        actions = state.get("initialization_actions")
        _expect(_optional_list(actions), task_id, "'initial_state.initialization_actions'", "must be a list or null")
        for i, action in enumerate(actions or ()):
            _check_env_call(action, task_id, f"'initial_state.initialization_actions[{i}]'")
        history = state.get("message_history")
        _expect(_optional_list(history), task_id, "'initial_state.message_history'", "must be a list or null")
        for i, message in enumerate(history or ()):
            _check_message(message, task_id, f"'initial_state.message_history[{i}]'")
    crit = task.get("evaluation_criteria")
    if crit is not None:
        _expect(isinstance(crit, Mapping), task_id, "'evaluation_criteria'", "must be an object or null")
        for key in ("actions", "env_assertions", "communicate_info", "nl_assertions"):
            _expect(_optional_list(crit.get(key)), task_id, f"'evaluation_criteria.{key}'",
                    "must be a list or null")
        for i, action in enumerate(crit.get("actions") or ()):
            where = f"'evaluation_criteria.actions[{i}]'"
            _expect(isinstance(action, Mapping), task_id, where, "must be an object")
            _expect(isinstance(action.get("action_id"), str), task_id, f"{where}.action_id", "must be a string")
            _expect(isinstance(action.get("name"), str), task_id, f"{where}.name", "must be a string")
            _expect(isinstance(action.get("arguments"), Mapping), task_id, f"{where}.arguments", "must be an object")
            _expect(action.get("requestor", "assistant") in REQUESTORS, task_id, f"{where}.requestor",
                    "must be 'assistant' or 'user'")
            compare = action.get("compare_args")
            _expect(compare is None or (isinstance(compare, list) and all(isinstance(c, str) for c in compare)),
                    task_id, f"{where}.compare_args", "must be a list of strings or null")
        for i, assertion in enumerate(crit.get("env_assertions") or ()):
            _check_env_call(assertion, task_id, f"'evaluation_criteria.env_assertions[{i}]'")
        for key in ("communicate_info", "nl_assertions"):
            _expect(all(isinstance(s, str) for s in crit.get(key) or ()), task_id,
                    f"'evaluation_criteria.{key}'", "must hold strings")
        basis = crit.get("reward_basis", list(DEFAULT_REWARD_BASIS))
        _expect(isinstance(basis, list) and all(b in REWARD_TYPES for b in basis), task_id,
                "'evaluation_criteria.reward_basis'", f"must be a list of {', '.join(REWARD_TYPES)}")


def _check_env_call(call: Any, task_id: Any, where: str) -> None:
    _expect(isinstance(call, Mapping), task_id, where, "must be an object")
    _expect(call.get("env_type") in REQUESTORS, task_id, f"{where}.env_type", "must be 'assistant' or 'user'")
    _expect(isinstance(call.get("func_name"), str), task_id, f"{where}.func_name", "must be a string")
    _expect(isinstance(call.get("arguments"), Mapping), task_id, f"{where}.arguments", "must be an object")


def _check_message(message: Any, task_id: Any, where: str) -> None:
    _expect(isinstance(message, Mapping), task_id, where, "must be an object")
    role = message.get("role")
    _expect(role in ("assistant", "user", "tool"), task_id, f"{where}.role", "must be assistant, user or tool")
    if role == "tool":
        _expect(isinstance(message.get("id"), str), task_id, f"{where}.id", "must be a string")
        return
    for i, call in enumerate(message.get("tool_calls") or ()):
        _expect(isinstance(call, Mapping) and isinstance(call.get("name"), str)
                and isinstance(call.get("arguments"), Mapping), task_id, f"{where}.tool_calls[{i}]",
                "must have a 'name' and 'arguments'")


# -- reading a task with tau2's defaults --------------------------------------------------------------


def criteria(task: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return task.get("evaluation_criteria")


def reward_basis(task: Mapping[str, Any]) -> list[str]:
    crit = criteria(task)
    if crit is None:
        return []
    return list(crit.get("reward_basis", DEFAULT_REWARD_BASIS))


def gold_actions(task: Mapping[str, Any]) -> list[dict[str, Any]]:
    crit = criteria(task) or {}
    return [{"requestor": "assistant", "compare_args": None, **a} for a in crit.get("actions") or ()]


def needs_judge(task: Mapping[str, Any]) -> bool:
    """The task's reward depends on an LLM judge: NL assertions are in its basis and it has some."""
    crit = criteria(task) or {}
    return "NL_ASSERTION" in reward_basis(task) and bool(crit.get("nl_assertions"))


def initial_state(task: Mapping[str, Any]) -> Mapping[str, Any]:
    return task.get("initial_state") or {}


def message_history(task: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The task's message history in trajectory form (tau2's ``Message`` models with their defaults)."""
    return [normalize_message(m) for m in initial_state(task).get("message_history") or ()]


def normalize_message(message: Mapping[str, Any]) -> dict[str, Any]:
    role = message["role"]
    if role == "tool":
        return {
            "id": message.get("id", ""), "role": "tool", "content": message.get("content"),
            "requestor": message.get("requestor", "assistant"), "error": bool(message.get("error", False)),
        }
    calls = message.get("tool_calls")
    return {
        "role": role,
        "content": message.get("content"),
        "tool_calls": None if calls is None else [
            {"id": c.get("id", ""), "name": c["name"], "arguments": dict(c["arguments"]),
             "requestor": c.get("requestor", "assistant")}
            for c in calls
        ],
    }


def scenario_text(task: Mapping[str, Any]) -> str:
    """``str(task.user_scenario)``: what the user simulator gets inside ``<scenario>``."""
    scenario = task["user_scenario"]
    lines = []
    if scenario.get("persona") is not None:
        lines.append("Persona:")
        lines.append(textwrap.indent(scenario["persona"], "\t"))
    lines.append("Instructions:")
    lines.append(textwrap.indent(_instructions_text(scenario["instructions"]), "\t"))
    return "\n".join(lines)


def _instructions_text(instructions: Any) -> str:
    if isinstance(instructions, str):
        return instructions
    tab = "\t"
    lines = [f"Domain: {instructions['domain']}",
             f"Reason for call:\n{textwrap.indent(instructions['reason_for_call'], tab)}"]
    if instructions.get("known_info") is not None:
        lines.append(f"Known info:\n{textwrap.indent(instructions['known_info'], tab)}")
    if instructions.get("unknown_info") is not None:
        lines.append(f"Unknown info:\n{textwrap.indent(instructions['unknown_info'], tab)}")
    lines.append(f"Task instructions:\n{textwrap.indent(instructions['task_instructions'], tab)}")
    return "\n".join(lines)


def select(tasks: Sequence[Mapping[str, Any]], split_ids: Sequence[str] | None) -> list[Mapping[str, Any]]:
    """The tasks of a split, in the task file's order."""
    if split_ids is None:
        return list(tasks)
    wanted = set(split_ids)
    return [t for t in tasks if t["id"] in wanted]
