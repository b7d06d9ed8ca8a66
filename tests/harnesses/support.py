"""Helpers for the harness tests: a loopback OpenAI-compatible server (the kit's ``LoopbackOpenAI``) scripted
as a tool-calling model, and runs of the real lifecycle that use it through the ``openai-compatible``
provider — HTTP, retries, metering and all."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from agentcompass.testing import LoopbackOpenAI, run_benchmark, text, tool_call
from agentcompass_example_coding import tasks as coding_tasks

MODEL = "openai-compatible/loopback"

Request = dict[str, Any]


def assistant_turns(request: Request) -> int:
    """How many assistant messages the conversation already has."""
    return sum(1 for m in request["messages"] if m.get("role") == "assistant")


def last_tool_output(request: Request) -> str:
    tools = [m for m in request["messages"] if m.get("role") == "tool"]
    return str(tools[-1]["content"]) if tools else ""


def instruction(request: Request) -> str:
    return next(str(m["content"]) for m in request["messages"] if m.get("role") == "user")


def call(name: str, n: int = 1, **arguments: Any) -> dict[str, Any]:
    return tool_call(name, call_id=f"call_{n}", **arguments)


def solver(request: Request) -> dict[str, Any]:
    """Solves an ``example_coding`` task like a careful agent: writes the reference solution, checks that it
    imports, submits."""
    turn = assistant_turns(request)
    task_id = instruction(request).splitlines()[0].lstrip("# ").strip()
    if turn == 0:
        return call("write_file", 1, path="solution.py", content=coding_tasks.by_id(task_id).reference_solution)
    if turn == 1:
        return call("bash", 2, command="python3 -c 'import solution' && echo imported")
    return call("submit", 3, answer=f"solved {task_id}")


async def run_with(responder: Callable[[Request], Any], benchmark: Any, harness: str = "react", **kwargs: Any):  # type: ignore[no-untyped-def]
    """Run ``benchmark`` under ``harness`` against a loopback server answering with ``responder``; returns
    ``(run, server)``."""
    kwargs.setdefault("max_retries", 0)
    with LoopbackOpenAI(responder, api_key=None) as server:
        run = await run_benchmark(benchmark, harness, MODEL, model_base_url=server.base_url, **kwargs)
    return run, server


def tool_messages(request: Request) -> list[str]:
    return [str(m["content"]) for m in request["messages"] if m.get("role") == "tool"]


__all__ = ["MODEL", "assistant_turns", "call", "instruction", "json", "last_tool_output", "run_with", "solver",
           "text", "tool_messages"]
