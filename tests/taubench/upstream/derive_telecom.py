"""Derive ``snapshots/upstream_telecom.json`` from tau2-bench itself, for the telecom domain (run with a Python
that has ``tau2`` installed, as for ``derive_snapshot.py``; ``TAU2_DATA_DIR`` is set to this package's data)::

    /tmp/tau2up/.venv/bin/python tests/taubench/upstream/derive_telecom.py

What it records: every agent and user tool's OpenAI schema as ``Tool.openai_schema`` renders it, which tools
mutate state, the agent's system prompt (the policy as upstream's default ``telecom`` environment composes it),
the agent's system prompt of ``telecom-workflow`` (the workflow variant), the initial database hashes of both
sides; per task: the user simulator's system prompt (sha256) and whether it
gets tools, the hashes of tau2's gold environment (built twice: ``null`` when the two differ, as when a refuel
opens a bill with a random id), the result of every call of ``tb_telecom.sequences`` with the hashes after them,
upstream's ``evaluate_simulation`` (``EvaluationType.ALL``) of every conversation of ``tb_telecom.variants``
played by this package's runner, and the outcome of every call of ``tb_telecom.env_calls`` (the functions tasks
name that are not tools) with the hashes after them.

``TelecomUserTools.default_vpn_details`` is a class attribute that ``break_vpn`` degrades in place; it is
reset before each task here (and in the tests), as each task runs in a process of its own in the runner.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[2] / "plugins" / "agentcompass-taubench" / "src"
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(SRC))
os.environ.setdefault("TAU2_DATA_DIR", str(SRC / "agentcompass_taubench" / "data"))

import tb_fuzz  # noqa: E402
import tb_telecom  # noqa: E402
from loguru import logger  # noqa: E402

logger.remove()

from tau2.agent.llm_agent import LLMAgent  # noqa: E402
from tau2.data_model.message import AssistantMessage, ToolCall, ToolMessage, UserMessage  # noqa: E402
from tau2.data_model.simulation import SimulationRun, TerminationReason  # noqa: E402
from tau2.data_model.tasks import EnvFunctionCall, Task  # noqa: E402
from tau2.domains.telecom.user_data_model import PerformanceLevel, VpnDetails  # noqa: E402
from tau2.domains.telecom.user_tools import TelecomUserTools  # noqa: E402
from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation  # noqa: E402
from tau2.registry import registry  # noqa: E402
from tau2.runner.build import build_user  # noqa: E402


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def fresh_vpn_default() -> None:
    TelecomUserTools.default_vpn_details = VpnDetails(server_address="192.168.1.1", protocol="OpenVPN",
                                                      server_performance=PerformanceLevel.EXCELLENT)


def initial_env(task: Task):  # type: ignore[no-untyped-def]
    env = registry.get_env_constructor("telecom")()
    state = task.initial_state
    env.set_state(
        initialization_data=state.initialization_data if state else None,
        initialization_actions=state.initialization_actions if state else None,
        message_history=(state.message_history or []) if state else [],
    )
    return env


def gold_hashes(task: Task) -> tuple[str, str]:
    fresh_vpn_default()
    gold = initial_env(task)
    for action in task.evaluation_criteria.actions or []:
        try:
            gold.make_tool_call(tool_name=action.name, requestor=action.requestor, **action.arguments)
        except Exception:
            pass
    return gold.get_db_hash(), gold.get_user_db_hash()


def fuzz(task: Task, calls: list[dict]) -> tuple[list, str, str]:
    fresh_vpn_default()
    env = initial_env(task)
    results = []
    for call in calls:
        response = env.get_response(ToolCall(**call))
        results.append(tb_fuzz.record({"content": response.content, "error": response.error}))
    return results, env.get_db_hash(), env.get_user_db_hash()


def env_functions(task: Task) -> tuple[list, str, str]:
    fresh_vpn_default()
    env = initial_env(task)
    results = [tb_telecom.outcome(lambda c=c: env.run_env_function_call(EnvFunctionCall(**c)))
               for c in tb_telecom.env_calls()]
    return results, env.get_db_hash(), env.get_user_db_hash()


def to_tau2(message: dict):  # type: ignore[no-untyped-def]
    if message["role"] == "tool":
        return ToolMessage(id=message["id"], role="tool", content=message["content"],
                           requestor=message["requestor"], error=message["error"])
    calls = None
    if message.get("tool_calls") is not None:
        calls = [ToolCall(id=c["id"], name=c["name"], arguments=c["arguments"], requestor=c["requestor"])
                 for c in message["tool_calls"]]
    cls = AssistantMessage if message["role"] == "assistant" else UserMessage
    return cls(role=message["role"], content=message.get("content"), tool_calls=calls)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=str(HERE.parent / "snapshots" / "upstream_telecom.json"))
    args = parser.parse_args()
    import pydantic

    env = registry.get_env_constructor("telecom")()
    workflow = registry.get_env_constructor("telecom-workflow")()
    raw_tasks = list(tb_telecom.tasks_raw())
    tasks = {t["id"]: Task.model_validate(t) for t in raw_tasks}
    out: dict = {
        "source": "sierra-research/tau2-bench a2c0247 (tau2 1.0.1), domain telecom (manual policy)",
        "pydantic": pydantic.VERSION,
        "agent_tools": [t.openai_schema for t in env.get_tools()],
        "user_tools": [t.openai_schema for t in env.get_user_tools()],
        "mutating": {n: env.tools.tool_mutates_state(n) for n in env.tools.tools},
        "user_mutating": {n: env.user_tools.tool_mutates_state(n) for n in env.user_tools.tools},
        "agent_system_prompt": LLMAgent(tools=env.get_tools(), domain_policy=env.get_policy(), llm="x").system_prompt,
        "agent_system_prompt_workflow": LLMAgent(tools=workflow.get_tools(), domain_policy=workflow.get_policy(),
                                                 llm="x").system_prompt,
        "initial_db_hash": env.get_db_hash(),
        "initial_user_db_hash": env.get_user_db_hash(),
        "tasks": {},
    }
    sequences = dict(tb_telecom.sequences(raw_tasks))
    for raw in raw_tasks:
        task_id = raw["id"]
        task = tasks[task_id]
        fresh_vpn_default()
        user = build_user("user_simulator", registry.get_env_constructor("telecom")(), task, llm="x")
        first, second = gold_hashes(task), gold_hashes(task)
        results, db_hash, user_db_hash = fuzz(task, sequences[task_id])
        again = fuzz(task, sequences[task_id])
        deterministic = (results, db_hash, user_db_hash) == again
        functions = env_functions(task)
        rewards = {}
        for name, trajectory in tb_telecom.variants(raw).items():
            fresh_vpn_default()
            simulation = SimulationRun(
                id="x", task_id=task_id, start_time="", end_time="", duration=0.0,
                termination_reason=TerminationReason(trajectory["termination_reason"]),
                messages=[to_tau2(m) for m in trajectory["messages"]],
            )
            try:
                info = evaluate_simulation(simulation, task, EvaluationType.ALL, solo_mode=False, domain="telecom")
            except Exception as exc:
                rewards[name] = {"error": f"{type(exc).__name__}: {exc}"}
                continue
            rewards[name] = {
                "reward": info.reward,
                "reward_breakdown": {k.value: v for k, v in (info.reward_breakdown or {}).items()},
                "db_match": info.db_check.db_match if info.db_check else None,
                "env_assertions": [c.met for c in (info.env_assertions or [])],
            }
        out["tasks"][task_id] = {
            "user_system_prompt": sha(user.system_prompt),
            "user_has_tools": user.tools is not None,
            "gold_db_hash": first[0] if first[0] == second[0] else None,
            "gold_user_db_hash": first[1] if first[1] == second[1] else None,
            "fuzz": results if deterministic else None,
            "fuzz_db_hash": db_hash if deterministic else None,
            "fuzz_user_db_hash": user_db_hash if deterministic else None,
            "rewards": rewards,
            "env_calls": functions[0],
            "env_calls_db_hash": functions[1],
            "env_calls_user_db_hash": functions[2],
        }
        print(task_id, {k: v.get("reward") for k, v in rewards.items()}, "deterministic" if deterministic else "")
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
