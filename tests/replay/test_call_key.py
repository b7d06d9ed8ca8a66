"""The canonical request key (what replay matches on and the cache is keyed on): equal requests key equal; any
change to the messages, tools or settings changes the key; what differs between two attempts of the same work
(temporary paths, tool-call ids, gateway tokens and ports, session metadata) does not."""

from __future__ import annotations

import copy
import json
import random
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from agentcompass.models.call_key import (
    _DATE,
    _LOOPBACK,
    _TEMP_PATH,
    _TOKEN,
    _strings,
    first_difference,
    normalise,
    request_key,
    tool_digests,
)
from hypothesis import given, settings
from hypothesis import strategies as st

# Text without "/" or ":" — nothing in it is a path, token or address the key normalises.
words = st.text(alphabet="abcdefghijklmnopqrstuvwxyz ABCXYZ0123456789.,!?-_'\"\n{}[]", min_size=0, max_size=40)
names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12)
scalars = st.one_of(st.integers(-1000, 1000), st.floats(0, 2, allow_nan=False), words, st.booleans())
schemas = st.recursive(scalars, lambda inner: st.dictionaries(names, inner, max_size=3), max_leaves=6)


@st.composite
def tool_calls(draw: Any) -> dict[str, Any]:
    return {"id": "call_" + draw(names), "type": "function",
            "function": {"name": draw(names), "arguments": json.dumps(draw(st.dictionaries(names, scalars,
                                                                                           max_size=3)))}}


@st.composite
def conversations(draw: Any) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": draw(words)},
                                      {"role": "user", "content": draw(words)}]
    for _ in range(draw(st.integers(0, 4))):
        calls = draw(st.lists(tool_calls(), max_size=2, unique_by=lambda c: c["id"]))
        messages.append({"role": "assistant", "content": draw(st.one_of(st.none(), words)),
                         **({"tool_calls": calls} if calls else {})})
        for call in calls:
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": draw(words)})
    return messages


tools_lists = st.lists(st.builds(lambda n, d, p: {"type": "function", "function": {
    "name": n, "description": d, "parameters": p}}, names, words, schemas), max_size=3, unique_by=lambda t:
    t["function"]["name"])
params_dicts = st.dictionaries(st.sampled_from(["temperature", "top_p", "max_tokens", "seed", "stop",
                                                "tool_choice"]), scalars, max_size=4)


def shuffled(value: Any, rng: random.Random) -> Any:
    """``value`` with every object's keys in another order."""
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: shuffled(v, rng) for k, v in items}
    if isinstance(value, list):
        return [shuffled(v, rng) for v in value]
    return value


@settings(max_examples=150, deadline=None)
@given(conversations(), tools_lists, params_dicts, st.randoms(use_true_random=False))
def test_equal_requests_have_equal_keys(messages: list, tools: list, params: dict, rng: random.Random) -> None:
    assert request_key(messages, tools, params) == request_key(
        shuffled(copy.deepcopy(messages), rng), shuffled(copy.deepcopy(tools), rng), shuffled(dict(params), rng))


@settings(max_examples=200, deadline=None)
@given(conversations(), tools_lists, params_dicts, st.data())
def test_any_change_to_messages_tools_or_settings_changes_the_key(messages: list, tools: list, params: dict,
                                                                  data: st.DataObject) -> None:
    key = request_key(messages, tools, params)
    what = data.draw(st.sampled_from(["message", "new message", "drop message", "tool", "new tool", "setting",
                                      "new setting"]))
    m, t, p = copy.deepcopy(messages), copy.deepcopy(tools), dict(params)
    if what == "message":
        i = data.draw(st.integers(0, len(m) - 1))
        old = m[i].get("content")
        m[i]["content"] = data.draw(words.filter(lambda w: w != old))
    elif what == "new message":
        m.append({"role": "user", "content": data.draw(words)})
    elif what == "drop message":
        m.pop(data.draw(st.integers(0, len(m) - 1)))
    elif what == "tool" and t:
        function = t[data.draw(st.integers(0, len(t) - 1))]["function"]
        function["description"] = function["description"] + data.draw(words.filter(bool))
    elif what in ("tool", "new tool"):
        t.append({"type": "function", "function": {"name": "extra_tool", "parameters": {}}})
    elif what == "setting" and p:
        name = data.draw(st.sampled_from(sorted(p)))
        p[name] = data.draw(scalars.filter(lambda v: v != p[name] or type(v) is not type(p[name])))
        if json.dumps(p[name]) == json.dumps(params[name]):
            return  # 1 and 1.0, True and 1: the same JSON, the same request
    else:
        p["presence_penalty"] = data.draw(st.floats(0.1, 1.0))
    assert request_key(m, t, p) != key, what


