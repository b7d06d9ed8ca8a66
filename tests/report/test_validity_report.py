"""``agentcompass report VALIDATE_DIR``: the validity page of a real validate directory (real Harbor tasks broken on
purpose, run by the real ``agentcompass validate`` on ``local``) says per task what ``validate --json`` says — its
verdicts by trial, what is wrong, flip rate, times — and links to its two runs' own reports."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By

from tests.helpers.cli_processes import run_cli_subprocess
from tests.validate.test_validate_cli import broken_tasks


@pytest.fixture(scope="module")
def validated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A validate directory of 4 tasks x 2 trials (sound, oracle fails, nop passes, flaky) and its --json."""
    base = tmp_path_factory.mktemp("validate")
    tasks = broken_tasks(base / "tasks", base / "coin-counter")
    out = base / "v"
    done = run_cli_subprocess("validate", "harbor", "-b", f"path={tasks}", "--env", "local", "--trials", "2",
                              "-o", str(out), "--json", testing=False, timeout=300)
    assert done.returncode == 1, done.stderr  # tasks with problems
    return out, json.loads(done.stdout)


def _row(html: str, task: str) -> str:
    match = re.search(rf'<tr class="task [a-z]+" data-task="{re.escape(task)}".*?</tr>', html)
    assert match, f"no row of {task}"
    return match.group(0)


def _letters(verdicts: list[bool]) -> str:
    return "".join("P" if v else "F" for v in verdicts)


def test_the_validity_page_shows_each_tasks_verdicts_problems_flip_rate_and_times(validated):
    out, expected = validated
    done = run_cli_subprocess("report", str(out), testing=False, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"wrote {out / 'report.html'}" in done.stdout
    html = (out / "report.html").read_text()
    assert "<script" not in html  # no script, no network: a static page
    for task in expected["tasks"]:
        row = _row(html, task["task_id"])
        assert f'data-problems="{",".join(task["problems"])}"' in row
        plain = re.sub(r"<[^>]+>", "", row)
        assert _letters(task["oracle"]) in plain and _letters(task["nop"]) in plain
        assert f"{task['flip_rate']:.2f}" in plain
        assert f"total {task['seconds']['oracle']['total']:.1f}" in plain
    assert 'data-problems="oracle fails"' in _row(html, "verifier-always-fails")
    assert 'data-problems="nop passes"' in _row(html, "passes-untouched")
    assert "flaky" in _row(html, "coin-flip") and "0.50" in _row(html, "coin-flip")
    assert 'data-problems=""' in _row(html, "sound") and ">ok<" in _row(html, "sound")
    counts = ", ".join(f"{sum(w in t['problems'] for t in expected['tasks'])} {w}"
                       for w in ("oracle fails", "nop passes", "flaky"))
    assert "3 of 4 tasks with a problem" in html and counts in html  # coin-flip (P F) is flaky and fails too
    # the two runs got their own reports, which the page links to
    for phase in ("oracle", "nop"):
        assert (out / phase / "report.html").is_file() and f'href="{phase}/report.html"' in html


def test_a_directory_that_is_neither_a_run_nor_a_validation_is_refused_in_one_line(tmp_path):
    (tmp_path / "oracle").mkdir()  # no run.json inside
    done = run_cli_subprocess("report", str(tmp_path), testing=False)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


@pytest.mark.browser
def test_the_validity_page_in_a_browser(browser, validated, artifacts):
    out, expected = validated
    if not (out / "report.html").exists():
        assert run_cli_subprocess("report", str(out), testing=False, timeout=300).returncode == 0
    browser.get((out / "report.html").as_uri())
    rows = browser.find_elements(By.CSS_SELECTOR, "#validity tbody tr.task")
    # problem tasks first, then the sound ones
    assert [r.get_attribute("data-task") for r in rows][-1] == "sound"
    by_task = {r.get_attribute("data-task"): r for r in rows}
    for task in expected["tasks"]:
        cells = by_task[task["task_id"]].find_elements(By.TAG_NAME, "td")
        assert [c.text for c in cells[:5]] == [task["task_id"], _letters(task["oracle"]), _letters(task["nop"]),
                                               ", ".join(task["problems"]) or "ok", f"{task['flip_rate']:.2f}"]
    # what is wrong stands out (red): the oracle failing, nop passing; the oracle passing and nop failing do not
    def colours(task: str, run: str) -> list[str]:
        return [v.value_of_css_property("color")
                for v in by_task[task].find_elements(By.CSS_SELECTOR, f"td.{run} span")]

    good = colours("sound", "oracle")[0]
    assert colours("sound", "nop") == [good, good]
    assert good not in colours("verifier-always-fails", "oracle") and good not in colours("passes-untouched", "nop")
    browser.save_screenshot(str(artifacts / "validity.png"))
    browser.find_element(By.LINK_TEXT, "oracle run").click()
    from tests.report.test_browser import wait_for

    wait_for(browser, "return window.__report && window.__report.ready")
    assert "harbor" in browser.find_element(By.ID, "summary").text
