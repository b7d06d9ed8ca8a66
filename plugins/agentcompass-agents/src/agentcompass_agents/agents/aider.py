"""``aider``: Aider, ``aider --message`` (one instruction, then exit), against the gateway's chat completions
through litellm's OpenAI provider (``openai/agent``). It edits files through its edit format (``whole`` by
default here, ``--harness-arg edit_format=`` to change it) and works without git. Nothing at start reaches the
network: analytics, the update check and the release notes are off; tiktoken's encodings come from the copy
litellm ships in the bundle (``TIKTOKEN_CACHE_DIR``, checked when the bundle is built); litellm reads its own
model-cost map (``LITELLM_LOCAL_MODEL_COST_MAP``), and aider's model-info download is answered by a fresh cache
file in its ``HOME`` naming the gateway's model. Its chat history and the LLM history file (every message sent
and received) are the trajectory."""

from __future__ import annotations

import json
import posixpath
import re
from pathlib import Path
from typing import ClassVar

from agentcompass_agents.agents.events import files_under
from agentcompass_agents.catalog import AGENTS, TIKTOKEN_CACHE, AgentSpec
from agentcompass_agents.harness import Context, InstalledAgent, Summary

_ROLE = re.compile(r"^(USER|ASSISTANT|SYSTEM) ", re.M)
#: Aider's report after each call (counts of 1000 and more are rounded: "2.3k", "12k").
_TOKENS = re.compile(r"^Tokens: ([\d.]+k?) sent(?:, ([\d.]+k?) cache write)?(?:, ([\d.]+k?) cache hit)?, "
                     r"([\d.]+k?) received", re.M)
MODEL = "openai/agent"
#: What aider knows of the gateway's model (its model-info cache would otherwise be downloaded at start).
MODEL_INFO = {"max_input_tokens": 128000, "max_output_tokens": 8192, "max_tokens": 8192, "input_cost_per_token": 0.0,
              "output_cost_per_token": 0.0, "litellm_provider": "openai", "mode": "chat"}


class Aider(InstalledAgent):
    name: ClassVar[str] = "aider"
    agent: ClassVar[AgentSpec] = AGENTS["aider"]
    agent_options: ClassVar[tuple[str, ...]] = ("edit_format",)

    def argv(self, ctx: Context) -> list[str]:
        return [
            "--message-file", ctx.instruction_file,
            "--model", MODEL,
            "--openai-api-base", ctx.gateway.get("OPENAI_BASE_URL", ""),
            "--edit-format", str(self.options.get("edit_format") or "whole"),
            "--yes-always", "--no-git", "--no-auto-commits", "--no-dirty-commits", "--no-check-update",
            "--analytics-disable", "--no-show-model-warnings", "--no-pretty", "--no-stream", "--no-fancy-input",
            "--no-detect-urls", "--no-suggest-shell-commands", "--no-show-release-notes",
            "--chat-history-file", posixpath.join(ctx.agent_dir, "chat.history.md"),
            "--input-history-file", posixpath.join(ctx.agent_dir, "input.history"),
            "--llm-history-file", posixpath.join(ctx.agent_dir, "llm.history"),
        ]

    def env(self, ctx: Context) -> dict[str, str]:
        env = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "AIDER_CHECK_UPDATE": "false", "AIDER_ANALYTICS": "false"}
        if ctx.bundle:
            tokenizers = posixpath.join(ctx.bundle, "pkg", TIKTOKEN_CACHE)
            env |= {"TIKTOKEN_CACHE_DIR": tokenizers, "CUSTOM_TIKTOKEN_CACHE_DIR": tokenizers}
        return env

    def files(self, ctx: Context) -> dict[str, str]:
        cache = posixpath.join(ctx.home, ".aider", "caches", "model_prices_and_context_window.json")
        return {cache: json.dumps({MODEL: MODEL_INFO}, indent=2)}

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
        reports = _TOKENS.findall(stdout)
        if reports:
            counts = [(sent, received) for sent, _write, _hit, received in reports]
            if any(value.endswith("k") for pair in counts for value in pair):
                summary.extra["agent_tokens_rounded"] = [{"sent": s, "received": r} for s, r in counts]
            else:
                summary.tokens = {"prompt_tokens": sum(int(s) for s, _ in counts),
                                  "completion_tokens": sum(int(r) for _, r in counts)}
        return summary
