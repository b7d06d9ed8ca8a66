"""The documentation site in a real headless Chromium: the report and the live viewer of the README's main job are
screenshotted for it (``docs/screenshots/``), the site is built with them (``mkdocs build --strict``) and served
on loopback, and its pages open with their headings, tables and images and no error in the console.

The screenshots go to ``$AGENTCOMPASS_TEST_ARTIFACTS/report`` (or a temporary directory); with
``AGENTCOMPASS_DOCS_SCREENSHOTS=1`` they also replace ``docs/screenshots/*.png`` (how the committed ones were made).
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import importlib.util
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By

from tests.helpers.cli_processes import ROOT, start_cli
from tests.report.test_browser import open_page, report, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SHOTS = ROOT / "docs" / "screenshots"
UPDATE = "AGENTCOMPASS_DOCS_SCREENSHOTS"


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # no line per request on stderr
        pass


@contextlib.contextmanager
def serve(directory: Path) -> Iterator[str]:
    """``directory`` over HTTP on 127.0.0.1 (the site's search needs http://, not file://)."""
    handler = functools.partial(QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def _severe(browser) -> list[str]:
    return [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]


def test_screenshots_of_the_report_and_viewer_and_the_site_in_chromium(browser, runs, tmp_path, artifacts):
    if importlib.util.find_spec("mkdocs") is None or shutil.which("uv") is None:
        pytest.skip("the docs dependency group is not installed (uv sync --group docs)")
    shots = {"report.png": artifacts / "docs-report.png", "viewer.png": artifacts / "docs-viewer.png"}
    browser.set_window_size(1400, 1000)
    # The report of the README's main job, as `agentcompass report` writes it.
    open_page(browser, report([runs["main"]], tmp_path / "main.html").as_uri())
    browser.save_screenshot(str(shots["report.png"]))
    # The live viewer of the same run, with a task's conversation open.
    server = start_cli("view", str(runs["main"]), testing=False)
    try:
        assert server.stderr is not None
        line = server.stderr.readline()
        url = line.split(" at ", 1)[1].split(" ", 1)[0]
        open_page(browser, url)
        browser.find_element(By.CSS_SELECTOR, "#task-rows .trow").click()
        wait_for(browser, "return document.querySelectorAll('#trajectory .call').length > 0")
        browser.save_screenshot(str(shots["viewer.png"]))
    finally:
        server.terminate()
        server.wait(timeout=10)
    for shot in shots.values():
        assert _png_size(shot)[0] >= 1000
    if os.environ.get(UPDATE):
        SHOTS.mkdir(exist_ok=True)
        for name, shot in shots.items():
            shutil.copy(shot, SHOTS / name)
    assert {p.name for p in SHOTS.glob("*.png")} >= set(shots), "docs/screenshots/ lacks a screenshot"

    site = tmp_path / "site"
    built = subprocess.run(["uv", "run", "--group", "docs", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                           cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    pages = {"": "agentcompass", "guides/viewing/": "Report and viewer", "reference/cli/": "Command-line reference",
             "reference/api/": "Public API reference", "plugins/writing/": "Writing a plugin",
             "concepts/": "Concepts"}
    with serve(site) as base:
        browser.get_log("browser")  # start the console afresh
        for path, title in pages.items():
            browser.get(f"{base}/{path}")
            wait_for(browser, "return document.readyState === 'complete'")
            assert browser.find_element(By.CSS_SELECTOR, "article h1").text.rstrip("¶").strip() == title
            broken = browser.execute_script(
                "return [...document.images].filter(i => !i.complete || i.naturalWidth === 0).map(i => i.src)")
            assert broken == [], f"{path}: images that did not load: {broken}"
            assert _severe(browser) == [], f"{path}: console errors"
        browser.get(f"{base}/guides/viewing/")
        wait_for(browser, "return document.readyState === 'complete'")
        shown = browser.execute_script("return [...document.images].map(i => i.src.split('/').pop())")
        assert {"report.png", "viewer.png"} <= set(shown)
        browser.get(f"{base}/reference/cli/")
        assert browser.find_element(By.ID, "agentcompass-run").is_displayed()
        assert len(browser.find_elements(By.CSS_SELECTOR, "article table")) >= 15
        browser.save_screenshot(str(artifacts / "docs-cli-reference.png"))
