"""tau2's evaluation of a conversation (``evaluate_simulation`` with ``EvaluationType.ALL``).

* A conversation that ended other than by the user or the agent stopping scores 0, with no components.
* Otherwise each component is computed as upstream computes it, and the reward is the product of the
  components in the task's ``reward_basis``:

  - **DB** — the trajectory's state-changing calls replayed on a fresh environment (each reproducing its
    recorded result) against a fresh environment that replayed the gold actions: the agent-side and the
    user-side database hashes must both match. **ENV_ASSERTION** — the task's assertions on the replayed
    environment;
  - **ACTION** — every gold action matched by some tool call of the trajectory (same name, equal
    ``compare_args``);
  - **COMMUNICATE** — every ``communicate_info`` string a case-insensitive substring of an agent message,
    commas removed from the message;
  - **NL_ASSERTION** — an LLM judge's verdict on every natural-language assertion (only when it is in the
    basis, as upstream).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from taubench_runner import tasks as task_fields
from taubench_runner.domains import DomainData
from taubench_runner.environment import Environment, Message, has_text, is_tool_call, pair_hashes
from taubench_runner.prompts import JUDGE_SYSTEM_PROMPT, judge_user_prompt

STOPPED = ("user_stop", "agent_stop")
ENV_BASES = {"DB", "ENV_ASSERTION"}

#: ``judge(messages) -> content``: one chat completion of the judge model.
Judge = Callable[[list[dict[str, Any]]], str]


class EvaluationError(Exception):
    """The evaluation itself failed (upstream's evaluator raises here too)."""


def evaluate(
    task: Mapping[str, Any],
    trajectory: Mapping[str, Any],
    data: DomainData,
    *,
    judge: Judge | None = None,
    skip_nl: str | None = None,
) -> dict[str, Any]:
    """The reward and its breakdown. ``skip_nl``: why NL assertions in the basis are not judged (then they are
    left out of the product and reported as such); otherwise ``judge`` is called for them."""
    reason = trajectory.get("termination_reason")
    if reason not in STOPPED:
        return {"reward": 0.0, "reward_basis": None, "components": {},
                "info": {"note": f"Simulation terminated prematurely. Termination reason: {reason}"}}
    crit = task_fields.criteria(task)
    if crit is None:
        return {"reward": 1.0, "reward_basis": None, "components": {}, "info": {"note": "No evaluation criteria"}}
    messages: list[Message] = list(trajectory.get("messages") or ())
    basis = task_fields.reward_basis(task)

    env_info = environment_component(task, messages, data)
    action_info = action_component(task, messages, data)
    communicate_info = communicate_component(task, messages)
    nl_info: dict[str, Any] | None = None
    if "NL_ASSERTION" in basis:
        if skip_nl is not None:
            nl_info = {"reward": None, "skipped": skip_nl, "nl_assertions": None, "reward_breakdown": None}
        else:
            nl_info = nl_component(task, messages, judge)

    reward = 1.0
    breakdown: dict[str, float] = {}
    if set(basis) & ENV_BASES:
        breakdown.update(env_info.get("reward_breakdown") or {})
        reward *= env_info["reward"]
    if "ACTION" in basis:
        breakdown.update(action_info.get("reward_breakdown") or {})
        reward *= action_info["reward"]
    if "NL_ASSERTION" in basis and nl_info is not None and nl_info["reward"] is not None:
        breakdown.update(nl_info.get("reward_breakdown") or {})
        reward *= nl_info["reward"]
    if "COMMUNICATE" in basis:
        breakdown.update(communicate_info.get("reward_breakdown") or {})
        reward *= communicate_info["reward"]

    components = {
        "DB": env_info["db_check"]["db_reward"] if env_info.get("db_check") else None,
        "ENV_ASSERTION": env_info["env_assertion_reward"],
        "ACTION": action_info["reward"],
        "COMMUNICATE": communicate_info["reward"],
        "NL_ASSERTION": nl_info["reward"] if nl_info is not None else None,
    }
    return {
        "reward": reward,
        "reward_basis": basis,
        "reward_breakdown": breakdown,
        "components": {k: v for k, v in components.items() if v is not None},
        "db_check": env_info.get("db_check"),
        "db_hashes": env_info.get("db_hashes"),
        "env_assertions": env_info.get("env_assertions"),
        "action_checks": action_info.get("action_checks"),
        "communicate_checks": communicate_info.get("communicate_checks"),
        "nl_assertions": nl_info.get("nl_assertions") if nl_info else None,
        "info": {
            "env": env_info.get("info"),
            "nl": nl_info.get("info") if nl_info else None,
            "nl_skipped": nl_info.get("skipped") if nl_info else None,
            "communicate": communicate_info.get("info"),
            "action": action_info.get("info"),
        },
    }


# -- DB and env assertions -----------------------------------------------------------------------------


def gold_environment(task: Mapping[str, Any], data: DomainData) -> tuple[Environment, list[str]]:
    """A fresh environment after the task's initial state and its gold actions; the gold actions' errors."""
    state = task_fields.initial_state(task)
    env = data.environment()
    env.set_state(state.get("initialization_data"), state.get("initialization_actions"),
                  task_fields.message_history(task))
    errors = []
    for action in task_fields.gold_actions(task):
        try:
            env.make_tool_call(action["name"], requestor=action["requestor"], **action["arguments"])
        except Exception as exc:  # upstream logs and goes on
            errors.append(f"{action['name']}: {exc}")
    return env, errors


def environment_component(task: Mapping[str, Any], messages: Sequence[Message], data: DomainData) -> dict[str, Any]:
    crit = task_fields.criteria(task) or {}
    basis = task_fields.reward_basis(task)
    if crit.get("actions") is None and crit.get("env_assertions") is None:
        return {"reward": 1.0, "db_check": {"db_match": True, "db_reward": 1.0}, "env_assertions": None,
                "env_assertion_reward": 1.0, "reward_breakdown": None,
                "info": {"note": "No expected actions or env assertions"}}
    state = task_fields.initial_state(task)
    predicted = data.environment()
    try:
        predicted.set_state(state.get("initialization_data"), state.get("initialization_actions"), list(messages))
    except Exception as exc:
        raise EvaluationError(f"replaying the trajectory failed: {exc}") from exc
    cached = data.gold_cache.get(task["id"])
    if cached is not None:
        predicted_agent, predicted_user = predicted.get_db_hash(), predicted.get_user_db_hash()
    else:
        gold, errors = gold_environment(task, data)
        predicted_agent, gold_agent = pair_hashes(predicted.tools.db, gold.tools.db, cached=data.cached_hashes)
        predicted_user, gold_user = pair_hashes(
            predicted.user_tools.db if predicted.user_tools is not None else None,
            gold.user_tools.db if gold.user_tools is not None else None, cached=data.cached_hashes)
        cached = data.gold_cache[task["id"]] = (gold_agent, gold_user, errors)
    hashes = {"gold_agent": cached[0], "gold_user": cached[1], "predicted_agent": predicted_agent,
              "predicted_user": predicted_user}
    gold_errors = cached[2]
    match = hashes["gold_agent"] == hashes["predicted_agent"] and hashes["gold_user"] == hashes["predicted_user"]
    db_reward = 1.0 if match else 0.0

    checks = []
    assertion_reward = 1.0
    for assertion in crit.get("env_assertions") or ():
        try:
            met = predicted.run_env_assertion(assertion, raise_assertion_error=False)
        except Exception as exc:
            raise EvaluationError(f"env assertion {assertion.get('func_name')} failed: {exc}") from exc
        checks.append({"env_assertion": dict(assertion), "met": met, "reward": 1.0 if met else 0.0})
        assertion_reward *= 1.0 if met else 0.0

    reward = 1.0
    breakdown = {}
    if "DB" in basis:
        breakdown["DB"] = db_reward
        reward *= db_reward
    if "ENV_ASSERTION" in basis:
        breakdown["ENV_ASSERTION"] = assertion_reward
        reward *= assertion_reward
    return {
        "reward": reward, "db_check": {"db_match": match, "db_reward": db_reward}, "db_hashes": hashes,
        "env_assertions": checks, "env_assertion_reward": assertion_reward, "reward_breakdown": breakdown,
        "info": {"gold_action_errors": gold_errors} if gold_errors else None,
    }


# -- actions -------------------------------------------------------------------------------------------


def action_matches(action: Mapping[str, Any], call: Mapping[str, Any]) -> bool:
    """tau2's ``Action.compare_with_tool_call``: same name; with ``compare_args`` None, every argument of the
    *call* compared with the action's (an argument only the action has is not compared)."""
    if action["name"] != call.get("name"):
        return False
    arguments = call.get("arguments") or {}
    keys = list(arguments) if action.get("compare_args") is None else action["compare_args"]
    if len(keys) == 0:
        return True
    called = {k: v for k, v in arguments.items() if k in keys}
    expected = {k: v for k, v in action["arguments"].items() if k in keys}
    return called == expected


def action_component(task: Mapping[str, Any], messages: Sequence[Message], data: DomainData) -> dict[str, Any]:
    actions = task_fields.gold_actions(task)
    if not actions:
        return {"reward": 1.0, "action_checks": None, "reward_breakdown": {"ACTION": 1.0},
                "info": {"note": "No actions to evaluate"}}
    calls = [c for m in messages if m.get("role") in ("assistant", "user") and is_tool_call(m) for c in m["tool_calls"]]
    kinds = _tool_kinds(data)
    checks = []
    for action in actions:
        found = any(action_matches(action, call) for call in calls)
        checks.append({"action": action, "action_match": found, "action_reward": 1.0 if found else 0.0,
                       "tool_type": kinds.get(action["name"])})
    reward = 1.0 if all(c["action_match"] for c in checks) else 0.0
    return {"reward": reward, "action_checks": checks, "reward_breakdown": {"ACTION": reward}}


def _tool_kinds(data: DomainData) -> dict[str, str]:
    from taubench_runner.domains import module

    mod = module(data.domain)
    kinds = {name: spec.kind for name, spec in mod.AGENT_TOOLS.tool_specs.items()}
    if mod.USER_TOOLS is not None:
        kinds.update({name: spec.kind for name, spec in mod.USER_TOOLS.tool_specs.items()})
    return kinds


# -- communicate ---------------------------------------------------------------------------------------


def communicate_component(task: Mapping[str, Any], messages: Sequence[Message]) -> dict[str, Any]:
    info = (task_fields.criteria(task) or {}).get("communicate_info")
    if not info:
        return {"reward": 1.0, "communicate_checks": None, "reward_breakdown": {"COMMUNICATE": 1.0},
                "info": {"note": "No communicate_info to evaluate"}}
    checks = []
    for text in info:
        said = next(
            (m for m in messages if m.get("role") == "assistant" and has_text(m)
             and text.lower() in m["content"].lower().replace(",", "")),
            None,
        )
        if said is not None:
            checks.append({"info": text, "met": True,
                           "justification": f"Information '{text}' communicated in the message:\n '{said['content']}'"})
        else:
            checks.append({"info": text, "met": False, "justification": f"Information '{text}' not communicated."})
    reward = 1.0 if all(c["met"] for c in checks) else 0.0
    return {"reward": reward, "communicate_checks": checks, "reward_breakdown": {"COMMUNICATE": reward}}


# -- NL assertions -------------------------------------------------------------------------------------

_TRUE_WORDS = {"1", "on", "t", "true", "y", "yes"}
_FALSE_WORDS = {"0", "off", "f", "false", "n", "no"}


def _met(value: Any) -> bool:
    """pydantic's reading of ``metExpectation`` as a bool."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE_WORDS | _FALSE_WORDS:
        return value.strip().lower() in _TRUE_WORDS
    raise EvaluationError(f"the judge's metExpectation {value!r} is not a boolean")


def judge_messages(messages: Sequence[Message], nl_assertions: Sequence[str]) -> list[dict[str, Any]]:
    return [{"role": "system", "content": JUDGE_SYSTEM_PROMPT},
            {"role": "user", "content": judge_user_prompt(messages, nl_assertions)}]


def nl_component(task: Mapping[str, Any], messages: Sequence[Message], judge: Judge | None) -> dict[str, Any]:
    assertions = (task_fields.criteria(task) or {}).get("nl_assertions")
    if not assertions:
        return {"reward": 1.0, "nl_assertions": [], "reward_breakdown": {"NL_ASSERTION": 1.0},
                "info": {"note": "No nl_assertions to evaluate"}}
    if judge is None:
        raise EvaluationError("the task's NL assertions need a judge model, and none was configured")
    content = judge(judge_messages(messages, assertions))
    try:
        verdict = json.loads(content)
        results = verdict.get("results", [])
        checks = [{"nl_assertion": r["expectedOutcome"], "met": _met(r["metExpectation"]),
                   "justification": r["reasoning"]} for r in results]
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise EvaluationError(f"the judge's answer is not the expected JSON ({exc}): {str(content)[:300]!r}") from None
    reward = 1.0 if all(c["met"] for c in checks) else 0.0
    return {"reward": reward, "nl_assertions": checks, "reward_breakdown": {"NL_ASSERTION": reward}}
