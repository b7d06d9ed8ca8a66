"""Test support for taubench: the packaged data, fresh environments, scripted participants and conversations,
and responders for the kit's loopback OpenAI server playing the agent, the user and the judge."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from taubench_runner import tasks as task_fields
from taubench_runner.environment import Environment
from taubench_runner.prompts import STOP
from tb_variants import (  # noqa: F401 - re-exported for the tests
    DOMAINS,
    ROOT,
    SRC,
    ScriptedAgent,
    StopUser,
    converse,
    domain_data,
    environment,
    fake_judge,
    oracle,
    score,
    tasks,
    variants,
    write_actions,
    wrong_argument,
)

SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
SNAPSHOT = SNAPSHOTS / "upstream.json"
REWARDS_SNAPSHOT = SNAPSHOTS / "upstream_rewards.json"
#: The tasks whose gold actions do not satisfy their own criteria, and why (the plugin README lists them).
ORACLE_EXCEPTIONS = {
    "mock/update_task_with_history_and_env_assertions": "no gold actions; its env assertion wants task_2 completed",
    "mock/update_task_with_user_tools": "the env assertion wants the user's notification read, which no gold "
                                        "action does (the user would have to dismiss it)",
}


def call(env: Environment, name: str, requestor: str = "assistant", **arguments: Any) -> dict[str, Any]:
    """One tool call through the environment; the tool message."""
    return env.get_response({"id": "t1", "name": name, "arguments": arguments, "requestor": requestor})


def content(env: Environment, name: str, **arguments: Any) -> Any:
    """A successful call's result, parsed; a failing one raises AssertionError with its message."""
    message = call(env, name, **arguments)
    assert not message["error"], message["content"]
    try:
        return json.loads(message["content"])
    except ValueError:
        return message["content"]


def raw(env: Environment, name: str, **arguments: Any) -> str:
    """A successful call's result text, as the model reads it."""
    message = call(env, name, **arguments)
    assert not message["error"], message["content"]
    return message["content"]


def error(env: Environment, name: str, requestor: str = "assistant", **arguments: Any) -> str:
    message = call(env, name, requestor, **arguments)
    assert message["error"], message["content"]
    return message["content"]


# -- the runner as a subprocess -----------------------------------------------------------------------


def request_for(domain: str, task: Mapping[str, Any], **fields: Any) -> dict[str, Any]:
    return {
        "domain": domain, "task": task, "data_dir": str(ROOT / "domains" / domain),
        "guidelines_dir": str(ROOT / "user_simulator"), "agent": {"model": "agent-model"},
        "user": {"model": "user-model"}, **fields,
    }


def run_runner(workdir: Path, command: str, request: Mapping[str, Any], env: Mapping[str, str] | None = None,
               trajectory: Path | None = None, timeout: float = 120) -> tuple[subprocess.CompletedProcess[str], Any]:
    """``python3 -m taubench_runner COMMAND`` in ``workdir``; the process and its output JSON (or None)."""
    request_path = workdir / "request.json"
    request_path.write_text(json.dumps(request))
    output = workdir / f"{command}.json"
    argv = [sys.executable, "-m", "taubench_runner", command, "--request", str(request_path), "--output", str(output)]
    if trajectory is not None:
        argv += ["--trajectory", str(trajectory)]
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    child_env.update(env or {})
    child_env["PYTHONPATH"] = str(SRC)
    proc = subprocess.run(argv, cwd=workdir, env=child_env, capture_output=True, text=True, timeout=timeout)
    payload = json.loads(output.read_text()) if output.exists() else None
    return proc, payload


# -- responders for the loopback server ---------------------------------------------------------------

TASK_MARK = re.compile(r"\[task ([^\]]+)\]")


def approving_judge(messages: list[dict[str, Any]]) -> str:
    """A judge that finds every assertion met."""
    user = messages[-1]["content"]
    assertions = eval(user.rsplit("expectedOutcomes:\n", 1)[1].strip())
    return json.dumps({"results": [{"expectedOutcome": a, "reasoning": "ok", "metExpectation": True}
                                   for a in assertions]})


def role_of(body: Mapping[str, Any]) -> str:
    """Which role a chat request is for, from its system prompt: ``agent``, ``user`` or ``judge``."""
    system = str(body["messages"][0].get("content") or "")
    if system.startswith("<instructions>\nYou are a customer service agent"):
        return "agent"
    if "<scenario>" in system:
        return "user"
    if "expected outcomes" in system:
        return "judge"
    raise AssertionError(f"a request for no known role: {system[:80]!r}")


def role_responder(
    *, wrong: bool = False, judge: Callable[[list[dict[str, Any]]], str] = fake_judge,
    requests: list[dict[str, Any]] | None = None, among: Sequence[str] | None = None,
) -> Callable[[dict[str, Any]], Any]:
    """One responder playing three roles (told apart by their system prompts): the user states its task
    (``[task DOMAIN/ID]``, found from its scenario) and stops when the agent is done; the agent replays the
    task's gold actions as tool calls (with a wrong argument in the last write when ``wrong``), one per
    message, then says it is done with what the task expects communicated; the judge is ``judge``. Requests
    are appended to ``requests`` when given; ``among`` (``DOMAIN/ID`` ids) tells apart tasks that share a
    scenario."""

    def respond(body: dict[str, Any]) -> Any:
        if requests is not None:
            requests.append(body)
        messages = body["messages"]
        role = role_of(body)
        if role == "judge":
            return {"content": judge(messages)}
        if role == "user":
            domain, task_id = task_of_user(messages[0]["content"], among)
            heard = [m for m in messages[1:] if m["role"] == "user"]  # the agent's texts, as the user sees them
            if heard and "All done" in str(heard[-1].get("content")):
                return {"content": STOP}
            return {"content": f"[task {domain}/{task_id}] Hello, I need help."}
        first_user = next(m for m in messages if m["role"] == "user")
        found = TASK_MARK.search(str(first_user.get("content")))
        if found is None:
            return {"content": "How can I help?"}
        domain, task_id = found.group(1).split("/", 1)
        task = tasks(domain)[task_id]
        actions = [a for a in task_fields.gold_actions(task) if a["requestor"] == "assistant"]
        if wrong:
            writes = write_actions(domain, task)
            if writes:
                i = max(i for i, a in enumerate(actions) if a == writes[-1])
                actions[i] = wrong_argument(actions[i])
        done = sum(len(m.get("tool_calls") or ()) for m in messages if m["role"] == "assistant")
        if done < len(actions):
            action = actions[done]
            return {"content": None, "tool_calls": [{
                "id": f"call_{done}", "type": "function",
                "function": {"name": action["name"], "arguments": json.dumps(action["arguments"])}}]}
        info = (task_fields.criteria(task) or {}).get("communicate_info") or ()
        return {"content": " ".join(["All done.", *info])}

    return respond


def task_of_user(system_prompt: str, among: Sequence[str] | None = None) -> tuple[str, str]:
    """The (domain, task id) whose scenario the user simulator was given (one of ``among`` when given)."""
    scenario = system_prompt.split("<scenario>\n", 1)[1].rsplit("\n</scenario>", 1)[0]
    found = [(domain, task_id) for domain in DOMAINS for task_id, task in tasks(domain).items()
             if task_fields.scenario_text(task) == scenario
             and (among is None or f"{domain}/{task_id}" in among)]
    if len(found) != 1:
        raise AssertionError(f"{len(found)} tasks have this scenario: {found}")
    return found[0]
