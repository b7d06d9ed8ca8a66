"""``codex``: OpenAI's Codex CLI, ``codex exec --json``, against the gateway's Responses endpoint: a model
provider in ``$CODEX_HOME/config.toml`` (``base_url`` the gateway, ``env_key`` the attempt's token,
``wire_api = "responses"``), approvals and its own sandbox off (the task's container is the sandbox). Its
``exec --json`` events (``item.completed`` messages and commands, ``turn.completed`` usage) are the
trajectory; its session files land under ``$CODEX_HOME/sessions``."""

from __future__ import annotations

import posixpath
from pathlib import Path
from typing import ClassVar

from agentcompass_agents import task_tools
from agentcompass_agents.agents.events import json_lines
from agentcompass_agents.catalog import AGENTS, AgentSpec
from agentcompass_agents.harness import Context, InstalledAgent, Summary

TOOL_ITEMS = ("command_execution", "file_change", "mcp_tool_call", "web_search", "function_call",
              "custom_tool_call")


class Codex(InstalledAgent):
    name: ClassVar[str] = "codex"
    agent: ClassVar[AgentSpec] = AGENTS["codex"]
    agent_options: ClassVar[tuple[str, ...]] = ("reasoning_effort",)

    def argv(self, ctx: Context) -> list[str]:
        args = ["exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox",
                "--cd", ctx.workdir]
        effort = self.options.get("reasoning_effort")
        if effort:
            args += ["-c", f'model_reasoning_effort="{effort}"']
        return [*args, ctx.instruction]

    def env(self, ctx: Context) -> dict[str, str]:
        return {"CODEX_HOME": posixpath.join(ctx.home, ".codex")}

    def files(self, ctx: Context) -> dict[str, str]:
        base = ctx.gateway.get("OPENAI_BASE_URL", "")
        config = (
            'model = "agent"\n'
            'model_provider = "agentcompass"\n'
            'approval_policy = "never"\n'
            'sandbox_mode = "danger-full-access"\n'
            "check_for_update_on_startup = false\n"
            "[analytics]\nenabled = false\n"
            "[otel]\nexporter = \"none\"\n"
            "[model_providers.agentcompass]\n"
            'name = "agentcompass gateway"\n'
            f'base_url = "{base}"\n'
            'env_key = "OPENAI_API_KEY"\n'
            'wire_api = "responses"\n'
        )
        config += task_tools.codex_toml(ctx.mcp_servers)
        return {posixpath.join(ctx.home, ".codex", "config.toml"): config}

    def summarize(self, stdout: str, files: Path | None) -> Summary:
        summary = Summary()
        prompt = completion = 0
        for event in json_lines(stdout):
            kind = event.get("type")
            item = event.get("item") or {}
            if kind == "thread.started" and event.get("thread_id"):
                summary.extra["session_id"] = event["thread_id"]
            elif kind == "item.completed":
                if item.get("type") == "agent_message" and item.get("text"):
                    summary.final_message = str(item["text"])
                elif item.get("type") in TOOL_ITEMS:
                    summary.tool_calls += 1
            elif kind == "turn.completed":
                summary.turns += 1
                summary.stop_reason = "completed"
                usage = event.get("usage") or {}
                prompt += int(usage.get("input_tokens") or 0)
                completion += int(usage.get("output_tokens") or 0)
            elif kind in ("turn.failed", "error"):
                summary.stop_reason = "error"
                summary.extra["agent_error"] = str(event.get("error") or event.get("message"))[:2000]
        if prompt or completion:
            summary.tokens = {"prompt_tokens": prompt, "completion_tokens": completion}
        return summary
