"""The page of a validate directory (``agentcompass validate -o DIR``): one self-contained HTML file, no script,
no network.

The findings are :func:`agentcompass.runtime.run_reader.read_validity`'s — exactly what ``agentcompass validate``
prints: per task, the oracle's and nop's verdict in each trial (P pass, F fail), what is wrong (oracle fails, nop
passes, flaky), the oracle's flip rate, its errors, and the mean seconds of each lifecycle phase of a trial under
each harness. ``oracle/`` and ``nop/`` are run directories: the page links to their own reports
(``agentcompass report DIR/oracle``).
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agentcompass.runtime.model_providers import Redactor
from agentcompass.runtime.run_reader import TaskValidity, ValidityReport, read_validity

from agentcompass_report.page import _hash, asset

#: The problems a task can have, in the order the page counts them.
PROBLEMS = ("oracle fails", "nop passes", "flaky")
#: Lifecycle phases shown as columns (a trial's other timings are in its run's report).
PHASE_COLUMNS = ("environment", "prepare", "run", "evaluate", "total")

EXTRA_CSS = """
.vt td.verdicts { font-family: ui-monospace, monospace; letter-spacing: 1px; white-space: nowrap; }
.vt .v-ok { color: var(--ok); } .vt .v-bad { color: var(--err); font-weight: 600; }
.vt tr.problem td.finding { color: var(--err); font-weight: 600; }
.vt tr.sound td.finding { color: var(--ok); }
.vt td.times { white-space: nowrap; }
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _verdicts(verdicts: Sequence[bool], *, expected: bool) -> str:
    """P and F by trial, the ones other than ``expected`` (the oracle passes, nop fails) in red; a dash without
    any trial."""
    if not verdicts:
        return "–"
    return "".join(f'<span class="{"v-ok" if v == expected else "v-bad"}">{"P" if v else "F"}</span>'
                   for v in verdicts)


def _times(seconds: Mapping[str, float]) -> str:
    return " · ".join(f"{phase} {seconds[phase]:.1f}" for phase in PHASE_COLUMNS if phase in seconds) or "–"


def _row(t: TaskValidity) -> str:
    cls = "problem" if t.problems else "sound"
    errors = "".join(f'<div class="muted small">{_e(error)}</div>' for error in t.oracle_errors[:3])
    return (f'<tr class="task {cls}" data-task="{_e(t.task_id)}" data-problems="{_e(",".join(t.problems))}" '
            f'data-flip-rate="{t.flip_rate!r}">'
            f'<td>{_e(t.task_id)}</td>'
            f'<td class="verdicts oracle">{_verdicts(t.oracle, expected=True)}</td>'
            f'<td class="verdicts nop">{_verdicts(t.nop, expected=False)}</td>'
            f'<td class="finding">{_e(", ".join(t.problems) or "ok")}{errors}</td>'
            f'<td class="num flip">{t.flip_rate:.2f}</td>'
            f'<td class="times oracle-s">{_times(t.seconds.get("oracle", {}))}</td>'
            f'<td class="times nop-s">{_times(t.seconds.get("nop", {}))}</td></tr>')


def _summary(report: ValidityReport) -> str:
    bad = report.problem_tasks
    counts = ", ".join(f"{sum(1 for t in bad if w in t.problems)} {w}" for w in PROBLEMS)
    times = ", ".join(f"{phase} {s:.1f} s" for phase, s in report.seconds.items())
    unfinished = "".join(
        f'<div class="box note unfinished">Unfinished: {n} {_e(phase)} results have no final record; finish with: '
        f"agentcompass validate --resume {_e(report.directory)}</div>"
        for phase, n in report.unfinished.items() if n)
    verdict = ('<span class="st ok">sound</span>' if report.sound
               else f'<span class="st err">{len(bad)} of {len(report.tasks)} tasks with a problem</span>')
    return (f'<p class="lede" id="validity-summary">{verdict} — {len(report.tasks)} tasks × {report.trials} '
            f"trials; {counts}. A trial passes when {_e(report.metric)} ≥ {report.threshold:.4g}; an errored "
            f"trial fails. Time: {_e(times) or '–'}.</p>{unfinished}")


def validity_page(path: Path, redactor: Redactor) -> str:
    """The page of the validate directory at ``path`` (a UsageError naming it when it is not one)."""
    report = read_validity(path)
    rows = "".join(_row(t) for t in sorted(report.tasks, key=lambda t: (not t.problems, t.task_id)))
    title = f"agentcompass validate: {report.benchmark} ({path.name})"
    generated = datetime.now(UTC).isoformat(timespec="seconds")
    links = " · ".join(f'<a href="{phase}/report.html">{phase} run</a>' for phase in ("oracle", "nop")
                       if (path / phase / "run.json").is_file())
    table = ('<div class="xscroll"><table class="grid vt" id="validity"><thead><tr><th>task</th>'
             '<th>oracle (by trial)</th><th>nop (by trial)</th><th>finding</th><th class="num">flip rate</th>'
             '<th>oracle seconds (mean per trial)</th><th>nop seconds (mean per trial)</th></tr></thead>'
             f"<tbody>{rows}</tbody></table></div>")
    legend = ('<p class="muted small">P pass, F fail. <b>oracle fails</b>: the reference solution did not pass '
              "(the task or its verifier is broken); <b>nop passes</b>: doing nothing passed (the verifier accepts "
              "an untouched environment); <b>flaky</b>: the oracle's verdicts differ between trials. Flip rate: the "
              "share of the oracle's trials whose verdict differs from its majority.</p>")
    css = asset("report.css") + EXTRA_CSS
    csp = f"default-src 'none'; style-src {_hash(css)}; img-src data:; base-uri 'none'; form-action 'none'"
    page = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta http-equiv=\"Content-Security-Policy\" content=\"{csp}\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{_e(title)}</title><style>{css}</style></head><body><div id=\"app\">"
            f"<h1>{_e(title)}</h1><p class=\"muted small\">generated {generated}; the runs: {links} "
            "(their own reports, written beside this page).</p>"
            f"{_summary(report)}{legend}{table}</div></body></html>\n")
    return redactor.text(page)
