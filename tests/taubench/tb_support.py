"""Test support for taubench: the packaged data, fresh environments, scripted participants and conversations,
and responders for the kit's loopback OpenAI server playing the agent, the user and the judge."""

from __future__ import annotations

import copy
import functools
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from agentcompass_taubench.data import packaged_root
from taubench_runner import tasks as task_fields
from taubench_runner.domains import DomainData, normalized_db_text
from taubench_runner.environment import Environment
from taubench_runner.evaluator import evaluate
from taubench_runner.orchestrator import OracleAgent, OraclePlan, OracleUser, Orchestrator
from taubench_runner.prompts import STOP

ROOT = packaged_root()
SRC = Path(__file__).resolve().parents[2] / "plugins" / "agentcompass-taubench" / "src"
DOMAINS = ("mock", "airline", "retail")
SNAPSHOT = Path(__file__).resolve().parent / "snapshots" / "upstream.json"
#: The tasks whose gold actions do not satisfy their own criteria, and why (the plugin README lists them).
ORACLE_EXCEPTIONS = {
    "mock/update_task_with_history_and_env_assertions": "no gold actions; its env assertion wants task_2 completed",
    "mock/update_task_with_user_tools": "the env assertion wants the user's notification read, which no gold "
                                        "action does (the user would have to dismiss it)",
}


@functools.cache
def tasks(domain: str) -> dict[str, dict[str, Any]]:
    raw = json.loads((ROOT / "domains" / domain / "tasks.json").read_text())
    return {t["id"]: t for t in raw}


@functools.cache
def domain_data(domain: str) -> DomainData:
    """The domain's data, its databases normalised once (as the staging directory ships them)."""
    data = DomainData.load(domain, str(ROOT / "domains" / domain))
    normalized = normalized_db_text(domain, str(ROOT / "domains" / domain))
    data.db_text = normalized["db.json"]
    data.user_db_text = normalized.get("user_db.json")
    data.trusted = True
    return data


def environment(domain: str, task: Mapping[str, Any] | None = None) -> Environment:
    """A fresh environment, in the task's initial state when a task is given."""
    env = domain_data(domain).environment()
    if task is not None:
        state = task_fields.initial_state(task)
        env.set_state(state.get("initialization_data"), state.get("initialization_actions"),
                      task_fields.message_history(task))
    return env


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


def error(env: Environment, name: str, requestor: str = "assistant", **arguments: Any) -> str:
    message = call(env, name, requestor, **arguments)
    assert message["error"], message["content"]
    return message["content"]


# -- scripted participants -----------------------------------------------------------------------------


class ScriptedAgent:
    """Sends the given tool calls one per message, then ``final`` as text."""

    def __init__(self, actions: Sequence[Mapping[str, Any]], final: str = "All done.") -> None:
        self.actions = [dict(a) for a in actions]
        self.final = final
        self.seen: list[Any] = []

    def init_state(self, history: Sequence[Any]) -> None:
        pass

    def next(self, incoming: Any) -> dict[str, Any]:
        self.seen.append(incoming)
        if self.actions:
            action = self.actions.pop(0)
            n = len(self.seen)
            return {"role": "assistant", "content": None, "tool_calls": [
                {"id": f"s{n}", "name": action["name"], "arguments": dict(action["arguments"]),
                 "requestor": "assistant"}]}
        return {"role": "assistant", "content": self.final, "tool_calls": None}


class StopUser:
    """States a request, then stops once the agent has sent ``final`` (or after ``turns`` replies)."""

    def __init__(self, final: str = "All done.", turns: int = 100) -> None:
        self.final, self.turns = final, turns
        self.seen: list[Any] = []

    def init_state(self, history: Sequence[Any]) -> None:
        pass

    def next(self, incoming: Any) -> dict[str, Any]:
        self.seen.append(incoming)
        if len(self.seen) > self.turns or (isinstance(incoming, dict) and incoming.get("content") == self.final):
            return {"role": "user", "content": STOP, "tool_calls": None}
        return {"role": "user", "content": "Please help me with my request.", "tool_calls": None}


def converse(domain: str, task: Mapping[str, Any], agent: Any, user: Any, **limits: Any) -> dict[str, Any]:
    return Orchestrator(environment(domain), task, agent, user, **limits).run()


def oracle(domain: str, task: Mapping[str, Any], **limits: Any) -> dict[str, Any]:
    plan = OraclePlan(task)
    return converse(domain, task, OracleAgent(plan), OracleUser(plan), **limits)


def score(domain: str, task: Mapping[str, Any], trajectory: Mapping[str, Any], **options: Any) -> dict[str, Any]:
    return evaluate(task, trajectory, domain_data(domain), **options)


