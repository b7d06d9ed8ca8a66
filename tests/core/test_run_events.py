"""What a run announces, to every observer alike (the console is one of them, see test_console.py): how much work
there is and how much was done before, its live figures, the damaged records a resume skipped, each task's end,
the signals it received."""

from __future__ import annotations

import os
import signal
from typing import Any

from agentcompass import hookimpl
from agentcompass.cli.common import observing
from agentcompass.runner import Runner
from agentcompass.runtime import RunRequest
from agentcompass.runtime.records import LiveFigures, TaskEvent


class Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []
        self.figures: list[LiveFigures] = []

    @hookimpl
    def agentcompass_run_started(self, n_work: int, n_finished: int, figures) -> None:
        self.seen.append(("started", (n_work, n_finished)))
        self.figures.append(figures())

    @hookimpl
    def agentcompass_run_warning(self, run_id: str, message: str) -> None:
        self.seen.append(("warning", message))

    @hookimpl
    def agentcompass_task_event(self, event: TaskEvent) -> None:
        if event.event == "task.finished":
            self.seen.append(("finished", event.task_id))

    @hookimpl
    def agentcompass_run_signal(self, signal: str, count: int) -> None:
        self.seen.append(("signal", (signal, count)))


async def test_a_resume_announces_its_work_what_was_done_and_the_damaged_line_it_skipped(host, tmp_path):
    run_dir = tmp_path / "r"
    req = RunRequest(benchmark="scripted", harness="none", model="mock", benchmark_args={"n": "3"})
    first = Recorder()
    with observing(host, first, "first"):
        await Runner(host, req, run_dir=run_dir, handle_signals=False).run()
    assert first.seen[0] == ("started", (3, 0))
    assert first.figures == [LiveFigures(in_flight=0, cost_usd=0.0)]  # nothing in flight yet; the mock costs 0
    assert sorted(v for k, v in first.seen if k == "finished") == ["t0", "t1", "t2"]

    results = run_dir / "results.jsonl"
    lines = results.read_text().splitlines(keepends=True)
    damaged = next(i for i, line in enumerate(lines) if '"t1"' in line)
    lines[damaged] = "{not json\n"
    results.write_text("".join(lines))
    again = Recorder()
    with observing(host, again, "again"):
        await Runner(host, RunRequest(benchmark="", harness="", model=""), run_dir=run_dir, resume=True,
                     handle_signals=False).run()
    warnings = [v for k, v in again.seen if k == "warning"]
    assert len(warnings) == 1 and warnings[0].startswith(f"{results}:{damaged + 1}: not a JSON line")
    assert ("started", (3, 2)) in again.seen
    assert [v for k, v in again.seen if k == "finished"] == ["t1"]
    assert [k for k, _ in again.seen].index("warning") < [k for k, _ in again.seen].index("started")


async def test_a_signal_is_announced_to_observers_and_the_run_stops_keeping_what_finished(host, tmp_path):
    recorder = Recorder()

    class Interrupter:
        """Sends the process a SIGINT as the second task starts running (the runner's handler takes it)."""

        @hookimpl
        def agentcompass_task_event(self, event: TaskEvent) -> None:
            if event.event == "task.phase" and event.phase == "RUNNING" and event.task_id == "t1":
                os.kill(os.getpid(), signal.SIGINT)

    req = RunRequest(benchmark="scripted", harness="none", model="mock", benchmark_args={"n": "4"}).with_options(concurrency=1)
    with observing(host, recorder, "recorder"), observing(host, Interrupter(), "interrupter"):
        outcome = await Runner(host, req, run_dir=tmp_path / "r").run()
    assert outcome.interrupted
    assert ("signal", ("SIGINT", 1)) in recorder.seen
    assert [v for k, v in recorder.seen if k == "finished"] == ["t0"]
    assert outcome.summary.n_finished == 1


async def test_phase_events_are_made_only_when_a_plugin_observes_them(host, tmp_path, monkeypatch):
    import json

    from agentcompass import runner as runner_module

    made: list[str] = []

    class Counting(TaskEvent):
        def __init__(self, **fields: Any) -> None:
            made.append(fields["event"])
            super().__init__(**fields)

    monkeypatch.setattr(runner_module, "TaskEvent", Counting)
    for name in [n for n in host.pm.list_name_plugin() if n[1] is not None]:  # no observer of task events left
        if any(i.plugin_name == name[0] for i in host.pm.hook.agentcompass_task_event.get_hookimpls()):
            host.pm.unregister(name=name[0])
    assert not host.pm.hook.agentcompass_task_event.get_hookimpls()
    req = RunRequest(benchmark="scripted", harness="none", model="mock", benchmark_args={"n": "2"})
    await Runner(host, req, run_dir=tmp_path / "r", handle_signals=False).run()
    assert "task.phase" not in made
    phases = [json.loads(line) for line in (tmp_path / "r" / "logs.jsonl").read_text().splitlines()]
    assert sum(p["event"] == "task.phase" for p in phases) >= 2 * 4  # the log still has every transition

    class Phases:
        def __init__(self) -> None:
            self.seen: list[str] = []

        @hookimpl
        def agentcompass_task_event(self, event: TaskEvent) -> None:
            if event.event == "task.phase":
                self.seen.append(event.phase)

    phases_seen = Phases()
    with observing(host, phases_seen, "phases"):
        await Runner(host, req, run_dir=tmp_path / "r2", handle_signals=False).run()
    assert "RUNNING" in phases_seen.seen and "task.phase" in made
