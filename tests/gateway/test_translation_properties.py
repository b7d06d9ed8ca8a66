"""Hypothesis: a conversation translated to a protocol and back keeps what the README's table says it keeps."""

from __future__ import annotations

import itertools
import json
from typing import Any

from agentcompass.protocols import CODECS, CanonicalRequest
from agentcompass.protocols.sse import SSEParser, last_boundary
from agentcompass.runtime.model_stream import StreamAssembler, StreamEnd, events_of
from agentcompass.runtime.models import ChatResponse, Usage
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers.examples import examples

SETTINGS = settings(max_examples=examples(30), deadline=None, suppress_health_check=list(HealthCheck))
words = st.text(st.sampled_from("ab \"\\\n{}é中😀"), min_size=1, max_size=12)
names = st.from_regex(r"[a-z][a-z_]{0,10}", fullmatch=True)
ids = st.from_regex(r"(toolu|call)_[A-Za-z0-9]{4,10}", fullmatch=True)
json_values = st.recursive(st.none() | st.booleans() | st.integers() | words,
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(names, inner, max_size=3),
                           max_leaves=6)
arguments = st.dictionaries(names, json_values, max_size=3)
cache = st.sampled_from([None, {"type": "ephemeral"}])


def _cached(block: dict[str, Any], control: Any) -> dict[str, Any]:
    return {**block, "cache_control": control} if control else block


# -- Anthropic ----------------------------------------------------------------------------------------------

text_block = st.builds(lambda t, c: _cached({"type": "text", "text": t}, c), words, cache)
image_block = st.builds(lambda d: {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                               "data": d}}, st.from_regex(r"[A-Za-z0-9+/]{4,12}=", fullmatch=True))
tool_use = st.builds(lambda i, n, a: {"type": "tool_use", "id": i, "name": n, "input": a}, ids, names, arguments)
thinking = st.one_of(
    st.builds(lambda t, s: {"type": "thinking", "thinking": t, "signature": s}, words, words),
    st.builds(lambda d: {"type": "redacted_thinking", "data": d}, words))


@st.composite
def anthropic_turns(draw: st.DrawFn) -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = []
    pending: list[str] = []
    for i in range(draw(st.integers(1, 6))):
        if i % 2 == 0:  # user
            results = [{"type": "tool_result", "tool_use_id": p,
                        **({"content": draw(words)} if draw(st.booleans()) else
                           {"content": draw(st.lists(text_block, min_size=1, max_size=2))}),
                        **({"is_error": True} if draw(st.booleans()) else {})} for p in pending]
            rest = draw(st.lists(text_block | image_block, max_size=2))
            if not results and not rest and draw(st.booleans()):
                turns.append({"role": "user", "content": draw(words)})
            else:
                turns.append({"role": "user", "content": results + (rest or ([] if results else [draw(text_block)]))})
            pending = []
        else:
            if draw(st.booleans()):
                turns.append({"role": "assistant", "content": draw(words)})
                continue
            blocks = draw(st.lists(thinking, max_size=2)) + draw(st.lists(text_block, max_size=2))
            calls = draw(st.lists(tool_use, max_size=2, unique_by=lambda b: b["id"]))
            pending = [c["id"] for c in calls]
            turns.append({"role": "assistant", "content": blocks + calls})
    return turns


@SETTINGS
@given(turns=anthropic_turns(), system=st.none() | words | st.lists(text_block, min_size=1, max_size=2),
       tools=st.lists(st.builds(lambda n, d, c: _cached({"name": n, "description": d, "input_schema": {
           "type": "object", "properties": {}}}, c), names, words, cache), max_size=2, unique_by=lambda t: t["name"]),
       max_tokens=st.integers(1, 64000), stop=st.lists(words, max_size=2), temperature=st.none() | st.floats(0, 1))
def test_anthropic_to_canonical_and_back(turns: Any, system: Any, tools: Any, max_tokens: int, stop: Any,
                                         temperature: Any) -> None:
    body: dict[str, Any] = {"model": "m", "messages": turns, "max_tokens": max_tokens}
    if system:
        body["system"] = system
    if tools:
        body["tools"] = tools
        body["tool_choice"] = {"type": "any"}
    if stop:
        body["stop_sequences"] = stop
    if temperature is not None:
        body["temperature"] = temperature
    codec = CODECS["anthropic"]
    canonical = codec.parse_request(body)
    assert codec.render_request(canonical, "m") == body
    json.dumps(canonical.messages)  # the record is plain JSON


