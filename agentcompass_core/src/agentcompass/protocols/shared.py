"""Helpers every codec uses: ids, request checks, text and tool-call arguments, the canonical shapes of tools,
tool calls and tool choices, images as data URLs, and the error type names shared by the vendors."""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from typing import Any

from agentcompass.protocols.base import ProtocolError

#: A free-form (``custom``) tool's input, for protocols that only have JSON-schema tools: one string field.
CUSTOM_INPUT_SCHEMA: dict[str, Any] = {"type": "object", "properties": {"input": {"type": "string"}},
                                       "required": ["input"]}
EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


def new_id(prefix: str) -> str:
    return f"{prefix}{secrets.token_hex(12)}"


def require(condition: bool, message: str) -> None:
    """Refuse the request (HTTP 400, in the protocol's error shape) unless ``condition`` holds."""
    if not condition:
        raise ProtocolError(message)


def text_of(content: Any) -> str:
    """The text of a message content: a string, or the text parts of a list joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping) and "text" in p)
    return str(content)


def arguments_object(raw: Any) -> dict[str, Any]:
    """A tool call's JSON arguments as an object (``{}`` when empty; non-objects wrapped, never lost)."""
    if isinstance(raw, Mapping):
        return dict(raw)
    try:
        value = json.loads(raw or "{}")
    except (TypeError, json.JSONDecodeError):
        return {"_raw": raw}
    return value if isinstance(value, dict) else {"_value": value}


def kind_and_body(entry: Mapping[str, Any], default: Any = None) -> tuple[str, Mapping[str, Any]]:
    """A canonical tool call or tool: its kind (``"function"`` or ``"custom"``) and the object under it
    (``{"name", "arguments"}`` / ``{"name", "input"}`` for a call; ``{"name", "description", "parameters"}``
    for a tool). ``default`` is what to read when neither key is there (``{}`` unless given)."""
    kind = str(entry.get("type") or "function")
    body = entry.get(kind) or entry.get("function")
    return kind, body if isinstance(body, Mapping) else ({} if default is None else default)


def call_input(call: Mapping[str, Any]) -> dict[str, Any]:
    """A canonical tool call's input as a JSON object: a function's arguments, a custom tool's ``{"input"}``."""
    kind, body = kind_and_body(call)
    return {"input": body.get("input", "")} if kind == "custom" else arguments_object(body.get("arguments"))


def tool_schema(tool: Mapping[str, Any]) -> dict[str, Any]:
    """A canonical tool's JSON schema (a custom tool's is :data:`CUSTOM_INPUT_SCHEMA`)."""
    kind, fn = kind_and_body(tool, tool)
    if kind == "custom":
        return dict(CUSTOM_INPUT_SCHEMA)
    return dict(fn.get("parameters") or EMPTY_SCHEMA)


def choice_name(choice: Mapping[str, Any]) -> tuple[str, str]:
    """A canonical ``tool_choice`` object's tool kind and name (``""`` when it names none)."""
    kind = str(choice.get("type") or "function")
    named = choice.get(kind) or choice.get("function") or choice.get("custom") or {}
    return kind, str((named.get("name") if isinstance(named, Mapping) else None) or choice.get("name") or "")


def data_url(media_type: str, data: str) -> str:
    return f"data:{media_type};base64,{data}"


def split_data_url(url: str) -> tuple[str, str] | None:
    """``(media type, base64 data)`` of a ``data:`` URL, or None for any other URL."""
    if url.startswith("data:") and ";base64," in url:
        media, data = url[5:].split(";base64,", 1)
        return media, data
    return None


def error_kind(status: int) -> str:
    """The conventional error type for an HTTP status (shared by the OpenAI and Anthropic shapes)."""
    return {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
            404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
            529: "overloaded_error"}.get(status, "api_error")