def test_what_differs_between_attempts_of_the_same_work_is_left_out() -> None:
    def request(workdir: str, ids: tuple[str, str], token: str, port: int) -> tuple[list, list, dict]:
        messages = [
            {"role": "system", "content": f"Work in {workdir}; the API is http://127.0.0.1:{port}/v1 ({token})."},
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": ids[0], "type": "function", "function": {"name": "bash", "arguments": "{}"}},
                {"id": ids[1], "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": ids[0], "content": f"{workdir}/solution.py"},
            {"role": "tool", "tool_call_id": ids[1], "content": "ok"},
        ]
        return messages, [], {"temperature": 0, "metadata": {"user_id": token}}

    one = request("/tmp/agentcompass-local-RUN1-abcd1234/roman-x1y2z3w4", ("call_a", "call_b"),
                  "acgw-" + "x" * 32, 40001)
    two = request("/tmp/agentcompass-local-RUN2-zzzz9999/roman-qqqqqqqq", ("toolu_1", "toolu_2"),
                  "acgw-" + "y" * 32, 40002)
    assert request_key(*one) == request_key(*two)
    swapped = request("/tmp/agentcompass-local-RUN1-abcd1234/roman-x1y2z3w4", ("call_b", "call_a"),
                      "acgw-" + "x" * 32, 40001)
    swapped[0][3]["tool_call_id"], swapped[0][4]["tool_call_id"] = "call_a", "call_b"  # results swapped
    assert request_key(*swapped) != request_key(*one)
    elsewhere = request("/home/me/project", ("call_a", "call_b"), "acgw-" + "x" * 32, 40001)
    assert request_key(*elsewhere) != request_key(*one)  # a real path is part of the question


def test_the_first_difference_names_the_path_and_shows_a_short_diff() -> None:
    old = normalise([{"role": "system", "content": "line one\nline two\nline three"}], (), {"temperature": 0})
    new = normalise([{"role": "system", "content": "line one\nline 2\nline three"}], (), {"temperature": 0})
    text = first_difference(old, new)
    assert text.startswith("messages[0].content differs:")
    assert "-line two" in text and "+line 2" in text
    assert first_difference(old, normalise(old["messages"], (), {"temperature": 1})).startswith(
        "params.temperature differs:")
    longer = normalise([*old["messages"], {"role": "user", "content": "more"}], (), {"temperature": 0})
    assert "messages (length)" in first_difference(old, longer)


def test_todays_date_is_left_out_so_a_recording_replays_another_day(monkeypatch) -> None:
    import agentcompass.models.call_key as call_key

    prompt = [{"role": "system", "content": "Today's date is 2026-12-02. The invoice is dated 2025-01-31."}]
    monkeypatch.setattr(call_key, "current_dates", lambda: frozenset({"2026-12-01", "2026-12-02", "2026-12-03"}))
    recorded = request_key(prompt)
    monkeypatch.setattr(call_key, "current_dates", lambda: frozenset({"2027-03-09", "2027-03-10", "2027-03-11"}))
    later = [{"role": "system", "content": "Today's date is 2027-03-10. The invoice is dated 2025-01-31."}]
    assert request_key(later) == recorded
    other_invoice = [{"role": "system", "content": "Today's date is 2027-03-10. The invoice is dated 2025-02-01."}]
    assert request_key(other_invoice) != recorded


# -- the key's value is stable (recorded runs and caches made by earlier versions keep matching) -------------------

