"""Where the scanners' findings show in the report: a ``flags`` column and a flag filter in the task table, and
the evidence beside the conversation — in the page's data (no browser) and in a real headless Chromium."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from agentcompass.redaction import Redactor
from agentcompass.runtime.run_reader import RunReader
from agentcompass.runtime.scanning import Evidence, Finding
from agentcompass.scanning import store
from agentcompass_report.payload import ROW_COLUMNS, detail, run_payload
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from tests.report.test_browser import open_page, report, table_tasks, text, wait_for


def flagged_copy(runs: dict[str, Path], tmp_path: Path) -> tuple[Path, dict[str, Any], list[Finding]]:
    """A copy of the README's run with two findings on its first result's attempt (as ``scan`` writes them)."""
    run_dir = tmp_path / "run"
    shutil.copytree(runs["main"], run_dir)
    first = json.loads((run_dir / "results.jsonl").read_text().splitlines()[0])
    key = (first["task_id"], first["trial"], first["attempt"])
    found = [Finding("reward-hacking", *key, "high", "the agent read the task's tests",
                     (Evidence("step", "cat tests/test.sh && echo <b>done</b>", 2),)),
             Finding("loop", *key, "medium", "the same call was made 6 times in a row (steps 0–5)",
                     (Evidence("step", "ls", 0),))]
    store.append(run_dir / "scans.jsonl", found, Redactor())
    return run_dir, first, found


def test_rows_carry_their_flags_and_the_detail_the_evidence(runs: dict[str, Path], tmp_path: Path) -> None:
    run_dir, first, _ = flagged_copy(runs, tmp_path)
    files = RunReader.open(run_dir)
    payload = run_payload(files)
    flags = {r[0]: r[ROW_COLUMNS.index("flags")] for r in payload["rows"]}
    assert flags.pop(first["task_id"]) == "loop, reward-hacking"
    assert set(flags.values()) == {None}
    shown = detail(files, (first["task_id"], first["trial"]))
    assert shown is not None
    assert [(f["scanner"], f["evidence"][0]["excerpt"]) for f in shown["findings"]] == [
        ("reward-hacking", "cat tests/test.sh && echo <b>done</b>"), ("loop", "ls")]
    other = next(k for k in files.results if k[0] != first["task_id"])
    assert detail(files, other)["findings"] == []  # type: ignore[index]


@pytest.mark.browser
def test_the_table_shows_and_filters_flags_and_the_task_its_evidence(browser: Any, runs: dict[str, Path],
                                                                      tmp_path: Path, artifacts: Path) -> None:
    run_dir, first, _ = flagged_copy(runs, tmp_path)
    open_page(browser, report([run_dir], tmp_path / "report.html").as_uri())
    head = [h.text for h in browser.find_elements(By.CSS_SELECTOR, "#task-head > div")]
    assert "flags" in head
    Select(browser.find_element(By.ID, "filter-flag")).select_by_value("reward-hacking")
    assert table_tasks(browser) == [first["task_id"]]
    row = browser.find_element(By.CSS_SELECTOR, "#task-rows .trow")
    assert "loop, reward-hacking" in row.text
    Select(browser.find_element(By.ID, "filter-flag")).select_by_value("UNFLAGGED")
    assert first["task_id"] not in table_tasks(browser) and table_tasks(browser)
    Select(browser.find_element(By.ID, "filter-flag")).select_by_value("FLAGGED")
    browser.find_element(By.CSS_SELECTOR, "#task-rows .trow").click()
    wait_for(browser, "return !!document.getElementById('detail-findings')")
    shown = text(browser, "detail-findings")
    assert "reward-hacking high the agent read the task's tests (step 2)" in shown
    assert "cat tests/test.sh && echo <b>done</b>" in shown  # shown as text, never as markup
    assert not browser.find_elements(By.CSS_SELECTOR, "#detail-findings b + b")
    browser.save_screenshot(str(artifacts / "findings-task.png"))
