"""A suite's cells share one concurrency, one environment bound and one cost budget (agentcompass.capacity), and a
cell's lock is dropped by the kernel when its holder dies."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys

import pytest
from agentcompass import hookimpl
from agentcompass.capacity import SharedCapacity
from agentcompass.errors import UsageError
from agentcompass.models.budget import CostPool, LimitReached, RunBudget
from agentcompass.runtime.records import TaskEvent
from agentcompass.suites.cell_state import SuiteDirectory
from agentcompass.suites.scheduler import SuiteRunner
from agentcompass.suites.suite_file import expand

from tests.helpers.cli_processes import wait_for


class InFlight:
    """Counts the attempts between their first phase change and FINISHED, over every run of the process."""

    def __init__(self) -> None:
        self.now = 0
        self.most = 0
        self.runs: set[str] = set()

    @hookimpl
    def agentcompass_task_event(self, event: TaskEvent) -> None:
        if event.event != "task.phase":
            return
        if event.previous == "PENDING":
            self.now += 1
            self.most = max(self.most, self.now)
            self.runs.add(event.run_id)
        if event.phase == "FINISHED":
            self.now -= 1


def grid(cells: int, **defaults: object) -> dict[str, object]:
    return {"defaults": {"benchmark": "example_interactive", "harness": "none", "model": "mock",
                         "model_args": {"latency": "0.02"}, **defaults},
            "run": [{"name": f"c{i}", "seed": i} for i in range(cells)]}


def test_cells_share_one_concurrency(host, tmp_path):
    seen = InFlight()
    host.add_plugin(seen, "in-flight")
    try:
        runner = SuiteRunner(host, SuiteDirectory(tmp_path / "s"), concurrency=3, handle_signals=False)
        outcome = asyncio.run(runner.run(expand(grid(3, concurrency=8, limit=6), "s.toml")))
    finally:
        host.remove_plugin("in-flight")
    assert [c.state for c in outcome.cells] == ["finished"] * 3
    assert len(seen.runs) == 3
    assert seen.most == 3  # each cell alone would run 6 at once; together they never pass the suite's 3
    assert seen.now == 0


def test_a_shared_max_cost_stops_every_cell(host, tmp_path):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"mock": {"input": 1000.0, "output": 1000.0}}))  # 1,000 tokens = 1 USD
    runner = SuiteRunner(host, SuiteDirectory(tmp_path / "s"), concurrency=2, max_cost=3.0, handle_signals=False)
    outcome = asyncio.run(runner.run(expand(grid(3, prices=str(prices)), "s.toml")))
    spent = 0.0
    for cell in outcome.cells:
        assert cell.summary is not None
        spent += sum(u.cost_usd or 0.0 for u in cell.summary.usage.values())
    stopped = [c for c in outcome.cells if c.summary.stopped_reason]
    assert stopped and all("shared max_cost=3" in c.summary.stopped_reason for c in stopped)
    assert any(c.state == "unfinished" for c in outcome.cells)  # unrun work stays resumable
    assert spent >= 3.0
    assert sum(c.summary.n_finished for c in outcome.cells) < 3 * 11


def test_a_shared_max_cost_needs_prices(host, tmp_path):
    runner = SuiteRunner(host, SuiteDirectory(tmp_path / "s"), max_cost=1.0, handle_signals=False)
    unpriced = grid(1, model="openai-compatible/unpriced", model_base_url="http://127.0.0.1:9/v1")
    outcome = asyncio.run(runner.run(expand(unpriced, "s.toml")))
    assert outcome.cells[0].state == "failed" and "--max-cost needs a price" in outcome.cells[0].error


def test_the_cost_pool_stops_a_budget_that_did_not_spend_it():
    pool = CostPool(max_cost=1.0)
    a, b = RunBudget(pool=pool), RunBudget(pool=pool)
    a.add_cost(0.6)
    assert b.poll() is None
    a.add_cost(0.5)
    assert a.stop_reason is not None and "shared max_cost=1" in a.stop_reason
    with pytest.raises(LimitReached):
        b.check()
    assert b.stopped_by_limit


def test_shared_capacity_checks_its_limits():
    with pytest.raises(UsageError, match="--concurrency"):
        SharedCapacity(0)
    with pytest.raises(UsageError, match="--max-environments"):
        SharedCapacity(1, max_environments=0)


def test_a_killed_holder_never_blocks_a_cell(tmp_path):
    directory = SuiteDirectory(tmp_path)
    directory.state_dir.mkdir()
    code = ("import sys, time; from agentcompass.suites.cell_state import SuiteDirectory; from pathlib import Path;"
            "lock = SuiteDirectory(Path(sys.argv[1])).lock('c'); assert lock.acquire(); print('held', flush=True);"
            "time.sleep(60)")
    holder = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        lock = directory.lock("c")
        assert not lock.acquire()
        assert lock.holder()["pid"] == holder.pid
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=10)
        wait_for(lock.acquire, timeout=10, what="the dead holder's lock to go")
        assert lock.holder()["pid"] == os.getpid()
        lock.release()
    finally:
        if holder.poll() is None:
            holder.kill()


def test_a_cell_with_an_unknown_option_is_reported_and_the_others_run(host, tmp_path):
    suite = tmp_path / "suite.toml"
    data = grid(2, limit=2)
    data["run"].append({"name": "typo", "concurency": 3})  # type: ignore[union-attr]
    runner = SuiteRunner(host, SuiteDirectory(tmp_path / "s"), handle_signals=False)
    outcome = asyncio.run(runner.run(expand(data, str(suite))))
    states = {c.name: c.state for c in outcome.cells}
    assert states == {"c0": "finished", "c1": "finished", "typo": "failed"}
    typo = next(c for c in outcome.cells if c.name == "typo")
    assert str(suite) in typo.error and "cell 'typo'" in typo.error and "concurency" in typo.error
    assert "concurrency" in typo.error  # the parser's "did you mean"
    assert not (tmp_path / "s" / "typo").exists()


def test_a_crashed_cell_is_run_again_by_a_resume_up_to_retries_and_the_rest_is_left_alone(host, tmp_path):
    data = {"defaults": {"model": "mock"},
            "run": [{"name": "ok", "benchmark": "scripted", "harness": "none", "benchmark_args": {"n": "2"}},
                    {"name": "crash", "benchmark": "broken", "harness": "nop"}]}
    directory = SuiteDirectory(tmp_path / "s")
    notes: list[str] = []

    class Notes:
        def cell_note(self, name, message):  # type: ignore[no-untyped-def]
            notes.append(f"{name}: {message}")

        def cell_started(self, name, run_dir, resumed):  # type: ignore[no-untyped-def]
            notes.append(f"{name}: started")

        def cell_ended(self, outcome):  # type: ignore[no-untyped-def]
            pass

    def run(plan):  # type: ignore[no-untyped-def]
        return asyncio.run(SuiteRunner(host, directory, retries=1, observer=Notes(), handle_signals=False).run(plan))

    first = run(expand(data, "s.toml"))
    assert {c.name: c.state for c in first.cells} == {"ok": "finished", "crash": "failed"}
    assert "task_id" in next(c for c in first.cells if c.name == "crash").error  # the benchmark's KeyError
    assert directory.state("crash").failures == 1
    assert int(first.exit_code) == 1
    notes.clear()
    second = run(None)
    assert notes == ["crash: started"]  # the finished cell is not run again; the failed one is (1 <= --retries 1)
    assert directory.state("crash").failures == 2
    notes.clear()
    third = run(None)
    assert notes == ["crash: not run again: " + next(c for c in third.cells if c.name == "crash").error]
    assert "failed 2 times; --retries 1 allows no more" in notes[0]
    assert {c.name: c.state for c in second.cells} == {c.name: c.state for c in third.cells}