# -- Responses ----------------------------------------------------------------------------------------------


def _message(role: str, text: str) -> dict[str, Any]:
    if role == "assistant":
        return {"type": "message", "role": role, "content": [{"type": "output_text", "text": text, "annotations": []}]}
    return {"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]}


@st.composite
def responses_items(draw: st.DrawFn) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = [_message("user", draw(words))]
    for turn in range(draw(st.integers(0, 4))):
        reasoning = [{"type": "reasoning", "id": draw(ids), "summary": [{"type": "summary_text", "text": draw(words)}],
                      "encrypted_content": draw(words)} for _ in range(draw(st.integers(0, 1)))]
        said = [_message("assistant", draw(words))] if draw(st.booleans()) else []
        calls = []
        for call_id in (f"{i}_{turn}" for i in draw(st.lists(ids, max_size=2, unique=True))):  # unique in a run
            if draw(st.booleans()):
                calls.append({"type": "function_call", "call_id": call_id, "name": draw(names),
                              "arguments": json.dumps(draw(arguments))})
            else:
                calls.append({"type": "custom_tool_call", "call_id": call_id, "name": draw(names),
                              "input": draw(words)})
        if not (reasoning or said or calls):
            said = [_message("assistant", draw(words))]
        outputs = [{"type": "function_call_output" if c["type"] == "function_call" else "custom_tool_call_output",
                    "call_id": c["call_id"], "output": draw(words)} for c in calls]
        items += reasoning + said + calls + outputs
        items.append(_message(draw(st.sampled_from(["user", "developer"])), draw(words)))
    return items


@SETTINGS
@given(items=responses_items(), instructions=st.none() | words, max_output=st.none() | st.integers(1, 10000),
       tools=st.lists(st.one_of(
           st.builds(lambda n: {"type": "function", "name": n, "parameters": {"type": "object"}}, names),
           st.builds(lambda n, d: {"type": "custom", "name": n, "description": d}, names, words)),
           max_size=3, unique_by=lambda t: t["name"]),
       parallel=st.none() | st.booleans())
def test_responses_to_canonical_and_back(items: Any, instructions: Any, max_output: Any, tools: Any,
                                         parallel: Any) -> None:
    body: dict[str, Any] = {"model": "m", "input": items, "store": False}
    if instructions:
        body["instructions"] = instructions
    if max_output is not None:
        body["max_output_tokens"] = max_output
    if tools:
        body["tools"] = tools
        body["tool_choice"] = "auto"
    if parallel is not None:
        body["parallel_tool_calls"] = parallel
    codec = CODECS["responses"]
    assert codec.render_request(codec.parse_request(body), "m") == body


# -- Gemini -------------------------------------------------------------------------------------------------

signatures = st.from_regex(r"[A-Za-z0-9+/]{8,16}", fullmatch=True)


@st.composite
def gemini_contents(draw: st.DrawFn) -> list[dict[str, Any]]:
    contents: list[dict[str, Any]] = []
    pending: list[tuple[str, str]] = []
    for turn in range(draw(st.integers(1, 6))):
        if turn % 2 == 0:  # user: the answers to the last turn's calls, then text or an image
            parts: list[dict[str, Any]] = [
                {"functionResponse": {"id": i, "name": n, "response": {draw(st.sampled_from(["output", "error"])):
                                                                       draw(words)}}} for n, i in pending]
            rest = draw(st.lists(st.one_of(
                st.builds(lambda t: {"text": t}, words),
                st.builds(lambda d: {"inlineData": {"mimeType": "image/png", "data": d}},
                          st.from_regex(r"[A-Za-z0-9+/]{4,12}=", fullmatch=True))), max_size=2))
            contents.append({"role": "user", "parts": parts + (rest or ([] if parts else [{"text": draw(words)}]))})
            pending = []
        else:  # model: thoughts, at most one text, calls
            parts = [{"text": draw(words), "thought": True,
                      **({"thoughtSignature": draw(signatures)} if draw(st.booleans()) else {})}
                     for _ in range(draw(st.integers(0, 2)))]
            if draw(st.booleans()):
                parts.append({"text": draw(words)})
            calls = [{"functionCall": {"id": f"{i}_{turn}", "name": draw(names), "args": draw(arguments)},
                      **({"thoughtSignature": draw(signatures)} if draw(st.booleans()) else {})}
                     for i in draw(st.lists(ids, max_size=2, unique=True))]
            if not parts and not calls:
                parts.append({"text": draw(words)})
            pending = [(c["functionCall"]["name"], c["functionCall"]["id"]) for c in calls]
            contents.append({"role": "model", "parts": parts + calls})
    return contents


@SETTINGS
@given(contents=gemini_contents(), system=st.lists(words, max_size=2),
       tools=st.lists(st.builds(lambda n, d: {"name": n, "description": d, "parametersJsonSchema": {
           "type": "object", "properties": {"x": {"type": "string"}}}}, names, words),
           max_size=2, unique_by=lambda t: t["name"]),
       mode=st.sampled_from(["AUTO", "ANY", "NONE"]),
       config=st.fixed_dictionaries({}, optional={
           "temperature": st.floats(0, 2), "topP": st.floats(0, 1), "topK": st.integers(1, 64),
           "maxOutputTokens": st.integers(1, 65536), "stopSequences": st.lists(words, min_size=1, max_size=2),
           "seed": st.integers(0, 2**31), "thinkingConfig": st.builds(
               lambda b, i: {"thinkingBudget": b, "includeThoughts": i}, st.integers(-1, 4096), st.booleans()),
           "responseMimeType": st.just("application/json")}))
def test_gemini_to_canonical_and_back(contents: Any, system: Any, tools: Any, mode: str, config: Any) -> None:
    body: dict[str, Any] = {"contents": contents}
    if system:
        body["systemInstruction"] = {"parts": [{"text": t} for t in system]}
    if tools:
        body["tools"] = [{"functionDeclarations": tools}]
        body["toolConfig"] = {"functionCallingConfig": {"mode": mode}}
    if config:
        body["generationConfig"] = config
    codec = CODECS["gemini"]
    canonical = codec.parse_request(json.loads(json.dumps({**body, "model": "gemini-x"})))
    assert canonical.model == "gemini-x" and not canonical.dropped
    assert codec.render_request(canonical, "m") == body
    json.dumps(canonical.messages)  # the record is plain JSON


def test_gemini_calls_without_ids_are_matched_by_name_and_openapi_schemas_lowered() -> None:
    body = {"contents": [
        {"role": "user", "parts": [{"text": "go"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "ls", "args": {}}},
                                    {"functionCall": {"name": "cat", "args": {"path": "a"}}},
                                    {"functionCall": {"name": "ls", "args": {"dir": "b"}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "cat", "response": {"content": "A"}}},
                                   {"functionResponse": {"name": "ls", "response": {"output": "x"}}},
                                   {"functionResponse": {"name": "ls", "response": {"error": "no b"}}}]}],
        "tools": [{"functionDeclarations": [{"name": "ls", "parameters": {
            "type": "OBJECT", "properties": {"dir": {"type": "STRING"}, "n": {"type": "ARRAY", "items": {
                "type": "INTEGER"}}}}}]}, {"googleSearch": {}}]}
    canonical = CODECS["gemini"].parse_request(body)
    calls = canonical.messages[1]["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["ls", "cat", "ls"]
    assert len({c["id"] for c in calls}) == 3
    tools = canonical.messages[2:]
    assert [(t["tool_call_id"], t["content"], t.get("is_error", False)) for t in tools] == [
        (calls[1]["id"], '{"content": "A"}', False), (calls[0]["id"], "x", False), (calls[2]["id"], "no b", True)]
    assert canonical.tools[0]["function"]["parameters"] == {
        "type": "object", "properties": {"dir": {"type": "string"}, "n": {"type": "array", "items": {
            "type": "integer"}}}}
    assert canonical.dropped == ("tool googleSearch",)


# -- across protocols: the canonical conversation survives a trip through each -------------------------------


@st.composite
def canonical_conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": draw(words)}]
    for _ in range(draw(st.integers(1, 4))):
        messages.append({"role": "user", "content": draw(words)})
        calls = [{"id": i, "type": "function", "function": {"name": draw(names),
                                                           "arguments": json.dumps(draw(arguments))}}
                 for i in draw(st.lists(ids, max_size=2, unique=True))]
        said = draw(words) if draw(st.booleans()) or not calls else None
        messages.append({"role": "assistant", "content": said, **({"tool_calls": calls} if calls else {})})
        messages += [{"role": "tool", "tool_call_id": c["id"], "content": draw(words)} for c in calls]
    return messages


def _normal(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Plain text parts as strings; assistant content None when empty (what every protocol can say)."""
    out = []
    for m in messages:
        m = dict(m)
        if isinstance(m.get("content"), list) and all(p.get("type") == "text" for p in m["content"]):
            m["content"] = "".join(p["text"] for p in m["content"])
        if m["role"] == "assistant" and not m.get("content"):
            m["content"] = None
        if m.get("tool_calls"):  # arguments are kept as the same JSON value (re-serialised on the way)
            m["tool_calls"] = [{**c, "function": {**c["function"], "arguments": json.loads(c["function"]["arguments"])}}
                               for c in m["tool_calls"]]
        out.append(m)
    return out


@SETTINGS
@given(messages=canonical_conversations(), protocol=st.sampled_from(["anthropic", "responses", "chat", "gemini"]))
def test_a_canonical_conversation_survives_every_protocol(messages: Any, protocol: str) -> None:
    codec = CODECS[protocol]
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]
    request = CanonicalRequest(messages=messages, tools=tools, params={"max_tokens": 100, "temperature": 0.5})
    back = codec.parse_request(json.loads(json.dumps(codec.render_request(request, "m"))))
    assert _normal(back.messages) == _normal(messages)
    assert back.tools == tools and back.params["max_tokens"] == 100 and back.params["temperature"] == 0.5


answers = st.builds(
    lambda said, calls, reasoning: {"role": "assistant", "content": said,
                                    **({"tool_calls": calls} if calls else {}),
                                    **({"reasoning_content": reasoning} if reasoning else {})},
    st.none() | words,
    st.lists(st.builds(lambda i, n, a: {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}},
                       ids, names, arguments), max_size=2, unique_by=lambda c: c["id"]),
    st.none() | words)


@SETTINGS
@given(message=answers, protocol=st.sampled_from(["anthropic", "responses", "chat", "gemini"]),
       usage=st.builds(Usage, st.integers(0, 10**6), st.integers(0, 10**6)))
def test_an_answer_survives_every_protocol_whole_and_streamed(message: Any, protocol: str, usage: Usage) -> None:
    codec = CODECS[protocol]
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    response = ChatResponse(message=message, model="m", usage=usage, finish_reason=finish)
    whole = codec.parse_response(json.loads(json.dumps(codec.render_response(response, "m"))))
    encoder = codec.encoder("m", CanonicalRequest(messages=[], include_usage=True))
    raw = encoder.start() + b"".join(encoder.event(e) for e in events_of(response))
    decoder = codec.decoder("m")
    for name, data in SSEParser().feed(raw):
        decoder.feed(name, data)
    streamed = decoder.end().response
    for got in (whole, streamed):
        assert got.finish_reason == finish
        assert (got.message.get("content") or None) == (message.get("content") or None)
        assert _normal([got.message])[0].get("tool_calls", []) == _normal([message])[0].get("tool_calls", [])
        assert got.usage.prompt_tokens == usage.prompt_tokens and got.usage.completion_tokens == usage.completion_tokens
    assert (streamed.message.get("reasoning_content") or None) == (message.get("reasoning_content") or None)


def test_stream_assembler_keeps_pieces_in_order() -> None:
    pieces = StreamAssembler()
    for event in events_of(ChatResponse({"role": "assistant", "content": "hi"}, "m")):
        if not isinstance(event, StreamEnd):
            pieces.add(event)
    assert pieces.message() == {"role": "assistant", "content": "hi"}


@SETTINGS
@given(events=st.lists(st.tuples(st.none() | names, words), min_size=1, max_size=8),
       newline=st.sampled_from(["\n", "\r\n"]), cuts=st.lists(st.integers(0, 400), max_size=8))
def test_relayed_blocks_end_on_event_boundaries(events: Any, newline: str, cuts: Any) -> None:
    """The passthrough relay forwards whole events only, however the provider's bytes are cut."""
    raw = "".join((f"event: {n}{newline}" if n else "") + f"data: {json.dumps(d)}{newline}{newline}"
                  for n, d in events).encode()
    points = sorted({min(c, len(raw)) for c in cuts} | {0, len(raw)})
    pending, blocks = b"", []
    for a, b in itertools.pairwise(points):
        pending += raw[a:b]
        cut = last_boundary(pending)
        if cut > 0:
            blocks.append(pending[:cut])
            pending = pending[cut:]
    assert b"".join(blocks) == raw and pending == b""
    parsed = [e for block in blocks for e in SSEParser().feed(block)]
    assert parsed == [(n or "", json.dumps(d)) for n, d in events]
