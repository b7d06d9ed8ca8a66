"""``gemini-cli``: Google's Gemini CLI, ``gemini -p`` with ``--output-format stream-json``, against the
gateway's Gemini API (``GOOGLE_GEMINI_BASE_URL``, ``GEMINI_API_KEY``). It needs Node >= 20, which the bundle
carries. Usage statistics and auto-update are off in its ``settings.json``."""

from __future__ import annotations

import json
import posixpath
from pathlib import Path
from typing import ClassVar

from agentcompass_agents import task_tools
from agentcompass_agents.agents.events import gateway_root, json_lines
from agentcompass_agents.catalog import AGENTS, AgentSpec
from agentcompass_agents.harness import Context, InstalledAgent, Summary


class GeminiCli(InstalledAgent):
    name: ClassVar[str] = "gemini-cli"
    agent: ClassVar[AgentSpec] = AGENTS["gemini-cli"]

    def argv(self, ctx: Context) -> list[str]:
        return ["-p", ctx.instruction, "--output-format", "stream-json", "--yolo", "--model", "agent"]

    def env(self, ctx: Context) -> dict[str, str]:
        return {
            "GOOGLE_GEMINI_BASE_URL": ctx.gateway.get("GOOGLE_GEMINI_BASE_URL") or gateway_root(ctx.gateway),
            "GEMINI_API_KEY": ctx.gateway.get("GEMINI_API_KEY") or ctx.gateway.get("OPENAI_API_KEY", ""),
            "GEMINI_CLI_NO_RELAUNCH": "true",
            # Headless runs refuse an untrusted folder (and --yolo falls back to asking) without this.
            "GEMINI_CLI_TRUST_WORKSPACE": "true",
        }

    def files(self, ctx: Context) -> dict[str, str]:
        settings = {
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "privacy": {"usageStatisticsEnabled": False},
            "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
            "telemetry": {"enabled": False},
            "model": {"maxSessionTurns": ctx.max_turns or -1},
        }
        if ctx.mcp_servers:
            settings["mcpServers"] = task_tools.gemini_cli(ctx.mcp_servers)
        if ctx.skills_dir:
            settings["experimental"] = {"skills": True}
        return {posixpath.join(ctx.home, ".gemini", "settings.json"): json.dumps(settings, indent=2)}

    def summarize(self, stdout: str, files: Path | None) -> Summary:
        summary = Summary()
        texts: list[str] = []
        current: list[str] = []
        for event in json_lines(stdout):
            kind = event.get("type")
            if kind == "init" and event.get("session_id"):
                summary.extra["session_id"] = event["session_id"]
            elif kind == "message" and event.get("role") == "assistant":
                current.append(str(event.get("content") or ""))
            elif kind == "tool_use":
                summary.tool_calls += 1
                summary.turns += 1
                if current:
                    texts.append("".join(current))
                    current = []
            elif kind == "result":
                summary.stop_reason = str(event.get("status") or "") or None
                stats = event.get("stats") or {}
                tokens = {"prompt_tokens": int(stats.get("input_tokens") or 0),
                          "completion_tokens": int(stats.get("output_tokens") or 0)}
                if any(tokens.values()):
                    summary.tokens = tokens
        if current:
            texts.append("".join(current))
            summary.turns += 1
        summary.final_message = texts[-1] if texts else None
        return summary
