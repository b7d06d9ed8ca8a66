"""A domain environment: the agent's tools and the user's tools over their databases (tau2's ``Environment``).

Messages are plain dicts in tau2's trajectory format:

* participant messages ``{"role": "assistant" | "user", "content": str | None, "tool_calls": [ToolCall] |
  None, ...}`` where a tool call is ``{"id", "name", "arguments": {...}, "requestor": "assistant" | "user"}``;
* tool results ``{"role": "tool", "id": <call id>, "content": str, "requestor": ..., "error": bool}``.
"""

from __future__ import annotations

import hashlib
import json
import marshal
from collections.abc import Mapping, Sequence
from typing import Any

from taubench_runner import records
from taubench_runner.toolkit import ModelOut, ToolKit, ToolSpec

Message = dict[str, Any]


def is_tool_call(message: Mapping[str, Any]) -> bool:
    return message.get("tool_calls") is not None


def has_text(message: Mapping[str, Any]) -> bool:
    content = message.get("content")
    return isinstance(content, str) and bool(content.strip())


def dict_hash(data: Any, *, cached: bool = False) -> str:
    """tau2's ``get_dict_hash``: sha256 of ``json.dumps(data, sort_keys=True, default=str)``.

    With ``cached`` (a process that hashes many databases of one domain, such as a test suite), the JSON is
    assembled from the JSON of each top-level value, and of each entry of the large top-level
    dicts (a database's users, orders, flights), each found in a cache keyed by the entry's ``marshal`` bytes
    when it was serialised before: two environments of one task differ in a few entries only. ``marshal``
    encodes types (``1``, ``1.0`` and ``True`` differ) and order, so a hit is the same JSON; a miss is
    serialised afresh. The digest is the very string's, as upstream's.
    """
    if not cached or not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
        return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()
    parts = []
    for key in sorted(data):
        value = data[key]
        if isinstance(value, dict) and len(value) > 16 and all(isinstance(k, str) for k in value):
            inner = ", ".join(f"{json.dumps(k)}: {_serialised(value[k])}" for k in sorted(value))
            text = "{" + inner + "}"
        else:
            text = _serialised(value)
        parts.append(f"{json.dumps(key)}: {text}")
    return hashlib.sha256(("{" + ", ".join(parts) + "}").encode()).hexdigest()


_SERIALISED: dict[bytes, str] = {}
_SERIALISED_LIMIT = 200_000


def _serialised(value: Any) -> str:
    try:
        key = hashlib.blake2b(marshal.dumps(value), digest_size=16).digest()
    except ValueError:  # not a plain JSON-like value
        return json.dumps(value, sort_keys=True, default=str)
    text = _SERIALISED.get(key)
    if text is None:
        if len(_SERIALISED) >= _SERIALISED_LIMIT:
            _SERIALISED.clear()
        text = _SERIALISED[key] = json.dumps(value, sort_keys=True, default=str)
    return text


def _process(resp: Any) -> Any:
    if isinstance(resp, ModelOut):
        return resp.value
    if isinstance(resp, str) or resp is None:
        return resp
    if isinstance(resp, bool | int | float):
        return str(resp)
    if isinstance(resp, list):
        return [_process(item) for item in resp]
    if isinstance(resp, tuple):
        return tuple(_process(item) for item in resp)
    if isinstance(resp, dict):
        return {k: _process(v) for k, v in resp.items()}
    raise ValueError(f"Unsupported type: {type(resp)}")


def to_json_str(resp: Any) -> str:
    """What a tool result becomes in the tool message (tau2's ``Environment.to_json_str``)."""
    if isinstance(resp, str):
        return resp
    return json.dumps(_process(resp), default=str)


