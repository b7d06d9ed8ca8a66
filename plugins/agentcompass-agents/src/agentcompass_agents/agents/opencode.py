"""``opencode``: OpenCode, ``opencode run --format json``, against the gateway's chat completions through its
bundled ``@ai-sdk/openai-compatible`` provider (configured inline with ``OPENCODE_CONFIG_CONTENT``; the base URL
and key come from the gateway's variables). Auto-update, the models.dev fetch, LSP downloads, default plugins
and sharing are off. Its JSON events (``text``, ``tool_use``, ``step_finish`` with tokens) are the
trajectory; its session storage lands under the agent's ``HOME``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

from agentcompass_agents import task_tools
from agentcompass_agents.agents.events import json_lines
from agentcompass_agents.catalog import AGENTS, AgentSpec
from agentcompass_agents.harness import Context, InstalledAgent, Summary

PROVIDER = "agentcompass"


class OpenCode(InstalledAgent):
    name: ClassVar[str] = "opencode"
    agent: ClassVar[AgentSpec] = AGENTS["opencode"]

    def argv(self, ctx: Context) -> list[str]:
        return ["run", "--format", "json", "--model", f"{PROVIDER}/agent", ctx.instruction]

    def env(self, ctx: Context) -> dict[str, str]:
        config: dict[str, Any] = {
            "$schema": "https://opencode.ai/config.json",
            "autoupdate": False,
            "share": "disabled",
            "model": f"{PROVIDER}/agent",
            "small_model": f"{PROVIDER}/agent",
            "provider": {
                PROVIDER: {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "agentcompass gateway",
                    "options": {"baseURL": "{env:OPENAI_BASE_URL}", "apiKey": "{env:OPENAI_API_KEY}"},
                    "models": {"agent": {"name": "agent", "tool_call": True,
                                         "limit": {"context": 128000, "output": 16384}}},
                }
            },
            "permission": {"edit": "allow", "bash": "allow", "webfetch": "deny", "external_directory": "allow"},
        }
        if ctx.max_turns:
            config["agent"] = {"build": {"steps": ctx.max_turns}}
        if ctx.mcp_servers:
            config["mcp"] = task_tools.opencode(ctx.mcp_servers)
        return {
            "OPENCODE_CONFIG_CONTENT": json.dumps(config),
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
            "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
            "OPENCODE_DISABLE_SHARE": "1",
        }

    def summarize(self, stdout: str, files: Path | None) -> Summary:
        summary = Summary()
        texts: list[str] = []
        prompt = completion = 0
        for event in json_lines(stdout):
            part = event.get("part") or {}
            kind = event.get("type")
            if event.get("sessionID"):
                summary.extra["session_id"] = event["sessionID"]
            if kind == "text" and part.get("text"):
                texts.append(str(part["text"]))
            elif kind == "tool_use":
                summary.tool_calls += 1
            elif kind == "step_finish":
                summary.turns += 1
                summary.stop_reason = str(part.get("reason") or "") or summary.stop_reason
                tokens = part.get("tokens") or {}
                cache = tokens.get("cache") or {}
                prompt += int(tokens.get("input") or 0) + int(cache.get("read") or 0) + int(cache.get("write") or 0)
                completion += int(tokens.get("output") or 0) + int(tokens.get("reasoning") or 0)
            elif kind == "error":
                summary.stop_reason = "error"
                summary.extra["agent_error"] = json.dumps(event.get("error"))[:2000]
        summary.final_message = texts[-1] if texts else None
        if prompt or completion:
            summary.tokens = {"prompt_tokens": prompt, "completion_tokens": completion}
        return summary
