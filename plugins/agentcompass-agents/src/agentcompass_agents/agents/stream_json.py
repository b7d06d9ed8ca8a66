"""The ``stream-json`` output Claude Code and Qwen Code share: ``system`` (init), ``assistant`` and ``user``
messages with content blocks (``text``, ``tool_use``, ``tool_result``), and a closing ``result`` (final text,
turns, subtype, usage)."""

from __future__ import annotations

from agentcompass_agents.agents.events import content_text, json_lines
from agentcompass_agents.harness import Summary


def summarize(stdout: str) -> Summary:
    summary = Summary()
    last_text: str | None = None
    assistant_messages = 0
    for event in json_lines(stdout):
        kind = event.get("type")
        if kind == "system" and event.get("session_id"):
            summary.extra["session_id"] = event["session_id"]
        elif kind == "assistant":
            message = event.get("message") or {}
            content = message.get("content") or []
            assistant_messages += 1
            if isinstance(content, list):
                summary.tool_calls += sum(1 for b in content if isinstance(b, dict) and b.get("type") == "tool_use")
            text = content_text(content)
            if text.strip():
                last_text = text
        elif kind == "result":
            if isinstance(event.get("result"), str):
                last_text = event["result"]
            summary.turns = int(event.get("num_turns") or 0)
            summary.stop_reason = str(event.get("subtype") or "") or None
            if event.get("is_error"):
                summary.stop_reason = f"error ({summary.stop_reason})" if summary.stop_reason else "error"
            usage = event.get("usage") or {}
            tokens = {"prompt_tokens": int(usage.get("input_tokens") or 0)
                      + int(usage.get("cache_read_input_tokens") or 0)
                      + int(usage.get("cache_creation_input_tokens") or 0),
                      "completion_tokens": int(usage.get("output_tokens") or 0)}
            if any(tokens.values()):
                summary.tokens = tokens
            if event.get("total_cost_usd") is not None:
                summary.extra["agent_cost_usd"] = event["total_cost_usd"]
    summary.final_message = last_text
    if not summary.turns:
        summary.turns = assistant_messages
    return summary
