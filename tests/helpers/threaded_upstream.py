"""A :class:`LoopbackUpstream` served from a thread of its own, for tests that run the CLI in a child process, and
an Anthropic SDK client like Claude Code's to run against it (``CLAUDE_LIKE``: a script taking ``max_tokens``)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from agentcompass.testing.upstream import LoopbackUpstream


@contextmanager
def upstream_in_thread(*args: Any, kind: type[LoopbackUpstream] = LoopbackUpstream,
                       **kwargs: Any) -> Iterator[LoopbackUpstream]:
    """A ``kind`` (default :class:`LoopbackUpstream`) made of ``args``, serving from a thread of its own."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    up = kind(*args, **kwargs)
    asyncio.run_coroutine_threadsafe(up.__aenter__(), loop).result(30)
    try:
        yield up
    finally:
        asyncio.run_coroutine_threadsafe(up.__aexit__(None, None, None), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


class TimedUpstream(LoopbackUpstream):
    """A :class:`LoopbackUpstream` that notes when it finished each answer (``ended``: ``time.time()``, the end
    of a stream's last piece)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ended: list[float] = []

    async def _answer(self, request: Any, protocol: str, body: Any) -> Any:
        answered = await super()._answer(request, protocol, body)
        self.ended.append(time.time())
        return answered

#: A streamed Anthropic Messages call with a thinking block and cache_control marks; prints its text and the
#: seconds between its first and last piece (or the error), as JSON.
CLAUDE_LIKE = '''
import json, os, sys, time
import anthropic

client = anthropic.Anthropic(base_url=os.environ["ANTHROPIC_BASE_URL"], api_key=os.environ["ANTHROPIC_API_KEY"],
                             max_retries=0)
cache = {"cache_control": {"type": "ephemeral"}}
messages = [
    {"role": "user", "content": [{"type": "text", "text": "Rome?", **cache}]},
    {"role": "assistant", "content": [{"type": "thinking", "thinking": "Weather.", "signature": "sig-abc=="},
                                      {"type": "text", "text": "Looking."}]},
    {"role": "user", "content": "go on"}]
times, text = [], ""
try:
    with client.messages.stream(model=os.environ["AGENTCOMPASS_MODEL"], max_tokens=int(sys.argv[1]),
                                thinking={"type": "enabled", "budget_tokens": 1024}, messages=messages,
                                system=[{"type": "text", "text": "Be brief.", **cache}]) as s:
        for piece in s.text_stream:
            times.append(time.monotonic())
            text += piece
    print(json.dumps({"text": text, "spread": times[-1] - times[0]}))
except anthropic.APIStatusError as exc:
    print(json.dumps({"text": text, "error": str(exc)}))
'''
