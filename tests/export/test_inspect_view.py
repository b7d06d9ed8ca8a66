"""An exported run opens in Inspect's own viewer (``inspect view``), driven in a real headless Chromium: the
samples list shows the errored sample as errored, and a sample's messages show its tool calls and results."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.export.runs import run_cli
from tests.report.browser import chromium, missing

pytestmark = pytest.mark.browser


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def viewer(runs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``inspect view`` on a directory holding the exported react run; its base URL."""
    logs = tmp_path_factory.mktemp("inspect-view")
    done = run_cli("export", "inspect", str(runs["react"]), "-o", str(logs / "react.eval"))
    assert done.returncode == 0, done.stderr
    port = free_port()
    inspect = Path(sys.executable).with_name("inspect")
    process = subprocess.Popen([str(inspect), "view", "--log-dir", str(logs), "--host", "127.0.0.1",
                                "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(base, timeout=5) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                out = process.stdout.read().decode() if process.stdout else ""
                pytest.fail(f"inspect view did not start: {out}")
            time.sleep(0.5)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    reason = missing()
    if reason:
        if os.environ.get("AGENTCOMPASS_REQUIRE_BROWSER"):
            pytest.fail(f"AGENTCOMPASS_REQUIRE_BROWSER is set but no browser can start: {reason}")
        pytest.skip(f"no headless browser: {reason}")
    with chromium() as driver:
        yield driver


def page_text(driver: Any, *wanted: str, timeout: float = 60) -> str:
    """The page's text once it holds every ``wanted`` string (the viewer renders as it loads)."""
    from selenium.webdriver.common.by import By

    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        text = driver.find_element(By.TAG_NAME, "body").text
        if all(w in text for w in wanted):
            return text
        time.sleep(0.5)
    raise AssertionError(f"the viewer never showed {[w for w in wanted if w not in text]}; it showed:\n{text[:3000]}")


def test_the_viewer_lists_the_samples_with_the_errored_one(viewer: str, browser: Any) -> None:
    browser.get(viewer + "#/tasks/react.eval")
    text = page_text(browser, "example_coding", "fizzbuzz", "flatten", "roman", "1 of 3 samples")
    assert "RUN_ERROR in run" in text
    assert "solved fizzbuzz" in text


def test_a_samples_messages_show_its_tool_calls_and_results(viewer: str, browser: Any,
                                                             tmp_path_factory: pytest.TempPathFactory) -> None:
    from selenium.webdriver.common.by import By

    browser.get(viewer + "#/tasks/react.eval/samples/sample/fizzbuzz/1/")
    page_text(browser, "Sample fizzbuzz", "MESSAGES")
    tab = next(e for e in browser.find_elements(By.XPATH, "//*[translate(normalize-space(text()), 'MESAG', 'mesag')='messages']")
               if e.is_displayed())
    tab.click()
    text = page_text(browser, "write_file", "bash", "submit", "imported", "solved fizzbuzz")
    assert "You are an autonomous agent" in text
    shot = tmp_path_factory.mktemp("shots") / "inspect-view-messages.png"
    browser.save_screenshot(str(shot))
    if os.environ.get("AGENTCOMPASS_TEST_ARTIFACTS"):
        keep = Path(os.environ["AGENTCOMPASS_TEST_ARTIFACTS"]) / "export"
        keep.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, keep / shot.name)
