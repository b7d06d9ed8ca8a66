"""The task-management domain: tools, policy errors, replay and the DB check."""

from __future__ import annotations

import ast
import json
import sys
from importlib import resources
from typing import Any

import pytest
from example_interactive import RUNNER_FILES
from example_interactive.domain import (
    POLICY,
    STATUSES,
    TOOL_NAMES,
    TOOLS,
    TaskDomain,
    ToolError,
    apply_patch,
    canonical,
    db_diff,
    db_equal,
    db_hash,
    replay,
)

DB: dict[str, Any] = {
    "users": {
        "user_1": {"user_id": "user_1", "name": "Ann", "tasks": ["task_1"]},
        "user_2": {"user_id": "user_2", "name": "Ben", "tasks": []},
    },
    "tasks": {
        "task_1": {
            "task_id": "task_1",
            "user_id": "user_1",
            "title": "T",
            "description": "",
            "status": "pending",
        }
    },
}


def call(domain: TaskDomain, name: str, **arguments):
    result, is_error = domain.call(name, json.dumps(arguments))
    return json.loads(result), is_error


def test_tool_schemas_are_openai_functions():
    assert set(TOOL_NAMES) == {
        "get_user",
        "list_tasks",
        "create_task",
        "update_task_status",
        "transfer_to_human_agents",
    }
    for tool in TOOLS:
        assert tool["type"] == "function"
        fn = tool["function"]
        params = fn["parameters"]
        assert params["type"] == "object" and fn["description"]
        assert set(params["required"]) <= set(params["properties"])
    status = next(t for t in TOOLS if t["function"]["name"] == "update_task_status")
    assert status["function"]["parameters"]["properties"]["status"]["enum"] == ["pending", "completed"]
    assert "delete" not in " ".join(TOOL_NAMES)
    json.dumps(TOOLS)  # serialisable as a request body


def test_get_user_and_list_tasks():
    d = TaskDomain(DB)
    user, err = call(d, "get_user", user_id="user_1")
    assert not err and user["name"] == "Ann" and user["tasks"] == ["task_1"]
    tasks, err = call(d, "list_tasks", user_id="user_1")
    assert not err and [t["task_id"] for t in tasks] == ["task_1"]
    assert call(d, "list_tasks", user_id="user_2") == ([], False)


def test_create_task_assigns_the_next_id_and_links_the_user():
    d = TaskDomain(DB)
    task, err = call(d, "create_task", user_id="user_2", title="Write tests")
    assert not err
    assert task == {
        "task_id": "task_2",
        "user_id": "user_2",
        "title": "Write tests",
        "description": "",
        "status": "pending",
    }
    assert d.db["users"]["user_2"]["tasks"] == ["task_2"]
    task, _ = call(d, "create_task", user_id="user_1", title="More", description="with text")
    assert task["task_id"] == "task_3" and task["description"] == "with text"


def test_update_task_status_and_transfer():
    d = TaskDomain(DB)
    task, err = call(d, "update_task_status", task_id="task_1", status="completed")
    assert not err and d.db["tasks"]["task_1"]["status"] == "completed" == task["status"]
    result, err = call(d, "transfer_to_human_agents", summary="needs a human")
    assert not err and result == "Transfer successful"
    assert d.transferred and d.transfer_summary == "needs a human"


@pytest.mark.parametrize(
    ("name", "arguments", "fragment"),
    [
        ("get_user", {"user_id": "user_9"}, "user 'user_9' not found"),
        ("list_tasks", {"user_id": "nobody"}, "not found"),
        ("create_task", {"user_id": "user_9", "title": "X"}, "user 'user_9' not found"),
        ("create_task", {"user_id": "user_1", "title": "   "}, "non-empty title"),
        ("create_task", {"user_id": "user_1"}, "missing required argument(s) for create_task: title"),
        ("update_task_status", {"task_id": "task_1", "status": "archived"}, "invalid status 'archived'"),
        ("update_task_status", {"task_id": "task_1", "status": "Completed"}, "invalid status"),
        ("update_task_status", {"task_id": "task_9", "status": "completed"}, "task 'task_9' not found"),
        (
            "update_task_status",
            {"task_id": "task_1", "status": "completed", "x": "1"},
            "unexpected argument 'x'",
        ),
        ("get_user", {"user_id": 1}, "must be a string"),
        ("delete_task", {"task_id": "task_1"}, "unknown tool 'delete_task'"),
    ],
)
def test_policy_errors_are_tool_results_and_change_nothing(name, arguments, fragment):
    d = TaskDomain(DB)
    result, err = call(d, name, **arguments)
    assert err is True
    assert fragment in result["error"]
    assert db_equal(d.db, DB) and not d.transferred


