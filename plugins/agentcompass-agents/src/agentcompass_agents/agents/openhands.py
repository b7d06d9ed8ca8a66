"""``openhands``: OpenHands headless through its Software Agent SDK (``openhands-sdk`` with ``openhands-tools``,
the packages the OpenHands CLI is built on): the CLI's default agent (OpenHands' system prompt, its terminal,
file-editor and task-tracker tools, its condenser) on the task's working directory, driven by
``agentcompass-openhands`` (:mod:`agentcompass_agents.drivers.openhands_driver`, shipped in the bundle). It calls
the gateway's chat completions through LiteLLM's OpenAI provider (``LLM_BASE_URL``, ``LLM_API_KEY``,
``openai/agent``). The SDK needs Python >= 3.12: the bundle carries a CPython built from Debian's source.
Nothing at start reaches the network (checked when the bundle is built): LiteLLM reads its own model-cost map
(``LITELLM_LOCAL_MODEL_COST_MAP``), the browser tools are off (CLI mode), observability is off (no ``LMNR_*``
or ``OTEL_*`` endpoint is set). The conversation's event files (``persistence_dir``) are the trajectory."""

from __future__ import annotations

import json
import posixpath
from pathlib import Path
from typing import Any, ClassVar

from agentcompass_agents.agents.events import files_under
from agentcompass_agents.catalog import AGENTS, AgentSpec
from agentcompass_agents.harness import Context, InstalledAgent, Summary

MODEL = "openai/agent"
PERSISTENCE = "conversations"
#: Variables that would switch on OpenHands' tracing (to an outside collector): never passed to the agent.
OBSERVABILITY_OFF = {"LMNR_PROJECT_API_KEY": "", "OTEL_ENDPOINT": "", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "",
                     "OTEL_EXPORTER_OTLP_ENDPOINT": ""}


class OpenHands(InstalledAgent):
    name: ClassVar[str] = "openhands"
    agent: ClassVar[AgentSpec] = AGENTS["openhands"]

    def argv(self, ctx: Context) -> list[str]:
        args = ["--instruction-file", ctx.instruction_file, "--workspace", ctx.workdir,
                "--persistence-dir", posixpath.join(ctx.agent_dir, PERSISTENCE)]
        if ctx.max_turns:
            args += ["--max-iterations", str(ctx.max_turns)]
        return args

    def env(self, ctx: Context) -> dict[str, str]:
        return {
            "LLM_BASE_URL": ctx.gateway.get("OPENAI_BASE_URL", ""),
            "LLM_API_KEY": ctx.gateway.get("OPENAI_API_KEY", ""),
            "LLM_MODEL": MODEL,
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "OPENHANDS_SUPPRESS_BANNER": "1",
            **OBSERVABILITY_OFF,
        }

    def summarize(self, stdout: str, files: Path | None) -> Summary:
        summary = Summary()
        for path in files_under(files, "result.json"):
            result = json.loads(path.read_text(encoding="utf-8"))
            summary.stop_reason = str(result.get("status") or "") or None
            summary.extra["conversation_id"] = result.get("conversation_id")
            if result.get("error"):
                summary.extra["agent_error"] = result["error"]
            if result.get("prompt_tokens") or result.get("completion_tokens"):
                summary.tokens = {"prompt_tokens": int(result.get("prompt_tokens") or 0),
                                  "completion_tokens": int(result.get("completion_tokens") or 0)}
        events = [json.loads(p.read_text(encoding="utf-8")) for p in files_under(files, "event-*.json")]
        events.sort(key=lambda e: str(e.get("timestamp") or ""))
        responses: set[str] = set()
        errors: list[str] = []
        for event in events:
            kind = event.get("kind")
            if kind == "ActionEvent":
                summary.tool_calls += 1
                responses.add(str(event.get("llm_response_id")))
                action = event.get("action") or {}
                if event.get("tool_name") == "finish" and action.get("message"):
                    summary.final_message = str(action["message"])
            elif kind == "MessageEvent" and event.get("source") == "agent":
                responses.add(str(event.get("llm_response_id") or event.get("id")))
                text = _text(event.get("llm_message") or {})
                if text:
                    summary.final_message = text
            elif kind in ("ConversationErrorEvent", "AgentErrorEvent"):
                errors.append(str(event.get("detail") or event.get("error") or kind))
        summary.turns = len(responses)
        if errors:
            summary.extra["agent_errors"] = errors[-3:]
        return summary


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text") or "") for part in content if isinstance(part, dict))
    return ""
