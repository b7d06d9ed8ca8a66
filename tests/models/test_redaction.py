"""The redactor masks a secret cut short by a truncation and in the encodings it is sent in; what a call record
cuts is masked before it is cut."""

from __future__ import annotations

import base64
import json
import string
from urllib.parse import quote, quote_plus

from agentcompass.models.metering import RECORD_LIMIT, bound_call
from agentcompass.redaction import MASK, Redactor
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tests.helpers.examples import examples

#: Text around the secrets: no 8-character run of it can be part of a key (every 8 characters hold a space).
FILLER = "the key in the call was not valid; " * 40
KEY_CHARS = string.ascii_letters + string.digits + "-_"
#: Characters that JSON, percent-encoding or base64 change (or that line up base64 differently).
ODD_CHARS = KEY_CHARS + "+/=%&?#\"\\ é~.:"


def keys(alphabet: str = KEY_CHARS, min_size: int = 12) -> st.SearchStrategy[str]:
    """Random keys, as real ones are (Hypothesis's text strategy likes words and runs of zeros, which the
    text around a key may hold too)."""
    return st.builds(lambda rnd, n: "sk-" + "".join(rnd.choice(alphabet) for _ in range(n)),
                     st.randoms(use_true_random=True), st.integers(min_size, 56))


def pieces(value: str, n: int = 8) -> set[str]:
    return {value[i:i + n] for i in range(len(value) - n + 1)}


def leaked(value: str, text: str) -> set[str]:
    return {p for p in pieces(value) if p in text}


@settings(max_examples=examples(300), deadline=None)
@given(key=keys(), data=st.data())
def test_a_key_cut_by_a_truncation_is_masked(key: str, data: st.DataObject) -> None:
    cut = 300
    at = data.draw(st.integers(cut - len(key) + 1, cut - 1), label="key offset")  # the cut splits the key
    body = FILLER[:at] + key + FILLER
    redactor = Redactor()
    redactor.add(key)
    head = body[:cut] + "..."
    tail = "..." + body[-(len(body) - at - 1):] if data.draw(st.booleans(), label="tail too") else ""
    for text in (head, tail, head + tail, json.dumps({"error": head, "more": tail})):
        out = redactor.text(text)
        assert not leaked(key, out), (text, out)
    json.loads(redactor.text(json.dumps({"error": head})))  # still valid JSON


def encodings(key: str, user: str) -> list[tuple[str, str, int, int]]:
    """(name, text, start, end): an encoded text holding ``key``, and where in it the key's characters lie."""
    out = [("raw", key, 0, len(key))]
    for name, form in [("json", json.dumps(key)[1:-1]), ("json-ascii", json.dumps(key, ensure_ascii=True)[1:-1]),
                       ("json-twice", json.dumps(json.dumps(key)[1:-1])[1:-1]), ("quote", quote(key)),
                       ("quote-all", quote(key, safe="")), ("quote_plus", quote_plus(key))]:
        out.append((name, form, 0, len(form)))
    for prefix in ("", "Bearer ", f"{user}:"):
        data = (prefix + key).encode()
        before = len(prefix.encode())
        # The base64 characters that carry bits of the key's bytes.
        start, end = before // 3 * 4, -(-len(data) // 3) * 4
        for name, encode in (("b64", base64.b64encode), ("b64-url", base64.urlsafe_b64encode)):
            text = encode(data).decode()
            out.append((f"{name}({prefix!r}+key)", text, start, end))
            out.append((f"{name}({prefix!r}+key) unpadded", text.rstrip("="), start, min(end, len(text.rstrip("=")))))
    return out


@settings(max_examples=examples(300), deadline=None)
@given(key=keys(ODD_CHARS), user=st.text(alphabet=string.ascii_letters + string.digits, max_size=12),
       wrap=st.sampled_from(["plain", "header", "json-line"]))
def test_encoded_keys_are_masked(key: str, user: str, wrap: str) -> None:
    redactor = Redactor()
    redactor.add(key)
    for name, form, start, end in encodings(key, user):
        region = form[start:end]
        assume(len(region) >= 8)
        if wrap == "json-line" and name == "json-twice":
            continue  # escaped a third time: JSON in JSON in JSON is not a form the redactor knows
        text = {"plain": f"[{form}]", "header": f"Authorization: Basic {form}\n",
                "json-line": json.dumps({"note": f"sent {form} to the server"}, ensure_ascii=False)}[wrap]
        out = redactor.text(text)
        assert MASK in out, (name, text)
        # At most the edge groups of a base64 text (which mix in the bytes around the key) remain.
        assert not leaked(region, out), (name, form, out)
        assert not leaked(key, out), (name, form, out)
        if wrap == "json-line":
            json.loads(out)


def test_short_and_low_entropy_pieces_are_masked_whole_only() -> None:
    redactor = Redactor()
    redactor.add("sk-000000000000000000")
    assert redactor.text("latency 0.000000001 s") == "latency 0.000000001 s"
    assert redactor.text("key sk-000000000000000000!") == "key ***!"


@settings(max_examples=examples(50), deadline=None)
@given(key=keys(), shift=st.integers(0, 4000), tail=st.integers(0, 3) )
def test_a_call_record_is_masked_before_it_is_cut(key: str, shift: int, tail: int) -> None:
    # Keys back to back where the cut falls: wherever it lands, it splits one (or none) of them.
    content = "x" * (RECORD_LIMIT - 6000 + shift) + key * (8000 // len(key)) + "y" * 1_000_000
    call = {"messages": [{"role": "user", "content": "hi"}, {"role": "user", "content": content}],
            "response": {"role": "assistant", "content": "ok " * tail}, "error": None}
    redactor = Redactor()
    redactor.add(key)
    kept, original = bound_call(call, redactor)
    assert original is not None and original > len(content)
    assert len(json.dumps(kept, ensure_ascii=False).encode()) <= RECORD_LIMIT
    text = kept["messages"][1]["content"]
    assert text.endswith(" more bytes not recorded]")
    recorded = text[:text.rindex("[... ")]
    assert redactor.text(content).startswith(recorded)  # what is kept is a prefix of the masked text
    assert kept["messages"][0] == call["messages"][0] and kept["response"] == call["response"]


def test_a_record_of_countless_messages_leaves_out_the_middle() -> None:
    call = {"messages": [{"role": "user", "content": f"message {i}"} for i in range(100_000)],
            "response": None, "error": None}
    kept, original = bound_call(call, None)
    assert original is not None and len(json.dumps(kept).encode()) <= RECORD_LIMIT
    messages = kept["messages"]
    assert messages[0]["content"] == "message 0" and messages[-1]["content"] == "message 99999"
    [note] = [m for m in messages if m["role"] == "agentcompass"]
    assert note["content"] == f"[... {100_000 - len(messages) + 1} messages not recorded]"