class Environment:
    """tau2's ``Environment`` for one domain. ``tools`` serve the agent, ``user_tools`` (or None) the user."""

    def __init__(self, domain_name: str, policy: str, tools: ToolKit, user_tools: ToolKit | None = None) -> None:
        self.domain_name = domain_name
        self.policy = policy
        self.tools = tools
        self.user_tools = user_tools
        self.sync_tools()

    # -- what the participants are offered -------------------------------------------------------

    def get_tools(self) -> list[ToolSpec]:
        return self.tools.specs()

    def get_user_tools(self, include: Sequence[str] | None = None) -> list[ToolSpec] | None:
        if self.user_tools is None:
            return None
        return self.user_tools.specs(include)

    def tool_kind(self, name: str) -> str | None:
        for toolkit in (self.tools, self.user_tools):
            if toolkit is not None and toolkit.has_tool(name):
                return toolkit.tool_specs[name].kind
        return None

    # -- calls -----------------------------------------------------------------------------------

    def _has_tool(self, name: str) -> bool:
        return self.tools.has_tool(name) or (self.user_tools is not None and self.user_tools.has_tool(name))

    def _is_mutating_tool(self, name: str) -> bool:
        for toolkit in (self.tools, self.user_tools):
            if toolkit is not None and toolkit.has_tool(name):
                return toolkit.tool_specs[name].mutates
        return True

    def use_tool(self, tool_name: str, **kwargs: Any) -> Any:
        return self.tools.use_tool(tool_name=tool_name, **kwargs)

    def use_user_tool(self, tool_name: str, **kwargs: Any) -> Any:
        if self.user_tools is None:
            raise ValueError("User tools not available")
        return self.user_tools.use_tool(tool_name=tool_name, **kwargs)

    def make_tool_call(self, tool_name: str, requestor: str = "assistant", **kwargs: Any) -> Any:
        if requestor == "user":
            return self.use_user_tool(tool_name=tool_name, **kwargs)
        if requestor == "assistant":
            return self.use_tool(tool_name=tool_name, **kwargs)
        raise ValueError(f"Invalid requestor: {requestor}")

    def sync_tools(self) -> None:
        """Keep the two sides consistent after a change (a domain whose sides share state overrides it)."""

    def get_response(self, call: Mapping[str, Any]) -> Message:
        """Run one tool call; a failure is an error tool message ``Error: <message>``, never an exception."""
        error = False
        try:
            arguments = call.get("arguments")
            if not isinstance(arguments, Mapping):
                raise TypeError(f"argument after ** must be a mapping, not {type(arguments).__name__}")
            resp = self.make_tool_call(call["name"], requestor=call.get("requestor", "assistant"), **arguments)
            self.sync_tools()
        except Exception as exc:
            resp = f"Error: {exc}"
            error = True
        return {
            "id": call.get("id", ""),
            "role": "tool",
            "content": to_json_str(resp),
            "requestor": call.get("requestor", "assistant"),
            "error": error,
        }

    # -- task set-up and assertions --------------------------------------------------------------

    def _toolkit(self, env_type: str) -> ToolKit:
        if env_type == "user":
            if self.user_tools is None:
                raise ValueError("User tools not available")
            return self.user_tools
        if env_type == "assistant":
            return self.tools
        raise ValueError(f"Invalid environment type: {env_type}")

    def run_env_function_call(self, call: Mapping[str, Any]) -> Any:
        func = self._toolkit(call["env_type"]).env_call(call["func_name"])
        result = func(**(call.get("arguments") or {}))
        self.sync_tools()
        return result

    def run_env_assertion(self, assertion: Mapping[str, Any], raise_assertion_error: bool = True) -> bool:
        result = self.run_env_function_call(assertion)
        if not isinstance(result, bool):
            raise ValueError(f"Function {assertion['func_name']} returned {type(result)} instead of bool")
        passed = result == assertion.get("assert_value", True)
        if raise_assertion_error and not passed:
            raise AssertionError(assertion.get("message") or f"Assertion failed: {assertion}")
        return passed

    def set_state(
        self,
        initialization_data: Mapping[str, Any] | None,
        initialization_actions: Sequence[Mapping[str, Any]] | None,
        message_history: Sequence[Message],
        strict: bool = True,
    ) -> None:
        """Initial state of a task, then every state-changing tool call of ``message_history`` replayed in
        order; with ``strict``, a replayed call must give the recorded result."""
        if initialization_data is not None:
            # As upstream: after one side's data is updated, the other side's toolkit is pointed at the same
            # (new) database object.
            if initialization_data.get("agent_data") is not None:
                self.tools.update_db(initialization_data["agent_data"])
                if self.user_tools is not None and self.user_tools.db is not None:
                    self.user_tools.db = self.tools.db
                    self.user_tools.db_model_name = self.tools.db_model_name
            if initialization_data.get("user_data") is not None:
                user_tools = self._toolkit("user")
                user_tools.update_db(initialization_data["user_data"])
                if self.tools.db is not None:
                    self.tools.db = user_tools.db
                    self.tools.db_model_name = user_tools.db_model_name
        for action in initialization_actions or ():
            self.run_env_function_call(action)
        for call, expected in actions_of(message_history):
            if not self._has_tool(call["name"]):
                continue  # a hallucinated tool changed nothing live: a no-op on replay too
            if not self._is_mutating_tool(call["name"]):
                continue
            response = self.get_response(call)
            if _loads(response["content"]) != _loads(expected.get("content")) and strict:
                raise ValueError(
                    f"Tool call:\n{call}\n\nReturned:\n{response}\n\nExpected:\n{expected}"
                )
        self.sync_tools()

    # -- state -----------------------------------------------------------------------------------

    #: Hash with :func:`dict_hash`'s cache (set by a process that hashes many databases of one domain).
    cached_hashes = False

    def get_db_hash(self) -> str | None:
        return dict_hash(self.tools.db, cached=self.cached_hashes) if self.tools.db is not None else None

    def get_user_db_hash(self) -> str | None:
        if self.user_tools is None or self.user_tools.db is None:
            return None
        return dict_hash(self.user_tools.db, cached=self.cached_hashes)


