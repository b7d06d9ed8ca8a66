"""``agentcompass view``: the report's page served on loopback, following a run as its results arrive.

Endpoints (every response masked with the redactor, JSON with ``Cache-Control: no-store``):

* ``GET /`` — the page (``view`` mode: no detail inlined; the page fetches them).
* ``GET /api/summary`` — ``{"version", "runs": [{header, summary, live, warnings, n_rows}], "comparisons"}``;
  each request first reads what the run appended.
* ``GET /api/tasks?run=R&from=N&replaced=M`` — the rows of run ``R`` from row ``N`` on, when the client has
  seen ``M`` in-place replacements (``replaced`` in the answer); when rows were replaced since, every row
  (``"from": 0``).
* ``GET /api/task/R-I`` — row ``I``'s detail: result, earlier attempts and conversation (read then, not before).
* ``POST /api/ctl/R`` — only when served on loopback: one ``agentcompass ctl`` request (``{"action": "pause"}``, ...)
  to run ``R`` while it runs, with the page's token in the ``X-Agentcompass-Control`` header (a page of another
  origin cannot send it: it neither knows the token nor may send the header without a preflight this server
  refuses); the run's reply, or ``{"ok": false, "error": ...}``.
"""

from __future__ import annotations

import asyncio
import ipaddress
import secrets
import socket
from collections.abc import Sequence
from typing import Any

import attrs
from agentcompass.errors import UsageError
from agentcompass.runtime.model_providers import Redactor
from agentcompass.runtime.run_control import send
from agentcompass.runtime.run_reader import RunReader
from aiohttp import web

from agentcompass_report.compare import comparisons
from agentcompass_report.conversation import VIEW_CAPS
from agentcompass_report.page import json_response_text, render
from agentcompass_report.payload import ROW_COLUMNS, detail, header, rows, summary_of, unfinished_rows
from agentcompass_report.report import page_data, title_of

LOOPBACK_NAMES = frozenset({"localhost"})
#: What the page's buttons may ask of a live run, and the header carrying the page's token.
CONTROL_ACTIONS = ("status", "pause", "resume", "drain", "set", "requeue", "cancel")
CONTROL_HEADER = "X-Agentcompass-Control"


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_host(host: str, allow_remote: bool) -> None:
    """A :class:`UsageError` for a non-loopback address unless the user asked for it."""
    if not is_loopback(host) and not allow_remote:
        raise UsageError(f"--host {host} is not a loopback address: the page shows the run's prompts and answers "
                         f"to anyone who can reach it; pass --allow-remote as well to serve it there anyway")


@attrs.define
class ViewState:
    """The runs being viewed, refreshed (under a lock) at each request."""

    runs: list[RunReader]
    redactor: Redactor
    lock: asyncio.Lock = attrs.field(factory=asyncio.Lock)
    #: The token the page's steering buttons send (``POST /api/ctl``); ``None``: no buttons (not on loopback).
    control_token: str | None = None
    #: The last summary answer and the version it was built at (polls of an unchanged run reuse it).
    _cached: tuple[str, dict[str, Any]] | None = None

    def refresh(self) -> None:
        for r in self.runs:
            r.refresh()

    def version(self) -> str:
        return "-".join(".".join(str(v) for v in r.version()) for r in self.runs)

    def summary(self) -> dict[str, Any]:
        version = self.version()
        if self._cached is not None and self._cached[0] == version:
            return self._cached[1]
        out = []
        for r in self.runs:
            summary, live = summary_of(r)
            out.append({"header": header(r), "summary": summary, "live": live, "warnings": r.warnings[-50:],
                        "n_rows": len(r.results), "replaced": r.replaced, "unfinished": unfinished_rows(r)})
        answer = {"version": version, "runs": out, "comparisons": comparisons(self.runs)}
        self._cached = (version, answer)
        return answer


def _json(state: ViewState, value: Any, status: int = 200) -> web.Response:
    return web.Response(text=json_response_text(value, state.redactor), status=status,
                        content_type="application/json", headers={"Cache-Control": "no-store"})


