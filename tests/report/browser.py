"""A real headless Chromium for the report's tests and bench (Debian's ``chromium`` and ``chromium-driver``)."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CHROMIUM = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")
DRIVER = ("/usr/bin/chromedriver",)
#: Without these, Chromium on a closed network waits on connections it tries to open at start.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage")


def find(candidates: tuple[str, ...], name: str) -> str | None:
    for c in candidates:
        if Path(c).exists():
            return c
    return shutil.which(name)


def missing() -> str | None:
    """Why no browser can be started here (``None`` when one can)."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed"
    if not find(CHROMIUM, "chromium"):
        return "no chromium binary (apt-get install chromium chromium-driver)"
    if not find(DRIVER, "chromedriver"):
        return "no chromedriver (apt-get install chromium-driver)"
    return None


@contextlib.contextmanager
def chromium(width: int = 1400, height: int = 1000) -> Iterator[Any]:
    """A new headless Chromium with a fresh profile, quit (and the profile removed) on leaving."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = find(CHROMIUM, "chromium") or ""
    profile = tempfile.mkdtemp(prefix="agentcompass-chromium-")
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--window-size={width},{height}")
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        driver = webdriver.Chrome(service=Service(find(DRIVER, "chromedriver") or ""), options=options)
        try:
            yield driver
        finally:
            driver.quit()
    finally:
        shutil.rmtree(profile, ignore_errors=True)
