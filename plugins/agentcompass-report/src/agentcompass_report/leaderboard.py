"""The leaderboard page of a suite directory: one self-contained HTML file, no script, no network.

The figures are :func:`agentcompass.runtime.run_reader.leaderboard`'s — exactly what ``agentcompass suite show``
prints: per benchmark, every cell's mean with its 95% interval (drawn as a bar), pass^k, errors, tokens, cost,
time, and its paired difference against the baseline cell with its minimum detectable difference (MDE: 80%
power, 5% two-sided) and whether it is within noise (its 95% interval contains zero). Each cell's name links to
its run's own report (``CELL/report.html``, written beside it by ``agentcompass report SUITE_DIR``). A suite with
a ``faults`` axis also gets each benchmark's robustness table: every faulted cell against its clean twin.
"""

from __future__ import annotations

import html
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agentcompass.runtime.model_providers import Redactor
from agentcompass.runtime.run_reader import leaderboard

from agentcompass_report.page import _hash, asset

EXTRA_CSS = """
#app { max-width: 1680px; padding-left: 16px; padding-right: 16px; }
.lb td.cibar { width: 128px; padding-top: 6px; }
.lb td.ci, .lb .diff { white-space: nowrap; }
.lb td.cellname { min-width: 12ch; }
.lb .counts, .lb .noise { display: block; }
.lb svg { display: block; }
.diff.sig.up { color: var(--ok); font-weight: 600; } .diff.sig.down { color: var(--err); font-weight: 600; }
.lb tr.baseline td { background: var(--soft); }
.notes li { margin: 2px 0; }
"""


#: Pixels of the interval bar's scale (kept small: every column must fit a 1,400 px window).
BAR_SPAN = 112


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _breakable(value: Any) -> str:
    """``value`` escaped, with a line-break opportunity after each ``/`` and ``_`` (long model and cell names
    such as ``openai-compatible/Qwen/Qwen3-30B-A3B-Instruct-2507`` wrap there rather than widen the table)."""
    return _e(value).replace("/", "/<wbr>").replace("_", "_<wbr>")


def _num(value: float | None, digits: int = 4) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _bar(mean: float | None, ci: list[float] | None, low: float, high: float) -> str:
    """The mean as a dot and its interval as a line, on the benchmark's common scale [low, high]."""
    if mean is None:
        return ""
    span = (high - low) or 1.0

    def x(v: float) -> float:
        return 4 + BAR_SPAN * (min(max(v, low), high) - low) / span

    line = (f'<line x1="{x(ci[0]):.1f}" x2="{x(ci[1]):.1f}" y1="9" y2="9" stroke="#5f6b7a" stroke-width="2"/>'
            if ci else "")
    return (f'<svg width="{BAR_SPAN + 8}" height="18" role="img" aria-label="mean {mean:.4f}">'
            f'<line x1="4" x2="{BAR_SPAN + 4}" y1="9" y2="9" stroke="#dfe3e8"/>{line}'
            f'<circle cx="{x(mean):.1f}" cy="9" r="4" fill="#2f6fdf"/></svg>')


def _difference(cell: dict[str, Any], baseline: str) -> str:
    diff = cell["difference"]
    if cell["name"] == baseline:
        return '<span class="muted">baseline</span>'
    if diff is None:
        return "–"
    if "error" in diff:
        return f'<span class="muted" title="{_e(diff["error"])}">n/a</span>'
    d, ci = diff["difference"], diff["ci95"]
    sig = ci is not None and (ci[0] > 0 or ci[1] < 0)
    cls = "diff " + ("up" if d > 0 else "down" if d < 0 else "") + (" sig" if sig else "")
    ci_text = f" [{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else ""
    mde = diff.get("mde")
    noise = (f'<span class="muted small noise" data-mde="{mde!r}">MDE {_num(mde, 3)}'
             f'{" · within noise" if diff.get("within_noise", True) else ""}</span>') if mde is not None else (
        '<span class="muted small noise">within noise</span>' if diff.get("within_noise", True) else "")
    return (f'<span class="{cls}" data-diff="{d!r}">{d:+.4f}{ci_text}</span> {noise}'
            f'<span class="muted small counts">{diff["better"]}↑ {diff["worse"]}↓ {diff["equal"]}= of {diff["n_tasks"]}'
            f'</span>')


def _flags(flagged: int | None) -> str:
    """A cell's flag count: the attempts a scanner flagged, or a dash for a cell not scanned."""
    if flagged is None:
        return '<span class="muted" title="not scanned">–</span>'
    return f'<span class="errtext">{flagged}</span>' if flagged else "0"