@pytest.mark.parametrize("raw", ["{not json", "[1, 2]", '"text"'])
def test_malformed_arguments_are_tool_errors(raw):
    result, err = TaskDomain(DB).call("get_user", raw)
    assert err and "error" in json.loads(result)


def test_empty_arguments_string_means_no_arguments():
    result, err = TaskDomain(DB).call("get_user", "")
    assert err and "missing required" in json.loads(result)["error"]


def test_optional_argument_may_be_null():
    d = TaskDomain(DB)
    task, err = call(d, "create_task", user_id="user_1", title="A", description=None)
    assert not err and task["description"] == ""


def test_the_domain_never_mutates_its_input():
    before = canonical(DB)
    d = TaskDomain(DB)
    call(d, "create_task", user_id="user_1", title="A")
    call(d, "update_task_status", task_id="task_1", status="completed")
    assert canonical(DB) == before
    snap = d.snapshot()
    snap["tasks"].clear()
    assert d.db["tasks"]


def test_apply_patch_replaces_and_removes_records():
    patched = apply_patch(
        DB,
        {
            "tasks": {"task_1": None, "task_5": {"task_id": "task_5"}},
            "users": {"user_3": {"user_id": "user_3"}},
        },
    )
    assert set(patched["tasks"]) == {"task_5"}
    assert set(patched["users"]) == {"user_1", "user_2", "user_3"}
    assert "task_1" in DB["tasks"]
    assert apply_patch(DB, None) == DB


def test_replay_is_strict_unless_told_otherwise():
    actions = [{"name": "update_task_status", "arguments": {"task_id": "task_9", "status": "completed"}}]
    with pytest.raises(ToolError):
        replay(DB, actions)
    assert db_equal(replay(DB, actions, strict=False).db, DB)


def test_db_check_helpers():
    other = json.loads(json.dumps(DB))
    assert db_equal(DB, other) and db_hash(DB) == db_hash(other)
    other["tasks"]["task_1"]["status"] = "completed"
    other["users"]["user_3"] = {"user_id": "user_3"}
    assert not db_equal(DB, other)
    diff = db_diff(DB, other)
    assert any(line.startswith("tasks.task_1: expected") for line in diff)
    assert 'users.user_3: unexpected {"user_id":"user_3"}' in diff
    assert db_diff(other, DB)[-1] == "users.user_3: missing"


def test_policy_text_states_the_rules():
    for phrase in ("never be deleted", "cannot be reopened", "belongs to", "pending", "completed"):
        assert phrase in POLICY
    assert STATUSES == ("pending", "completed")


# -- the packaged tasks --------------------------------------------------------------------------


def test_tasks_file_is_consistent(task_doc, resolved_tasks):
    tasks = task_doc["tasks"]
    assert 10 <= len(tasks) <= 15
    assert len({t["id"] for t in tasks}) == len(tasks)
    assert {t["category"] for t in tasks} == {"create", "update", "policy", "multi-step"}
    for task_id, task in resolved_tasks.items():
        # every golden action is valid on the task's initial DB
        golden = replay(task["initial_db"], task["golden_actions"])
        assert task["user"]["first_message"], task_id
        # policy tasks change nothing; the others change something
        changed = not db_equal(golden.db, task["initial_db"])
        assert changed is (task["category"] != "policy"), task_id
        for action in task["golden_actions"]:
            assert action["name"] in TOOL_NAMES


def test_user_lines_are_free_of_single_quotes(resolved_tasks):
    # the mock model reads '...' and "..." as quoted values; an apostrophe would open a bogus one
    for task in resolved_tasks.values():
        for line in [task["user"]["first_message"], *task["user"]["follow_ups"]]:
            assert "'" not in line, line


def test_db_patch_is_applied(resolved_tasks):
    db = resolved_tasks["policy_delete_request"]["initial_db"]
    assert "task_7" in db["tasks"] and "task_7" in db["users"]["user_1"]["tasks"]
    assert "task_7" not in resolved_tasks["create_basic"]["initial_db"]["tasks"]


def test_runner_files_import_only_the_standard_library():
    package = resources.files("example_interactive")
    for name in RUNNER_FILES:
        if not name.endswith(".py"):
            continue
        tree = ast.parse(package.joinpath(name).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                roots = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                roots = [(node.module or "").split(".")[0]]
            else:
                continue
            for root in roots:
                assert root in sys.stdlib_module_names or root == "example_interactive", (name, root)
