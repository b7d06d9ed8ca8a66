"""OpenTelemetry traces of runs: received with the SDK's in-memory exporter (in-process runs) and with an
OTLP/HTTP receiver on loopback (``agentcompass run --otel`` through the real CLI); the tree run → task attempt →
phase → model call, its attributes against the run directory, and no planted key anywhere."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from agentcompass.plugins import load_plugins
from agentcompass.testing import run_benchmark
from agentcompass_otel.tracing import RunTracing
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.export.runs import PLANTED_KEY, jsonl, make_react_run, make_runs, run_cli
from tests.otel.receiver import otlp_receiver
from tests.otel.spans import all_values, check_run_tree, from_sdk


def traced_host(exporter: InMemorySpanExporter, enabled: bool | None = True):  # type: ignore[no-untyped-def]
    host = load_plugins()
    host.remove_plugin("otel")  # the installed one reads $AGENTCOMPASS_OTEL: replace it by one we control
    tracing = RunTracing(exporter_factory=lambda: exporter, enabled=enabled)
    host.add_plugin(tracing, "otel-test")
    return host


async def test_the_main_job_is_one_trace_tree(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    run = await run_benchmark("example_interactive", host=traced_host(exporter), run_dir=tmp_path / "run", seed=7)
    assert run.exit_code == 0
    spans = from_sdk(exporter.get_finished_spans())
    tree = check_run_tree(spans, tmp_path / "run")
    assert len(tree["attempts"]) == 11
    assert {s.attributes["agentcompass.via"] for s in tree["calls"]} == {"gateway"}  # the benchmark's own runner
    assert tree["root"].resource["service.name"] == "agentcompass"


async def test_retried_attempts_are_spans_of_their_own(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    run = await run_benchmark("example_interactive", host=traced_host(exporter), run_dir=tmp_path / "run",
                              limit=3, model_args={"latency": "0.2"}, timeout=0.5, retries=1, seed=7)
    assert run.exit_code == 1
    tree = check_run_tree(from_sdk(exporter.get_finished_spans()), tmp_path / "run")
    retried = [s for s in tree["attempts"] if s.attributes.get("agentcompass.retried")]
    assert retried and all(s.attributes["agentcompass.attempt"] == 1 and s.status_code == 2 for s in retried)
    assert "timed out" in retried[0].attributes["agentcompass.error"]


async def test_trials_and_an_error_prone_model(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    await run_benchmark("example_interactive", host=traced_host(exporter), run_dir=tmp_path / "run", limit=4,
                        trials=3, model_args={"error_rate": "0.3"}, seed=8)
    tree = check_run_tree(from_sdk(exporter.get_finished_spans()), tmp_path / "run")
    assert {s.attributes["agentcompass.trial"] for s in tree["attempts"]} == {1, 2, 3}


async def test_disabled_tracing_makes_no_span_and_no_exporter(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("AGENTCOMPASS_OTEL", raising=False)

    def no_exporter():  # type: ignore[no-untyped-def]
        raise AssertionError("an exporter was made while tracing was off")

    host = load_plugins()
    host.remove_plugin("otel")
    tracing = RunTracing(exporter_factory=no_exporter)
    host.add_plugin(tracing, "otel-test")
    run = await run_benchmark("example_interactive", host=host, run_dir=tmp_path / "run", limit=2)
    assert run.exit_code == 0 and not tracing.runs
    assert "plugin.observer_failed" not in (tmp_path / "run" / "logs.jsonl").read_text()


OTLP_ENV = {"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_SERVICE_NAME": "h27-otel-test"}


def check_received(receiver, runs: dict[str, Path]) -> None:  # type: ignore[no-untyped-def]
    """Every run's trace checks out in what the receiver got, and the react run's planted key is nowhere in it."""
    assert receiver.bodies and set(receiver.paths) == {"/v1/traces"}
    assert set(receiver.content_types) == {"application/x-protobuf"}
    for run_dir in runs.values():
        check_run_tree(receiver.spans, run_dir)
    assert {s.resource["service.name"] for s in receiver.spans} == {"h27-otel-test"}
    assert len({s.trace_id for s in receiver.spans}) == len(runs)
    for body in receiver.bodies:
        assert PLANTED_KEY.encode() not in body
    assert PLANTED_KEY not in all_values(receiver.spans)
    react = json.loads((runs["react"] / "run.json").read_text())["run_id"]
    failed = [s for s in receiver.spans if s.name.startswith("chat ") and s.status_code == 2]
    # Calls the errored run's timeouts cut short are recorded (and traced) as such; the one refused call is the
    # react run's.
    failed = [s for s in failed if "the attempt ended before the call did" not in s.status_message]
    assert len(failed) == 1 and "HTTP 400" in failed[0].status_message
    assert failed[0].attributes["agentcompass.via"] == "client"  # the react harness calls in-process
    assert any(s.attributes.get("agentcompass.run_id") == react for s in receiver.spans)


def test_a_run_with_otel_reaches_an_otlp_receiver(tmp_path: Path) -> None:
    """The react run of the export tests with ``--otel`` through the real CLI, exported by the SDK's OTLP/HTTP
    exporter to a receiver on loopback (the other runs' trees are checked in-process above, and all four
    through OTLP in the slow test below)."""
    with otlp_receiver() as receiver:
        runs = {"react": make_react_run(tmp_path, "--otel", env={**OTLP_ENV,
                                                                  "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint})}
    check_received(receiver, runs)


@pytest.mark.slow
def test_runs_with_otel_reach_an_otlp_receiver(tmp_path: Path) -> None:
    """The four runs of the export tests, each with ``--otel``, exported by the SDK's OTLP/HTTP exporter to a
    receiver on loopback: every trace checks out, and the react run's planted key is nowhere in what arrived."""
    with otlp_receiver() as receiver:
        runs = make_runs(tmp_path, "--otel", env={**OTLP_ENV, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint})
    check_received(receiver, runs)


