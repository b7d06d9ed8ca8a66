"""Plain-text rendering of tables and run summaries."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agentcompass.runtime.records import MetricAggregate, PassAtK, RunSummary
from agentcompass.runtime.statistics import TOO_FEW_TASKS
from agentcompass.runtime.wording import counted

#: Characters of an error on a console task line (shortened around what it says differs:
#: :mod:`agentcompass.runtime.shortening`).
CONSOLE_ERROR = 240
#: Characters of an error in a table's cell (``results show --tasks``).
TABLE_ERROR = 120

if TYPE_CHECKING:
    from agentcompass.results.comparison import Comparison, ComparisonPlan


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def interval_text(m: MetricAggregate) -> str:
    """``[low, high]`` of a metric's 95% interval, or why there is none."""
    if m.mean is None:
        return "-"
    if m.ci95 is None:
        return TOO_FEW_TASKS
    return f"[{m.ci95[0]:.4f}, {m.ci95[1]:.4f}]"


def pass_k_text(pass_k: Sequence[PassAtK], n_errored: int) -> str:
    hat = "  ".join(f"pass^{p.k}={p.pass_hat_k:.4f}" for p in pass_k)
    at = "  ".join(f"pass@{p.k}={p.pass_at_k:.4f}" for p in pass_k)
    return f"{hat}\n{at}  (errored trials, counted as failures: {n_errored})"


def unfinished_text(summary: RunSummary) -> str:
    """The warning every figure of an unfinished run carries."""
    return (f"UNFINISHED: {summary.n_unfinished} of {summary.n_planned} planned results have no final record "
            f"(not run); every figure below is over the {summary.n_finished} finished ones. "
            f"Finish with: agentcompass run --resume {summary.run_dir}")


def usage_text(summary: RunSummary) -> str | None:
    """Tokens and cost of every model call, with the share of retried or cut-short attempts apart."""
    if not summary.usage:
        return None
    parts = []
    for role, u in summary.usage.items():
        retried = summary.usage_retried.get(role)
        cost = f", {u.cost_usd:.4f} USD" if u.cost_usd is not None else ""
        line = f"{role}: {counted(u.calls, 'call')}, {counted(u.prompt_tokens + u.completion_tokens, 'token')}{cost}"
        if retried is not None and retried.calls:
            r_cost = f", {retried.cost_usd:.4f} USD" if retried.cost_usd is not None else ""
            line += (f" (of which retried or cut-short attempts: {counted(retried.calls, 'call')}, "
                     f"{counted(retried.prompt_tokens + retried.completion_tokens, 'token')}{r_cost})")
        sources = [f"{u.replayed} replayed"] if u.replayed else []
        sources += [f"{u.replay_live} live (replay misses)"] if u.replay_live else []
        if u.cache_hits:
            saved = f", {u.cache_saved_usd:.4f} USD" if u.cache_saved_usd is not None else ""
            sources.append(f"{u.cache_hits} from the cache, saving {counted(u.cache_saved_tokens, 'token')}{saved}")
        if sources:
            line += f" [{'; '.join(sources)}]"
        parts.append(line)
    return "usage — " + "; ".join(parts)


def summary_text(summary: RunSummary) -> str:
    trials = f" × {summary.trials} trials" if summary.trials > 1 else ""
    counts = "  ".join(f"{k}: {v}" for k, v in sorted(summary.status_counts.items()))
    if summary.unfinished:
        counts += f"  UNFINISHED: {summary.n_unfinished}"
    lines = [
        f"run {summary.run_id}: {summary.benchmark} / {summary.harness} / {summary.model} on {summary.environment}"
        + (f" (seed {summary.seed})" if summary.seed is not None else ""),
        f"tasks: {summary.n_tasks}{trials}  {counts}".rstrip(),
    ]
    if summary.unfinished:
        lines.append(unfinished_text(summary))
    rows = []
    groups = [("all", summary.metrics.overall)]
    groups += [(category, group.metrics) for category, group in summary.metrics.by_category.items()]
    unfinished_column = summary.unfinished
    for category, metrics in groups:
        for name, m in metrics.items():
            row = [m.label or name, category, _fmt(m.mean), interval_text(m), _fmt(m.mean_completed), m.n,
                   m.n_errored]
            rows.append([*row, m.n_unfinished] if unfinished_column else row)
    if rows:
        headers = ["metric", "category", "mean (errors=0)", "95% CI", "mean (completed)", "n", "errored"]
        lines.append(table([*headers, "unfinished"] if unfinished_column else headers, rows))
    figures = [f"{m.label or name}: " + "  ".join(f"{kind}={value:.4f}" for kind, value in m.aggregates.items())
               for name, m in summary.metrics.overall.items() if m.aggregates]
    if figures:
        lines.append("; ".join(figures) + "  (over every result, errored ones counting 0)")
    if summary.metrics.pass_k:
        errored = sum(v for k, v in summary.status_counts.items() if k != "COMPLETED")
        lines.append(pass_k_text(summary.metrics.pass_k, errored)
                     + (f"  (over {summary.n_finished} finished of {summary.n_planned} planned)"
                        if summary.unfinished else ""))
    flips = flips_text(summary)
    if flips:
        lines.append(flips)
    usage = usage_text(summary)
    if usage:
        lines.append(usage)
    if summary.findings:
        lines.append(findings_text(summary.findings) + f"  (see: agentcompass results show {summary.run_dir} "
                     "--flagged)")
    lines.append(time_text(summary))
    lines.append(f"run directory: {summary.run_dir}")
    return "\n".join(lines)


