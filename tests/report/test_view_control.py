"""``agentcompass view`` on loopback offers ``ctl``'s actions as buttons, in a real headless Chromium, on a real run in
another process; the server refuses a request without the page's token."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from agentcompass.runtime.run_control import send
from selenium.webdriver.common.by import By

from tests.helpers.cli_processes import start_cli, wait_for
from tests.report.test_browser import open_page, text
from tests.report.test_browser import wait_for as page_wait_for

pytestmark = pytest.mark.browser


def test_the_view_steers_a_live_run_with_buttons(browser, tmp_path, artifacts):
    run_dir = tmp_path / "running"
    run = start_cli("run", "scripted", "none", "mock", "-b", "n=6", "-b", "sleep=2", "-c", "1", "-o", str(run_dir),
                    "--task-lines")
    server = None
    try:
        wait_for(lambda: (run_dir / "control.sock").exists(), what="the run's control socket")
        server = start_cli("view", str(run_dir), testing=False)
        assert server.stderr is not None
        url = server.stderr.readline().split(" at ", 1)[1].split(" ", 1)[0]
        open_page(browser, url)
        browser.find_element(By.ID, "ctl-pause").click()
        page_wait_for(browser, "return document.getElementById('ctl-message').textContent.startsWith('paused')")
        assert send(run_dir, {"action": "status"})["status"]["state"] == "paused"
        browser.find_element(By.ID, "ctl-concurrency").send_keys("3")
        browser.find_element(By.ID, "ctl-set-concurrency").click()
        page_wait_for(browser, "return document.getElementById('ctl-message').textContent === 'concurrency 1 -> 3'")
        browser.save_screenshot(str(artifacts / "view-control.png"))
        forged = urllib.request.Request(url + "api/ctl/0", data=json.dumps({"action": "drain"}).encode(),
                                        method="POST", headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(forged, timeout=10)
        assert refused.value.code == 403
        assert send(run_dir, {"action": "status"})["status"]["state"] == "paused"  # the forged drain did nothing
        browser.find_element(By.ID, "ctl-drain").click()
        page_wait_for(browser, "return document.getElementById('ctl-message').textContent.startsWith('draining')")
        _, stderr = run.communicate(timeout=60)
        assert run.returncode == 130, stderr
        assert "ctl pause (uid" in stderr and "ctl drain (uid" in stderr
        assert "Steer this run" in text(browser, "ctl-bar")
    finally:
        for process in (run, server):
            if process is not None and process.poll() is None:
                process.terminate()
                process.wait(timeout=10)


def test_a_view_served_off_loopback_refuses_every_steering_request():
    """Unit level: off loopback the command gives the server no token (no buttons on the page), and every
    ``POST /api/ctl`` is refused."""
    import asyncio

    from agentcompass.runtime.model_providers import Redactor
    from agentcompass_report.server import ViewState, make_app
    from aiohttp.test_utils import TestClient, TestServer

    async def check() -> int:
        async with TestClient(TestServer(make_app(ViewState([], Redactor(), control_token=None)))) as client:
            answer = await client.post("/api/ctl/0", json={"action": "pause"}, headers={"X-Agentcompass-Control": ""})
            return answer.status

    assert asyncio.run(check()) == 403
