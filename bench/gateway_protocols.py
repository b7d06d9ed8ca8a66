"""The gateway's cost per protocol for streamed calls: time to first token it adds, and throughput at 100
concurrent streams, against the same loopback provider called directly.

The provider is the testing kit's ``LoopbackUpstream`` in a child process (its own core), answering every
protocol with a 60-word text streamed in 16-character pieces, ``--delay`` seconds apart (default 10 ms: about
the pace of a hosted model's stream; 0 measures the gateway's CPU cost per event instead). For each protocol
the same request is made

  * ``direct``  — straight to the provider;
  * ``gateway`` — to the run's gateway (in this process) with an attempt's token: passthrough, since the role's
    client (the real ``anthropic`` / ``openai`` provider) speaks the protocol; metered into a ``TaskMeter``;
  * ``translated`` (Anthropic, Responses and Gemini clients) — to the gateway, whose client is the
    ``openai-compatible`` provider, so the request is translated to chat completions and the answer back.

The calls are made by a load generator in a process of its own (as an agent in a container is: its parsing
does not share the gateway's event loop), the paths interleaved (one call of each in turn; then the rounds of
each in turn) so that the load of whatever else runs on the machine weighs on them alike. Time to first
token: from sending the request to the first text piece (median of ``--ttft-calls`` calls made one at a
time). Throughput: ``--calls`` calls with ``--concurrency`` in flight, whole streams read, the best of
``--rounds`` rounds. Targets (issue 22): at most 2 ms added to time to first token, at most 5% less
throughput. The last column is the gateway's own CPU time per call (this process's, each gateway path run
alone): unlike the rates it does not move with whatever else runs on the machine.

``--floor`` adds a path ``bare relay``: an aiohttp server in this process doing nothing but relaying each
request's bytes to the provider and its answer's chunks back (no token, no metering, no masking) — what aiohttp
itself costs per call on this design, the floor under the gateway's CPU column.

Usage: uv run python bench/gateway_protocols.py [--calls 1000] [--concurrency 100] [--ttft-calls 200]
                                               [--protocols chat,anthropic,responses,gemini] [--floor]
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
from agentcompass_models.gemini import make_gemini
from agentcompass_models.openai import make_openai, make_openai_compatible
from aiohttp import web

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
    "gemini": {"path": "/v1beta/models/m:streamGenerateContent?alt=sse", "marker": b'"text":"w',
               "body": {"contents": [{"role": "user", "parts": [{"text": "talk"}]}]}},
}


CLIENT = """
import asyncio, json, statistics, sys, time
import aiohttp

job = json.loads(sys.argv[1])


async def call(http, url, headers, body, marker):
    t0 = time.perf_counter()
    first = 0.0
    async with http.post(url, data=body, headers=headers) as r:
        assert r.status == 200, await r.text()
        seen = b""
        async for chunk in r.content.iter_any():
            if not first:
                seen += chunk
                if marker in seen:
                    first = time.perf_counter() - t0
    assert first, "no text piece in the stream"
    return first


async def main():
    body, marker = json.dumps(job["body"]), job["marker"].encode()
    paths = job["paths"]
    out = {label: {"ttft": [], "rate": []} for label, _, _ in paths}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        for label, url, headers in paths:
            for _ in range(20):  # warm up connections and code paths
                await call(http, url, headers, body, marker)
        for _ in range(job["ttft_calls"]):  # one at a time, the paths in turn: the same load on each
            for label, url, headers in paths:
                out[label]["ttft"].append(await call(http, url, headers, body, marker))
        for _ in range(job["rounds"]):
            for label, url, headers in paths:
                queue = iter(range(job["calls"]))

                async def worker():
                    for _ in queue:
                        await call(http, url, headers, body, marker)

                t0 = time.perf_counter()
                await asyncio.gather(*(worker() for _ in range(job["concurrency"])))
                out[label]["rate"].append(job["calls"] / (time.perf_counter() - t0))
    print(json.dumps(out))


asyncio.run(main())
"""


async def measure(paths: list[tuple[str, str, dict[str, str]]], spec: dict[str, Any], args: argparse.Namespace
                  ) -> dict[str, dict[str, list[float]]]:
    """Each path's times to first token (s) and rates (calls/s), measured by a client process of its own
    (as an agent in a container is), the paths interleaved so that the machine's other load weighs alike."""
    job = {"paths": paths, "body": spec["body"], "marker": spec["marker"].decode(), "calls": args.calls,
           "concurrency": args.concurrency, "ttft_calls": args.ttft_calls, "rounds": args.rounds}
    child = await asyncio.create_subprocess_exec(sys.executable, "-c", CLIENT, json.dumps(job),
                                                 stdout=asyncio.subprocess.PIPE)
    out, _ = await child.communicate()
    assert child.returncode == 0, "the client process failed"
    return json.loads(out)  # type: ignore[no-any-return]


