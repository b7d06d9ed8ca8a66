"""``run --cache DIR``: answers shared across runs through a content-addressed directory — hits counted and
priced as savings, errors never stored, entries expire, two concurrent runs share it, and a writer killed at
any moment leaves no torn entry."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from agentcompass.models.call_cache import CachingClient, CallCache, parse_expiry
from agentcompass.runtime.models import ChatResponse, ModelClient, ModelError, Usage
from agentcompass.testing import LoopbackOpenAI

from tests.harnesses.support import solver
from tests.helpers.cli_processes import ROOT
from tests.helpers.replay_runs import agentcompass, calls, results, sources, summary

pytestmark = pytest.mark.timeout(900)

MODEL = "openai-compatible/loopback"


def run_args(out: Path, cache: Path, *extra: str) -> list[str]:
    return ["run", "example_coding", "react", MODEL, "-o", str(out), "--cache", str(cache), "-t", "roman",
            "-t", "flatten", *extra]


def outcomes(run_dir: Path) -> dict[Any, Any]:
    """The results without what differs between two runs of a cache (the seed; the cost paid)."""
    return {k: {f: v for f, v in r.items() if f not in ("seed", "usage")} for k, r in results(run_dir).items()}


def entries(cache: Path) -> list[Path]:
    return sorted(p for p in cache.rglob("*.json"))


def test_a_second_run_is_answered_from_the_cache_and_counts_what_it_saved(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({MODEL: {"input": 1.0, "output": 4.0}}))
    with LoopbackOpenAI(solver, api_key=None) as server:
        first = agentcompass(*run_args(tmp_path / "one", cache, "--prices", str(prices)), "--model-base-url",
                             server.base_url)
        assert first.returncode == 0, first.stderr[-3000:]
        asked = len(server.requests)
        second = agentcompass(*run_args(tmp_path / "two", cache, "--prices", str(prices)), "--model-base-url",
                              server.base_url)
        assert second.returncode == 0, second.stderr[-3000:]
        assert len(server.requests) == asked == 6  # nothing asked the second time
    assert len(entries(cache)) == 6
    assert outcomes(tmp_path / "two") == outcomes(tmp_path / "one")
    assert calls(tmp_path / "two") == calls(tmp_path / "one")
    assert set(sources(tmp_path / "two")) == {"cache"} and set(sources(tmp_path / "one")) == {None}
    usage = summary(tmp_path / "two")["usage"]["agent"]
    paid = summary(tmp_path / "one")["usage"]["agent"]
    assert usage["cache_hits"] == 6 and usage["cost_usd"] == 0
    assert usage["cache_saved_tokens"] == paid["prompt_tokens"] + paid["completion_tokens"]
    assert usage["cache_saved_usd"] == pytest.approx(paid["cost_usd"]) and paid["cost_usd"] > 0
    info = json.loads((tmp_path / "two" / "run.json").read_text())
    assert info["model_calls"] == {"cache": {"dir": str(cache.resolve()), "expiry_s": None}}


def test_expired_entries_are_asked_again(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with LoopbackOpenAI(solver, api_key=None) as server:
        assert agentcompass(*run_args(tmp_path / "one", cache), "--model-base-url", server.base_url).returncode == 0
        time.sleep(1.2)
        again = agentcompass(*run_args(tmp_path / "two", cache, "--cache-expiry", "1"), "--model-base-url",
                             server.base_url)
        assert again.returncode == 0, again.stderr[-3000:]
        assert len(server.requests) == 12  # every entry was older than a second
        fresh = agentcompass(*run_args(tmp_path / "three", cache, "--cache-expiry", "1h"), "--model-base-url",
                             server.base_url)
        assert fresh.returncode == 0 and len(server.requests) == 12  # re-stored by the second run
    assert set(sources(tmp_path / "two")) == {None} and set(sources(tmp_path / "three")) == {"cache"}


@pytest.mark.slow  # a long end-to-end run; CI runs it (--all-tests)
def test_two_concurrent_runs_share_one_cache(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    slow = lambda request: (time.sleep(0.05), solver(request))[1]  # noqa: E731 - both runs in flight at once
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    with LoopbackOpenAI(slow, api_key=None) as server:
        procs = [subprocess.Popen([sys.executable, "-m", "agentcompass.cli.main",
                                   *run_args(tmp_path / f"run{i}", cache, "-t", "word_count", "-t", "fizzbuzz"),
                                   "--model-base-url", server.base_url], cwd=ROOT, env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in (1, 2)]
        for proc in procs:
            _, err = proc.communicate(timeout=600)
            assert proc.returncode == 0, err[-3000:]
        assert len(server.requests) <= 24
        third = agentcompass(*run_args(tmp_path / "run3", cache, "-t", "word_count", "-t", "fizzbuzz"),
                             "--model-base-url", server.base_url)
        assert third.returncode == 0
        asked = len(server.requests)
    assert asked <= 24  # the third run asked nothing
    assert set(sources(tmp_path / "run3")) == {"cache"}
    for path in entries(cache):
        json.loads(path.read_text())  # every entry whole
    assert len(entries(cache)) == 12
    assert outcomes(tmp_path / "run3") == outcomes(tmp_path / "run1") == outcomes(tmp_path / "run2")


WRITER = """
import sys, time
from pathlib import Path
from agentcompass.models.call_cache import CallCache
from agentcompass.runtime.models import ChatResponse
cache = CallCache.open(Path(sys.argv[1]))
big = "x" * 2_000_000
print("ready", flush=True)
i = 0
while True:
    cache.put(cache.key("m", str(i % 50)), "m", ChatResponse({"role": "assistant", "content": big + str(i)}, "m"))
    i += 1
