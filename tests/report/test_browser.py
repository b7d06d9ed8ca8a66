"""The report and the viewer in a real headless Chromium: what a user sees of real runs.

Screenshots go to ``$AGENTCOMPASS_TEST_ARTIFACTS/report`` (or a temporary directory).
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from tests.helpers.cli_processes import ROOT, run_cli_subprocess, start_cli
from tests.helpers.report_runs import PLANTED_KEY

pytestmark = pytest.mark.browser


def wait_for(driver: Any, script: str, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = driver.execute_script(script)
        if value or time.monotonic() > deadline:
            assert value, f"timed out waiting for: {script}"
            return value
        time.sleep(0.02)


def report(run_dirs: list[Path], out: Path, env: dict[str, str] | None = None) -> Path:
    done = run_cli_subprocess("report", *map(str, run_dirs), "-o", str(out), testing=False, env=env)
    assert done.returncode == 0, done.stderr
    assert f"wrote {out}" in done.stdout
    return out


def open_page(driver: Any, url: str) -> None:
    driver.get(url)
    wait_for(driver, "return window.__report && window.__report.ready")


def text(driver: Any, element_id: str) -> str:
    return driver.find_element(By.ID, element_id).text


def table_tasks(driver: Any) -> list[str]:
    return [r.get_attribute("data-task") for r in driver.find_elements(By.CSS_SELECTOR, "#task-rows .trow")]


def results_of(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]


def summary_of(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "summary.json").read_text())


def line_search_text(result: dict[str, Any]) -> str:
    """What the text filter searches in a row: task, category, error and answer (their first line, 160 chars)."""
    def first(value: Any) -> str:
        text = value if isinstance(value, str) else "" if value is None else str(value)
        return (text.strip().splitlines() or [""])[0][:160]
    return " ".join((result["task_id"], result.get("category") or "", first(result.get("error")),
                     first(result.get("final_answer")))).lower()


def test_report_of_the_readme_run_shows_its_metrics_tasks_and_a_trajectory(browser, runs, tmp_path, artifacts):
    run = runs["main"]
    open_page(browser, report([run], tmp_path / "main.html").as_uri())
    summary = summary_of(run)
    overall = summary["metrics"]["overall"]["score"]
    assert text(browser, "primary-0") == f"{overall['mean']:.3f}"
    lo, hi = overall["ci95"]
    assert f"95% CI [{lo:.3f}, {hi:.3f}]" in browser.find_element(By.ID, "summary").text
    metrics = text(browser, "metrics-0")
    for category, group in summary["metrics"]["by_category"].items():
        assert f"Reward {category} {group['metrics']['score']['mean']:.3f}" in metrics
    assert text(browser, "status-0").startswith(f"COMPLETED: {summary['status_counts']['COMPLETED']}")
    pass_one = summary["metrics"]["pass_k"][0]["pass_at_k"]
    assert f"pass@1 (share of trials that succeed)\n{pass_one:.3f}" in browser.find_element(By.ID, "summary").text
    header = browser.find_element(By.ID, "summary").text
    for value in ("example_interactive", "mock", str(summary["seed"]), "builtin 0.1.0"):
        assert value in header
    # charts: one bar per category (+ all) with its interval, and the distribution
    assert len(browser.find_elements(By.CSS_SELECTOR, "#chart-categories rect")) == len(summary["metrics"]["by_category"]) + 1
    assert browser.find_elements(By.CSS_SELECTOR, "#chart-distribution rect")
    assert sorted(table_tasks(browser)) == sorted(r["task_id"] for r in results_of(run))
    browser.save_screenshot(str(artifacts / "main-report.png"))

    # sorting by a column, twice for the other direction
    scores = sorted((r["metrics"]["score"], r["task_id"]) for r in results_of(run))
    browser.find_element(By.CSS_SELECTOR, "#task-head [data-key='score']").click()
    assert browser.find_element(By.CSS_SELECTOR, "#task-rows .trow .num").text == f"{scores[0][0]:.3f}"
    browser.find_element(By.CSS_SELECTOR, "#task-head [data-key='score']").click()
    assert browser.find_element(By.CSS_SELECTOR, "#task-rows .trow .num").text == f"{scores[-1][0]:.3f}"
    # the category filter, then a task's conversation with its tool call
    Select(browser.find_element(By.ID, "filter-category")).select_by_value("create")
    expected = sorted(r["task_id"] for r in results_of(run) if r["category"] == "create")
    assert sorted(table_tasks(browser)) == expected
    assert text(browser, "task-count") == f"showing {len(expected)} of {len(results_of(run))}"
    browser.find_element(By.CSS_SELECTOR, "#task-rows .trow[data-task='create_basic']").click()
    wait_for(browser, "return document.querySelectorAll('#trajectory .call').length > 0")
    calls = [json.loads(line) for line in (run / "trajectories.jsonl").read_text().splitlines()
             if json.loads(line)["task_id"] == "create_basic"]
    assert len(browser.find_elements(By.CSS_SELECTOR, "#trajectory .call")) == len(calls)
    tool_calls = [c["function"]["name"] for call in calls for c in (call["response"].get("tool_calls") or [])]
    shown = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#trajectory .toolcall b")]
    assert tool_calls and shown == [f"→ {name}" for name in tool_calls]
    first = browser.find_element(By.CSS_SELECTOR, "#trajectory .call .callhead").text
    assert f"tokens {calls[0]['prompt_tokens']} in / {calls[0]['completion_tokens']} out" in first
    answer = next(r["final_answer"] for r in results_of(run) if r["task_id"] == "create_basic")
    assert text(browser, "detail-answer") == answer
    browser.save_screenshot(str(artifacts / "main-task.png"))
    browser.find_element(By.ID, "back").click()
    wait_for(browser, "return document.getElementById('main').style.display === ''")


def test_an_errored_run_shows_errors_as_errors_and_filters_by_status(browser, runs, tmp_path, artifacts):
    run = runs["errored"]
    open_page(browser, report([run], tmp_path / "errored.html").as_uri())
    results = results_of(run)
    errored = [r for r in results if r["status"] != "COMPLETED"]
    assert errored, "tasks of three or more calls at 0.2 s each cannot finish in 0.5 s"
    counts = summary_of(run)["status_counts"]
    chips = text(browser, "status-0")
    assert f"RUN_ERROR: {counts['RUN_ERROR']}" in chips
    assert f"{len(errored)} errored (counted as 0 in the mean)" in chips
    Select(browser.find_element(By.ID, "filter-status")).select_by_value("RUN_ERROR")
    assert sorted(table_tasks(browser)) == sorted(r["task_id"] for r in errored)
    row = browser.find_element(By.CSS_SELECTOR, "#task-rows .trow")
    assert "error" in row.text and "[run] run timed out after 0.5s" in row.text
    heads = [h.text.strip().lower() for h in browser.find_elements(By.CSS_SELECTOR, ".thead > div")]
    cells = [c.text for c in row.find_elements(By.CSS_SELECTOR, ":scope > div")]
    score = dict(zip(heads, cells, strict=False)).get("reward")  # the primary metric's column, by its label
    assert score is not None, heads
    assert score == "error", (heads, cells)  # an error is not shown as a zero score (its cost may be $0)
    browser.save_screenshot(str(artifacts / "errored-report.png"))
    row.click()
    wait_for(browser, "return !!document.getElementById('detail-error')")
    assert text(browser, "detail-error") == "Error in phase run:\nrun timed out after 0.5s"
    attempts = text(browser, "detail-attempts")
    assert "attempt 1: RUN_ERROR [run] run timed out after 0.5s" in attempts  # the retried attempt
    assert "attempt 2 (final): RUN_ERROR" in attempts
    assert "run" in text(browser, "detail-timings")
    browser.save_screenshot(str(artifacts / "errored-task.png"))


def test_a_comparison_shows_the_paired_differences_of_results_compare(browser, runs, tmp_path, artifacts):
    a, b = runs["main"], runs["trials"]
    open_page(browser, report([a, b], tmp_path / "compare.html").as_uri())
    done = run_cli_subprocess("results", "compare", str(a), str(b), "--json", testing=False)
    assert done.returncode == 0, done.stderr
    expected = json.loads(done.stdout)[0]
    overall = next(m for m in expected["metrics"] if m["category"] is None)
    table = text(browser, "comparison-1")
    lo, hi = overall["ci95"]
    sign = "+" if overall["difference"] > 0 else ""
    reading = ("within noise" if overall["within_noise"]
               else "B better" if overall["difference"] > 0 else "B worse")
    assert (f"Reward all {overall['n_tasks']} {overall['a']['mean']:.3f} {overall['b']['mean']:.3f} "
            f"{sign}{overall['difference']:.3f} [{lo:.3f}, {hi:.3f}] {overall['mde']:.3f} {reading} "
            f"{overall['b_better']} {overall['b_worse']} {overall['equal']}") in table
    passk = text(browser, "passk-1")  # one row per k, so many trials never run off the page's edge
    assert "all pass^k" in passk and any(line.startswith("3 ") for line in passk.splitlines())
    browser.save_screenshot(str(artifacts / "comparison.png"))
    # side by side: a task's row links to both runs' results of it
    browser.find_element(By.CSS_SELECTOR, "#task-rows .trow[data-task='create_basic']").click()
    wait_for(browser, "return document.querySelectorAll('.detail-col #trajectory').length == 2")
    assert len(browser.find_elements(By.CSS_SELECTOR, ".detail-col")) == 2
    browser.save_screenshot(str(artifacts / "comparison-task.png"))


def test_a_run_of_several_trials_shows_each_tasks_flip_rate_as_its_summary_has_it(browser, runs, tmp_path, artifacts):
    run = runs["trials"]
    verdicts = summary_of(run)["verdicts"]
    open_page(browser, report([run], tmp_path / "trials.html").as_uri())
    lede = text(browser, "flips-lede-0")
    assert f"Mean flip rate {verdicts['mean_flip_rate']:.3f}" in lede
    assert f"{verdicts['n_flipping']} of {verdicts['n_tasks']} tasks with any flip" in lede
    flipping = {t: rate for t, rate in verdicts["flip_rates"].items() if rate > 0}
    assert flipping, "the mock's 30% error rate flips some task's verdict between trials"
    rows = browser.find_elements(By.CSS_SELECTOR, "#flips-0 tbody tr")
    shown = {r.get_attribute("data-task"): r.find_elements(By.TAG_NAME, "td")[1].text for r in rows}
    assert shown == {t: f"{rate:.3f}" for t, rate in flipping.items()}
    browser.save_screenshot(str(artifacts / "verdict-flips.png"))
    # one trial: nothing can flip, and no such section
    open_page(browser, report([runs["main"]], tmp_path / "main.html").as_uri())
    assert browser.find_elements(By.ID, "verdict-flips-0") == []


def test_a_comparison_puts_the_paired_differences_before_each_runs_results(browser, runs, tmp_path, artifacts):
    open_page(browser, report([runs["main"], runs["trials"]], tmp_path / "compare.html").as_uri())
    headings = [h.text for h in browser.find_elements(By.CSS_SELECTOR, "#summary h2")]
    assert headings[:4] == ["Runs", "Paired differences (each run against run A, on the tasks both finished)",
                            "Results of run A", "Results of run B"], headings
    # in the document's order too: the differences' table before either run's results
    follows = browser.execute_script(
        "var d = document.getElementById('comparison-1');"
        "return ['results-0', 'results-1'].map(function (id) {"
        "  return !!(d.compareDocumentPosition(document.getElementById(id)) & Node.DOCUMENT_POSITION_FOLLOWING); });")
    assert follows == [True, True]
    browser.save_screenshot(str(artifacts / "comparison-differences-first.png"))


def test_a_script_in_a_model_reply_is_shown_never_run_and_a_planted_key_is_masked(browser, runs, tmp_path, artifacts):
    run = runs["hostile"]
    page = report([run], tmp_path / "hostile.html", env={"REPORT_TEST_API_KEY": PLANTED_KEY})
    html = page.read_text()
    assert PLANTED_KEY not in html and PLANTED_KEY[:12] not in html
    assert "</script><script>window.__xss" not in html
    open_page(browser, page.as_uri())
    first = results_of(run)[0]["task_id"]
    browser.find_element(By.CSS_SELECTOR, f"#task-rows .trow[data-task='{first}']").click()
    wait_for(browser, "return document.querySelectorAll('#trajectory .call').length > 0")
    time.sleep(0.2)  # an onerror/onload handler would have fired by now
    assert browser.execute_script("return window.__xss") is None
    assert browser.find_elements(By.CSS_SELECTOR, "#detail img, #detail svg script, #detail iframe") == []
    assert "</script><script>window.__xss = 1</script><img src=x" in text(browser, "detail-answer")
    replies = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#trajectory .msg.response pre")]
    assert any("<script>window.__xss = 1</script>" in r for r in replies)
    conversation = text(browser, "trajectory")
    assert "my key is ***" in conversation and PLANTED_KEY not in conversation
    assert not [e for e in browser.get_log("browser") if e["level"] == "SEVERE" and "__xss" in e["message"]]
    browser.save_screenshot(str(artifacts / "xss-shown-not-run.png"))


def test_the_page_fetches_nothing_from_the_network(runs, tmp_path):
    page = report([runs["main"]], tmp_path / "main.html").read_text()
    policy = page.split('http-equiv="Content-Security-Policy" content="', 1)[1].split('"', 1)[0]
    assert policy.startswith("default-src 'none'") and "connect-src" not in policy and "unsafe-inline" not in policy
    assert "http://" not in page.split("<script", 1)[0] and "https://" not in page.split("<script", 1)[0]


def test_a_10000_task_report_opens_and_filters_within_ten_seconds(browser, tmp_path, artifacts):
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import report as bench  # bench/report.py
    finally:
        sys.path.remove(str(ROOT / "bench"))
    run = bench.make_run(tmp_path / "big", tasks=10_000, calls=4)
    page = tmp_path / "big.html"
    bench.write_report(run, page)
    started = time.monotonic()
    figures = bench.measure(browser, page.as_uri())
    elapsed = time.monotonic() - started
    assert figures["rows"] == 10_000
    assert figures["shown_text"] == 10  # task-09990 .. task-09999
    errors = sum(1 for r in results_of(run) if r["status"] != "COMPLETED")
    assert figures["errors"] == errors
    # The bound is generous (the bench prints the real figures: about 0.5 s to render, 5 ms per filter).
    assert figures["first_render"] < 10 and figures["text_wall"] < 10 and figures["status_wall"] < 10
    assert elapsed < 30
    # the cut note of a long reply (task 0 has one)
    assert "shortened" in text(browser, "trajectory-cut")
    assert "characters cut from this page]" in text(browser, "trajectory")  # where the text was cut
    browser.save_screenshot(str(artifacts / "big-task.png"))


def test_view_follows_a_run_as_results_arrive(browser, runs, tmp_path, artifacts):
    source = runs["main"]
    live = tmp_path / "live"
    shutil.copytree(source, live)
    lines = (live / "results.jsonl").read_text().splitlines(keepends=True)
    (live / "summary.json").unlink()
    (live / "scores.json").unlink()
    (live / "results.jsonl").write_text("".join(lines[:3]))
    server = start_cli("view", str(live), testing=False)
    try:
        assert server.stderr is not None
        line = server.stderr.readline()
        assert "serving" in line, line
        url = line.split(" at ", 1)[1].split(" ", 1)[0]
        assert url.startswith("http://127.0.0.1:")
        open_page(browser, url)
        # the live view knows the planned total: the 8 tasks to come are listed as UNFINISHED
        n = len(lines)
        assert text(browser, "task-count") == f"showing {n} of {n}"
        assert text(browser, "unfinished-total").startswith(f"UNFINISHED: {n - 3} of {n} planned")
        assert "so far" in browser.find_element(By.ID, "summary").text
        with open(live / "results.jsonl", "a") as f:
            f.write(lines[3])
            f.write(lines[4][: len(lines[4]) // 2])  # a half-written line waits for the rest
            f.flush()
            wait_for(browser, "return (document.getElementById('unfinished-total') || {}).textContent"
                              f".indexOf('UNFINISHED: {n - 4} of') == 0")
            f.write(lines[4][len(lines[4]) // 2:])
            f.writelines(lines[5:])
        wait_for(browser, "return !document.getElementById('unfinished-total')")
        assert text(browser, "task-count") == f"showing {n} of {n}"
        # a filter being typed survives the refreshes, focus included
        needle = json.loads(lines[-1])["task_id"]
        box = browser.find_element(By.ID, "filter-text")
        box.send_keys(needle)
        matching = sum(1 for line in lines if needle in line_search_text(json.loads(line)))
        wait_for(browser, f"return document.getElementById('task-count').textContent == "
                          f"'showing {matching} of {len(lines)}'")
        shutil.copy(source / "summary.json", live / "summary.json")
        wait_for(browser, "return document.getElementById('live').textContent.indexOf('run finished') >= 0")
        assert browser.switch_to.active_element.get_attribute("id") == "filter-text"
        assert box.get_attribute("value") == needle
        assert text(browser, "task-count") == f"showing {matching} of {len(lines)}"
        box.clear()
        browser.execute_script("var e = document.getElementById('filter-text'); e.dispatchEvent(new Event('input'));")
        wait_for(browser, f"return document.getElementById('task-count').textContent == "
                          f"'showing {len(lines)} of {len(lines)}'")
        overall = summary_of(source)["metrics"]["overall"]["score"]
        assert text(browser, "primary-0") == f"{overall['mean']:.3f}"
        browser.save_screenshot(str(artifacts / "view-live.png"))
        # a task's detail is fetched when opened
        browser.find_element(By.CSS_SELECTOR, "#task-rows .trow").click()
        wait_for(browser, "return document.querySelectorAll('#trajectory .call').length > 0")
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_view_of_a_real_run_while_it_runs(browser, tmp_path, artifacts):
    run_dir = tmp_path / "running"
    run = start_cli("run", "example_interactive", "none", "mock", "-o", str(run_dir), "-n", "4", "-c", "1",
                    "-m", "latency=0.3", testing=False)
    server = None
    try:
        deadline = time.monotonic() + 30
        while not (run_dir / "run.json").exists():
            assert time.monotonic() < deadline and run.poll() is None, "the run did not start"
            time.sleep(0.05)
        server = start_cli("view", str(run_dir), testing=False)
        assert server.stderr is not None
        url = server.stderr.readline().split(" at ", 1)[1].split(" ", 1)[0]
        open_page(browser, url)
        # Rows of planned work not finished yet are listed too (UNFINISHED): count the finished ones.
        first = browser.execute_script("return window.__report.finished()")
        assert first < 4, "the run had finished before the page opened"
        wait_for(browser, "return document.getElementById('live').textContent.indexOf('run finished') >= 0",
                 timeout=60)
        assert run.wait(timeout=30) == 0
        assert text(browser, "task-count") == "showing 4 of 4"
        overall = summary_of(run_dir)["metrics"]["overall"]["score"]
        assert text(browser, "primary-0") == f"{overall['mean']:.3f}"
        browser.save_screenshot(str(artifacts / "view-real-run.png"))
    finally:
        for process in (run, server):
            if process is not None and process.poll() is None:
                process.terminate()
                process.wait(timeout=10)
