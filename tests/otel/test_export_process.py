"""The exporting process (``python -m agentcompass_otel.export_process``), for real: records sent from this
process become spans at an OTLP/HTTP receiver on loopback; attempts still open when the input ends are closed
as cancelled; a dead exporting process is one warning line and never an error in the run."""

from __future__ import annotations

import time

from agentcompass_otel.export_process import ExportProcess
from agentcompass_otel.tracing import finish_record

from tests.otel.receiver import otlp_receiver

START = ("start", "run-1", {"agentcompass.run_id": "run-1", "agentcompass.benchmark": "bench"}, {"agent": "mock/m"},
         "bench", "/nonexistent-run-dir", 0)


def records(now: int) -> list[tuple]:  # type: ignore[type-arg]
    a, b = ("a", 1, 1), ("b", 1, 1)
    return [
        ("phase", *a, "PREPARING", now + 1_000), ("phase", *a, "RUNNING", now + 2_000),
        ("call", *a, "agent", "m", "client", (now + 3_000) / 1e9, 0.000_001, 10, 5, "stop", None, 1, None, None, None,
         None, None),
        ("phase", *a, "FINISHED", now + 9_000),
        ("end", *a, "COMPLETED", None, None, {"score": 1.0}, False, now + 10_000),
        ("phase", *b, "RUNNING", now + 11_000),  # still open at the end: closed as cancelled
    ]


def test_records_sent_to_the_exporting_process_reach_the_receiver_as_the_run_tree(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    now = time.time_ns()
    with otlp_receiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
        monkeypatch.setenv("OTEL_SERVICE_NAME", "export-process-test")
        sink = ExportProcess.launch((*START[:-1], now), "http/protobuf", receiver.endpoint + "/v1/traces")
        for record in records(now):
            sink.send(record)
        sink.close(finish_record(None))
        assert sink.proc.returncode == 0
    assert sorted(s.name for s in receiver.spans) == ["chat mock/m", "prepare", "run", "run", "run bench", "task a",
                                                       "task b"]
    by_name = {s.name: s for s in receiver.spans if s.name != "run"}
    root, a, b = by_name["run bench"], by_name["task a"], by_name["task b"]
    phase = {s.parent_id: s for s in receiver.spans if s.name == "run"}
    assert root.start_ns == now and root.resource["service.name"] == "export-process-test"
    assert a.parent_id == root.span_id and (a.start_ns, a.end_ns) == (now + 1_000, now + 10_000)
    assert a.attributes["agentcompass.metric.score"] == 1.0 and a.status_code == 0
    assert (phase[a.span_id].start_ns, phase[a.span_id].end_ns) == (now + 2_000, now + 9_000)
    assert phase[b.span_id].parent_id == b.span_id and phase[b.span_id].start_ns == now + 11_000
    chat = by_name["chat mock/m"]
    assert chat.parent_id == phase[a.span_id].span_id and chat.attributes["gen_ai.usage.input_tokens"] == 10
    assert chat.attributes["gen_ai.request.model"] == "mock/m" and chat.attributes["gen_ai.system"] == "mock"
    assert b.status_code == 2 and b.status_message == "CANCELLED: cancelled: the run ended before the attempt did"


def test_a_dead_exporting_process_is_one_warning_line_and_the_run_goes_on(capsys) -> None:  # type: ignore[no-untyped-def]
    sink = ExportProcess.launch(START, "http/protobuf", "http://127.0.0.1:9/v1/traces")
    sink.proc.kill()
    sink.proc.wait()
    for record in records(time.time_ns()) * 3:
        sink.send(record)
    sink.close(finish_record(None))  # no error, no wait
    err = capsys.readouterr().err
    assert err.count("warning: otel:") == 1
    assert "warning: otel: the exporting process ended early; spans of this run are dropped" in err
