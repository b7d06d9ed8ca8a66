"""The report's data, without a browser: reading run directories, the conversation and its caps, safe JSON in
HTML, masking, the comparison (against ``results compare``), the commands' errors and the viewer's API."""

from __future__ import annotations

import json
import re
import shutil
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from agentcompass.runtime.model_providers import Redactor
from agentcompass.runtime.run_reader import RunReader
from agentcompass_report.compare import compare
from agentcompass_report.conversation import Caps, conversation
from agentcompass_report.page import json_for_html, render
from agentcompass_report.payload import contract_of, live_summary
from agentcompass_report.secrets import known_secrets
from agentcompass_report.server import is_loopback
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.cli_processes import run_cli_subprocess, start_cli
from tests.helpers.examples import examples
from tests.helpers.report_runs import PLANTED_KEY

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@given(json_values)
def test_json_in_a_script_block_holds_no_character_that_could_end_it_and_reads_back_the_same(value):
    text = json_for_html(value, Redactor())
    assert not set(text) & {"<", ">", "&", "\u2028", "\u2029"}
    assert json.loads(text) == value


def test_a_number_json_cannot_hold_is_written_as_its_name():
    text = json_for_html({"m": [float("nan"), float("inf"), -float("inf"), 1.5]}, Redactor())
    assert json.loads(text) == {"m": ["NaN", "Infinity", "-Infinity", 1.5]}


@settings(max_examples=examples(50))
@given(st.lists(st.text(alphabet="<>/!-&\"' scriptSCRIPT", max_size=30), max_size=5))
def test_no_data_opens_or_closes_a_script_element_of_the_page(texts):
    page = render({"texts": texts}, [(f"0-{i}", {"answer": t}) for i, t in enumerate(texts)], Redactor(), "report",
                  "t")
    assert page.lower().count("<script") == 2 + len(texts)
    assert page.lower().count("</script") == 2 + len(texts)


def _call(messages, response, attempt=1, role="agent"):
    return {"attempt": attempt, "role": role, "messages": messages, "response": response, "prompt_tokens": 3,
            "completion_tokens": 1, "latency_s": 0.5, "cost_usd": None}