#: Requests and the keys (and tool digests) the key had before the fast paths of ``normalise``: temp paths, a date,
#: a gateway token and port, tool-call ids, tuples, an OrderedDict, ignored and ``None`` settings.
GOLDEN = [
    (([{"role": "user", "content": "question task-1"}], None, None),
     "8d1c27c92d5a6e32aed101721b07df64b88d0107e6931d844a9c4ff9447b7e8c", []),
    (([{"role": "system", "content": "Today is 2026-01-02; work in "
        "/tmp/agentcompass-local-RUN-abcd1234/roman-x1y2z3w4/solution.py"},
       {"role": "user", "content": ["a", ("b", 1, 2.5, True, None)]},
       {"role": "assistant", "content": None, "tool_calls": [{"id": "call_zz", "type": "function", "function": {
           "name": "f", "arguments": "{\"path\": \"/tmp/tmpabcd_123/x\"}"}}]},
       {"role": "tool", "tool_call_id": "call_zz",
        "content": "acgw-ABCDEFGHIJKLMNOPQRSTUVWXYZ at http://127.0.0.1:43123/v1"}],
      [{"type": "function", "function": {"name": "f", "description": "é ü 2026-13-45 /var/tmp",
                                         "parameters": OrderedDict(a=1)}}],
      {"temperature": 0.5, "metadata": {"x": 1}, "seed": 3, "stop": ("a", "b"), "max_tokens": None}),
     "c6cf3fb8e2ec4a7052fbecebe96d40a5f97c7be649a650bdab3efd14fb39e601", ["f18557340f1e"]),
]


def test_keys_are_the_same_as_before_the_fast_paths() -> None:
    for (messages, tools, params), key, digests in GOLDEN:
        assert request_key(messages, tools, params) == key
        assert tool_digests(tools) == digests


def _reference_strings(value: Any, dates: frozenset[str]) -> Any:
    """``normalise``'s walk as it was before its fast paths (every string through every pattern)."""
    if isinstance(value, str):
        if dates and "-" in value:
            value = _DATE.sub(lambda m: "<today>" if m.group(0) in dates else m.group(0), value)
        if "/" in value:
            value = _TEMP_PATH.sub("<tmp>", value)
        if "acgw-" in value:
            value = _TOKEN.sub("<token>", value)
        if ":" in value:
            value = _LOOPBACK.sub(r"\1:<port>", value)
        return value
    if isinstance(value, Mapping):
        return {str(k): _reference_strings(v, dates) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_reference_strings(v, dates) for v in value]
    return value


path_words = st.lists(st.sampled_from(["/tmp/tmpab12cd34/x.py", "/tmp", "/tmpx", "/var/tmp/run-abcdefgh",
                                       "/home/u", "2026-01-02", "1999-12-31", "today", "-", "/", ":", " ",
                                       "acgw-" + "a" * 24, "localhost:8080", "x"]), max_size=6).map("".join)
json_values = st.recursive(
    st.one_of(path_words, st.integers(), st.floats(allow_nan=False), st.booleans(), st.none()),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.lists(inner, max_size=3).map(tuple),
                            st.dictionaries(path_words, inner, max_size=3),
                            st.dictionaries(path_words, inner, max_size=3).map(OrderedDict)),
    max_leaves=10)


@given(json_values, st.sampled_from([frozenset(), frozenset({"2026-01-02"}), frozenset({"1999-12-31", "x"})]))
def test_the_fast_paths_normalise_as_every_pattern_did(value: Any, dates: frozenset[str]) -> None:
    assert _strings(value, dates) == _reference_strings(value, dates)


def test_todays_dates_follow_the_clock_across_midnight(monkeypatch) -> None:
    from datetime import UTC, datetime, timedelta

    from agentcompass.models import call_key

    clock = [datetime(2026, 12, 2, 23, 59, 59, tzinfo=UTC)]

    class Clock(datetime):
        @classmethod
        def now(cls, tz=None):  # type: ignore[no-untyped-def,override]
            return clock[0]

    monkeypatch.setattr(call_key, "datetime", Clock)
    monkeypatch.setattr(call_key.time, "time", lambda: clock[0].timestamp())
    assert call_key.current_dates() == {"2026-12-01", "2026-12-02", "2026-12-03"}
    assert call_key.current_dates() is call_key.current_dates()  # made once for the day
    clock[0] += timedelta(seconds=2)
    assert call_key.current_dates() == {"2026-12-02", "2026-12-03", "2026-12-04"}
