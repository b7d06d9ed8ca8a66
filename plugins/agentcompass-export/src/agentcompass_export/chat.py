"""The trajectory's messages (OpenAI chat-completions form, as ``trajectories.jsonl`` records them), read for
export: texts, tool calls and their arguments, and what each call added to the conversation."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

Message = Mapping[str, Any]


def text_of(content: Any) -> str:
    """A message's content as text: a string as it is, content parts' texts joined (other parts named)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, Mapping):
                kind = part.get("type")
                if kind in ("text", "input_text", "output_text") or "text" in part:
                    parts.append(str(part.get("text", "")))
                else:
                    parts.append(f"[{kind or 'part'}]")
            else:
                parts.append(str(part))
        return "\n".join(parts)
    return json.dumps(content, ensure_ascii=False, default=str)


def arguments_of(raw: Any) -> tuple[dict[str, Any], str | None]:
    """A tool call's arguments as an object, and a parse error when they were not a JSON object (they are then
    kept whole under ``"arguments"``)."""
    if isinstance(raw, Mapping):
        return dict(raw), None
    if raw is None or raw == "":
        return {}, None
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw)
        except json.JSONDecodeError as exc:
            return {"arguments": raw}, f"arguments are not JSON: {exc}"
        if isinstance(parsed, dict):
            return parsed, None
        return {"arguments": parsed}, "arguments are not a JSON object"
    return {"arguments": raw}, "arguments are not a JSON object"


def tool_calls_of(message: Message | None) -> list[tuple[str, str, dict[str, Any], str | None]]:
    """``(id, function name, arguments, parse error)`` of each tool call of an assistant message."""
    out = []
    for i, call in enumerate((message or {}).get("tool_calls") or ()):
        if not isinstance(call, Mapping):
            continue
        function: Mapping[str, Any] = call["function"] if isinstance(call.get("function"), Mapping) else call
        arguments, error = arguments_of(function.get("arguments", function.get("input")))
        out.append((str(call.get("id") or f"call_{i}"), str(function.get("name") or ""), arguments, error))
    return out


def reasoning_of(message: Message | None) -> str | None:
    """The reasoning text an assistant message carries (``reasoning_content`` or ``reasoning``), if any."""
    for key in ("reasoning_content", "reasoning"):
        value = (message or {}).get(key)
        if isinstance(value, str) and value:
            return value
    return None


def common_prefix(a: Sequence[Any], b: Sequence[Any]) -> int:
    """How many leading messages ``a`` and ``b`` share."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def conversation(calls: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The conversation the calls of one role had: each call's prompt and reply, every message once.

    A call's prompt normally repeats the previous prompt and reply and adds to them; what a prompt rewrote (a
    harness that compacts its history) is kept as the earlier calls saw it, followed by the new prompt's
    messages from where the two differ.
    """
    out: list[dict[str, Any]] = []
    previous: list[Any] = []
    for call in calls:
        messages = list(call.get("messages") or ())
        start = common_prefix(previous, messages)
        out.extend(dict(m) for m in messages[start:] if isinstance(m, Mapping))
        reply = call.get("response")
        previous = messages
        if isinstance(reply, Mapping):
            reply = {"role": "assistant", **reply}
            out.append(dict(reply))
            previous = [*messages, call.get("response")]
    return out


def agent_calls(calls: Sequence[Mapping[str, Any]], roles: Sequence[str]) -> tuple[str, list[Mapping[str, Any]]]:
    """The role whose conversation a sample shows (``agent`` when it called, else the first role that did) and
    its calls."""
    called = [c.get("role") for c in calls]
    role = "agent" if "agent" in called else next((r for r in roles if r in called), called[0] if called else "")
    return str(role), [c for c in calls if c.get("role") == role]
