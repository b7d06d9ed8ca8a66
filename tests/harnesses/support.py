"""Helpers for the harness tests: a loopback OpenAI-compatible server (the kit's ``LoopbackOpenAI``) scripted
as a tool-calling model, and runs of the real lifecycle that use it through the ``openai-compatible``
provider — HTTP, retries, metering and all."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from agentcompass.runtime import BaseBenchmark, TaskSpec, TaskStatus
from agentcompass.testing import LoopbackOpenAI, run_benchmark, text, tool_call
from agentcompass_example_coding import tasks as coding_tasks

MODEL = "openai-compatible/loopback"

CODING_TASKS = ("fizzbuzz", "roman", "is_palindrome", "word_count", "flatten", "merge_intervals")


class Tiny(BaseBenchmark):
    """One task with an instruction (and optionally a time limit); scores 1 when the run completed."""

    name = "tiny"

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.data: dict[str, Any] = {"instruction": "Say hello, then submit."}
        if options.get("limit"):
            self.data["agent_timeout_sec"] = float(options["limit"])
        if options.get("no_instruction"):
            self.data = {}

    def load_tasks(self, req):  # type: ignore[no-untyped-def]
        return [TaskSpec(task_id="t1", data=self.data)]

    async def evaluate(self, task, prepared, result, req, plan, env=None):  # type: ignore[no-untyped-def]
        if result.status is not TaskStatus.COMPLETED:
            return replace(result, metrics={})
        return replace(result, metrics={"score": 1.0})


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


__all__ = ["CODING_TASKS", "MODEL", "Tiny", "assistant_turns", "call", "instruction", "json", "last_tool_output", "run_with", "solver",
           "text", "tool_messages"]


#: An agent that asks the model for the solution through the gateway and writes it: OpenAI's protocol over
#: plain HTTP, with what the harness puts into its environment.
AGENT = r'''
import json, os, sys, urllib.request
task = open(sys.argv[1]).read()
body = {"model": os.environ["AGENTCOMPASS_MODEL"], "messages": [{"role": "user", "content": task}]}
request = urllib.request.Request(os.environ["OPENAI_BASE_URL"].rstrip("/") + "/chat/completions",
                                 data=json.dumps(body).encode(),
                                 headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
                                          "Content-Type": "application/json"})
reply = json.load(urllib.request.urlopen(request, timeout=60))
open("solution.py", "w").write(reply["choices"][0]["message"]["content"])
open(os.environ["AGENTCOMPASS_ANSWER_FILE"], "w").write("wrote solution.py\n")
print("agent done for", os.environ["AGENTCOMPASS_TASK_ID"])
print("warning: nothing wrong", file=sys.stderr)
'''


def answers_with_the_reference(request: dict[str, Any]) -> dict[str, Any]:
    task_id = instruction(request).splitlines()[0].lstrip("# ").strip()
    return text(coding_tasks.by_id(task_id).reference_solution)
