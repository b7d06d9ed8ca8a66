"""A plugin for the tests of in-process model calls: the ``stream_probe`` benchmark (run it with the ``none``
harness) calls its agent model in process as a Python harness does — one ``chat`` and one ``stream``, each with
generation settings beyond the gateway's usual ones (``top_k``, ``reasoning_effort``, ``metadata``, ``user``) —
and writes, to its artifacts, when each streamed piece reached it (``pieces.json``: ``[[time.time(), text]]``).
With ``-b warn=WHAT`` it logs a warning ``probe.damaged_record`` (``detail=WHAT``, ``line`` 1 then 2, and a
``path`` that is not JSON) before its calls and after them.

Its :data:`ENTRY_POINTS` line lets Ray nodes find it (:func:`install_for_nodes` writes a ``.dist-info`` for a
``PYTHONPATH``), so a cluster's workers have it as they have an installed plugin.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from agentcompass import hookimpl
from agentcompass.runtime import HarnessFreeBenchmark, RunResult, TaskSpec, TaskStatus
from agentcompass.runtime.logs import get_logger
from agentcompass.runtime.model_stream import StreamEnd, TextDelta

#: What both calls pass besides the messages: settings the gateway would drop when translating.
SETTINGS: dict[str, Any] = {"temperature": 0.25, "top_k": 7, "reasoning_effort": "low",
                            "metadata": {"probe": "yes"}, "user": "probe-user"}


class StreamProbe(HarnessFreeBenchmark):
    name = "stream_probe"
    required_model_roles = ("agent",)

    def __init__(self, warn: str = "") -> None:
        super().__init__()
        self.warn = warn

    def load_tasks(self, req):  # type: ignore[no-untyped-def]
        return [TaskSpec(task_id="probe")]

    def _warn(self, line: int) -> None:
        if self.warn:
            get_logger(plugin="stream_probe").warning("probe.damaged_record", detail=self.warn, line=line,
                                                      path=Path("records.jsonl"))

    async def run_task(self, task, prepared, req, plan, env=None):  # type: ignore[no-untyped-def]
        self._warn(1)
        model = plan.models["agent"]
        whole = await model.chat([{"role": "user", "content": "whole, please"}], **SETTINGS)
        pieces: list[tuple[float, str]] = []
        text = ""
        async for event in model.stream([{"role": "user", "content": "stream, please"}], **SETTINGS):
            if isinstance(event, TextDelta):
                pieces.append((time.time(), event.text))
                text += event.text
            elif isinstance(event, StreamEnd):
                text = event.response.content
        self._warn(2)
        out = Path(plan.artifacts_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "pieces.json").write_text(json.dumps(pieces))
        return RunResult(task_id=task.task_id, status=TaskStatus.COMPLETED, final_answer=f"{whole.content}|{text}")

    async def evaluate(self, task, prepared, result, req, plan, env=None):  # type: ignore[no-untyped-def]
        return replace(result, metrics={"score": 1.0 if result.status is TaskStatus.COMPLETED else 0.0})


@hookimpl
def register_benchmarks(register):  # type: ignore[no-untyped-def]
    register("stream_probe", StreamProbe)


ENTRY_POINTS = "[agentcompass]\nstream_probe = tests.helpers.stream_probe_plugin\n"


def install_for_nodes(root: Path) -> Path:
    """A directory to put on ``PYTHONPATH`` (with the repository's root) so that this plugin is found as an
    installed one: a ``.dist-info`` with its entry point."""
    info = root / "agentcompass_stream_probe-0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: agentcompass-stream-probe\nVersion: 0\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    return root
