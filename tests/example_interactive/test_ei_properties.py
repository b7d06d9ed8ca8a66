"""Properties of the domain and the DB check (hypothesis)."""

from __future__ import annotations

import json
import random
from typing import Any

from example_interactive.domain import TOOL_NAMES, TaskDomain, canonical, db_equal, db_hash, replay
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.examples import examples

USERS = ["user_1", "user_2", "user_3", "user_9"]
TASK_IDS = [f"task_{i}" for i in range(1, 10)]
STATUS = ["pending", "completed", "archived"]


def base_db() -> dict:
    users: dict[str, Any] = {u: {"user_id": u, "name": u.upper(), "tasks": []} for u in USERS[:3]}
    tasks = {}
    for i in range(1, 6):
        owner = USERS[i % 3]
        tid = f"task_{i}"
        tasks[tid] = {
            "task_id": tid,
            "user_id": owner,
            "title": f"T{i}",
            "description": "",
            "status": "pending" if i % 2 else "completed",
        }
        users[owner]["tasks"].append(tid)
    return {"users": users, "tasks": tasks}


actions = st.one_of(
    st.builds(lambda u: {"name": "get_user", "arguments": {"user_id": u}}, st.sampled_from(USERS)),
    st.builds(lambda u: {"name": "list_tasks", "arguments": {"user_id": u}}, st.sampled_from(USERS)),
    st.builds(
        lambda u, t: {"name": "create_task", "arguments": {"user_id": u, "title": t}},
        st.sampled_from(USERS),
        st.text(max_size=8),
    ),
    st.builds(
        lambda t, s: {"name": "update_task_status", "arguments": {"task_id": t, "status": s}},
        st.sampled_from(TASK_IDS),
        st.sampled_from(STATUS),
    ),
)


@given(st.lists(actions, max_size=12))
def test_replay_is_deterministic_and_pure(seq):
    db = base_db()
    before = canonical(db)
    first = replay(db, seq, strict=False).db
    second = replay(json.loads(before), seq, strict=False).db
    assert db_equal(first, second) and db_hash(first) == db_hash(second)
    assert canonical(db) == before


@given(st.lists(actions, max_size=12))
def test_reads_and_failed_calls_never_change_the_db(seq):
    domain = TaskDomain(base_db())
    for action in seq:
        before = canonical(domain.db)
        result, is_error = domain.call(action["name"], json.dumps(action["arguments"]))
        json.loads(result)
        if is_error or action["name"] in ("get_user", "list_tasks"):
            assert canonical(domain.db) == before


@given(
    st.dictionaries(st.sampled_from(TASK_IDS[:5]), st.sampled_from(["pending", "completed"]), min_size=1),
    st.randoms(use_true_random=False),
)
def test_status_updates_on_distinct_tasks_commute(updates, rnd):
    seq = [{"name": "update_task_status", "arguments": {"task_id": t, "status": s}} for t, s in updates.items()]
    shuffled = list(seq)
    rnd.shuffle(shuffled)
    assert db_equal(replay(base_db(), seq).db, replay(base_db(), shuffled).db)


@given(st.randoms(use_true_random=False))
def test_db_check_ignores_key_order(rnd: random.Random):
    db = replay(base_db(), [{"name": "create_task", "arguments": {"user_id": "user_2", "title": "x"}}]).db

    def shuffle(value):
        if isinstance(value, dict):
            items = list(value.items())
            rnd.shuffle(items)
            return {k: shuffle(v) for k, v in items}
        return value

    assert db_equal(db, shuffle(db)) and db_hash(db) == db_hash(shuffle(db))


def test_creation_order_matters():
    a = {"name": "create_task", "arguments": {"user_id": "user_1", "title": "A"}}
    b = {"name": "create_task", "arguments": {"user_id": "user_1", "title": "B"}}
    assert not db_equal(replay(base_db(), [a, b]).db, replay(base_db(), [b, a]).db)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=8,
)


@settings(max_examples=examples(200))
@given(st.sampled_from([*TOOL_NAMES, "delete_task", ""]), json_values | st.text(max_size=20))
def test_any_tool_call_yields_a_json_result_and_never_raises(name, arguments):
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    result, is_error = TaskDomain(base_db()).call(name, raw)
    assert isinstance(is_error, bool)
    parsed = json.loads(result)
    if is_error:
        assert set(parsed) == {"error"}