async def bare_relay(root: str) -> tuple[web.AppRunner, aiohttp.ClientSession, str]:
    """An aiohttp server relaying every request as it is to ``root`` and the answer's chunks back: the floor."""
    http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1000), auto_decompress=False)
    headers = {"Authorization": f"Bearer {KEY}", "x-api-key": KEY, "x-goog-api-key": KEY,
               "Content-Type": "application/json"}

    async def relay(request: web.Request) -> web.StreamResponse:
        async with http.post(root + request.path_qs, data=await request.read(), headers=headers) as reply:
            response = web.StreamResponse(status=reply.status, headers={"Content-Type": reply.content_type})
            await response.prepare(request)
            async for chunk in reply.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response

    app = web.Application()
    app.router.add_post("/{path:.*}", relay)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, http, f"http://127.0.0.1:{port}"


async def main(args: argparse.Namespace) -> None:
    upstream = subprocess.Popen([sys.executable, "-c", UPSTREAM, str(args.delay)], stdout=subprocess.PIPE,  # noqa: ASYNC220
                                text=True)
    try:
        assert upstream.stdout is not None
        port = int(upstream.stdout.readline())
        root = f"http://127.0.0.1:{port}"
        settings = ProviderSettings(base_url=root, max_connections=1000, max_retries=0,
                                    environ={"ANTHROPIC_API_KEY": KEY, "GEMINI_API_KEY": KEY})
        openai_settings = ProviderSettings(base_url=root + "/v1", max_connections=1000, max_retries=0,
                                           environ={"OPENAI_API_KEY": KEY, "K": KEY}, api_key_env=None)
        clients = {"anthropic": make_anthropic("m", settings=settings),
                   "responses": make_openai("m", settings=openai_settings),
                   "chat": make_openai("m", settings=openai_settings),
                   "gemini": make_gemini("m", settings=settings)}
        compatible = make_openai_compatible("m", settings=ProviderSettings(
            base_url=root + "/v1", api_key_env="K", max_connections=1000, max_retries=0, environ={"K": KEY}))
        gateway = ModelGateway({"agent": "m"})
        await gateway.start()
        floor = await bare_relay(root) if args.floor else None
        print(f"{args.calls} streamed calls at concurrency {args.concurrency} (best of {args.rounds} rounds), pieces "
              f"{args.delay * 1000:g} ms apart; time to first token: median of {args.ttft_calls} calls one at a "
              "time; the load generator is a process of its own, the paths interleaved")
        print(f"{'protocol':<10} {'path':<11} {'TTFT ms':>8} {'added ms':>9} {'calls/s':>8} {'vs direct':>10} "
              f"{'gw CPU ms/call':>15}")
        for name, spec in PROTOCOLS.items():
            if name not in args.protocols.split(","):
                continue
            paths = [("direct", root + spec["path"], {"Authorization": f"Bearer {KEY}", "x-api-key": KEY,
                                                      "x-goog-api-key": KEY})]
            tokens = []
            for label, client in [("gateway", clients[name])] + ([("translated", compatible)] if name != "chat"
                                                                  else []):
                token, _ = gateway.grant({"agent": client}, TaskMeter("bench", 1, records_calls=False),
                                         gateway.base_url)
                tokens.append(token)
                paths.append((label, gateway.base_url.removesuffix("/v1") + spec["path"],
                               {"Authorization": f"Bearer {token}"}))
            if floor is not None:
                paths.append(("bare relay", floor[2] + spec["path"], {}))
            figures = await measure(paths, spec, args)
            cpu = {}  # the gateway's own CPU time per call (this process), each path alone: robust to other load
            for path in paths[1:]:
                before = time.process_time()
                await measure([path], spec, argparse.Namespace(**{**vars(args), "ttft_calls": 0, "rounds": 1}))
                cpu[path[0]] = (time.process_time() - before) / (args.calls + 20) * 1000
            for token in tokens:
                gateway.revoke(token)
            direct_ttft = statistics.median(figures["direct"]["ttft"]) * 1000
            direct_rate = max(figures["direct"]["rate"])
            for i, (label, _, _) in enumerate(paths):
                ttft = statistics.median(figures[label]["ttft"]) * 1000
                rate = max(figures[label]["rate"])
                added = f"{ttft - direct_ttft:>9.2f}" if i else f"{'':>9}"
                versus = f"{(rate / direct_rate - 1) * 100:>+9.1f}%" if i else ""
                gw_cpu = f"{cpu[label]:>15.2f}" if label in cpu else ""
                print(f"{name if not i else '':<10} {label:<11} {ttft:>8.2f} {added} {rate:>8.0f} {versus:>10} "
                      f"{gw_cpu}")
        await gateway.stop()
        if floor is not None:
            await floor[0].cleanup()
            await floor[1].close()
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
    parser.add_argument("--protocols", default=",".join(PROTOCOLS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--floor", action="store_true", help="add the bare aiohttp relay (the floor) as a path")
    asyncio.run(main(parser.parse_args()))
