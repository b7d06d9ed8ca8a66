"""Reading a run's attempts for the scanners cheaply: a call line's prompt left unparsed but for the last call of
each role, the trajectory file read as a stream, and the patterns' cheap pre-checks never missing a match."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from agentcompass.results.lines import LineTail
from agentcompass.results.reader import RunReader
from agentcompass.runtime.scanning import steps_of
from agentcompass.scanning.builtin import _ENVIRONMENT, _REFUSAL
from agentcompass.scanning.transcripts import attempt_calls, call_without_messages
from hypothesis import given, settings
from hypothesis import strategies as st


def core_line(data: dict[str, Any]) -> bytes:
    """A line as the run directory writes it (compact, keys in order)."""
    return (json.dumps(data, ensure_ascii=False, default=str, separators=(",", ":")) + "\n").encode()


#: Text that looks like the line's own structure, inside strings and as nested keys.
TRICKY = st.sampled_from(['],"tools":[', '"messages":', "]", "}", '\\"', "\\", "é", "\n", '{"tools":1}'])
TEXT = st.lists(st.one_of(TRICKY, st.text(max_size=8)), max_size=6).map("".join)
JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | TEXT,
                       lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                           st.sampled_from(["tools", "messages", "content", "x"]) | TEXT, inner, max_size=3),
                       max_leaves=8)


def a_call(index: int, role: str, messages: list[Any], response: Any, tools: list[str]) -> dict[str, Any]:
    return {"task_id": "t \"1\"", "trial": 1, "attempt": 1, "index": index, "role": role, "model": "m",
            "started_at": 0.0, "latency_s": 0.1, "messages": messages, "tools": tools, "response": response,
            "prompt_tokens": 3, "completion_tokens": 1, "error": None}


@settings(max_examples=150, deadline=None)
@given(messages=st.lists(JSONISH, max_size=4), response=JSONISH, tools=st.lists(TEXT, max_size=3))
def test_a_call_without_messages_is_the_call_less_its_messages(messages: list[Any], response: Any,
                                                                  tools: list[str]) -> None:
    call = a_call(0, "agent", messages, response, tools)
    parsed = call_without_messages(core_line(call))
    assert parsed == {k: v for k, v in call.items() if k != "messages"}


def test_a_line_not_laid_out_as_the_core_writes_it_is_not_read_partly() -> None:
    call = a_call(0, "agent", [{"role": "user", "content": "hi"}], None, [])
    assert call_without_messages(json.dumps(call).encode()) is None  # spaces after the separators
    del call["tools"]
    assert call_without_messages(core_line(call)) is None


def write_run(run_dir: Path, calls: list[dict[str, Any]]) -> RunReader:
    run_dir.mkdir()
    (run_dir / "run.json").write_text(json.dumps({
        "run_id": "r", "request": {"benchmark": "b", "harness": "h", "model": "m"},
        "plan": {"metric_contract": {"primary": "reward"}}}))
    (run_dir / "results.jsonl").write_text(json.dumps({"task_id": "t \"1\"", "trial": 1, "attempt": 2,
                                                       "status": "COMPLETED"}) + "\n")
    (run_dir / "trajectories.jsonl").write_bytes(b"".join(core_line(c) for c in calls))
    return RunReader.open(run_dir)


def test_only_the_last_call_of_each_role_keeps_its_messages_and_every_tool_output_is_found(tmp_path: Path) -> None:
    conversation: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    calls = [dict(a_call(0, "agent", [], None, []), attempt=1)]  # an earlier attempt: not this transcript's
    for i in range(4):
        reply = {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": json.dumps(
                {"command": f"echo {i}"})}}]}
        calls.append(dict(a_call(i, "agent", list(conversation), reply, ["bash"]), attempt=2))
        conversation += [reply, {"role": "tool", "tool_call_id": f"c{i}", "content": f"out {i}"}]
        if i == 1:
            calls.append(dict(a_call(9, "judge", [{"role": "user", "content": "grade"}],
                                     {"content": "ok"}, []), attempt=2))
    calls.append(dict(a_call(4, "agent", list(conversation), {"content": "done"}, ["bash"]), attempt=2))
    reader = write_run(tmp_path / "run", calls)

    read = attempt_calls(reader, ("t \"1\"", 1), 2)

    assert [(c["index"], c["role"], "messages" in c) for c in read] == [
        (0, "agent", False), (1, "agent", False), (9, "judge", True), (2, "agent", False), (3, "agent", False),
        (4, "agent", True)]
    assert [(c["response"], c["tools"]) for c in read] == [(c["response"], c["tools"]) for c in calls[1:]]
    assert [(s.command, s.output) for s in steps_of(read)] == [(f"echo {i}", f"out {i}") for i in range(4)]


@settings(max_examples=60, deadline=None)
@given(lines=st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=8),
       torn=st.binary(max_size=10).map(lambda b: b.replace(b"\n", b"")))
def test_a_line_tail_streams_the_complete_lines_and_waits_for_a_torn_one(tmp_path_factory: Any, lines: list[bytes],
                                                                        torn: bytes) -> None:
    path = tmp_path_factory.mktemp("tail") / "f.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in lines) + torn)
    tail = LineTail(path)
    got = list(tail.new_lines())
    assert [raw for _, _, raw in got] == [line + b"\n" for line in lines]
    assert [offset for _, offset, _ in got] == [sum(len(x) + 1 for x in lines[:i]) for i in range(len(lines))]
    assert tail.offset == sum(len(x) + 1 for x in lines)
    with open(path, "ab") as f:
        f.write(b"\n")
    assert [raw for _, _, raw in tail.new_lines()] == ([torn + b"\n"])


def _pieces(pattern: re.Pattern[str]) -> list[str]:
    """The literal words of a pattern's alternatives, for texts that match it."""
    return [p for p in re.split(r"[|()?:\\]|\[[^\]]*\]|\$|\bb\b|\bs\*", pattern.pattern) if len(p) > 3]


SIGNS = [sign for _, sign in _ENVIRONMENT] + [_REFUSAL]
PIECES = sorted({p for sign in SIGNS for p in _pieces(sign.pattern)} | {
    "I can't help", "I'm sorry, but I cannot assist", "against my policy", "I must refuse", "Killed",
    "exit code 137", "No such file or directory: 'gcc'", ": not found"})


@settings(max_examples=300, deadline=None)
@given(sign=st.sampled_from(SIGNS),
       parts=st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=6), st.sampled_from([" ", "\n"])),
                      max_size=6),
       upper=st.booleans())
def test_a_signs_pre_check_never_hides_a_match(sign: Any, parts: list[str], upper: bool) -> None:
    text = "".join(parts)
    text = text.upper() if upper else text
    assert (sign.search(text) is None) == (sign.pattern.search(text) is None)
