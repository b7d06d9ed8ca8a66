"""The public run-directory reader (``agentcompass.runtime.run_reader.RunReader``) on a real run: what it reads, and
how it follows a run that is still writing (by byte offset, torn lines waiting for their newline)."""

from __future__ import annotations

import json

import pytest
from agentcompass.errors import ResultsError
from agentcompass.runtime.run_reader import LOGS, RESULTS, TRAJECTORIES, RunReader

from tests.helpers.cli_processes import finished_run, read_jsonl


def test_it_reads_what_the_run_wrote(tmp_path):
    run_dir = finished_run(tmp_path, n=3)
    reader = RunReader.open(run_dir)
    written = read_jsonl(run_dir / RESULTS)
    assert reader.run_id == json.loads((run_dir / "run.json").read_text())["run_id"]
    assert sorted(reader.results) == sorted((r["task_id"], r["trial"]) for r in written)
    assert reader.summary() is not None and reader.summary()["n_finished"] == 3
    assert reader.warnings == [] and reader.refresh() is False


def test_logs_are_followed_by_byte_offset_and_a_torn_line_waits_for_its_newline(tmp_path):
    run_dir = finished_run(tmp_path, n=2)
    reader = RunReader.open(run_dir)
    logs, offset = reader.logs()
    events = [r["event"] for r in logs]
    assert "run.started" in events and events[-1] == "run.finished"
    assert offset == (run_dir / LOGS).stat().st_size
    assert reader.logs(offset) == ([], offset)
    with open(run_dir / LOGS, "a") as f:
        f.write('{"event": "late.event", "n": ')  # a writer in the middle of a line
    assert reader.logs(offset) == ([], offset)
    with open(run_dir / LOGS, "a") as f:
        f.write('1}\n[1, 2]\n')
    more, end = reader.logs(offset)
    assert more == [{"event": "late.event", "n": 1}] and end == (run_dir / LOGS).stat().st_size
    assert reader.warnings[-1].endswith("holds list, not a JSON object; skipped")


def test_refresh_reads_only_what_was_appended(tmp_path):
    run_dir = finished_run(tmp_path, n=2)
    reader = RunReader.open(run_dir)
    first = next(iter(reader.results.values()))
    again = {**first, "trial": 2, "final_answer": "appended"}
    with open(run_dir / RESULTS, "a") as f:
        f.write(json.dumps(again) + "\n" + '{"task_id": 5}\n' + json.dumps({**again, "trial": 3})[:20])
    assert reader.refresh() is True
    assert reader.results[(first["task_id"], 2)]["final_answer"] == "appended"
    assert (first["task_id"], 3) not in reader.results  # torn: not yet
    assert reader.warnings == [f"{run_dir / RESULTS}:4: not a valid result (task_id is not a string); skipped"]
    calls = reader.trajectory((first["task_id"], 1))
    assert [c["task_id"] for c in calls] == [first["task_id"]] * len(calls)
    assert len(calls) == sum(1 for c in read_jsonl(run_dir / TRAJECTORIES) if c["task_id"] == first["task_id"])


def test_a_directory_that_is_not_a_run_is_one_clear_error(tmp_path):
    with pytest.raises(ResultsError, match=r"has no run\.json"):
        RunReader.open(tmp_path)
    (tmp_path / "run.json").write_text("[]")
    with pytest.raises(ResultsError, match="not a JSON object"):
        RunReader.open(tmp_path)