def _bench_section(bench: dict[str, Any]) -> str:
    cells = bench["cells"]
    bounds = [v for c in cells for v in ([c["mean"]] if c["mean"] is not None else []) + (c["ci95"] or [])]
    low, high = (min([0.0, *bounds]), max([1.0, *bounds])) if bounds else (0.0, 1.0)
    rows = []
    for rank, c in enumerate(cells, 1):
        ci = c["ci95"]
        passk = c["pass_hat_k"]
        errors = f'{c["errors"]}' + (f' <span class="muted">+{c["unfinished"]} unfinished</span>'
                                      if c["unfinished"] else "")
        cost = "–" if c["cost_usd"] is None else f'{c["cost_usd"]:.4f}'
        state = "" if c["state"] == "finished" else f' <span class="badge">{_e(c["state"])}</span>'
        ci_text = f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "–"
        passk_text = f'{passk["value"]:.3f} <span class="muted">(k={passk["k"]})</span>' if passk else "–"
        rows.append(
            f'<tr class="cell{" baseline" if c["name"] == bench["baseline"] else ""}" data-cell="{_e(c["name"])}" '
            f'data-mean="{c["mean"]!r}">'
            f'<td class="num">{rank}</td><td class="cellname"><a href="{_e(c["report"])}">{_breakable(c["name"])}</a>'
            f'{state}</td>'
            f'<td>{_breakable(c["harness"])}</td><td>{_breakable(c["model"])}</td>'
            f'<td class="num mean">{_num(c["mean"])}</td>'
            f'<td class="num ci">{ci_text}</td>'
            f'<td class="cibar">{_bar(c["mean"], ci, low, high)}</td>'
            f'<td class="num">{passk_text}</td><td class="num errors">{errors}</td>'
            f'<td class="num flagged">{_flags(c.get("flagged"))}</td><td class="num">{c["tokens"]:,}</td>'
            f'<td class="num">{cost}</td><td class="num">{c["duration_s"]:.1f}</td>'
            f'<td class="difference">{_difference(c, bench["baseline"])}</td></tr>')
    return (f'<section class="benchmark" data-benchmark="{_e(bench["benchmark"])}">'
            f'<h2>{_e(bench["benchmark"])} <span class="muted small">{_e(bench["label"])} '
            f'({_e(bench["primary_metric"])}); paired differences vs <b>{_e(bench["baseline"])}</b></span></h2>'
            '<div class="xscroll"><table class="grid lb"><thead><tr><th class="num">#</th><th>cell</th>'
            '<th>harness</th><th>model</th><th class="num">mean</th><th class="num">95% CI</th><th></th>'
            '<th class="num">pass^k</th><th class="num">errors</th>'
            '<th class="num" title="attempts a transcript scanner flagged (agentcompass scan)">flagged</th>'
            '<th class="num">tokens</th>'
            '<th class="num">cost USD</th><th class="num">time s</th><th>difference vs baseline [95% CI] · MDE</th>'
            f'</tr></thead><tbody>{"".join(rows)}</tbody></table></div>{_robustness(bench)}</section>')


def _robustness(bench: dict[str, Any]) -> str:
    """Each faulted cell against its clean twin (``--faults``; see ``agentcompass suite show``), or nothing."""
    rows = []
    for c in bench["cells"]:
        r = c.get("robustness")
        if not r:
            continue
        ci = r["ci95"]
        kinds = "".join(
            f'<li data-kind="{_e(k["kind"])}">{_e(k["kind"])}: {k["calls"]} calls on {k["tasks"]} tasks'
            + (f', drop {k["drop"]:+.3f}' if k["drop"] is not None else "") + "</li>" for k in r["kinds"])
        rows.append(
            f'<tr data-cell="{_e(c["name"])}"><td class="cellname">{_breakable(c["name"])}</td>'
            f'<td>{_e(r["profile"])}</td><td>{_breakable(r["vs"])}</td><td class="num">{_num(r["clean_mean"])}</td>'
            f'<td class="num">{_num(r["faulted_mean"])}</td>'
            f'<td class="num drop">{r["drop"]:+.4f}' + (f' [{ci[0]:+.3f}, {ci[1]:+.3f}]' if ci else "") + "</td>"
            f'<td class="num">{r["faulted_calls"]}/{r["calls"]}</td>'
            f'<td class="num">{r["errors_by_faults"]} / {r["errors_by_agent"]}</td>'
            f'<td><ul class="kinds">{kinds}</ul></td></tr>')
    if not rows:
        return ""
    return ('<h3>Robustness <span class="muted small">each faulted cell against its clean twin: the score drop '
            '(paired by task, 95% CI), by fault kind, and the errors the faults caused vs the agent\'s own</span></h3>'
            '<div class="xscroll"><table class="grid robustness"><thead><tr><th>cell</th><th>faults</th><th>vs</th>'
            '<th class="num">clean</th><th class="num">faulted</th><th class="num">drop [95% CI]</th>'
            '<th class="num">faulted calls</th><th class="num">errors: faults / agent</th><th>by fault kind</th>'
            f'</tr></thead><tbody>{"".join(rows)}</tbody></table></div>')


def leaderboard_page(path: Path, redactor: Redactor, baseline: str | None = None) -> tuple[str, list[str]]:
    """The page of the suite at ``path`` and the warnings reading it raised."""
    data = leaderboard(path, baseline)
    sections = "".join(_bench_section(b) for b in data["benchmarks"])
    others = [*data["not_run"], *data["skipped"]]
    notes = ""
    if others:
        items = "".join(f'<li data-cell="{_e(c["name"])}"><b>{_e(c["name"])}</b>: {_e(c["state"])}'
                        f'{" — " + _e(c.get("error") or c.get("note")) if c.get("error") or c.get("note") else ""}'
                        "</li>" for c in others)
        notes = f'<h2>Not on the board</h2><ul class="notes" id="not-on-board">{items}</ul>'
    css = asset("report.css") + EXTRA_CSS
    csp = f"default-src 'none'; style-src {_hash(css)}; img-src data:; base-uri 'none'; form-action 'none'"
    title = f"agentcompass suite: {path.name}"
    generated = datetime.now(UTC).isoformat(timespec="seconds")
    page = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta http-equiv=\"Content-Security-Policy\" content=\"{csp}\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{_e(title)}</title><style>{css}</style></head><body><div id=\"app\">"
            f"<h1>{_e(title)}</h1><p class=\"muted small\">{len(data['benchmarks'])} benchmark(s), "
            f"{sum(len(b['cells']) for b in data['benchmarks'])} cell(s) with results; generated {generated}. "
            "Each cell links to its run's report.</p>"
            f"<div id=\"leaderboard\">{sections}</div>{notes}</div></body></html>\n")
    return redactor.text(page), list(data["warnings"])
