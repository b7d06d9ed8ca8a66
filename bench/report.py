"""The report of a large run: 10,000 tasks with trajectories, written and opened in a real headless Chromium.

Builds a synthetic but valid run directory through the core's own writer (``RunDirectory``: ``run.json``,
``results.jsonl`` with 2% errors of three kinds, ``trajectories.jsonl`` with several tool-calling model calls
per task, one of them long enough to be cut, ``summary.json`` from ``build_summary``), then prints:

  * writing the report (``agentcompass report``'s own function): seconds and file size;
  * opening it: time to first render (navigation start until the page has drawn its summary and first rows,
    measured by the page itself), and the wall time of the browser's load;
  * filtering the table: in-page time of a text filter and a status filter (the whole filter, sort and redraw of
    the visible rows), and the wall time from the keystroke until the page shows the new count;
  * scrolling to the end of the table and opening a task's detail (its trajectory parsed then).

Each measurement is repeated (``--repeat``) and reported as a range: the machine is shared.

Usage: uv run python bench/report.py [--tasks 10000] [--calls 4] [--repeat 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agentcompass.results.run_dir import RunDirectory
from agentcompass.results.summary import build_run_info, build_summary
from agentcompass.runtime import RunRequest, RunResult, TaskSpec, TaskStatus
from agentcompass.runtime.metrics import make_metric_contract
from agentcompass.runtime.model_providers import Redactor
from agentcompass.runtime.records import RunPlan

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CONTRACT = make_metric_contract("reward", scalar=("reward",), labels={"reward": "Reward"}, binary=True)
CATEGORIES = ("billing", "shipping", "accounts", "returns", "policy", "search", "multi-step")
ERRORS = ((TaskStatus.RUN_ERROR, "run", "run timed out after 600s"),
          (TaskStatus.PREPARE_ERROR, "prepare", "environment failed to start: image not found"),
          (TaskStatus.EVAL_ERROR, "evaluate", "evaluator raised KeyError: 'expected'"))
SYSTEM = "You are a support agent. Use the tools you are given, one call at a time, and follow the policy."


def _calls(task: str, n_calls: int, rng: random.Random, long_reply: bool) -> list[dict[str, Any]]:
    ask = f"Please help with {task}: order o_{rng.randint(1, 999)}."
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": ask}]
    calls = []
    for i in range(n_calls):
        last = i == n_calls - 1
        if last:
            text = ("Here is the summary. " * (400 if long_reply else 3)).strip()
            response: dict[str, Any] = {"role": "assistant", "content": text}
        else:
            response = {"role": "assistant", "content": None, "tool_calls": [{
                "id": f"call_{task}_{i}", "type": "function",
                "function": {"name": rng.choice(("get_order", "refund", "lookup_user")),
                             "arguments": json.dumps({"order_id": f"o_{rng.randint(1, 999)}"})}}]}
        calls.append({"role": "agent", "model": "mock", "started_at": 1.8e9 + i, "latency_s": rng.random(),
                      "messages": list(messages), "tools": ["get_order", "refund", "lookup_user"],
                      "response": response, "prompt_tokens": 50 * (i + 1), "completion_tokens": 20, "error": None,
                      "via": "gateway", "finish_reason": "stop" if last else "tool_calls", "attempts": 1,
                      "cost_usd": 0.0001, "truncated": None})
        messages.append(response)
        if not last:
            messages.append({"role": "tool", "tool_call_id": f"call_{task}_{i}",
                             "content": json.dumps({"status": "ok", "amount": rng.randint(1, 500)})})
    return calls


def make_run(path: Path, tasks: int = 10_000, calls: int = 4, seed: int = 1) -> Path:
    """A finished run directory of ``tasks`` tasks at ``path`` (which must not exist yet)."""
    rng = random.Random(seed)
    req = RunRequest(benchmark="synthetic", harness="none", model="mock", run_id=path.name).with_options(seed=seed)
    store = RunDirectory.create(path, Redactor())
    final: dict[tuple[str, int], RunResult] = {}
    for t in range(tasks):
        task = f"task-{t:05d}"
        category = CATEGORIES[t % len(CATEGORIES)]
        if rng.random() < 0.02:
            status, phase, error = ERRORS[t % len(ERRORS)]
            result = RunResult(task_id=task, category=category, status=status, error=error, error_phase=phase,
                               seed=rng.randint(0, 2**31), timings={"prepare": 0.1, "run": 1.0, "total": 1.2})
        else:
            reward = 1.0 if rng.random() < 0.6 else 0.0
            trajectory = _calls(task, calls, rng, long_reply=t % 500 == 0)
            store.append_trajectory(task, 1, 1, trajectory)
            usage = {"models": {"agent": {"calls": calls, "prompt_tokens": sum(c["prompt_tokens"] for c in trajectory),
                                          "completion_tokens": 20 * calls, "latency_s": 1.0, "errors": 0,
                                          "cost_usd": 0.0001 * calls}}}
            answer = trajectory[-1]["response"]["content"][:200]
            result = RunResult(task_id=task, category=category, final_answer=answer,
                               metrics={"reward": reward}, seed=rng.randint(0, 2**31), usage=usage,
                               timings={"prepare": 0.05, "run": rng.random() * 5, "evaluate": 0.01, "total": 5.1})
        store.append_result(result)
        final[(task, 1)] = result
    plan = RunPlan("Synthetic", None, "LocalProvider", "local", "reuse",
                   {"primary": "reward", "scalar": ["reward"], "labels": {"reward": "Reward"},
                    "higher_is_better": True, "success_threshold": CONTRACT.success_threshold, "success_metric": None},
                   {"agent": "mock"})
    store.write_run_info(build_run_info(req, plan, {"builtin": "0.1.0"}, None, time.time()))
    work = [(TaskSpec(task_id=k[0]), 1) for k in final]
    store.write_summary(build_summary(req, CONTRACT, work, final, interrupted=False, stopped_reason=None,
                                      duration_s=1234.5, run_dir=str(path)), final)
    store.close()
    return path


def write_report(run_dir: Path, out: Path) -> float:
    from agentcompass_report.report import build_report

    started = time.perf_counter()
    html, _ = build_report([run_dir], Redactor())
    out.write_text(html, encoding="utf-8")
    return time.perf_counter() - started


def wait_for(driver: Any, script: str, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = driver.execute_script(script)
        if value:
            return value
        time.sleep(0.01)
    raise TimeoutError(script)


def measure(driver: Any, url: str) -> dict[str, float]:
    """Open ``url`` and filter its table; seconds of each step (see the module doc)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    started = time.perf_counter()
    driver.get(url)
    wait_for(driver, "return window.__report && window.__report.ready")
    load_wall = time.perf_counter() - started
    first_render = driver.execute_script("return window.__report.readyAt") / 1000
    total = driver.execute_script("return window.__report.rows()")
    box = driver.find_element(By.ID, "filter-text")
    started = time.perf_counter()
    box.send_keys("task-0999")
    wait_for(driver, f"return window.__report.shown() < {total}")
    text_wall = time.perf_counter() - started
    text_ms = driver.execute_script("return window.__report.lastFilterMs")
    shown_text = driver.execute_script("return window.__report.shown()")
    box.clear()
    driver.execute_script("var e = document.getElementById('filter-text'); e.value = '';"
                          "e.dispatchEvent(new Event('input'));")
    wait_for(driver, f"return window.__report.shown() == {total}")
    started = time.perf_counter()
    Select(driver.find_element(By.ID, "filter-status")).select_by_value("ERROR")
    wait_for(driver, f"return window.__report.shown() < {total}")
    status_wall = time.perf_counter() - started
    status_ms = driver.execute_script("return window.__report.lastFilterMs")
    errors = driver.execute_script("return window.__report.shown()")
    Select(driver.find_element(By.ID, "filter-status")).select_by_value("")
    started = time.perf_counter()
    driver.execute_script("var s = document.getElementById('task-scroll'); s.scrollTop = s.scrollHeight;")
    wait_for(driver, "var r = document.querySelectorAll('#task-rows .trow'); "
                     f"return r.length && r[r.length - 1].getAttribute('data-task') === 'task-{total - 1:05d}'")
    scroll_wall = time.perf_counter() - started
    started = time.perf_counter()
    driver.execute_script("location.hash = '#task/0-0'")
    wait_for(driver, "return document.querySelectorAll('#trajectory .call').length > 0")
    detail_wall = time.perf_counter() - started
    return {"load_wall": load_wall, "first_render": first_render, "text_ms": text_ms, "text_wall": text_wall,
            "status_ms": status_ms, "status_wall": status_wall, "scroll_wall": scroll_wall,
            "detail_wall": detail_wall, "rows": total, "shown_text": shown_text, "errors": errors}


