"""The report plays a ``human`` session's recording beside its result, in a real headless Chromium."""

from __future__ import annotations

from pathlib import Path

import pytest
from selenium.webdriver.common.by import By

from tests.harnesses.test_human import Tmux, cli
from tests.report.test_browser import open_page, report, wait_for

pytestmark = pytest.mark.browser


def human_run(tmp_path: Path) -> Path:
    run_dir, tmux = tmp_path / "run", Tmux("report-recording")
    try:
        tmux.start(cli("run", "example_coding", "human", "mock", "-t", "is_palindrome", "--env", "local",
                       "-o", str(run_dir)))
        tmux.wait_for("# ", timeout=120)
        tmux.type("printf 'def is_palindrome(s):\\n    t = [c.lower() for c in s if c.isalnum()]\\n"
                  "    return t == t[::-1]\\n' > solution.py; echo typed-by-a-person")
        tmux.type("exit")
        assert "EXITED 0" in tmux.wait_for("EXITED ")
    finally:
        tmux.kill()
    return run_dir


def test_the_report_plays_the_session_beside_the_result(browser, tmp_path, artifacts):
    run_dir = human_run(tmp_path)
    open_page(browser, report([run_dir], tmp_path / "human.html").as_uri())
    browser.find_element(By.CSS_SELECTOR, "#task-rows .trow[data-task='is_palindrome']").click()
    wait_for(browser, "return document.getElementById('detail-player')")
    assert "Terminal session (120×40)" in browser.find_element(By.ID, "detail-player").text
    buttons = browser.find_elements(By.CSS_SELECTOR, "#detail-player button")
    buttons[0].click()  # Play: the instruction shows first, then the session as it went
    wait_for(browser, "return document.getElementById('detail-recording').textContent.includes('is_palindrome')")
    wait_for(browser, "return document.getElementById('detail-recording').textContent.includes('typed-by-a-person')",
             timeout=20)
    screen = browser.find_element(By.ID, "detail-recording").get_attribute("textContent")
    assert screen.index("your instruction") < screen.index("> solution.py; echo typed-by-a-person")
    assert "\x1b" not in screen
    assert browser.find_element(By.ID, "detail-status").text == "COMPLETED"
    browser.save_screenshot(str(artifacts / "human-recording.png"))