"""


def test_a_writer_killed_at_any_moment_leaves_no_torn_entry(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    for delay in (0.3, 0.55, 0.8):
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(cache)], cwd=ROOT, stdout=subprocess.PIPE,
                                  text=True)
        assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
        time.sleep(delay)
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=30)
    reader = CallCache.open(cache)
    stored = entries(cache)
    assert stored, "the writer stored something before it was killed"
    for path in stored:
        entry = json.loads(path.read_text())  # whole: a reader never sees a part
        assert reader.get(entry["key"]) is not None
        assert entry["response"]["message"]["content"].startswith("x" * 2_000_000)
    leftovers = [p for p in cache.rglob("*") if p.is_file() and p.suffix != ".json"]
    assert all(p.name.endswith(".tmp") for p in leftovers)  # at most the killed write's temporary file


class Flaky(ModelClient):
    """Fails the first call, then answers."""

    model = "flaky"

    def __init__(self) -> None:
        self.calls = 0

    async def chat(self, messages: Any, *, tools: Any = None, **params: Any) -> ChatResponse:
        self.calls += 1
        if self.calls == 1:
            raise ModelError("overloaded", retryable=True, status=529)
        return ChatResponse({"role": "assistant", "content": "ok"}, "flaky", Usage(3, 1))


async def test_errors_are_never_cached(tmp_path: Path) -> None:
    live = Flaky()
    client = CachingClient(live, CallCache.open(tmp_path / "cache"), "p/flaky")
    messages = [{"role": "user", "content": "hi"}]
    with pytest.raises(ModelError):
        await client.chat(messages)
    assert entries(tmp_path / "cache") == []
    answer = await client.chat(messages)
    assert answer.content == "ok" and answer.metadata.get("source") is None
    hit = await client.chat(messages)
    assert hit.content == "ok" and hit.metadata["source"] == "cache" and hit.usage == Usage(3, 1)
    assert live.calls == 2
    other = CachingClient(live, CallCache.open(tmp_path / "cache"), "p/other-model")
    await other.chat(messages)
    assert live.calls == 3  # the model is part of the key


def test_unreadable_entries_are_misses_and_expiry_parses(tmp_path: Path) -> None:
    cache = CallCache.open(tmp_path / "cache")
    key = cache.key("m", "k")
    cache.path(key).parent.mkdir(parents=True, exist_ok=True)
    cache.path(key).write_text('{"key": "')
    assert cache.get(key) is None
    cache.put(key, "m", ChatResponse({"role": "assistant", "content": "a"}, "m"))
    assert cache.get(key) is not None
    assert CallCache(cache.root, expiry_s=0.001).get(key) is None or time.sleep(0.01) is None
    time.sleep(0.01)
    assert CallCache(cache.root, expiry_s=0.001).get(key) is None
    assert [parse_expiry(x) for x in ("90", "30m", "12h", "7d", "2w", None)] == [
        90, 1800, 43200, 604800, 1209600, None]


@pytest.mark.slow  # a long end-to-end run; CI runs it (--all-tests)
def test_a_killed_run_leaves_whole_entries_that_the_next_run_uses(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    slow = lambda request: (time.sleep(0.3), solver(request))[1]  # noqa: E731 - kill it in the middle
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    tasks = ["-t", "word_count", "-t", "fizzbuzz", "-t", "roman", "-t", "flatten"]
    with LoopbackOpenAI(slow, api_key=None) as server:
        proc = subprocess.Popen([sys.executable, "-m", "agentcompass.cli.main",
                                 *run_args(tmp_path / "killed", cache, *tasks, "-c", "4"),
                                 "--model-base-url", server.base_url], cwd=ROOT, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 300
        while len(entries(cache)) < 5 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        stored = entries(cache)
        assert 5 <= len(stored) < 12, len(stored)  # killed in the middle of the run
        for path in stored:
            json.loads(path.read_text())  # whole
        asked = len(server.requests)
        again = agentcompass(*run_args(tmp_path / "again", cache, *tasks), "--model-base-url", server.base_url)
        assert again.returncode == 0, again.stderr[-3000:]
        assert len(server.requests) - asked == 12 - len(stored)  # only what the killed run had not stored
    assert sources(tmp_path / "again").count("cache") == len(stored)


def test_a_cache_that_misses_only_by_the_seed_says_so_once(tmp_path: Path) -> None:
    """Issue 32, item 12: the mock takes the run's seed, and a run without ``--seed`` draws a random one, so the
    second run's calls all miss: it ends with one warning line saying why; with the first run's seed, they hit."""
    cache = tmp_path / "cache"

    def mock_run(name: str, *extra: str) -> subprocess.CompletedProcess[str]:
        done = agentcompass("run", "example_interactive", "none", "mock", "-n", "2", "-o", str(tmp_path / name),
                            "--cache", str(cache), *extra)
        assert done.returncode == 0, done.stderr[-3000:]
        return done

    first = mock_run("one")
    assert "warning:" not in first.stderr
    second = mock_run("two")
    warnings = [ln for ln in second.stderr.splitlines() if ln.startswith("warning:")]
    assert warnings == [
        f"warning: --cache {cache.resolve()}: 4 model calls missed only because the request's seed differs from the "
        "cached one's (without --seed a run draws a random seed, and a model that takes a seed, such as mock, is "
        "sent it): run with the --seed of the run that filled the cache"], second.stderr
    logged = [json.loads(ln) for ln in (tmp_path / "two" / "logs.jsonl").read_text().splitlines()]
    assert [e["event"] for e in logged].count("cache.seed_miss") == 1
    assert summary(tmp_path / "two")["usage"]["agent"]["cache_hits"] == 0
    seed = json.loads((tmp_path / "one" / "run.json").read_text())["request"]["seed"]
    third = mock_run("three", "--seed", str(seed))
    assert "warning:" not in third.stderr
    assert summary(tmp_path / "three")["usage"]["agent"]["cache_hits"] == 4
