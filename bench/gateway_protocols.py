"""The gateway's cost per protocol for streamed calls: time to first token it adds, and throughput at 100
concurrent streams, against the same loopback provider called directly.

The provider is the testing kit's ``LoopbackUpstream`` in a child process (its own core), answering every
protocol with a 60-word text streamed in 16-character pieces, ``--delay`` seconds apart (default 10 ms: about
the pace of a hosted model's stream; 0 measures the gateway's CPU cost per event instead). For each protocol
the same request is made

  * ``direct``  — straight to the provider;
  * ``gateway`` — to the run's gateway (in this process) with an attempt's token: passthrough, since the role's
    client (the real ``anthropic`` / ``openai`` provider) speaks the protocol; metered into a ``TaskMeter``;
  * ``translated`` (Anthropic and Responses clients only) — to the gateway, whose client is the
    ``openai-compatible`` provider, so the request is translated to chat completions and the answer back.

Time to first token: from sending the request to the first text piece (median of ``--ttft-calls`` calls made
one at a time). Throughput: ``--calls`` calls with ``--concurrency`` in flight, whole streams read. Targets
(issue 22): at most 2 ms added to time to first token, at most 5% less throughput.

Usage: uv run python bench/gateway_protocols.py [--calls 1000] [--concurrency 100] [--ttft-calls 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from typing import Any

import aiohttp
from agentcompass.models.gateway import ModelGateway
from agentcompass.models.metering import TaskMeter
from agentcompass.runtime.model_providers import ProviderSettings
from agentcompass_models.anthropic import make_anthropic
from agentcompass_models.openai import make_openai, make_openai_compatible

KEY = "bench-provider-key"
WORDS = " ".join(f"word{i}" for i in range(60))
UPSTREAM = f"""
import asyncio
import sys
from agentcompass.testing.scripted_models import ScriptedModel, text
from agentcompass.testing.upstream import LoopbackUpstream

async def main():
    async with LoopbackUpstream(ScriptedModel(lambda request: text({WORDS!r})), api_key={KEY!r}, piece=16,
                                delay=float(sys.argv[1])) as up:
        print(up.port, flush=True)
        await asyncio.Event().wait()

asyncio.run(main())
"""
PROTOCOLS: dict[str, dict[str, Any]] = {
    "chat": {"path": "/v1/chat/completions", "marker": b'"content":"w',
             "body": {"model": "m", "stream": True, "messages": [{"role": "user", "content": "talk"}]}},
    "anthropic": {"path": "/v1/messages", "marker": b"text_delta",
                  "body": {"model": "m", "stream": True, "max_tokens": 500,
                           "messages": [{"role": "user", "content": "talk"}]}},
    "responses": {"path": "/v1/responses", "marker": b"output_text.delta",
                  "body": {"model": "m", "stream": True, "input": "talk", "store": False}},
}


async def call(http: aiohttp.ClientSession, url: str, headers: dict[str, str], body: dict[str, Any],
               marker: bytes) -> float:
    """Seconds to the first text piece (the whole stream is read)."""
    t0 = time.perf_counter()
    first = 0.0
    async with http.post(url, data=json.dumps(body), headers=headers) as r:
        assert r.status == 200, await r.text()
        seen = b""
        async for chunk in r.content.iter_any():
            if not first:
                seen += chunk
                if marker in seen:
                    first = time.perf_counter() - t0
    assert first, "no text piece in the stream"
    return first


async def measure(url: str, headers: dict[str, str], spec: dict[str, Any], args: argparse.Namespace
                  ) -> tuple[float, float]:
    """(median time to first token in ms, calls per second at the concurrency)."""
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as http:
        for _ in range(20):  # warm up connections and code paths
            await call(http, url, headers, spec["body"], spec["marker"])
        ttfts = [await call(http, url, headers, spec["body"], spec["marker"]) for _ in range(args.ttft_calls)]
        queue = iter(range(args.calls))

        async def worker() -> None:
            for _ in queue:
                await call(http, url, headers, spec["body"], spec["marker"])

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(args.concurrency)))
        rate = args.calls / (time.perf_counter() - t0)
    return statistics.median(ttfts) * 1000, rate


async def main(args: argparse.Namespace) -> None:
    upstream = subprocess.Popen([sys.executable, "-c", UPSTREAM, str(args.delay)], stdout=subprocess.PIPE,  # noqa: ASYNC220
                                text=True)
    try:
        assert upstream.stdout is not None
        port = int(upstream.stdout.readline())
        root = f"http://127.0.0.1:{port}"
        settings = ProviderSettings(base_url=root, max_connections=1000, max_retries=0,
                                    environ={"ANTHROPIC_API_KEY": KEY})
        openai_settings = ProviderSettings(base_url=root + "/v1", max_connections=1000, max_retries=0,
                                           environ={"OPENAI_API_KEY": KEY, "K": KEY}, api_key_env=None)
        clients = {"anthropic": make_anthropic("m", settings=settings),
                   "responses": make_openai("m", settings=openai_settings),
                   "chat": make_openai("m", settings=openai_settings)}
        compatible = make_openai_compatible("m", settings=ProviderSettings(
            base_url=root + "/v1", api_key_env="K", max_connections=1000, max_retries=0, environ={"K": KEY}))
        gateway = ModelGateway({"agent": "m"})
        await gateway.start()
        print(f"{args.calls} streamed calls at concurrency {args.concurrency}, pieces {args.delay * 1000:g} ms apart; "
              f"time to first token: median of {args.ttft_calls} calls one at a time")
        print(f"{'protocol':<10} {'path':<11} {'TTFT ms':>8} {'added ms':>9} {'calls/s':>8} {'vs direct':>10}")
        for name, spec in PROTOCOLS.items():
            direct = await measure(root + spec["path"], {"Authorization": f"Bearer {KEY}", "x-api-key": KEY},
                                   spec, args)
            print(f"{name:<10} {'direct':<11} {direct[0]:>8.2f} {'':>9} {direct[1]:>8.0f}")
            paths = [("gateway", clients[name])] + ([("translated", compatible)] if name != "chat" else [])
            for label, client in paths:
                token, _ = gateway.grant({"agent": client}, TaskMeter("bench", 1, records_calls=False),
                                         gateway.base_url)
                via = await measure(gateway.base_url.removesuffix("/v1") + spec["path"],
                                    {"Authorization": f"Bearer {token}"}, spec, args)
                gateway.revoke(token)
                print(f"{'':<10} {label:<11} {via[0]:>8.2f} {via[0] - direct[0]:>9.2f} {via[1]:>8.0f} "
                      f"{(via[1] / direct[1] - 1) * 100:>+9.1f}%")
        await gateway.stop()
        for client in (*clients.values(), compatible):
            await client.aclose()
    finally:
        upstream.terminate()
        upstream.wait(10)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--ttft-calls", type=int, default=200)
    parser.add_argument("--delay", type=float, default=0.01)
    asyncio.run(main(parser.parse_args()))
