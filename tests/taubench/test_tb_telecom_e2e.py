"""Telecom end to end through the CLI, on the local environment and in docker: a loopback OpenAI-compatible
server plays the agent (its gold actions as tool calls, and asking the user for theirs) and the user, who makes
the user's gold actions on the phone through its own tool calls (or one wrong action); and the oracle harness.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import tb_support as s
import tb_telecom
from agentcompass.testing import LoopbackOpenAI
from taubench_runner import tasks as task_fields
from taubench_runner.prompts import STOP
from test_tb_e2e_cli import cli, records

from tests.helpers.docker_engine import require_engine

AIRPLANE = "[service_issue]airplane_mode_on[PERSONA:None]"
ROAMING = "[mobile_data_issue]user_abroad_roaming_disabled_off[PERSONA:Hard]"
PAYMENT = "[service_issue]overdue_bill_suspension[PERSONA:Easy]"
PERMISSIONS = "[mms_issue]break_app_both_permissions[PERSONA:Hard]"
LOCAL = (AIRPLANE, ROAMING, PAYMENT, PERMISSIONS)
DOCKER = (AIRPLANE, PAYMENT)
ALL_TASKS = list(tb_telecom.tasks("telecom"))
ASK = "Please do this on your phone: "
MARK = "~~"  # around the task id in the user's first message (telecom ids hold brackets)


def _task_of_user(system_prompt: str, among: Sequence[str]) -> str:
    scenario = system_prompt.split("<scenario>\n", 1)[1].rsplit("\n</scenario>", 1)[0]
    found = [t for t in among if task_fields.scenario_text(tb_telecom.tasks("telecom")[t]) == scenario]
    assert len(found) == 1, found
    return found[0]


def telecom_responder(among: Sequence[str], *, wrong: bool = False,
                      requests: list[dict[str, Any]] | None = None) -> Callable[[dict[str, Any]], Any]:
    """The agent makes its gold actions as tool calls and asks the user for each of theirs by name; the user
    makes it as a tool call of its own (``wrong``: its last one replaced by a wrong action), says it is done,
    and stops once the agent says all is done."""

    def respond(body: dict[str, Any]) -> Any:
        if requests is not None:
            requests.append(body)
        messages = body["messages"]
        if s.role_of(body) == "user":
            task_id = _task_of_user(messages[0]["content"], among)
            last = messages[-1]
            if last["role"] == "tool":
                return {"content": "Done, what next?"}
            if last["role"] == "user" and "All done" in str(last.get("content")):
                return {"content": STOP}
            if last["role"] == "user" and str(last.get("content")).startswith(ASK):
                gold = [a for a in task_fields.gold_actions(tb_telecom.tasks("telecom")[task_id])
                        if a["requestor"] == "user"]
                made = sum(1 for m in messages if m["role"] == "assistant" and m.get("tool_calls"))
                action = gold[made]
                if wrong and made == len(gold) - 1:
                    action = tb_telecom.wrong_user_action(action)
                return {"content": None, "tool_calls": [{
                    "id": f"user_call_{made}", "type": "function",
                    "function": {"name": action["name"], "arguments": json.dumps(action["arguments"])}}]}
            return {"content": f"{MARK}{task_id}{MARK} My phone is not working properly."}
        first_user = next(m for m in messages if m["role"] == "user")
        task = tb_telecom.tasks("telecom")[str(first_user.get("content")).split(MARK)[1]]
        gold = task_fields.gold_actions(task)
        done = sum(len(m.get("tool_calls") or ()) for m in messages if m["role"] == "assistant")
        done += sum(1 for m in messages if m["role"] == "assistant" and str(m.get("content")).startswith(ASK))
        if done < len(gold):
            action = gold[done]
            if action["requestor"] == "user":
                return {"content": f"{ASK}{action['name']} {json.dumps(action['arguments'])}"}
            return {"content": None, "tool_calls": [{
                "id": f"agent_call_{done}", "type": "function",
                "function": {"name": action["name"], "arguments": json.dumps(action["arguments"])}}]}
        return {"content": "All done."}

    return respond


def scripted_run(tmp_path: Path, environment: str, task_ids: tuple[str, ...], *,
                 wrong: bool = False) -> tuple[dict[str, dict], list[dict[str, Any]], Path]:
    out = tmp_path / ("wrong" if wrong else "right")
    requests: list[dict[str, Any]] = []
    with LoopbackOpenAI(telecom_responder(task_ids, wrong=wrong, requests=requests), api_key=None) as server:
        args = ["run", "taubench", "none", "openai-compatible/agent-model", "--model-base-url", server.base_url,
                "--user-model", "openai-compatible/user-model", "-b", "domain=telecom", "--env", environment,
                "--json", "-o", str(out)]
        for task_id in task_ids:
            args += ["-t", f"telecom/{task_id}"]
        proc = cli(*args, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-3000:]
    return {t.split("/", 1)[1]: r for t, r in records(out).items()}, requests, out


def check_right(results: dict[str, dict], requests: list[dict[str, Any]], task_ids: tuple[str, ...]) -> None:
    assert {t: r["metrics"]["reward"] for t, r in results.items()} == dict.fromkeys(task_ids, 1.0)
    user_tool_names = {t["function"]["name"] for t in user_tool_schemas()}
    for body in requests:
        offered = {t["function"]["name"] for t in body.get("tools") or ()}
        if s.role_of(body) == "user":
            assert offered == user_tool_names  # the user simulator is offered the phone's tools
        else:
            assert "toggle_airplane_mode" not in offered and "refuel_data" in offered
    for task_id, record in results.items():
        evaluation = record["artifacts"]["evaluation"]
        assert evaluation["reward_basis"][0] == "ENV_ASSERTION"
        assert all(c["met"] for c in evaluation["env_assertions"]), task_id
        assert record["artifacts"]["official_result"]["termination_reason"] == "user_stop"


def user_tool_schemas() -> list[dict[str, Any]]:
    env = s.environment("telecom")
    return [t.openai_schema() for t in env.get_user_tools() or ()]


def check_wrong(results: dict[str, dict], task_ids: tuple[str, ...]) -> None:
    assert {t: r["metrics"]["reward"] for t, r in results.items()} == dict.fromkeys(task_ids, 0.0)
    for task_id, record in results.items():
        evaluation = record["artifacts"]["evaluation"]
        assert not all(c["met"] for c in evaluation["env_assertions"]), task_id
        assert record["artifacts"]["official_result"]["termination_reason"] == "user_stop"


@pytest.mark.slow
def test_the_user_fixing_the_phone_scores_1_and_a_wrong_action_on_it_0_locally(tmp_path: Path):
    results, requests, run_dir = scripted_run(tmp_path, "local", LOCAL)
    check_right(results, requests, LOCAL)
    # the user's tool calls and their results are in the saved trajectory
    saved = [json.loads(p.read_text()) for p in run_dir.glob("artifacts/*/attempt-1/trajectory.json")]
    assert len(saved) == len(LOCAL)
    assert all(any(c["requestor"] == "user" for m in t["messages"] if m["role"] == "user" and m.get("tool_calls")
                   for c in m["tool_calls"]) for t in saved)
    wrong, _, _ = scripted_run(tmp_path, "local", LOCAL, wrong=True)
    check_wrong(wrong, LOCAL)


@pytest.mark.docker
@pytest.mark.slow
def test_the_user_fixing_the_phone_scores_1_and_a_wrong_action_on_it_0_in_docker(tmp_path: Path):
    require_engine()
    results, requests, _ = scripted_run(tmp_path, "docker", DOCKER)
    check_right(results, requests, DOCKER)
    wrong, _, _ = scripted_run(tmp_path, "docker", DOCKER, wrong=True)
    check_wrong(wrong, DOCKER)


def _oracle(tmp_path: Path, *extra: str) -> dict[str, dict]:
    proc = cli("run", "taubench", "oracle", "mock", "-b", "domain=telecom", *extra, "--json", "-o",
               str(tmp_path / "o"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return records(tmp_path / "o")


def test_the_oracle_scores_1_on_the_20_tasks_locally(tmp_path: Path):
    results = _oracle(tmp_path)
    assert {t: r["metrics"]["reward"] for t, r in results.items()} == {f"telecom/{t}": 1.0 for t in ALL_TASKS}


@pytest.mark.docker
def test_the_oracle_scores_1_on_the_20_tasks_in_docker(tmp_path: Path):
    require_engine()
    results = _oracle(tmp_path, "--env", "docker")
    assert {t: r["metrics"]["reward"] for t, r in results.items()} == {f"telecom/{t}": 1.0 for t in ALL_TASKS}
