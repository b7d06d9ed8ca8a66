"""Assembling the page: the hand-written assets (``assets/report.css``, ``assets/report.js``) inlined, the data
in ``<script type="application/json">`` blocks.

Data is JSON with ``<``, ``>``, ``&`` and U+2028/U+2029 written as ``\\u`` escapes, so no text a model wrote
(``</script>``, ``<!--``) can end its block; the script reads it with ``JSON.parse`` and puts every text in the
page with ``textContent``. Every block's JSON text goes through the :class:`Redactor` first.

The Content-Security-Policy allows only the inlined script and style (by their hashes) and, in ``report`` mode,
no network access at all (``default-src 'none'``, no ``connect-src``); ``view`` may also fetch from its own
origin.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from collections.abc import Iterable
from functools import cache
from importlib import resources
from typing import Any, Literal

from agentcompass.runtime.model_providers import Redactor

Mode = Literal["report", "view"]

_ESCAPES = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028",
                          "\u2029": "\\u2029"})


def _finite(value: Any) -> Any:
    """``value`` with every NaN or infinite number written as the string ``"NaN"``, ``"Infinity"`` or
    ``"-Infinity"`` (JSON has no such numbers; the page shows the word)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _dumps(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str, allow_nan=False)
    except ValueError:  # a NaN or an infinity somewhere (a benchmark's metric, an artifact)
        return json.dumps(_finite(value), ensure_ascii=False, separators=(",", ":"), default=str)


def json_for_html(value: Any, redactor: Redactor) -> str:
    """``value`` as JSON text that is safe inside a ``<script type="application/json">`` block, masked."""
    return redactor.text(_dumps(value)).translate(_ESCAPES)


def json_response_text(value: Any, redactor: Redactor) -> str:
    """``value`` as masked JSON text for an HTTP response (``view``)."""
    return redactor.text(_dumps(value))


@cache
def asset(name: str) -> str:
    return resources.files("agentcompass_report").joinpath("assets", name).read_text(encoding="utf-8")


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def content_security_policy(mode: Mode) -> str:
    script, style = asset("report.js"), asset("report.css")
    connect = "connect-src 'self'; " if mode == "view" else ""
    return (f"default-src 'none'; script-src {_hash(script)}; style-src {_hash(style)}; img-src data:; "
            f"{connect}base-uri 'none'; form-action 'none'")


def render(data: Any, details: Iterable[tuple[str, Any]], redactor: Redactor, mode: Mode, title: str) -> str:
    """The whole page: ``data`` (the runs), then one block per task detail (``id`` ``d-<key>``), then the script.

    ``details`` may be a generator: the page is assembled in one pass over it.
    """
    parts = [
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{content_security_policy(mode)}\">",
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">",
        f"<title>{_escape_text(title)}</title>",
        f"<style>{asset('report.css')}</style></head><body>",
        "<div id=\"app\"><p id=\"loading\">Loading…</p></div>",
        f"<script type=\"application/json\" id=\"data\">{json_for_html(data, redactor)}</script>",
    ]
    for key, value in details:
        parts.append(f"<script type=\"application/json\" id=\"d-{_escape_attr(key)}\">"
                     f"{json_for_html(value, redactor)}</script>")
    parts.append(f"<script>{asset('report.js')}</script></body></html>\n")
    return "".join(parts)


def _escape_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _escape_attr(text: str) -> str:
    return _escape_text(text).replace('"', "&quot;")