def same_data(a: Any, b: Any) -> bool:
    """``a`` and ``b`` are the same JSON-like data, types and order included (their ``marshal`` bytes are
    equal); False may also mean only that they were built differently."""
    try:
        return marshal.dumps(a) == marshal.dumps(b)
    except ValueError:
        return False


def pair_hashes(a: Any, b: Any, *, cached: bool = False) -> tuple[str | None, str | None]:
    """``(dict_hash(a), dict_hash(b))`` (None for None), serialising once when the two are the same data."""
    first = dict_hash(a, cached=cached) if a is not None else None
    if b is None:
        return first, None
    return first, first if a is not None and same_data(a, b) else dict_hash(b, cached=cached)


def _loads(content: Any) -> Any:
    try:
        return json.loads(content)
    except (TypeError, ValueError):
        return content


def actions_of(messages: Sequence[Message]) -> list[tuple[Message, Message]]:
    """Every (tool call, tool message) pair of a trajectory, checking that each call is answered in order."""
    pending = list(messages)[::-1]
    pairs: list[tuple[Message, Message]] = []
    while pending:
        message = pending.pop()
        if message.get("role") == "tool":
            raise ValueError("Tool message not expected. Tool messages should always follow a tool call.")
        if message.get("role") in ("assistant", "user") and is_tool_call(message):
            for call in message["tool_calls"]:
                if not pending:
                    raise ValueError("Tool message expected. Got None.")
                answer = pending.pop()
                if answer.get("role") != "tool":
                    raise ValueError(f"Tool message expected. Got {answer.get('role')}")
                if call.get("id") != answer.get("id"):
                    raise ValueError(f"Tool call id mismatch. Got {call.get('id')} and {answer.get('id')}")
                pairs.append((call, answer))
    return pairs


__all__ = ["Environment", "Message", "actions_of", "dict_hash", "has_text", "is_tool_call", "records",
           "to_json_str"]
