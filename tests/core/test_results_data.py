"""Result JSON round trips, aggregation and redaction, over generated inputs."""

from __future__ import annotations

import json
import math

from agentcompass.redaction import MASK, Redactor
from agentcompass.results.run_dir import RunDirectory, read_jsonl, safe_name
from agentcompass.runtime import RunResult, TaskStatus
from agentcompass.runtime.metrics import aggregate, make_metric_contract
from agentcompass.serialization import dumps, result_from_json
from hypothesis import example, given
from hypothesis import strategies as st

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
results = st.builds(
    RunResult,
    task_id=st.text(min_size=1, max_size=20),
    category=st.none() | st.sampled_from(["a", "b", "c"]),
    status=st.sampled_from(list(TaskStatus)),
    final_answer=json_values,
    error=st.none() | st.text(max_size=40),
    artifacts=st.dictionaries(st.text(max_size=8), json_values, max_size=3),
    metrics=st.dictionaries(st.sampled_from(["score", "f1"]), st.floats(0, 1), max_size=2),
    attempt=st.integers(1, 5),
    error_phase=st.none() | st.sampled_from(["prepare", "run", "collect", "evaluate"]),
    timings=st.dictionaries(st.sampled_from(["run", "total"]), st.floats(0, 1e4), max_size=2),
)


@given(results)
def test_run_result_json_round_trip(result):
    line = dumps(result)
    assert "\n" not in line
    assert result_from_json(json.loads(line)) == result
    assert json.loads(line)["status"] == result.status.value


@given(st.lists(results, max_size=30))
def test_aggregation_counts_errors_as_zero_and_reports_both_means(rs):
    contract = make_metric_contract(primary="score", scalar=("score", "f1"))
    overall, metrics = aggregate(contract, rs)
    assert overall.n_results == len(rs)
    assert sum(overall.status_counts.values()) == len(rs)
    completed = [r for r in rs if r.status is TaskStatus.COMPLETED]
    for name in ("score", "f1"):
        m = metrics.overall[name]
        total = sum(r.metrics.get(name, 0.0) for r in completed)
        assert m.n == len(rs) and m.n_completed == len(completed) and m.n_errored == len(rs) - len(completed)
        assert m.n_missing == sum(name not in r.metrics for r in completed)
        if rs:
            assert math.isclose(m.mean, total / len(rs), abs_tol=1e-12)
            assert m.mean <= (m.mean_completed or 0.0) + 1e-12
        else:
            assert m.mean is None
        if completed:
            assert math.isclose(m.mean_completed, total / len(completed), abs_tol=1e-12)
        else:
            assert m.mean_completed is None
    # Every task with a category is counted in exactly one category group.
    assert sum(g.n_results for g in metrics.by_category.values()) == sum(r.category is not None for r in rs)


secret_text = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), min_size=6, max_size=40)


@given(secrets=st.lists(secret_text, min_size=1, max_size=3), prefix=st.text(max_size=20), suffix=st.text(max_size=20))
def test_redaction_removes_every_secret(secrets, prefix, suffix):
    redactor = Redactor()
    redactor.add(*secrets)
    text = prefix + "".join(secrets) + suffix
    redacted = redactor.text(text)
    for s in secrets:
        assert s not in redacted
    data = redactor.data({"k": [text, {"inner": secrets[0]}], secrets[0]: 1})
    assert secrets[0] not in json.dumps(data)
    assert MASK in json.dumps(data)


@given(secret=secret_text, result=results)
@example(secret="000000", result=RunResult(task_id="0", status=TaskStatus.COMPLETED, final_answer=390_625_000_000))
def test_result_writer_never_writes_a_secret(tmp_path_factory, secret, result):
    from dataclasses import replace

    path = tmp_path_factory.mktemp("run")
    redactor = Redactor()
    redactor.add(secret)
    store = RunDirectory.create(path, redactor)
    store.append_result(replace(result, error=f"auth failed with key {secret}", artifacts={"echo": secret}))
    store.write_summary({"note": secret})
    store.close()
    for file in path.iterdir():
        assert secret not in file.read_text()
    assert len(list(read_jsonl(path / "results.jsonl"))) == 1


def test_safe_names_do_not_collide():
    assert safe_name("a/b") != safe_name("a_b")
    assert safe_name("plain-id_1.x") == "plain-id_1.x"
