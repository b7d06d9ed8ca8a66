"""``run --scan`` scans each attempt from the records the run has just written, handed over by the
``agentcompass_result_recorded`` hook: nothing is read back from ``results.jsonl`` or ``trajectories.jsonl``
while the run goes (what cost the run most of its scanning overhead), and the findings are those
``agentcompass scan`` makes of the finished run."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from agentcompass import hookimpl
from agentcompass.plugins import load_plugins
from agentcompass.scanning import store

from tests.harnesses.support import run_with, text
from tests.helpers.cli_processes import ROOT, default_signals

#: The CLI in a child process, counting every opening for reading of the run's record files (an audit hook).
AUDITED_CLI = """
import collections, json, os, sys
opened = collections.Counter()
def audit(event, args):
    if event != "open" or not isinstance(args[0], (str, bytes, os.PathLike)):
        return
    name = os.path.basename(os.fsdecode(args[0]))
    mode = args[1] or "r"
    if name in ("results.jsonl", "trajectories.jsonl") and "r" in mode and "+" not in mode:
        opened[name] += 1
sys.addaudithook(audit)
from agentcompass.cli.main import cli
try:
    cli.main(sys.argv[1:], standalone_mode=False)
finally:
    print("OPENED " + json.dumps(opened))
"""


def audited_cli(*args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, int]]:
    done = subprocess.run([sys.executable, "-c", AUDITED_CLI, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env=dict(os.environ), preexec_fn=default_signals)
    line = next((x for x in done.stdout.splitlines() if x.startswith("OPENED ")), None)
    assert line is not None, done.stdout + done.stderr
    return done, json.loads(line.removeprefix("OPENED "))


def test_run_scan_reads_no_record_back_and_finds_what_scan_finds(tmp_path: Path) -> None:
    run_dir = tmp_path / "r"
    done, opened = audited_cli("run", "example_coding", "react", "mock", "-o", str(run_dir), "-n", "3",
                               "--scan", "gave-up", "--scan", "loop", "--scan", "reward-hacking")
    assert done.returncode == 0, done.stderr
    assert opened == {}  # results.jsonl and trajectories.jsonl were only written
    during = store.read(run_dir / "scans.jsonl")
    assert during and {d["scanner"] for d in during} == {"gave-up"}
    counts = json.loads((run_dir / "summary.json").read_text())["findings"]

    again = subprocess.run([sys.executable, "-m", "agentcompass.cli.main", "scan", str(run_dir), "--scanner",
                            "gave-up", "--scanner", "loop", "--scanner", "reward-hacking"], cwd=ROOT,
                           capture_output=True, text=True, timeout=120, preexec_fn=default_signals)
    assert again.returncode == 0, again.stderr
    key = lambda d: (d["task_id"], d["trial"], d["attempt"], d["scanner"], d["reason"])  # noqa: E731
    assert sorted(store.read(run_dir / "scans.jsonl"), key=key) == sorted(during, key=key)
    assert json.loads((run_dir / "summary.json").read_text())["findings"] == counts


TOKEN = "tok-5f1e9a7c3b2d4e6f8a0b"


def test_an_observer_gets_each_final_attempt_as_written_and_masked(tmp_path: Path, monkeypatch: Any) -> None:
    """The hook hands each final attempt's result line and call lines, equal to what the files hold (the secret
    the model echoed masked in both)."""
    from agentcompass.runtime.records import RecordedResult

    monkeypatch.setenv("MY_SERVICE_TOKEN", TOKEN)
    recorded: list[RecordedResult] = []

    class Recorder:
        @hookimpl
        def agentcompass_result_recorded(self, record: RecordedResult) -> None:
            recorded.append(record)

    host = load_plugins()
    host.add_plugin(Recorder(), "recorder")
    run_dir = tmp_path / "r"
    asyncio.run(run_with(lambda request: text(f"the token is {TOKEN}"), "example_coding", host=host,
                         run_dir=run_dir, limit=2, harness_args={"max_turns": "2"}))
    results = [json.loads(x) for x in (run_dir / "results.jsonl").read_text().splitlines()]
    calls = [json.loads(x) for x in (run_dir / "trajectories.jsonl").read_text().splitlines()]
    assert len(recorded) == len(results) == 2
    for record in recorded:
        assert record.run_dir == str(run_dir)
        line = next(r for r in results if r["task_id"] == record.task_id)
        assert json.loads(json.dumps(record.result, default=str)) == line
        assert record.attempt == line["attempt"] and record.trial == line["trial"]
        mine = [c for c in calls if c["task_id"] == record.task_id]
        assert mine and json.loads(json.dumps(record.calls, default=str)) == mine
    written = json.dumps([(r.result, r.calls) for r in recorded], default=str)
    assert "the token is ***" in written and TOKEN not in written
