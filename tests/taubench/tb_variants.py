"""Conversations for the taubench tests, built with the runner alone (standard library + ``taubench_runner``),
so that ``upstream/derive_rewards.py`` can build the very same ones under tau2-bench's interpreter: the packaged
data, fresh environments, scripted participants, a deterministic judge, and named variants of each task's gold
path."""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from taubench_runner import tasks as task_fields
from taubench_runner.domains import DomainData, module, normalized_db_text, tasks_file
from taubench_runner.environment import Environment
from taubench_runner.evaluator import evaluate
from taubench_runner.orchestrator import OracleAgent, OraclePlan, OracleUser, Orchestrator
from taubench_runner.prompts import STOP

SRC = Path(__file__).resolve().parents[2] / "plugins" / "agentcompass-taubench" / "src"
ROOT = SRC / "agentcompass_taubench" / "data" / "tau2"
DOMAINS = ("mock", "airline", "retail")


@functools.cache
def tasks(domain: str) -> dict[str, dict[str, Any]]:
    raw = json.loads((ROOT / "domains" / domain / tasks_file(domain)).read_text())
    return {t["id"]: t for t in raw}


@functools.cache
def domain_data(domain: str) -> DomainData:
    """The domain's data, its databases normalised once (as the staging directory ships them)."""
    data = DomainData.load(domain, str(ROOT / "domains" / domain))
    normalized = normalized_db_text(domain, str(ROOT / "domains" / domain))
    data.db_text = normalized["db.json"]
    data.user_db_text = normalized.get("user_db.json")
    data.trusted = True
    data.cached_hashes = True  # a test process hashes many databases of one domain
    return data


def environment(domain: str, task: Mapping[str, Any] | None = None) -> Environment:
    """A fresh environment, in the task's initial state when a task is given."""
    env = domain_data(domain).environment()
    if task is not None:
        state = task_fields.initial_state(task)
        env.set_state(state.get("initialization_data"), state.get("initialization_actions"),
                      task_fields.message_history(task))
    return env


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
            return {"role": "assistant", "content": None, "tool_calls": [
                {"id": f"s{len(self.seen)}", "name": action["name"], "arguments": dict(action["arguments"]),
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
    head, tail = user.rsplit("expectedOutcomes:\n", 1)
    assertions = eval(tail.strip())  # the list's Python repr, as tau2 renders it
    conversation = head.lower()
    results = []
    for a in assertions:
        words = re.findall(r"[a-z]{6,}", a.lower())
        results.append({"expectedOutcome": a, "reasoning": "scripted",
                        "metExpectation": bool(words) and words[0] in conversation})
    return json.dumps({"results": results})


# -- variants of the gold path -----------------------------------------------------------------------------


def write_actions(domain: str, task: Mapping[str, Any]) -> list[dict[str, Any]]:
    specs = module(domain).AGENT_TOOLS.tool_specs
    return [a for a in task_fields.gold_actions(task)
            if a["requestor"] == "assistant" and a["name"] in specs and specs[a["name"]].mutates]


def wrong_argument(action: Mapping[str, Any]) -> dict[str, Any]:
    """``action`` with one argument changed: the first string made another string, else a list shortened or
    a number changed."""
    changed = copy.deepcopy(dict(action))
    arguments = changed["arguments"]
    for key, value in arguments.items():
        if isinstance(value, str):
            if key == "reason":
                arguments[key] = "no longer needed" if value == "ordered by mistake" else "ordered by mistake"
            else:
                arguments[key] = value + "_x"
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
    """Named trajectories of one task: the oracle; the gold path told by a scripted agent and user, with a
    wrong argument in its last write, without its last write, without saying what the task expects to be
    communicated; and one cut short by max_steps."""
    agent_gold = [a for a in task_fields.gold_actions(task) if a["requestor"] == "assistant"]
    info = list((task_fields.criteria(task) or {}).get("communicate_info") or ())
    final = " ".join(["All done.", *info])
    out = {"oracle": oracle(domain, task),
           "scripted": converse(domain, task, ScriptedAgent(agent_gold, final), StopUser(final))}
    writes = write_actions(domain, task)
    if writes:
        i = max(i for i, a in enumerate(agent_gold) if a == writes[-1])
        wrong = [*agent_gold[:i], wrong_argument(agent_gold[i]), *agent_gold[i + 1:]]
        out["wrong_argument"] = converse(domain, task, ScriptedAgent(wrong, final), StopUser(final))
        out["missing_write"] = converse(domain, task, ScriptedAgent(agent_gold[:i] + agent_gold[i + 1:], final),
                                        StopUser(final))
    out["silent"] = converse(domain, task, ScriptedAgent(agent_gold, "Goodbye."), StopUser("Goodbye."))
    out["max_steps"] = converse(domain, task, ScriptedAgent(agent_gold, final), StopUser(final), max_steps=3)
    return out
