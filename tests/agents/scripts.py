"""Scripted models that drive an installed agent through its own tools, whatever it calls them: write a file
with its shell tool, run a command, read the result, finish. One responder serves every chat-completions
agent (the gateway translates for the others); aider, which edits through text, gets its edit format."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentcompass.testing import text

#: Shell tools by name, as each agent offers them.
SHELL_TOOLS = ("bash", "Bash", "run_shell_command", "shell", "exec_command", "local_shell", "terminal")
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


@dataclass
class Job:
    """What the scripted agent does: write ``path`` with ``content``, run ``check``, then finish."""

    path: str
    content: str
    check: str
    #: Commands before the write (e.g. ``sleep 600`` to run into a deadline).
    before: Sequence[str] = ()
    #: The command that ends the agent's work, for agents that finish through a command (mini-swe-agent).
    finish: str | None = None
    #: Outputs of the tool calls, as the model saw them (to assert on what the agent ran).
    outputs: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def commands(self) -> list[str]:
        write = f"cat > {self.path} <<'AGENTCOMPASS_EOF'\n{self.content}\nAGENTCOMPASS_EOF"
        return [*self.before, write, self.check, *([self.finish] if self.finish else [])]


def _tool_names(request: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    out = {}
    for tool in request.get("tools") or []:
        function = tool.get("function") or tool
        if function.get("name"):
            out[str(function["name"])] = function.get("parameters") or {}
    return out


def _shell_arguments(name: str, schema: Mapping[str, Any], command: str) -> dict[str, Any]:
    properties = schema.get("properties") or {}
    if name == "shell":
        return {"command": ["bash", "-lc", command]}
    if "cmd" in properties and "command" not in properties:
        return {"cmd": command}
    arguments: dict[str, Any] = {"command": command}
    if "description" in properties:
        arguments["description"] = "run a command"
    return arguments


def _turns(messages: Sequence[Mapping[str, Any]]) -> int:
    return sum(1 for m in messages if m.get("role") == "assistant" and m.get("tool_calls"))


def _last_tool_output(messages: Sequence[Mapping[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "tool":
            content = message.get("content")
            if isinstance(content, list):
                return "".join(str(p.get("text") or "") for p in content if isinstance(p, dict))
            return str(content or "")
    return ""


def tool_agent(job: Job) -> Any:
    """A responder for agents with a shell tool. Calls without tools (titles, summaries) get a short text."""

    def responder(request: dict[str, Any]) -> dict[str, Any]:
        tools = _tool_names(request)
        shell = next((n for n in SHELL_TOOLS if n in tools), None)
        messages = request.get("messages") or []
        if shell is None:
            return text("ok")
        turn = _turns(messages)
        with job.lock:
            if turn:
                job.outputs.append(_last_tool_output(messages))
        commands = job.commands()
        if turn >= len(commands):
            return text(f"Done. The check said: {_last_tool_output(messages).strip()[:200]}")
        command = commands[turn]
        arguments = _shell_arguments(shell, tools[shell], command)
        return {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{turn + 1}", "type": "function",
             "function": {"name": shell, "arguments": json.dumps(arguments)}}]}

    return responder



def aider_whole(job: Job) -> Any:
    """A responder answering aider in its ``whole`` edit format: ``job.path``, then its whole content. Aider
    runs no shell tool; it runs its test command (``--test-cmd``, here ``job.check``) after the edit and, when
    that fails, shows the model its output: that output is kept in ``job.outputs``, and the model finishes."""

    def responder(request: dict[str, Any]) -> dict[str, Any]:
        messages = request.get("messages") or []
        if _edited(messages):
            with job.lock:
                job.outputs.append(_content(messages[-1]) if messages else "")
            return text("Done.")
        return text(f"I will write the file.\n\n{job.path}\n```\n{job.content}\n```\n")

    return responder


def _content(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(str(p.get("text") or "") for p in content if isinstance(p, dict))
    return str(content or "")


def _edited(messages: Sequence[Mapping[str, Any]]) -> bool:
    return any("I will write the file." in _content(m) for m in messages if m.get("role") == "assistant")
