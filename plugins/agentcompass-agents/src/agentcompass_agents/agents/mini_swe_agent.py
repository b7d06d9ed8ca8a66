"""``mini-swe-agent``: mini-SWE-agent 2.x, ``mini --agent-class default`` (non-interactive, yolo) with its
``mini.yaml`` configuration, calling a ``bash`` tool over the gateway's chat completions through litellm
(``openai/agent``). Its trajectory file (``-o``: every message, the exit status and the submission) is the
trajectory. It learns its deadline (``agent.wall_time_limit_seconds``). The first-run wizard, cost tracking
of unknown models and litellm's model-price download are off."""

from __future__ import annotations

import json
import posixpath
from pathlib import Path
from typing import ClassVar

from agentcompass_agents.agents.events import files_under
from agentcompass_agents.catalog import AGENTS, AgentSpec
from agentcompass_agents.harness import Context, InstalledAgent, Summary

TRAJECTORY = "trajectory.json"


class MiniSweAgent(InstalledAgent):
    name: ClassVar[str] = "mini-swe-agent"
    agent: ClassVar[AgentSpec] = AGENTS["mini-swe-agent"]
    agent_options: ClassVar[tuple[str, ...]] = ("config",)

    def argv(self, ctx: Context) -> list[str]:
        args = ["--agent-class", "default", "-y", "--exit-immediately", "-m", "openai/agent", "-l", "0",
                "-o", posixpath.join(ctx.agent_dir, TRAJECTORY), "-c", str(self.options.get("config") or "mini.yaml"),
                "-t", ctx.instruction]
        if ctx.max_turns:
            args += ["-c", f"agent.step_limit={ctx.max_turns}"]
        own = self.own_deadline(ctx)
        if own:
            args += ["-c", f"agent.wall_time_limit_seconds={own}"]
        return args

    def env(self, ctx: Context) -> dict[str, str]:
        return {
            "MSWEA_CONFIGURED": "true",
            "MSWEA_COST_TRACKING": "ignore_errors",
            "MSWEA_SILENT_STARTUP": "1",
            "MSWEA_GLOBAL_CONFIG_DIR": posixpath.join(ctx.home, ".config", "mini-swe-agent"),
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        }

    def summarize(self, stdout: str, files: Path | None) -> Summary:
        summary = Summary()
        found = files_under(files, TRAJECTORY)
        if not found:
            return summary
        data = json.loads(found[0].read_text(encoding="utf-8"))
        info = data.get("info") or {}
        summary.stop_reason = str(info.get("exit_status") or "") or None
        summary.out_of_time = summary.stop_reason == "TimeExceeded"
        summary.final_message = info.get("submission") or None
        messages = data.get("messages") or []
        assistant = [m for m in messages if isinstance(m, dict) and m.get("role") == "assistant"]
        summary.turns = len(assistant)
        summary.tool_calls = sum(len(m.get("tool_calls") or []) for m in assistant)
        stats = info.get("model_stats") or {}
        if stats.get("api_calls") is not None:
            summary.extra["agent_api_calls"] = stats["api_calls"]
        if not summary.final_message and assistant:
            summary.final_message = str(assistant[-1].get("content") or "") or None
        return summary