def _range(values: list[float], unit: str = "s", scale: float = 1.0) -> str:
    lo, hi = min(values) * scale, max(values) * scale
    return f"{lo:.2f}–{hi:.2f} {unit}" if hi - lo > 0.005 else f"{lo:.2f} {unit}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="Write the run directory and report here (kept).")
    args = parser.parse_args()
    from tests.report.browser import chromium, missing

    reason = missing()
    if reason:
        sys.exit(f"cannot open a browser here: {reason}")
    with tempfile.TemporaryDirectory() as tmp:
        base = args.keep or Path(tmp)
        base.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        run_dir = make_run(base / "run", args.tasks, args.calls)
        made = time.perf_counter() - started
        out = base / "report.html"
        writes = [write_report(run_dir, out) for _ in range(args.repeat)]
        size = out.stat().st_size
        traj = (run_dir / "trajectories.jsonl").stat().st_size
        print(f"agentcompass report — {args.tasks} tasks, {args.calls} model calls each "
              f"(trajectories.jsonl {traj / 1e6:.1f} MB, made in {made:.1f} s)")
        print(f"  write the report: {_range(writes)}; file {size / 1e6:.1f} MB")
        results = []
        with chromium() as driver:
            for _ in range(args.repeat):
                results.append(measure(driver, out.as_uri()))
        last = results[-1]
        print(f"  open in headless Chromium: first render {_range([r['first_render'] for r in results])} "
              f"(browser load, wall: {_range([r['load_wall'] for r in results])}); {last['rows']:,} rows")
        print(f"  text filter ({last['shown_text']} shown): in page {_range([r['text_ms'] for r in results], 'ms')}, "
              f"keystroke to new count {_range([r['text_wall'] for r in results])}")
        print(f"  status filter 'any error' ({last['errors']} shown): in page "
              f"{_range([r['status_ms'] for r in results], 'ms')}, "
              f"select to new count {_range([r['status_wall'] for r in results])}")
        print(f"  scroll to the last row: {_range([r['scroll_wall'] for r in results])}; open a task's trajectory: "
              f"{_range([r['detail_wall'] for r in results])}")


if __name__ == "__main__":
    main()