def _int(request: web.Request, name: str, default: int) -> int:
    try:
        return int(request.query.get(name, default))
    except ValueError:
        raise web.HTTPBadRequest(text=f"{name} must be an integer") from None


def make_app(state: ViewState) -> web.Application:
    routes = web.RouteTableDef()

    @routes.get("/")
    async def page(request: web.Request) -> web.Response:
        async with state.lock:
            state.refresh()
            data = page_data(state.runs, "view", VIEW_CAPS)
            if state.control_token is not None:
                data["control"] = {"token": state.control_token, "actions": list(CONTROL_ACTIONS)}
            html = render(data, (), state.redactor, "view", state.redactor.text(title_of(state.runs)))
        return web.Response(text=html, content_type="text/html", headers={"Cache-Control": "no-store"})

    @routes.get("/api/summary")
    async def summary(request: web.Request) -> web.Response:
        async with state.lock:
            state.refresh()
            return _json(state, state.summary())

    @routes.get("/api/tasks")
    async def tasks(request: web.Request) -> web.Response:
        run, start, seen = _int(request, "run", 0), _int(request, "from", 0), _int(request, "replaced", -1)
        if not 0 <= run < len(state.runs):
            raise web.HTTPNotFound(text=f"no run {run}")
        async with state.lock:
            state.refresh()
            files = state.runs[run]
            if seen != files.replaced:
                start = 0
            all_rows = rows(files)
            return _json(state, {"version": state.version(), "columns": list(ROW_COLUMNS), "from": start,
                                 "rows": all_rows[start:], "replaced": files.replaced})

    @routes.get("/api/task/{key}")
    async def task(request: web.Request) -> web.Response:
        run_text, _, index_text = request.match_info["key"].partition("-")
        if not (run_text.isdigit() and index_text.isdigit()) or int(run_text) >= len(state.runs):
            raise web.HTTPNotFound(text="no such task")
        async with state.lock:
            files = state.runs[int(run_text)]
            keys = list(files.results)
            index = int(index_text)
            if index >= len(keys):
                raise web.HTTPNotFound(text="no such task")
            value = detail(files, keys[index], VIEW_CAPS)
        return _json(state, value)

    @routes.post("/api/ctl/{run}")
    async def control(request: web.Request) -> web.Response:
        token = state.control_token
        given = request.headers.get(CONTROL_HEADER, "")
        if token is None or not secrets.compare_digest(given.encode(), token.encode()):
            raise web.HTTPForbidden(text="steering is offered only to the page this server served on loopback")
        run_text = request.match_info["run"]
        if not run_text.isdigit() or int(run_text) >= len(state.runs):
            raise web.HTTPNotFound(text=f"no run {run_text}")
        try:
            body = await request.json()
        except ValueError:
            raise web.HTTPBadRequest(text="the body is one JSON object") from None
        if not isinstance(body, dict) or body.get("action") not in CONTROL_ACTIONS:
            raise web.HTTPBadRequest(text=f"action must be one of {', '.join(CONTROL_ACTIONS)}")
        try:
            reply = await asyncio.to_thread(send, state.runs[int(run_text)].path, body)
        except UsageError as exc:
            return _json(state, {"ok": False, "error": str(exc)}, status=409)
        return _json(state, reply)

    app = web.Application()
    app.add_routes(routes)
    return app


async def serve(state: ViewState, host: str, port: int, ready: Any = None) -> None:
    """Serve until cancelled; ``ready(url)`` is called once the socket listens."""
    runner = web.AppRunner(make_app(state), access_log=None)
    await runner.setup()
    sock = socket.create_server((host, port))  # OSError (in use, not an address here) reaches the command
    site = web.SockSite(runner, sock)
    await site.start()
    bound = sock.getsockname()[1]
    url = f"http://{host if ':' not in host else f'[{host}]'}:{bound}/"
    if ready is not None:
        ready(url)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


def open_runs(paths: Sequence[Any]) -> list[RunReader]:
    return [RunReader.open(p) for p in paths]
