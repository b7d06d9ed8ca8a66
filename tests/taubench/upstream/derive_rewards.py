"""Derive ``snapshots/upstream_rewards.json``: tau2-bench's own evaluator on conversations played by this
package's runner (run with a Python that has ``tau2`` installed, as for ``derive_snapshot.py``).

For every task of the three domains, ``tb_variants.variants`` plays named conversations with the runner (the
oracle; the gold path told by a scripted agent and user; with a wrong argument in the last write; without the
last write; without the final message; cut short by max_steps). Each is converted to a tau2 ``SimulationRun``
and scored by ``tau2.evaluator.evaluator.evaluate_simulation`` (``EvaluationType.ALL``, as ``tau2 run``
does), with tau2's NL-assertion judge replaced by ``tb_variants.fake_judge`` (a deterministic function of the
judge's prompt, which is recorded too). ``test_tb_upstream_rewards.py`` scores the same conversations with the
runner's evaluator and compares.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parents[2] / "plugins" / "agentcompass-taubench" / "src"))

import tb_variants  # noqa: E402
from loguru import logger  # noqa: E402

logger.remove()

import tau2.evaluator.evaluator_nl_assertions as nl  # noqa: E402
from tau2.data_model.message import AssistantMessage, ToolCall, ToolMessage, UserMessage  # noqa: E402
from tau2.data_model.simulation import SimulationRun, TerminationReason  # noqa: E402
from tau2.data_model.tasks import Task  # noqa: E402
from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation  # noqa: E402
from tau2.utils.llm_utils import to_litellm_messages  # noqa: E402

JUDGE_PROMPTS: list[str] = []


def fake_generate(model, messages, call_name=None, **kwargs):  # type: ignore[no-untyped-def]
    """tau2's ``generate`` for the judge: the prompt recorded, the verdict from ``tb_variants.fake_judge``."""
    plain = to_litellm_messages(messages)
    JUDGE_PROMPTS.append(hashlib.sha256(json.dumps(plain).encode()).hexdigest())
    return AssistantMessage(role="assistant", content=tb_variants.fake_judge(plain))


nl.generate = fake_generate


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
    parser.add_argument("--out", default=str(HERE.parent / "snapshots" / "upstream_rewards.json"))
    args = parser.parse_args()
    out: dict = {"source": "sierra-research/tau2-bench a2c0247 (tau2 1.0.1), evaluate_simulation(ALL)",
                 "rewards": {}}
    for domain in tb_variants.DOMAINS:
        for task_id, raw in tb_variants.tasks(domain).items():
            task = Task.model_validate(raw)
            for name, trajectory in tb_variants.variants(domain, raw).items():
                JUDGE_PROMPTS.clear()
                simulation = SimulationRun(
                    id="x", task_id=task_id, start_time="", end_time="", duration=0.0,
                    termination_reason=TerminationReason(trajectory["termination_reason"]),
                    messages=[to_tau2(m) for m in trajectory["messages"]],
                )
                key = f"{domain}/{task_id}/{name}"
                try:
                    info = evaluate_simulation(simulation, task, EvaluationType.ALL, solo_mode=False, domain=domain)
                except Exception as exc:  # upstream's evaluator fails on this conversation
                    out["rewards"][key] = {"error": f"{type(exc).__name__}: {exc}"}
                    continue
                out["rewards"][key] = {
                    "reward": info.reward,
                    "reward_breakdown": {k.value: v for k, v in (info.reward_breakdown or {}).items()},
                    "db_match": info.db_check.db_match if info.db_check else None,
                    "judge_prompts": list(JUDGE_PROMPTS),
                }
        print(domain, "done")
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(len(out["rewards"]), "conversations")


if __name__ == "__main__":
    main()
