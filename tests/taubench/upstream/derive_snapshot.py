"""Derive ``snapshots/upstream.json`` from tau2-bench itself (run with a Python that has ``tau2`` installed).

    uv venv --python 3.12 /tmp/tau2up/.venv && uv pip install -e <tau2-bench checkout> "pydantic==2.12.4"
    /tmp/tau2up/.venv/bin/python tests/taubench/upstream/derive_snapshot.py [--out tests/taubench/snapshots]

What it records, per domain: every tool's OpenAI schema as ``Tool.openai_schema`` renders it (agent and user
tools, in order), which tools mutate state, the agent's system prompt, the initial database hashes; per task:
the user simulator's system prompt (sha256), the database hashes of tau2's gold environment (initial state plus
gold actions), and the result of every call of the ``tb_fuzz`` sequence (digest, error flag, short content)
with the database hashes after the sequence. The runner's tests compare their own values with these.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import tb_fuzz  # noqa: E402
from loguru import logger  # noqa: E402

logger.remove()

from tau2.agent.llm_agent import LLMAgent  # noqa: E402
from tau2.data_model.message import ToolCall  # noqa: E402
from tau2.data_model.tasks import Task  # noqa: E402
from tau2.registry import registry  # noqa: E402
from tau2.runner.build import build_user  # noqa: E402

DOMAINS = ("mock", "airline", "retail")


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def initial_env(domain: str, task: Task):  # type: ignore[no-untyped-def]
    env = registry.get_env_constructor(domain)()
    state = task.initial_state
    env.set_state(
        initialization_data=state.initialization_data if state else None,
        initialization_actions=state.initialization_actions if state else None,
        message_history=(state.message_history or []) if state else [],
    )
    return env


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=str(HERE.parent / "snapshots"))
    args = parser.parse_args()
    import pydantic

    snapshot: dict = {"source": "sierra-research/tau2-bench a2c0247 (tau2 1.0.1)", "pydantic": pydantic.VERSION,
                      "domains": {}}
    for domain in DOMAINS:
        env = registry.get_env_constructor(domain)()
        raw_tasks = json.loads(env_tasks_path(domain).read_text())
        tasks = [Task.model_validate(t) for t in raw_tasks]
        entry: dict = {
            "agent_tools": [t.openai_schema for t in env.get_tools()],
            "user_tools": [t.openai_schema for t in env.get_user_tools()] if env.user_tools is not None else None,
            "mutating": {n: env.tools.tool_mutates_state(n) for n in env.tools.tools},
            "agent_system_prompt": LLMAgent(tools=env.get_tools(), domain_policy=env.get_policy(),
                                            llm="x").system_prompt,
            "initial_db_hash": env.get_db_hash(),
            "initial_user_db_hash": env.get_user_db_hash(),
            "tasks": {},
        }
        by_id = {t.id: t for t in tasks}
        for task_id, calls in tb_fuzz.sequences(domain, raw_tasks):
            task = by_id[task_id]
            user = build_user("user_simulator", registry.get_env_constructor(domain)(), task, llm="x")
            gold = initial_env(domain, task)
            for action in (task.evaluation_criteria.actions or []) if task.evaluation_criteria else []:
                try:
                    gold.make_tool_call(tool_name=action.name, requestor=action.requestor, **action.arguments)
                except Exception:
                    pass
            fuzz_env = initial_env(domain, task)
            results = []
            for call in calls:
                response = fuzz_env.get_response(ToolCall(**call))
                results.append(tb_fuzz.record({"content": response.content, "error": response.error}))
            entry["tasks"][task_id] = {
                "user_system_prompt": sha(user.system_prompt),
                "user_has_tools": user.tools is not None,
                "gold_db_hash": gold.get_db_hash(),
                "gold_user_db_hash": gold.get_user_db_hash(),
                "fuzz": results,
                "fuzz_db_hash": fuzz_env.get_db_hash(),
                "fuzz_user_db_hash": fuzz_env.get_user_db_hash(),
            }
        snapshot["domains"][domain] = entry
        print(domain, len(entry["tasks"]), "tasks", sum(len(t["fuzz"]) for t in entry["tasks"].values()), "calls")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "upstream.json").write_text(json.dumps(snapshot, indent=1, sort_keys=False) + "\n")


def env_tasks_path(domain: str) -> Path:
    from tau2.utils.utils import DATA_DIR

    return Path(DATA_DIR) / "tau2" / "domains" / domain / "tasks.json"


if __name__ == "__main__":
    main()
