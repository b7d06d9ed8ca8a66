"""Telecom's tools by behaviour: the agent's side and the phone kept in step by the environment (a line
suspended leaves the phone without service, roaming enabled lets it roam, a payment request reaches the phone and
paying it settles the bill), the task helpers (initialization actions and assertions on either side), and
properties of the phone over any sequence of the user's actions. (Every tool's results are compared with
upstream's in ``test_tb_telecom_upstream.py``.)"""

from __future__ import annotations

from typing import Any

import tb_support as s
import tb_telecom
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from taubench_runner.environment import Environment

from tests.helpers.examples import examples

PHONE, CUSTOMER, LINE = "555-123-2002", "C1001", "L1002"


def phone_env() -> Environment:
    """The domain's initial state with the phone belonging to John Smith's line L1002 (as the tasks set it)."""
    tb_telecom.fresh_vpn_default()
    env = s.environment("telecom")
    env.run_env_function_call({"env_type": "user", "func_name": "set_user_info",
                               "arguments": {"name": "John Smith", "phone_number": PHONE}})
    return env


def user(env: Environment, name: str, **arguments: Any) -> str:
    message = s.call(env, name, "user", **arguments)
    assert not message["error"], message["content"]
    return str(message["content"])


def assertion(env: Environment, func_name: str, env_type: str = "user", **arguments: Any) -> bool:
    return env.run_env_assertion({"env_type": env_type, "func_name": func_name, "arguments": arguments},
                                 raise_assertion_error=False)


def test_the_user_has_the_phone_tools_and_the_agent_has_none_of_them():
    env = s.environment("telecom")
    agent = {t.name for t in env.get_tools()}
    phone = {t.name for t in env.get_user_tools() or ()}
    assert "refuel_data" in agent and "toggle_airplane_mode" in phone and not agent & phone
    assert s.error(env, "toggle_airplane_mode", "assistant") == "Error: Tool 'toggle_airplane_mode' not found."
    assert s.error(env, "refuel_data", "user", customer_id=CUSTOMER, line_id=LINE, gb_amount=1.0) == \
        "Error: Tool 'refuel_data' not found."


def test_suspending_the_line_takes_the_phone_off_the_network_until_it_is_resumed():
    env = phone_env()
    assert assertion(env, "assert_service_status", expected_status="connected")
    s.content(env, "suspend_line", customer_id=CUSTOMER, line_id=LINE, reason="travel")
    assert "No Signal" in user(env, "reboot_device")
    assert assertion(env, "assert_service_status", expected_status="no_service")
    assert assertion(env, "assert_line_status", "assistant", customer_id=CUSTOMER, line_id=LINE,
                     expected_status="Suspended")
    s.content(env, "resume_line", customer_id=CUSTOMER, line_id=LINE)
    assert "5G | 📱 Data Enabled" in user(env, "reboot_device")
    assert assertion(env, "assert_mobile_data_status", expected_status=True)


def test_roaming_works_abroad_only_when_the_line_and_the_phone_both_allow_it():
    env = phone_env()
    env.run_env_function_call({"env_type": "user", "func_name": "set_user_location", "arguments": {"abroad": True}})
    assert s.raw(env, "disable_roaming", customer_id=CUSTOMER, line_id=LINE) == "Roaming disabled successfully"
    assert user(env, "run_speed_test") == "Speed test failed: No Connection."
    user(env, "toggle_roaming")
    assert user(env, "run_speed_test") == "Speed test failed: No Connection."  # the line does not roam yet
    assert s.raw(env, "enable_roaming", customer_id=CUSTOMER, line_id=LINE) == "Roaming enabled successfully"
    assert user(env, "run_speed_test").startswith("Speed Test Result: 275.00 Mbps (Excellent)")
    assert s.raw(env, "enable_roaming", customer_id=CUSTOMER, line_id=LINE) == "Roaming was already enabled"


def test_a_payment_request_reaches_the_phone_and_paying_it_settles_the_bill():
    env = phone_env()
    bills = s.content(env, "get_bills_for_customer", customer_id=CUSTOMER)
    bill = next(b for b in bills if b["status"] == "Issued")
    assert user(env, "check_payment_request") == "No payment request has been made."
    s.raw(env, "send_payment_request", customer_id=CUSTOMER, bill_id=bill["bill_id"])
    assert user(env, "check_payment_request") == \
        f"You have a payment request for bill {bill['bill_id']} of {bill['total_due']} USD."
    assert s.error(env, "send_payment_request", customer_id=CUSTOMER, bill_id=bill["bill_id"]) == \
        "Error: A bill is already awaiting payment for this customer"
    assert user(env, "make_payment").startswith(f"Payment of {bill['total_due']} USD has been made")
    assert s.content(env, "get_details_by_id", id=bill["bill_id"])["status"] == "Paid"
    assert user(env, "check_payment_request") == "No payment request has been made."


