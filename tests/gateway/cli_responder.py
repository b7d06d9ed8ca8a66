"""A scripted model that drives Claude Code and Codex CLI to create ``hello.txt`` through their own tools: the
file-writing tool each offers (``Write``; ``apply_patch``; a shell tool), then a short final answer.

Run it as a loopback OpenAI-compatible server to try the CLIs by hand::

    python -m tests.gateway.cli_responder 8765 &
    agentcompass run harbor command openai-compatible/scripted --model-base-url http://127.0.0.1:8765/v1 ...
"""

from __future__ import annotations

import sys
import time
from typing import Any

from agentcompass.testing.scripted_models import LoopbackOpenAI, custom_call, text, tool_call

PATCH = "*** Begin Patch\n*** Add File: hello.txt\n+hello\n*** End Patch\n"


def tool_names(request: dict[str, Any]) -> dict[str, str]:
    out = {}
    for tool in request.get("tools") or ():
        kind = tool.get("type") or "function"
        out[str((tool.get(kind) or tool.get("function") or {}).get("name"))] = kind
    return out


def cli_responder(request: dict[str, Any]) -> dict[str, Any]:
    messages = request.get("messages") or []
    if any(m.get("role") == "tool" for m in messages):
        return text("Created hello.txt.")
    tools = tool_names(request)
    if "Write" in tools:
        return tool_call("Write", "call_write", file_path="/app/hello.txt", content="hello\n")
    if tools.get("apply_patch") == "custom":
        return custom_call("apply_patch", PATCH, "call_patch")
    if "apply_patch" in tools:
        return tool_call("apply_patch", "call_patch", input=PATCH)
    if "shell" in tools:
        return tool_call("shell", "call_shell", command=["bash", "-lc", "echo hello > hello.txt"])
    if "exec_command" in tools:
        return tool_call("exec_command", "call_exec", cmd="echo hello > /app/hello.txt")
    return text("OK")


if __name__ == "__main__":
    import json

    def logged(request: dict[str, Any]) -> dict[str, Any]:
        answer = cli_responder(request)
        print(json.dumps({"tools": tool_names(request), "n": len(request.get("messages") or []),
                          "answer": answer}), flush=True)
        return answer

    server = LoopbackOpenAI(logged, api_key=None)
    server.start()
    print(server.base_url, flush=True)
    if len(sys.argv) > 1:
        pass
    while True:
        time.sleep(3600)
