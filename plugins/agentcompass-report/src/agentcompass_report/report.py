"""``agentcompass report``: one self-contained HTML file of one or more runs."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agentcompass.runtime.model_providers import Redactor
from agentcompass.runtime.run_reader import RunReader

from agentcompass_report.compare import comparisons
from agentcompass_report.conversation import REPORT_CAPS, Caps
from agentcompass_report.page import Mode, render
from agentcompass_report.payload import detail, run_payload


def page_data(runs: Sequence[RunReader], mode: Mode, caps: Caps) -> dict[str, Any]:
    """What the page's ``data`` block holds: every run (header, summary, rows) and the comparisons."""
    return {
        "mode": mode, "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "runs": [run_payload(r) for r in runs], "comparisons": comparisons(runs),
        "caps": dataclasses.asdict(caps),
    }


def _details(runs: Sequence[RunReader], caps: Caps) -> Iterator[tuple[str, Any]]:
    for r, files in enumerate(runs):
        for i, key in enumerate(files.results):
            yield f"{r}-{i}", detail(files, key, caps)


def title_of(runs: Sequence[RunReader]) -> str:
    first = runs[0].info["request"]
    what = f"{first['benchmark']} / {first['harness']} / {first['model']}"
    return f"agentcompass: {what}" + (f" (+{len(runs) - 1} compared)" if len(runs) > 1 else "")


def build_report(paths: Sequence[Path], redactor: Redactor, caps: Caps = REPORT_CAPS) -> tuple[str, list[str]]:
    """The page of the runs at ``paths`` and the warnings reading them raised."""
    runs = [RunReader.open(p) for p in paths]
    html = render(page_data(runs, "report", caps), _details(runs, caps), redactor, "report",
                  redactor.text(title_of(runs)))
    return html, [w for r in runs for w in r.warnings]