def test_data_used_up_stops_mobile_data_until_refuelled():
    env = phone_env()
    env.run_env_function_call({"env_type": "assistant", "func_name": "set_data_usage",
                               "arguments": {"customer_id": CUSTOMER, "line_id": LINE, "data_used_gb": 15.0}})
    assert assertion(env, "assert_mobile_data_usage_exceeded", expected_status=True)
    assert user(env, "run_speed_test") == "Speed test failed: No Connection."
    usage = s.content(env, "get_data_usage", customer_id=CUSTOMER, line_id=LINE)
    assert usage["cycle_end_date"] == "2025-02-28" and usage["data_used_gb"] == "15.0"  # upstream's str() of it
    refuel = s.content(env, "refuel_data", customer_id=CUSTOMER, line_id=LINE, gb_amount=2.0)
    assert refuel["charge"] == "4.0" and refuel["new_data_refueling_gb"] == "2.0"
    assert assertion(env, "assert_data_refueling_amount", "assistant", customer_id=CUSTOMER, line_id=LINE,
                     expected_amount=2.0)
    assert assertion(env, "assert_mobile_data_usage_exceeded", expected_status=False)
    assert s.error(env, "refuel_data", customer_id=CUSTOMER, line_id=LINE, gb_amount=-1) == \
        "Error: Refuel amount must be positive"


def test_a_broken_apn_is_fixed_by_a_reset_and_a_reboot():
    env = phone_env()
    env.run_env_function_call({"env_type": "user", "func_name": "break_apn_settings", "arguments": {}})
    assert assertion(env, "assert_service_status", expected_status="no_service")
    assert user(env, "reset_apn_settings").startswith("APN settings will reset at reboot.")
    assert assertion(env, "assert_service_status", expected_status="no_service")  # not before the reboot
    assert user(env, "reboot_device").startswith("Resetting APN settings...\nRestarting network services...")
    assert assertion(env, "assert_service_status", expected_status="connected")


def test_a_broken_vpn_degrades_every_later_connection_as_upstreams_shared_default_does():
    env = phone_env()
    env.run_env_function_call({"env_type": "user", "func_name": "break_vpn", "arguments": {}})
    assert user(env, "run_speed_test").startswith("Speed Test Result: 22.00 Mbps (Fair)")
    user(env, "disconnect_vpn")
    assert assertion(env, "assert_internet_speed", expected_speed=100, expected_desc="excellent")
    user(env, "connect_vpn")
    assert "<PerformanceLevel.POOR: 'poor'>" in user(env, "check_vpn_status")
    tb_telecom.fresh_vpn_default()


def test_an_unknown_assertion_value_fails_as_upstreams_enum_does():
    env = phone_env()
    try:
        env.run_env_assertion({"env_type": "user", "func_name": "assert_service_status",
                               "arguments": {"expected_status": "offline"}})
    except ValueError as exc:
        assert str(exc) == "'offline' is not a valid NetworkStatus"
    else:
        raise AssertionError("no error")


USER_WRITES = [*tb_telecom.USER_TOGGLES, "reboot_device", "reseat_sim_card", "reset_apn_settings", "connect_vpn",
               "disconnect_vpn"]


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(USER_WRITES), max_size=12), st.booleans())
def test_the_phone_stays_consistent_over_any_sequence_of_user_actions(actions: list[str], abroad: bool):
    env = phone_env()
    env.run_env_function_call({"env_type": "user", "func_name": "set_user_location", "arguments": {"abroad": abroad}})
    for name in actions:
        user(env, name)
    bar = user(env, "check_status_bar")
    network = user(env, "check_network_status")
    airplane = "Airplane Mode: ON" in network
    assert ("✈️ Airplane Mode" in bar) is airplane
    working = assertion(env, "assert_mobile_data_status", expected_status=True)
    assert user(env, "run_speed_test").startswith("Speed Test Result") is working
    if airplane or (abroad and "Data Roaming Enabled: No" in network):
        assert not working
    # an action made twice more returns a toggle to where it was
    for name in tb_telecom.USER_TOGGLES[:4]:
        before = user(env, "check_network_status")
        user(env, name)
        user(env, name)
        assert user(env, "check_network_status").split("\n")[0] == before.split("\n")[0]