def fake_judge(messages: list[dict[str, Any]]) -> str:
    """A deterministic judge: an assertion is met when the conversation mentions its first long word."""
    user = messages[-1]["content"]
    assertions = eval(user.rsplit("expectedOutcomes:\n", 1)[1].strip())  # the list's Python repr
    conversation = user.split("expectedOutcomes:")[0].lower()
    results = []
    for a in assertions:
        words = [w for w in re.findall(r"[a-z]{6,}", a.lower())]
        met = bool(words) and words[0] in conversation
        results.append({"expectedOutcome": a, "reasoning": "scripted", "metExpectation": met})
    return json.dumps({"results": results})


# -- variants of the gold path, for comparing scores with upstream --------------------------------------


def write_actions(domain: str, task: Mapping[str, Any]) -> list[dict[str, Any]]:
    from taubench_runner.domains import module

    mod = module(domain)
    return [a for a in task_fields.gold_actions(task)
            if a["requestor"] == "assistant" and mod.AGENT_TOOLS.tool_specs.get(a["name"]) is not None
            and mod.AGENT_TOOLS.tool_specs[a["name"]].mutates]


def wrong_argument(action: Mapping[str, Any]) -> dict[str, Any]:
    """``action`` with one argument changed: the first string made a different string, else a list shortened
    or a number changed."""
    changed = copy.deepcopy(dict(action))
    arguments = changed["arguments"]
    for key, value in arguments.items():
        if isinstance(value, str):
            arguments[key] = value + "_x" if key != "reason" else "ordered by mistake" if value != \
                "ordered by mistake" else "no longer needed"
            return changed
    for key, value in arguments.items():
        if isinstance(value, list) and len(value) > 1:
            arguments[key] = value[:-1]
            return changed
        if isinstance(value, int) and not isinstance(value, bool):
            arguments[key] = value + 1
            return changed
    arguments["extra"] = "x"
    return changed


def variants(domain: str, task: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Named trajectories of one task: the oracle, the gold path with a wrong argument in its last write,
    without its last write, without the final message, and one cut short by max_steps."""
    gold = task_fields.gold_actions(task)
    agent_gold = [a for a in gold if a["requestor"] == "assistant"]
    info = list((task_fields.criteria(task) or {}).get("communicate_info") or ())
    final = "All done. " + " ".join(info)
    out = {"oracle": oracle(domain, task)}
    writes = write_actions(domain, task)
    if writes:
        last = writes[-1]
        i = max(i for i, a in enumerate(agent_gold) if a is last or a == last)
        wrong = [*agent_gold[:i], wrong_argument(last), *agent_gold[i + 1:]]
        out["wrong_argument"] = converse(domain, task, ScriptedAgent(wrong, final), StopUser(final))
        out["missing_write"] = converse(domain, task, ScriptedAgent(agent_gold[:i] + agent_gold[i + 1:], final),
                                        StopUser(final))
    out["silent"] = converse(domain, task, ScriptedAgent(agent_gold, "Goodbye."), StopUser("Goodbye."))
    out["max_steps"] = converse(domain, task, ScriptedAgent(agent_gold, final), StopUser(final), max_steps=3)
    return out


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


def role_responder(
    domain: str, *, agent_model: str = "agent-model", user_model: str = "user-model",
    judge_model: str = "judge-model", wrong: bool = False, judge: Callable[[list[dict[str, Any]]], str] = fake_judge,
) -> Callable[[dict[str, Any]], Any]:
    """One responder playing three roles by the request's model: the user states its task (``[task ID]``) and
    stops when the agent is done; the agent replays the task's gold actions as tool calls (with a wrong
    argument in the last write when ``wrong``), one per message, then says it is done with what the task
    expects communicated; the judge is :func:`fake_judge`."""

    def respond(body: dict[str, Any]) -> Any:
        model = str(body.get("model") or "")
        messages = body["messages"]
        if model.endswith(judge_model) or model == "judge":
            return {"content": judge(messages)}
        if model.endswith(user_model) or model == "user":
            system = messages[0]["content"]
            task_id = _task_of_user(domain, system)
            heard = [m for m in messages[1:] if m["role"] == "user"]  # the agent's texts, as the user sees them
            if heard and "All done" in str(heard[-1].get("content")):
                return {"content": STOP}
            return {"content": f"[task {task_id}] Hello, I need help."}
        # the agent
        first_user = next(m for m in messages if m["role"] == "user")
        found = TASK_MARK.search(str(first_user.get("content")))
        task = tasks(domain)[found.group(1)] if found else None
        actions = [a for a in task_fields.gold_actions(task) if a["requestor"] == "assistant"] if task else []
        if wrong and task is not None:
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
        info = (task_fields.criteria(task) or {}).get("communicate_info") or () if task else ()
        return {"content": "All done. " + " ".join(info)}

    return respond


def _task_of_user(domain: str, system_prompt: str) -> str:
    """The task whose scenario the user simulator was given (the scenario is what tells tasks apart)."""
    scenario = system_prompt.split("<scenario>\n", 1)[1].rsplit("\n</scenario>", 1)[0]
    found = [task_id for task_id, task in tasks(domain).items() if task_fields.scenario_text(task) == scenario]
    if len(found) != 1:
        raise AssertionError(f"{len(found)} tasks have this scenario: {found}")
    return found[0]