def test_each_call_shows_only_the_messages_the_one_before_it_did_not():
    system, ask = {"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}
    reply = {"role": "assistant", "content": None,
             "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "look", "arguments": "{}"}}]}
    result = {"role": "tool", "tool_call_id": "c1", "content": "found"}
    calls = [_call([system, ask], reply), _call([system, ask, reply, result], {"role": "assistant", "content": "ok"}),
             _call([system, {"role": "user", "content": "again"}], {"role": "assistant", "content": "x"}, attempt=2)]
    conv = conversation(calls)
    first, second, third = conv["calls"]
    assert [m["content"] for m in first["messages"]] == ["be brief", "hi"] and first["skipped"] == 0
    assert first["response"]["tool_calls"] == [{"id": "c1", "name": "look", "arguments": "{}"}]
    assert second["skipped"] == 3 and second["messages"] == [{"role": "tool", "content": "found", "tool_call_id": "c1"}]
    assert third["skipped"] == 0 and len(third["messages"]) == 2  # a new attempt starts its own conversation
    assert conv["cut"] is None


@given(st.lists(st.text(min_size=0, max_size=300), min_size=1, max_size=20),
       st.integers(min_value=1, max_value=200), st.integers(min_value=1, max_value=1500))
def test_the_caps_bound_what_a_trajectory_inlines_and_the_note_counts_what_was_cut(texts, per_text, total):
    # one call per attempt, so that no call repeats another's messages
    calls = [_call([{"role": "user", "content": t}], {"role": "assistant", "content": ""}, attempt=i)
             for i, t in enumerate(texts)]
    conv = conversation(calls, Caps(text=per_text, total=total, calls=1000))
    shown = [m["content"] for c in conv["calls"] if not c.get("dropped") for m in c["messages"]]
    assert all(len(t) <= per_text for t in shown)
    assert sum(len(t) for t in shown) <= total
    cut = conv["cut"] or {"calls_dropped": 0, "chars_cut": 0, "texts_shortened": 0}
    kept = [t for c, t in zip(conv["calls"], texts, strict=True) if not c.get("dropped")]
    assert cut["calls_dropped"] == len(texts) - len(kept)
    assert cut["chars_cut"] == sum(len(t) for t in kept) - sum(len(t) for t in shown)
    assert cut["texts_shortened"] == sum(1 for a, b in zip(kept, shown, strict=True) if a != b)


def test_reading_skips_damage_naming_the_line_waits_for_a_torn_line_and_follows_appends(runs, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(runs["main"], run)
    lines = (run / "results.jsonl").read_text().splitlines(keepends=True)
    (run / "results.jsonl").write_text(lines[0] + "{not json\n" + '{"task_id": 5}\n' + lines[1][:20])
    files = RunReader.open(run)
    assert list(files.results) == [(json.loads(lines[0])["task_id"], 1)]
    assert files.warnings == [f"{run / 'results.jsonl'}:2: not a JSON line (JSONDecodeError: Expecting property "
                              f"name enclosed in double quotes: line 1 column 2 (char 1)); skipped",
                              f"{run / 'results.jsonl'}:3: not a valid result (task_id is not a string); skipped"]
    with open(run / "results.jsonl", "a") as f:
        f.write(lines[1][20:])
        f.write(lines[0].replace('"COMPLETED"', '"EVAL_ERROR"'))  # the first task recorded again
    assert files.refresh()
    assert len(files.results) == 2 and files.replaced == 1
    assert next(iter(files.results.values()))["status"] == "EVAL_ERROR"  # in place, last line wins
    assert not files.refresh()


def test_a_directory_that_is_not_a_run_is_refused_in_one_line(tmp_path):
    done = run_cli_subprocess("report", str(tmp_path), testing=False)
    assert done.returncode == 2
    assert done.stderr.strip() == f"Error: {tmp_path} is not a run directory: it has no run.json"
    (tmp_path / "run.json").write_text('{"run_id": 3}')
    done = run_cli_subprocess("report", str(tmp_path), testing=False)
    assert done.returncode == 2 and done.stderr.strip() == (
        f"Error: {tmp_path / 'run.json'} is damaged: run_id is not a string")


def close(a, b) -> bool:
    """``a`` and ``b`` (JSON data) are equal, numbers to within rounding."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) or isinstance(b, float):
        return a == pytest.approx(b, rel=1e-12, abs=1e-12)
    return a == b


def test_the_live_summary_of_a_finished_run_equals_its_summary_json(runs):
    for name in ("main", "errored", "trials"):
        files = RunReader.open(runs[name])
        written = json.loads((runs[name] / "summary.json").read_text())
        live = json.loads(json.dumps(live_summary(files, contract_of(files.info))))
        assert close(live["metrics"], written["metrics"])  # summed in another order: equal to rounding
        assert live["status_counts"] == written["status_counts"]
        assert close(live["verdicts"], written["verdicts"])  # the flip rates the page shows of a live run


def test_the_comparison_is_results_compare_as_json(runs):
    ours = compare(RunReader.open(runs["main"]), RunReader.open(runs["trials"]))
    done = run_cli_subprocess("results", "compare", str(runs["main"]), str(runs["trials"]), "--json", testing=False)
    assert done.returncode == 0, done.stderr
    theirs = json.loads(done.stdout)[0]
    assert ours["problem"] is None and ours["n_shared_tasks"] == theirs["n_shared_tasks"] > 0
    overall = [m for m in ours["metrics"] if m["category"] is None]
    assert json.loads(json.dumps(overall)) == [m for m in theirs["metrics"] if m["category"] is None]
    assert {m["category"] for m in ours["metrics"]} > {None}  # and per category, which the page shows


def test_runs_of_different_benchmarks_are_shown_but_not_compared(runs, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(runs["main"], other)
    info = json.loads((other / "run.json").read_text())
    info["request"]["benchmark"] = "something_else"
    (other / "run.json").write_text(json.dumps(info))
    result = compare(RunReader.open(runs["main"]), RunReader.open(other))
    assert result["metrics"] == [] and "not compared" in result["problem"]


def test_a_planted_key_shows_only_when_nothing_names_it_as_a_secret(runs, tmp_path):
    out = tmp_path / "page.html"
    done = run_cli_subprocess("report", str(runs["hostile"]), "-o", str(out), testing=False)
    assert done.returncode == 0 and PLANTED_KEY in out.read_text()  # so the masked cases below can fail
    done = run_cli_subprocess("report", str(runs["hostile"]), "-o", str(out), "--secret-env", "MY_VALUE",
                              testing=False, env={"MY_VALUE": PLANTED_KEY})
    assert done.returncode == 0 and PLANTED_KEY not in out.read_text() and "my key is ***" in out.read_text()
    creds = tmp_path / "credentials.toml"
    creds.write_text(f'[openai]\napi_key = "{PLANTED_KEY}"\n')
    done = run_cli_subprocess("report", str(runs["hostile"]), "-o", str(out), testing=False,
                              env={"AGENTCOMPASS_CREDENTIALS": str(creds)})
    assert done.returncode == 0 and PLANTED_KEY not in out.read_text()
    done = run_cli_subprocess("report", str(runs["hostile"]), "--secret-env", "NOT_SET_ANYWHERE", testing=False)
    assert done.returncode == 2 and "--secret-env names $NOT_SET_ANYWHERE, which is not set" in done.stderr


def test_secrets_are_found_as_the_run_would_have_found_them():
    environ = {"OPENAI_API_KEY": "sk-openai-123456", "MY_VAR": "custom-key-98765", "HOME": "/root",
               "GITHUB_TOKEN": "ghp_abcdefgh"}
    requests = [{"model_api_key_env": "MY_VAR", "model_base_url": "https://user:pa55word@host/v1"}]
    found = set(known_secrets(requests, environ))
    assert found == {"sk-openai-123456", "custom-key-98765", "ghp_abcdefgh", "pa55word", "user"}


def test_view_refuses_a_non_loopback_address_unless_asked(runs):
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.4")
    done = run_cli_subprocess("view", str(runs["main"]), "--host", "0.0.0.0", testing=False)
    assert done.returncode == 2 and "not a loopback address" in done.stderr and "--allow-remote" in done.stderr


def _get(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, {}


def test_the_viewer_api_serves_rows_incrementally_and_details_masked(runs, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(runs["hostile"], run)
    lines = (run / "results.jsonl").read_text().splitlines(keepends=True)
    (run / "results.jsonl").write_text("".join(lines[:2]))
    server = start_cli("view", str(run), testing=False, env={"SERVICE_TOKEN": PLANTED_KEY})
    try:
        assert server.stderr is not None
        base = re.search(r"at (http://127\.0\.0\.1:\d+/)", server.stderr.readline()).group(1)
        status, summary = _get(base + "api/summary")
        assert status == 200 and summary["runs"][0]["n_rows"] == 2 and summary["runs"][0]["live"]
        status, tasks = _get(base + "api/tasks?run=0&from=0&replaced=0")
        assert [r[0] for r in tasks["rows"]] == [json.loads(x)["task_id"] for x in lines[:2]]
        with open(run / "results.jsonl", "a") as f:
            f.writelines(lines[2:4])
        status, more = _get(base + "api/tasks?run=0&from=2&replaced=0")
        assert more["from"] == 2 and [r[0] for r in more["rows"]] == [json.loads(x)["task_id"] for x in lines[2:4]]
        status, detail = _get(base + "api/task/0-0")
        assert status == 200 and detail["result"]["task_id"] == json.loads(lines[0])["task_id"]
        text = json.dumps(detail)
        assert PLANTED_KEY not in text and "my key is ***" in text
        assert _get(base + "api/task/0-99")[0] == 404 and _get(base + "api/task/7-0")[0] == 404
        assert _get(base + "api/tasks?run=0&from=x")[0] == 400
        with urllib.request.urlopen(base, timeout=10) as r:
            page = r.read().decode()
        assert "connect-src 'self'" in page and PLANTED_KEY not in page
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_report_writes_beside_the_run_by_default(runs, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(runs["main"], run)
    done = run_cli_subprocess("report", str(run), testing=False)
    assert done.returncode == 0 and (run / "report.html").is_file()
    assert done.stdout.startswith(f"wrote {run / 'report.html'} (")
    assert Path(run / "report.html").read_text().startswith("<!DOCTYPE html>")
