"""The rule-based user simulator."""

from __future__ import annotations

import pytest
from example_interactive.user_sim import GOAL_MET, SCRIPT_EXHAUSTED, STOP, TRANSFERRED, UserSimulator

SCRIPT = {"first_message": "hello", "follow_ups": ["one", "two"]}


def test_follow_ups_in_order_then_stop():
    user = UserSimulator(SCRIPT)
    assert user.first_message() == "hello"
    assert [user.respond("x"), user.respond("y"), user.respond("z")] == ["one", "two", STOP]
    assert user.stop_reason == SCRIPT_EXHAUSTED and user.stopped
    assert user.respond("again") == STOP


def test_stops_as_soon_as_the_goal_is_met():
    state = {"met": False}
    user = UserSimulator(SCRIPT, goal_met=lambda: state["met"])
    assert user.respond("working") == "one"
    state["met"] = True
    assert user.respond("done") == STOP
    assert user.stop_reason == GOAL_MET


def test_goal_met_before_the_first_reply():
    user = UserSimulator(SCRIPT, goal_met=lambda: True)
    assert user.respond("no") == STOP and user.stop_reason == GOAL_MET


def test_stops_after_a_transfer():
    user = UserSimulator(SCRIPT, goal_met=lambda: False)
    assert user.respond("transferring you", transferred=True) == STOP
    assert user.stop_reason == TRANSFERRED


def test_deterministic():
    def transcript():
        user = UserSimulator(SCRIPT, goal_met=lambda: False)
        return [user.respond(str(i)) for i in range(5)]

    assert transcript() == transcript() == ["one", "two", STOP, STOP, STOP]


@pytest.mark.parametrize(
    "script",
    [{}, {"first_message": ""}, {"first_message": "hi", "follow_ups": [""]}, {"first_message": 3}],
)
def test_invalid_scripts(script):
    with pytest.raises(ValueError):
        UserSimulator(script)
