"""The texts the models see, as tau2-bench writes them (``src/tau2/agent/llm_agent.py``,
``src/tau2/user/user_simulator.py``, ``src/tau2/evaluator/evaluator_nl_assertions.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: The first message of every conversation without a message history (tau2's orchestrator).
FIRST_AGENT_MESSAGE = "Hi! How can I help you today?"

AGENT_INSTRUCTION = (
    "You are a customer service agent that helps the user according to the <policy> provided below.\n"
    "In each turn you can either:\n"
    "- Send a message to the user.\n"
    "- Make a tool call.\n"
    "You cannot do both at the same time.\n"
    "\n"
    "Try to be helpful and always follow the policy. Always make sure you generate valid JSON only."
)

#: The user's stop tokens: the goal is met, they were transferred, the scenario does not cover the situation.
STOP = "###STOP###"
TRANSFER = "###TRANSFER###"
OUT_OF_SCOPE = "###OUT-OF-SCOPE###"


def agent_system_prompt(policy: str) -> str:
    return f"<instructions>\n{AGENT_INSTRUCTION}\n</instructions>\n<policy>\n{policy}\n</policy>"


def user_system_prompt(guidelines: str, scenario: str) -> str:
    """The simulation guidelines (tau2's persona placeholder, empty by default, removed) and the scenario."""
    return f"{guidelines.replace('<PERSONA_GUIDELINES>', '')}\n\n<scenario>\n{scenario}\n</scenario>"


_I = " " * 8
JUDGE_SYSTEM_PROMPT = "\n".join([
    "",
    f"{_I}TASK",
    f"{_I}- You will be given a list of expected outcomes and a conversation that was collected during a test case "
    "run.",
    f"{_I}- The conversation is between an agent and a customer.",
    f"{_I}- Your job is to evaluate whether the agent satisfies each of the expected outcomes.",
    f"{_I}- Grade each expected outcome individually.",
    "",
    f"{_I}FORMAT",
    f"{_I}- Your response should be a JSON object with the following fields:",
    f"{_I}- `reasoning`: a short explanation for your classification",
    f"{_I}- `metExpectation`: `true` if the agent satisfies the expected outcomes, `false` otherwise",
    f"{_I}- `expectedOutcome`: repeat the expectation from the input that you are grading",
    _I,
    f"{_I}Example response structure:",
    f"{_I}{{",
    f'{_I}    "results": [',
    f"{_I}        {{",
    f'{_I}            "expectedOutcome": "<one of the expected outcomes from the input>",',
    f'{_I}            "reasoning": "<reasoning trace>",',
    f'{_I}            "metExpectation": <false or true>,',
    f"{_I}        }}",
    f"{_I}    ]",
    f"{_I}}}",
    _I,
])


def judge_user_prompt(trajectory: Sequence[dict[str, Any]], nl_assertions: Sequence[str]) -> str:
    """The conversation (``role: content`` per message, tool messages included) and the assertions, rendered
    as Python renders the list."""
    conversation = "\n".join(f"{m.get('role')}: {m.get('content')}" for m in trajectory)
    return (f"\n{_I}conversation:\n{_I}{conversation}\n{_I}\n{_I}expectedOutcomes:\n{_I}{list(nl_assertions)}"
            f"\n{_I}")