def flips_text(summary: RunSummary) -> str | None:
    """With several trials: how often the trials of a task disagree on its verdict."""
    v = summary.verdicts
    if v is None or summary.trials < 2 or not v.n_tasks:
        return None
    worst = sorted(((rate, task) for task, rate in v.flip_rates.items() if rate > 0), reverse=True)[:5]
    named = f" (most: {', '.join(f'{task} {rate:.2f}' for rate, task in worst)})" if worst else ""
    return (f"verdict flips ({v.metric} >= {v.threshold:.4g} passes): mean flip rate {v.mean_flip_rate:.3f}, "
            f"{v.n_flipping} of {v.n_tasks} tasks with any flip{named}")


def findings_text(findings: Mapping[str, Mapping[str, int]]) -> str:
    """``flagged: reward-hacking 2 (high 1, medium 1), loop 1 (medium 1)``: the scanners' findings counted."""
    parts = []
    for scanner, by in sorted(findings.items()):
        each = ", ".join(f"{s} {by[s]}" for s in ("high", "medium", "low") if by.get(s))
        parts.append(f"{scanner} {sum(by.values())} ({each})")
    return "flagged: " + ", ".join(parts)


def time_text(summary: RunSummary) -> str:
    """The run's time: the total over every invocation, and each when it was resumed."""
    line = f"time: {summary.duration_s:.1f} s"
    if len(summary.invocations) > 1:
        each = ", ".join(f"{i.duration_s:.1f} s" for i in summary.invocations)
        line += f" over {len(summary.invocations)} invocations ({each})"
    return line


def _ci(ci: tuple[float, float] | None) -> str:
    return TOO_FEW_TASKS if ci is None else f"[{ci[0]:+.4f}, {ci[1]:+.4f}]"


def _reading(within_noise: bool, difference: float) -> str:
    if within_noise:
        return "within noise"
    return "B better" if difference > 0 else "B worse"


def comparison_text(c: Comparison) -> str:
    rows = [[m.label or m.metric, m.category or "all", m.n_tasks, _fmt(m.a.mean), _fmt(m.b.mean),
             f"{m.difference:+.4f}", _ci(m.ci95), "-" if m.mde is None else f"{m.mde:.4f}",
             _reading(m.within_noise, m.difference), f"{m.b_better}/{m.b_worse}/{m.equal}"] for m in c.metrics]
    head = f"{c.b} against {c.a} ({c.benchmark}, {c.n_shared_tasks} shared tasks): B − A, paired by task"
    foot = ("MDE: the smallest difference these tasks and trials detect (80% power, 5% two-sided); within noise: "
            "the 95% CI contains 0")
    return head + "\n" + table(["metric", "category", "tasks", "A mean", "B mean", "B − A", "95% CI", "MDE",
                                "reading", "B better/worse/equal"], rows) + "\n" + foot


def plan_text(p: ComparisonPlan) -> str:
    c = p.components
    source = ("the paired differences of the two runs" if p.paired
              else "one run, the other taken to vary alike and independently (pairing usually needs fewer)")
    head = [
        f"to detect a difference of {p.difference:g} in {p.metric} (80% power, 5% two-sided), from {source}:",
        f"pilot: {p.pilot_tasks} tasks × {p.pilot_trials:g} trials; variance of a task's difference: between tasks "
        f"{c.between:.4f}, within a task (per trial) {c.within:.4f}; the pilot detects {p.pilot_mde:.4f}",
    ]
    rows = [[r.trials, r.tasks, r.total_trials] for r in p.rows]
    return "\n".join(head) + "\n" + table(["trials per task", "tasks needed", "task runs per side"], rows)
