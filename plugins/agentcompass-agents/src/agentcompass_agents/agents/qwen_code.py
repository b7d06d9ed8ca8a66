"""``qwen-code``: Qwen Code, ``qwen -p`` with ``--output-format stream-json``, against the gateway's chat
completions (its OpenAI auth type: ``OPENAI_BASE_URL``, ``OPENAI_API_KEY``, ``OPENAI_MODEL``). Usage
statistics and update checks are off in its ``settings.json``; it learns its deadline (``--max-wall-time``)."""

from __future__ import annotations

import json
import posixpath
from pathlib import Path
from typing import ClassVar

from agentcompass_agents.agents import stream_json
from agentcompass_agents.catalog import AGENTS, AgentSpec
from agentcompass_agents.harness import Context, InstalledAgent, Summary


class QwenCode(InstalledAgent):
    name: ClassVar[str] = "qwen-code"
    agent: ClassVar[AgentSpec] = AGENTS["qwen-code"]
    #: ``--max-wall-time`` passing ends the run with this status.
    out_of_time_statuses: ClassVar[tuple[int, ...]] = (55,)

    def argv(self, ctx: Context) -> list[str]:
        args = ["-p", ctx.instruction, "--output-format", "stream-json", "--yolo", "--auth-type", "openai",
                "--model", "agent"]
        if ctx.max_turns:
            args += ["--max-session-turns", str(ctx.max_turns)]
        own = self.own_deadline(ctx)
        if own:
            args += ["--max-wall-time", f"{own}s"]
        return args

    def env(self, ctx: Context) -> dict[str, str]:
        return {"OPENAI_MODEL": "agent", "QWEN_CODE_NO_RELAUNCH": "1"}

    def files(self, ctx: Context) -> dict[str, str]:
        settings = {
            "security": {"auth": {"selectedType": "openai"}},
            "privacy": {"usageStatisticsEnabled": False},
            "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
            "telemetry": {"enabled": False},
            "model": {"name": "agent"},
        }
        return {posixpath.join(ctx.home, ".qwen", "settings.json"): json.dumps(settings, indent=2)}

    def summarize(self, stdout: str, files: Path | None) -> Summary:
        return stream_json.summarize(stdout)
