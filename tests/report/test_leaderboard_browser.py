"""The leaderboard page of a real suite (made by the real CLI) in a real headless Chromium: cells, intervals, the
baseline differences, and links into each run's report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By

from tests.helpers.cli_processes import run_cli_subprocess
from tests.report.test_browser import wait_for

pytestmark = pytest.mark.browser

SUITE = """
baseline = "example_interactive-e0"

[defaults]
model = "mock"
trials = 2
seed = 5

[matrix]
benchmark = ["example_coding", "example_interactive"]
harness = ["react", "none"]
model_args = [{ error_rate = "0" }, { error_rate = "0.6" }]
name = "{benchmark}-e{model_args[error_rate]}"
exclude = [{ benchmark = "example_coding", harness = "none" }, { benchmark = "example_interactive", harness = "react" }]

[[run]]
name = "broken"
benchmark = "example_interactive"
harness = "none"
env = "no-such-environment"
"""


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("suite")
    (base / "suite.toml").write_text(SUITE)
    out = base / "out"
    done = run_cli_subprocess("suite", "run", str(base / "suite.toml"), "-o", str(out), testing=False,
                              timeout=300)
    assert done.returncode == 1, done.stderr  # the broken cell
    return out


def test_the_leaderboard_page_shows_cells_intervals_differences_and_links(browser, suite, artifacts):
    done = run_cli_subprocess("report", str(suite), testing=False, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"wrote {suite / 'report.html'}" in done.stdout
    board = json.loads(run_cli_subprocess("suite", "show", str(suite), "--json", testing=False).stdout)
    browser.get((suite / "report.html").as_uri())
    wait_for(browser, "return document.querySelectorAll('tr.cell').length > 0")
    browser.save_screenshot(str(artifacts / "leaderboard.png"))
    sections = browser.find_elements(By.CSS_SELECTOR, "section.benchmark")
    assert [s.get_attribute("data-benchmark") for s in sections] == [b["benchmark"] for b in board["benchmarks"]]
    for section, bench in zip(sections, board["benchmarks"], strict=True):
        rows = section.find_elements(By.CSS_SELECTOR, "tr.cell")
        assert [r.get_attribute("data-cell") for r in rows] == [c["name"] for c in bench["cells"]]
        assert f"paired differences vs {bench['baseline']}" in section.text
        for row, cell in zip(rows, bench["cells"], strict=True):
            summary = json.loads((suite / cell["name"] / "summary.json").read_text())
            overall = summary["metrics"]["overall"][summary["primary_metric"]]
            assert row.find_element(By.CSS_SELECTOR, "td.mean").text == f"{overall['mean']:.4f}"
            lo, hi = overall["ci95"]
            assert row.find_element(By.CSS_SELECTOR, "td.ci").text == f"[{lo:.3f}, {hi:.3f}]"
            assert row.find_elements(By.CSS_SELECTOR, "td.cibar svg circle")
            difference = row.find_element(By.CSS_SELECTOR, "td.difference").text
            if cell["name"] == bench["baseline"]:
                assert difference == "baseline"
            else:
                d = cell["difference"]
                assert difference.startswith(f"{d['difference']:+.4f} [{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}]")
                assert f"of {d['n_tasks']}" in difference
                # the noise figures `suite show` prints beside the difference
                assert d["mde"] is not None and f"MDE {d['mde']:.3f}" in difference
                assert ("within noise" in difference) == d["within_noise"]
    interactive = next(b for b in board["benchmarks"] if b["benchmark"] == "example_interactive")
    assert interactive["baseline"] == "example_interactive-e0"
    notes = browser.find_element(By.ID, "not-on-board").text
    assert "broken: failed" in notes and "no-such-environment" in notes
    # every cell links to its run's report, which opens
    link = browser.find_element(By.CSS_SELECTOR, "tr.cell[data-cell='example_interactive-e0.6'] a")
    assert link.get_attribute("href").endswith("/example_interactive-e0.6/report.html")
    link.click()
    wait_for(browser, "return window.__report && window.__report.ready")
    assert "example_interactive" in browser.find_element(By.ID, "summary").text
    run_id = json.loads((suite / "example_interactive-e0.6" / "run.json").read_text())["request"]["run_id"]
    assert run_id in browser.page_source
    browser.back()
    wait_for(browser, "return document.querySelectorAll('tr.cell').length > 0")


#: Names as long as real ones (a served model's full name, a descriptive cell name): the columns must still fit.
LONG_NAMES = """
baseline = "example_interactive-qwen3-30b-a3b-instruct-e0"

[defaults]
model = "mock/Qwen/Qwen3-30B-A3B-Instruct-2507-FP8"
trials = 2
seed = 5

[matrix]
benchmark = ["example_interactive"]
harness = ["none"]
model_args = [{ error_rate = "0" }, { error_rate = "0.6" }]
name = "{benchmark}-qwen3-30b-a3b-instruct-e{model_args[error_rate]}"
"""

#: Per leaderboard table: the right edge of its last column, of its scrolling box and of the window, and
#: whether the box (not the page) scrolls; after scrolling the box to its end.
EDGES = """
return Array.from(document.querySelectorAll('table.lb')).map(function (table) {
  var box = table.closest('.xscroll');
  box.scrollLeft = box.scrollWidth;
  var last = table.querySelector('thead th:last-child').getBoundingClientRect();
  return {last: last.right, box: box.getBoundingClientRect().right, window: window.innerWidth,
          page: document.documentElement.scrollWidth, scrolls: box.scrollWidth > box.clientWidth};
});
"""


@pytest.fixture(scope="module")
def long_named_suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("long-suite")
    (base / "suite.toml").write_text(LONG_NAMES)
    out = base / "out"
    done = run_cli_subprocess("suite", "run", str(base / "suite.toml"), "-o", str(out), testing=False,
                              timeout=300)
    assert done.returncode == 0, done.stderr
    done = run_cli_subprocess("report", str(out), testing=False, timeout=300)
    assert done.returncode == 0, done.stderr
    return out


def test_every_leaderboard_column_is_visible_at_1400_px_and_the_table_scrolls_when_narrower(
        browser, long_named_suite, artifacts):
    try:
        for width in (1400, 900):
            browser.set_window_size(width, 1000)
            browser.get((long_named_suite / "report.html").as_uri())
            wait_for(browser, "return document.querySelectorAll('tr.cell').length == 2")
            browser.save_screenshot(str(artifacts / f"leaderboard-long-names-{width}.png"))
            (edges,) = browser.execute_script(EDGES)
            assert edges["window"] <= width
            assert edges["page"] <= edges["window"], edges  # the page itself never scrolls sideways
            assert edges["last"] <= edges["box"] + 0.5, edges  # the last column is reachable, not clipped
            if width == 1400:  # ... and at 1,400 px in view without scrolling
                assert not edges["scrolls"], edges
            else:
                assert edges["scrolls"], edges
    finally:
        browser.set_window_size(1400, 1000)
