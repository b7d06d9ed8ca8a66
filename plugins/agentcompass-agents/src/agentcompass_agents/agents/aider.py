"""``aider``: Aider, ``aider --message`` (one instruction, then exit), against the gateway's chat completions
through litellm's OpenAI provider (``openai/agent``). It edits files through its edit format (``whole`` by
default here, ``--harness-arg edit_format=`` to change it) and works without git; analytics, update checks and
litellm's model-price download are off. Its chat history and the LLM history file (every message sent and
received) are the trajectory."""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import ClassVar

from agentcompass_agents.agents.events import files_under
from agentcompass_agents.catalog import AGENTS, AgentSpec
from agentcompass_agents.harness import Context, InstalledAgent, Summary

_ROLE = re.compile(r"^(USER|ASSISTANT|SYSTEM) ", re.M)


class Aider(InstalledAgent):
    name: ClassVar[str] = "aider"
    agent: ClassVar[AgentSpec] = AGENTS["aider"]
    agent_options: ClassVar[tuple[str, ...]] = ("edit_format",)

    def argv(self, ctx: Context) -> list[str]:
        return [
            "--message-file", ctx.instruction_file,
            "--model", "openai/agent",
            "--openai-api-base", ctx.gateway.get("OPENAI_BASE_URL", ""),
            "--edit-format", str(self.options.get("edit_format") or "whole"),
            "--yes-always", "--no-git", "--no-auto-commits", "--no-dirty-commits", "--no-check-update",
            "--analytics-disable", "--no-show-model-warnings", "--no-pretty", "--no-stream", "--no-fancy-input",
            "--no-detect-urls", "--no-suggest-shell-commands",
            "--chat-history-file", posixpath.join(ctx.agent_dir, "chat.history.md"),
            "--input-history-file", posixpath.join(ctx.agent_dir, "input.history"),
            "--llm-history-file", posixpath.join(ctx.agent_dir, "llm.history"),
        ]

    def env(self, ctx: Context) -> dict[str, str]:
        return {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "AIDER_CHECK_UPDATE": "false",
                "AIDER_ANALYTICS": "false"}

    def summarize(self, stdout: str, files: Path | None) -> Summary:
        summary = Summary(stop_reason="completed")
        history = files_under(files, "llm.history")
        if history:
            text = history[0].read_text(encoding="utf-8", errors="replace")
            # Each call logs its messages (TO LLM) and the reply (LLM RESPONSE).
            summary.turns = text.count("LLM RESPONSE")
            replies = text.split("LLM RESPONSE")
            if len(replies) > 1:
                last = replies[-1].split("\n", 1)[1] if "\n" in replies[-1] else replies[-1]
                summary.final_message = _ROLE.sub("", last).strip() or None
        chat = files_under(files, "chat.history.md")
        if chat:
            summary.tool_calls = chat[0].read_text(encoding="utf-8", errors="replace").count("> Applied edit to")
        return summary
