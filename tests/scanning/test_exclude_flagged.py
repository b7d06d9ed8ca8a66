"""``evaluate --exclude-flagged SCANNER``: the run scored again without the attempts a scanner flagged, saying how
many were left out; without it, findings change no score. A real run (the react harness on an example_coding
task, two trials: a scripted model that solves it in the first and refuses the second, which ``refusal``
flags)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from agentcompass.cli.main import cli
from click.testing import CliRunner

from tests.harnesses.support import assistant_turns, run_with, solver, text

REFUSAL = "I'm sorry, but I can't help with that request."


def solves_once() -> Any:
    conversations = 0

    def responder(request: dict[str, Any]) -> dict[str, Any]:
        nonlocal conversations
        if assistant_turns(request) == 0:
            conversations += 1
        refused = any(REFUSAL in str(m.get("content")) for m in request["messages"] if m.get("role") == "assistant")
        if refused or (assistant_turns(request) == 0 and conversations > 1):
            return text(REFUSAL)
        return solver(request)
    return responder


def evaluate(*args: str) -> Any:
    return CliRunner().invoke(cli, ["evaluate", *args, "--json"])


def test_exclude_flagged_scores_without_the_flagged_attempts_and_says_how_many(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    asyncio.run(run_with(solves_once(), "example_coding", task_ids=["fizzbuzz"],
                         run_dir=run_dir, trials=2, concurrency=1))
    scanned = CliRunner().invoke(cli, ["scan", str(run_dir), "--scanner", "refusal", "--json"])
    assert [(f["trial"], f["scanner"]) for f in json.loads(scanned.stdout)] == [(2, "refusal")]

    plain = evaluate(str(run_dir), "-o", str(tmp_path / "all"))
    assert plain.exit_code == 0, plain.output
    summary = json.loads(plain.stdout)
    assert (summary["n_finished"], summary["metrics"]["overall"]["score"]["mean"]) == (2, 0.5)

    unflagged = evaluate(str(run_dir), "-o", str(tmp_path / "clean"), "--exclude-flagged", "refusal")
    assert unflagged.exit_code == 0, unflagged.output
    summary = json.loads(unflagged.stdout)
    assert (summary["n_finished"], summary["metrics"]["overall"]["score"]["mean"]) == (1, 1.0)
    assert "left out 1 results flagged by refusal" in unflagged.stderr
    derived = json.loads((tmp_path / "clean" / "run.json").read_text())["derived_from"]
    assert derived["excluded_flagged"] == "1 flagged by refusal"
    rows = [json.loads(line)["trial"] for line in (tmp_path / "clean" / "results.jsonl").read_text().splitlines()]
    assert rows == [1]

    other = evaluate(str(run_dir), "-o", str(tmp_path / "env"), "--exclude-flagged", "reward-hacking")
    assert json.loads(other.stdout)["n_finished"] == 2 and "left out 0 results" in other.stderr


def test_exclude_flagged_on_an_unscanned_run_says_to_scan_it(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    asyncio.run(run_with(lambda request: text(REFUSAL), "example_coding", task_ids=["fizzbuzz"], run_dir=run_dir))
    result = CliRunner().invoke(cli, ["evaluate", str(run_dir), "--exclude-flagged", "refusal"])
    assert result.exit_code == 2 and f"agentcompass scan {run_dir}" in result.output
    assert "Traceback" not in result.output
    scanned = CliRunner().invoke(cli, ["scan", str(run_dir), "--scanner", "refusal"])
    assert scanned.exit_code == 0
    everything = CliRunner().invoke(cli, ["evaluate", str(run_dir), "--exclude-flagged", "refusal"])
    assert everything.exit_code == 2 and "leaves none of the 1 results" in everything.output
