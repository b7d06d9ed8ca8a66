"""``claude-code``: Anthropic's Claude Code, ``claude -p`` with ``--output-format stream-json``, against the
gateway's Anthropic Messages endpoint (``ANTHROPIC_BASE_URL``). As root it needs ``IS_SANDBOX=1`` for
``--dangerously-skip-permissions``; ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC`` keeps it off the network.
Every model name it asks for (its haiku/sonnet/opus aliases too) is the run's agent model at the gateway."""

from __future__ import annotations

import json
import posixpath
from pathlib import Path
from typing import ClassVar

from agentcompass_agents import task_tools
from agentcompass_agents.agents import stream_json
from agentcompass_agents.agents.events import gateway_root
from agentcompass_agents.catalog import AGENTS, AgentSpec
from agentcompass_agents.harness import Context, InstalledAgent, Summary

#: The name Claude Code asks for (it refuses names it does not know); the gateway maps every name it does not
#: serve, this one and the haiku model of its side tasks alike, to the run's agent model.
MODEL = "sonnet"


class ClaudeCode(InstalledAgent):
    name: ClassVar[str] = "claude-code"
    agent: ClassVar[AgentSpec] = AGENTS["claude-code"]

    def argv(self, ctx: Context) -> list[str]:
        args = ["-p", ctx.instruction, "--output-format", "stream-json", "--verbose",
                "--dangerously-skip-permissions", "--model", MODEL]
        if ctx.max_turns:
            args += ["--max-turns", str(ctx.max_turns)]
        return args

    def env(self, ctx: Context) -> dict[str, str]:
        root = ctx.gateway.get("ANTHROPIC_BASE_URL") or gateway_root(ctx.gateway)
        token = ctx.gateway.get("ANTHROPIC_API_KEY") or ctx.gateway.get("OPENAI_API_KEY", "")
        return {
            "ANTHROPIC_BASE_URL": root,
            "ANTHROPIC_API_KEY": token,
            "IS_SANDBOX": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "DISABLE_AUTOUPDATER": "1",
        }

    def files(self, ctx: Context) -> dict[str, str]:
        if not ctx.mcp_servers:
            return {}
        return {posixpath.join(ctx.home, ".claude.json"): json.dumps(task_tools.claude_code(ctx.mcp_servers))}

    def summarize(self, stdout: str, files: Path | None) -> Summary:
        return stream_json.summarize(stdout)
