"""logs.jsonl lines: the run logger's single processor writes what structlog's chain of four wrote, byte for byte
(level, ISO UTC timestamp, secrets masked, unknown objects as ``str``), for any event."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import structlog
from agentcompass.redaction import Redactor
from agentcompass.run_log_writer import BufferedLineLogger, make_run_logger
from hypothesis import given
from hypothesis import strategies as st

SECRET = "sk-test-0123456789abcdef"


def chain_logger(stream: io.StringIO, redactor: Redactor, **context: Any) -> Any:
    """The logger as it was: structlog's processors one after another."""
    return structlog.wrap_logger(
        BufferedLineLogger(stream),
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            redactor.structlog_processor,
            structlog.processors.JSONRenderer(default=str),
        ],
        context_class=dict,
    ).bind(**context)


def without_timestamps(text: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in text.splitlines()]
    for line in lines:
        assert line.pop("timestamp").endswith("Z")
    return lines


values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=20),
              st.just(SECRET), st.just(f"key={SECRET}!"), st.builds(Path, st.just("/tmp/x"))),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=8)
keys = st.text(alphabet="abcdefghij_", min_size=1, max_size=8).filter(lambda k: k not in {"event", "level"})


@given(st.sampled_from(["debug", "info", "warning", "warn", "error", "critical", "exception", "msg"]),
       st.text(max_size=20), st.dictionaries(keys, values, max_size=4), st.booleans())
def test_lines_are_what_the_processor_chain_wrote(method: str, event: str, fields: dict[str, Any],
                                                  with_secret: bool) -> None:
    redactor = Redactor()
    if with_secret:
        redactor.add(SECRET)
    ours, theirs = io.StringIO(), io.StringIO()
    getattr(make_run_logger(ours, redactor, run_id="r1"), method)(event, **fields)
    getattr(chain_logger(theirs, redactor, run_id="r1"), method)(event, **fields)
    assert without_timestamps(ours.getvalue()) == without_timestamps(theirs.getvalue())
    # byte for byte too, once the timestamps (taken a moment apart) are set equal
    assert ours.getvalue().split('"timestamp": ')[0] == theirs.getvalue().split('"timestamp": ')[0]
    if with_secret:
        assert SECRET not in ours.getvalue()


def test_a_secret_is_masked_and_the_timestamp_is_iso_utc() -> None:
    redactor = Redactor()
    redactor.add(SECRET)
    out = io.StringIO()
    make_run_logger(out, redactor, run_id="r1").warning("model.error", detail=f"bad key {SECRET}", n=3)
    line = json.loads(out.getvalue())
    assert SECRET not in out.getvalue()
    assert line["level"] == "warning" and line["run_id"] == "r1" and line["n"] == 3
    assert line["timestamp"].endswith("Z") and "T" in line["timestamp"]
    assert list(line) == ["run_id", "detail", "n", "event", "level", "timestamp"]


@pytest.mark.parametrize("method, level", [("warn", "warning"), ("exception", "error"), ("debug", "debug")])
def test_level_names(method: str, level: str) -> None:
    out = io.StringIO()
    getattr(make_run_logger(out, Redactor()), method)("e")
    assert json.loads(out.getvalue())["level"] == level
