"""The record types telecom adds (dates, datetimes, ``str`` enums) against pydantic itself: a valid value is
held as the text ``json.dumps(model.model_dump(), default=str)`` writes for it (what upstream hashes and shows
the model), and an invalid one is refused."""

from __future__ import annotations

import datetime as dt
import enum
import json

import pydantic
import pytest
from hypothesis import given
from hypothesis import strategies as st
from taubench_runner import records as r
from taubench_runner.domains import telecom


class Dated(pydantic.BaseModel):
    day: dt.date
    moment: dt.datetime


DATED = r.Model("Dated", {"day": r.DATE, "moment": r.DATETIME})
NAIVE = st.datetimes(min_value=dt.datetime(1900, 1, 1), max_value=dt.datetime(2100, 1, 1))


@given(st.dates(min_value=dt.date(1900, 1, 1), max_value=dt.date(2100, 1, 1)), NAIVE,
       st.sampled_from(["object", "iso", "space"]))
def test_dates_and_datetimes_are_held_as_upstreams_json_writes_them(day: dt.date, moment: dt.datetime, form: str):
    value: dict[str, object]
    if form == "object":
        value = {"day": day, "moment": moment}
    else:
        value = {"day": day.isoformat(), "moment": moment.isoformat(sep="T" if form == "iso" else " ")}
    expected = json.loads(json.dumps(Dated.model_validate(value).model_dump(), default=str))
    assert DATED.validate(value) == expected


@pytest.mark.parametrize("bad", ["2025-02-30", "yesterday", 20250101, None])
def test_a_bad_date_is_refused_as_by_pydantic(bad: object):
    with pytest.raises(pydantic.ValidationError):
        Dated.model_validate({"day": bad, "moment": "2025-01-01T00:00:00"})
    with pytest.raises(r.ValidationError, match=r"1 validation error for Dated\nday\n"):
        DATED.validate({"day": bad, "moment": "2025-01-01T00:00:00"})


class LineStatus(str, enum.Enum):  # noqa: UP042 - upstream's kind of enum, not StrEnum
    ACTIVE = "Active"
    SUSPENDED = "Suspended"
    PENDING_ACTIVATION = "Pending Activation"
    CLOSED = "Closed"


class WithStatus(pydantic.BaseModel):
    status: LineStatus


@given(st.one_of(st.sampled_from([s.value for s in LineStatus]), st.text(max_size=12), st.integers()))
def test_str_enums_take_what_pydantic_takes_and_hold_the_value(value: object):
    model = r.Model("WithStatus", {"status": telecom.LineStatus})
    try:
        expected = json.loads(json.dumps(WithStatus.model_validate({"status": value}).model_dump(), default=str))
    except pydantic.ValidationError as exc:
        with pytest.raises(r.ValidationError) as raised:
            model.validate({"status": value})
        # pydantic's own message for the enum (its documentation link aside)
        assert str(raised.value).split("\n")[:3][2].split("[")[0] == str(exc).split("\n")[2].split("[")[0]
        return
    assert model.validate({"status": value}) == expected
    assert telecom.LineStatus.member_repr(str(value)) == repr(LineStatus(value))  # as a dict's repr shows it