def test_otel_without_the_plugin_is_a_clear_error(tmp_path: Path) -> None:
    done = run_cli("run", "example_interactive", "none", "mock", "-n", "1", "-o", str(tmp_path / "run"), "--otel",
                   env={"AGENTCOMPASS_LOAD_PLUGINS": "example_interactive"})
    assert done.returncode == 2
    assert "--otel needs the agentcompass-otel plugin" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "run").exists()


def test_an_unsupported_protocol_is_reported_and_the_run_goes_on(tmp_path: Path) -> None:
    done = run_cli("run", "example_interactive", "none", "mock", "-n", "1", "-o", str(tmp_path / "run"), "--otel",
                   env={"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})
    assert done.returncode == 0, done.stderr
    failures = [e for e in jsonl(tmp_path / "run" / "logs.jsonl") if e.get("event") == "plugin.observer_failed"]
    assert failures and "OTEL_EXPORTER_OTLP_PROTOCOL='http/json' is not supported" in failures[0]["error"]


def test_no_collector_is_one_warning_line_and_no_wait_at_exit(tmp_path: Path) -> None:
    """Issue 32, item 7: ``--otel`` pointed at a closed loopback port prints one warning line naming the endpoint
    (not the SDK's multi-line retry messages) and does not hold the run's end (it once added about 7 s)."""
    import socket
    import time

    with socket.socket() as s:  # a loopback port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    endpoint = f"http://127.0.0.1:{port}"
    args = ("run", "example_interactive", "none", "mock", "-n", "2")
    began = time.monotonic()
    plain = run_cli(*args, "-o", str(tmp_path / "plain"))
    baseline = time.monotonic() - began
    began = time.monotonic()
    done = run_cli(*args, "-o", str(tmp_path / "run"), "--otel",
                   env={**OTLP_ENV, "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint})
    elapsed = time.monotonic() - began
    assert plain.returncode == 0 and done.returncode == 0, done.stderr
    # every line the plain run does not print, but the per-task progress lines (numbered in the order the two tasks
    # happened to finish, which may differ between the runs)
    lines = [ln for ln in done.stderr.strip().splitlines() if not re.match(r"\[\d+/\d+\] \S+ [A-Z_]+", ln)]
    warnings = [ln for ln in lines if ln not in plain.stderr.replace(str(tmp_path / "plain"), str(tmp_path / "run"))]
    assert warnings == [f"warning: otel: no OTLP collector at {endpoint}/v1/traces (connection refused): spans are "
                        "dropped while none answers; to see them, start one (agentcompass-otel's README)"], done.stderr
    assert elapsed < baseline + 4.0, (elapsed, baseline)  # it once added about 7 s; 4 s leaves room for load
    logged = [e for e in jsonl(tmp_path / "run" / "logs.jsonl") if e.get("event") == "otel.export_failed"]
    assert logged and logged[0]["endpoint"] == f"{endpoint}/v1/traces"


async def test_the_installed_plugin_registers_no_hook_while_tracing_is_off(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Off (no ``--otel``, no ``$AGENTCOMPASS_OTEL``), the installed plugin registers no observer hook at all: a
    run calls none of its methods. Switched on before loading, or by ``refresh_observers`` (``run --otel``),
    it registers them."""
    from agentcompass import hookimpl
    from agentcompass.plugins import OBSERVER_HOOKS

    monkeypatch.delenv("AGENTCOMPASS_OTEL", raising=False)
    called: list[str] = []
    for hook in ("agentcompass_run_started", "agentcompass_task_event", "agentcompass_model_call",
                 "agentcompass_run_finished"):
        monkeypatch.setattr(RunTracing, hook, hookimpl(lambda self, *a, _h=hook, **k: called.append(_h)))
    host = load_plugins()
    assert host.records["otel"].loaded and host.records["otel"].hooks == []
    assert not [impl for hook in OBSERVER_HOOKS for impl in getattr(host.pm.hook, hook).get_hookimpls()
                if impl.plugin_name == "otel"]
    run = await run_benchmark("example_interactive", host=host, run_dir=tmp_path / "run", limit=2)
    assert run.exit_code == 0 and called == []

    monkeypatch.setenv("AGENTCOMPASS_OTEL", "1")
    assert host.refresh_observers("otel") is True
    traced = {"agentcompass_run_started", "agentcompass_task_event", "agentcompass_model_call",
              "agentcompass_run_finished"}
    assert set(host.records["otel"].hooks) == traced
    assert set(load_plugins().records["otel"].hooks) == traced
