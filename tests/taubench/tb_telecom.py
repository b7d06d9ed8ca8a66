"""Telecom conversations and tool-call sequences for the taubench tests, built with the runner alone (standard
library + ``taubench_runner``), so that ``upstream/derive_telecom.py`` builds the very same ones under
tau2-bench's interpreter and records upstream's results and rewards for them.

In telecom the user acts on their own phone: the gold path is the agent's actions and the user's actions,
each made by its requestor. The variants play it with the runner's oracle participants (the agent makes its
actions, asks the user for theirs, and the user makes them as tool calls) over a changed list of actions.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

from taubench_runner import tasks as task_fields
from taubench_runner.domains import module
from tb_variants import oracle, tasks

DOMAIN = "telecom"

#: A user's wrong action on the phone in place of a gold one: another setting changed.
WRONG_USER_ACTION = {
    "toggle_airplane_mode": ("toggle_data", {}),
    "toggle_data": ("toggle_airplane_mode", {}),
    "toggle_roaming": ("toggle_data_saver_mode", {}),
    "toggle_data_saver_mode": ("toggle_roaming", {}),
    "toggle_wifi_calling": ("toggle_wifi", {}),
    "reset_apn_settings": ("check_apn_settings", {}),
    "reboot_device": ("toggle_airplane_mode", {}),
    "reseat_sim_card": ("reboot_device", {}),
    "disconnect_vpn": ("connect_vpn", {}),
    "make_payment": ("check_payment_request", {}),
}


def with_actions(task: Mapping[str, Any], actions: list[dict[str, Any]]) -> dict[str, Any]:
    """``task`` whose gold actions (what the oracle participants make) are ``actions``."""
    changed = copy.deepcopy(dict(task))
    changed["evaluation_criteria"] = {**(changed.get("evaluation_criteria") or {}), "actions": actions}
    return changed


def wrong_user_action(action: Mapping[str, Any]) -> dict[str, Any]:
    """A user's gold action replaced by a wrong one: another toggle, the wrong permission, the wrong mode."""
    changed = copy.deepcopy(dict(action))
    if action["name"] == "grant_app_permission":
        changed["arguments"] = {**action["arguments"], "permission": "phone"}
    elif action["name"] == "set_network_mode_preference":
        changed["arguments"] = {"mode": "2g_only"}
    elif action["name"] in WRONG_USER_ACTION:
        changed["name"], changed["arguments"] = WRONG_USER_ACTION[action["name"]]
    else:
        raise KeyError(f"no wrong variant of the user action {action['name']!r}")
    return changed


def played(task: Mapping[str, Any], actions: list[dict[str, Any]] | None = None, **limits: Any) -> dict[str, Any]:
    """The oracle participants playing ``actions`` (default: the gold ones) on ``task`` (the task itself
    unchanged for scoring), from a fresh VPN default."""
    fresh_vpn_default()
    return oracle(DOMAIN, task if actions is None else with_actions(task, actions), **limits)


def variants(task: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Named trajectories of one telecom task: the oracle; the last user action made wrong; the last user
    action left out; the last agent write left out; and one cut short by max_steps."""
    gold = task_fields.gold_actions(task)
    out = {"oracle": played(task)}
    user_positions = [i for i, a in enumerate(gold) if a["requestor"] == "user"]
    if user_positions:
        i = user_positions[-1]
        out["wrong_user_action"] = played(task, [*gold[:i], wrong_user_action(gold[i]), *gold[i + 1:]])
        out["missing_user_action"] = played(task, gold[:i] + gold[i + 1:])
    specs = module(DOMAIN).AGENT_TOOLS.tool_specs
    agent_writes = [i for i, a in enumerate(gold) if a["requestor"] == "assistant" and specs[a["name"]].mutates]
    if agent_writes:
        i = agent_writes[-1]
        out["missing_agent_write"] = played(task, gold[:i] + gold[i + 1:])
    out["max_steps"] = played(task, max_steps=3)
    return out


# -- every tool, for comparing the results with upstream's --------------------------------------------------

SENTINEL = "does_not_exist_0"


def _agent_reads(customer_id: str, line_id: str, phone: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("get_customer_by_phone", {"phone_number": phone}),
        ("get_customer_by_phone", {"phone_number": "555-000-0000"}),
        ("get_customer_by_id", {"customer_id": customer_id}),
        ("get_customer_by_id", {"customer_id": SENTINEL}),
        ("get_customer_by_name", {"full_name": "john smith", "dob": "1985-06-15"}),
        ("get_customer_by_name", {"full_name": 7, "dob": "1985-06-15"}),
        ("get_details_by_id", {"id": line_id}),
        ("get_details_by_id", {"id": "D1001"}),
        ("get_details_by_id", {"id": "B1001"}),
        ("get_details_by_id", {"id": customer_id}),
        ("get_details_by_id", {"id": "P1002"}),
        ("get_details_by_id", {"id": "X1"}),
        ("get_details_by_id", {"id": 5}),
        ("get_details_by_id", {}),
        ("get_bills_for_customer", {"customer_id": customer_id}),
        ("get_bills_for_customer", {"customer_id": customer_id, "limit": 1}),
        ("get_bills_for_customer", {"customer_id": customer_id, "limit": "2"}),
        ("get_data_usage", {"customer_id": customer_id, "line_id": line_id}),
        ("get_data_usage", {"customer_id": customer_id, "line_id": "L9999"}),
        ("get_data_usage", {"customer_id": SENTINEL, "line_id": line_id}),
    ]


USER_READS = [
    "check_status_bar", "check_network_status", "check_network_mode_preference", "run_speed_test",
    "check_sim_status", "check_data_restriction_status", "check_apn_settings", "check_wifi_status",
    "check_wifi_calling_status", "check_vpn_status", "check_installed_apps", "can_send_mms",
    "check_payment_request",
]

#: User writes that undo themselves when made twice (the state returns to where it was).
USER_TOGGLES = ["toggle_airplane_mode", "toggle_data", "toggle_roaming", "toggle_data_saver_mode", "toggle_wifi",
                "toggle_wifi_calling"]


def _user_probe() -> list[tuple[str, dict[str, Any]]]:
    calls: list[tuple[str, dict[str, Any]]] = [(name, {}) for name in USER_READS]
    calls += [
        ("check_app_status", {"app_name": "messaging"}), ("check_app_status", {"app_name": "browser"}),
        ("check_app_status", {"app_name": "camera"}), ("check_app_permissions", {"app_name": "messaging"}),
        ("check_app_permissions", {"app_name": "browser"}), ("check_app_permissions", {"app_name": "nope"}),
        ("check_app_permissions", {}), ("check_status_bar", {"unexpected_argument": 1}),
    ]
    return calls


def _user_writes() -> list[tuple[str, dict[str, Any]]]:
    calls: list[tuple[str, dict[str, Any]]] = []
    for name in USER_TOGGLES:
        calls += [(name, {}), ("check_status_bar", {}), ("run_speed_test", {}), (name, {})]
    calls += [
        ("connect_vpn", {}), ("check_vpn_status", {}), ("run_speed_test", {}), ("connect_vpn", {}),
        ("disconnect_vpn", {}), ("disconnect_vpn", {}),
        ("grant_app_permission", {"app_name": "browser", "permission": "SMS"}),
        ("check_app_status", {"app_name": "browser"}),
        ("grant_app_permission", {"app_name": "browser", "permission": "camera"}),
        ("grant_app_permission", {"app_name": "camera", "permission": "sms"}),
        ("grant_app_permission", {"app_name": "browser", "permission": 3}),
        ("set_network_mode_preference", {"mode": "3g_only"}), ("run_speed_test", {}), ("can_send_mms", {}),
        ("set_network_mode_preference", {"mode": "2g_only"}), ("can_send_mms", {}),
        ("set_network_mode_preference", {"mode": "5g_only"}),
        ("set_network_mode_preference", {"mode": "4g_only"}), ("check_network_mode_preference", {}),
        ("set_network_mode_preference", {"mode": "4g_5g_preferred"}),
        ("set_network_mode_preference", {}),
        ("set_apn_settings", {"apn_settings": {"apn_name": "broken"}}), ("check_network_status", {}),
        ("set_apn_settings", {"apn_settings": {"apn_name": "nope"}}),
        ("set_apn_settings", {"apn_settings": {"apn_name": "internet", "mms_port": "x", "colour": 1}}),
        ("set_apn_settings", {"apn_settings": {"apn_name": "internet", "mmsc_url": None}}), ("can_send_mms", {}),
        ("check_apn_settings", {}),
        ("reset_apn_settings", {}), ("check_apn_settings", {}), ("reboot_device", {}), ("check_apn_settings", {}),
        ("reseat_sim_card", {}), ("check_sim_status", {}),
        ("check_payment_request", {}), ("make_payment", {}),
    ]
    return calls


def sequences(tasks: list[dict[str, Any]]) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """``(task_id, calls)`` per task, on the task's initial state: every agent tool and every user tool
    (reads, writes made twice, bad arguments), then each gold action by its requestor preceded by variants of
    it (an argument dropped or unexpected, a wrong id or type), then the phone read again. ``refuel_data``
    only as the gold action (a refuel on a customer without a draft bill opens a bill with a random id, in
    upstream too)."""
    for task in tasks:
        calls: list[dict[str, Any]] = []

        def add(name: str, arguments: Any, requestor: str, calls: list[dict[str, Any]] = calls) -> None:
            calls.append({"id": f"fz{len(calls) + 1}", "name": name, "arguments": arguments, "requestor": requestor})

        info = next((a["arguments"] for a in (task.get("initial_state") or {}).get("initialization_actions") or ()
                     if a["func_name"] == "set_user_info"), {})
        phone = info.get("phone_number", "555-123-2002")
        add("no_such_tool", {"x": 1}, "assistant")
        add("no_such_tool", {}, "user")
        for name, arguments in _agent_reads("C1001", "L1002", phone):
            add(name, arguments, "assistant")
        for name, arguments in _user_probe():
            add(name, arguments, "user")
        for action in task_fields.gold_actions(task):
            requestor = action["requestor"]
            args = action["arguments"]
            if action["name"] != "refuel_data":
                for key in list(args)[:2]:
                    add(action["name"], {k: v for k, v in args.items() if k != key}, requestor)
                add(action["name"], {**args, "unexpected_argument": 1}, requestor)
                for key, value in list(args.items())[:2]:
                    if isinstance(value, str):
                        add(action["name"], {**args, key: SENTINEL}, requestor)
            add(action["name"], copy.deepcopy(args), requestor)
        for name, arguments in _user_probe():
            add(name, arguments, "user")
        for name, arguments in _user_writes():
            add(name, arguments, "user")
        for name, arguments in (("suspend_line", {"customer_id": "C1001", "line_id": "L1002", "reason": "travel"}),
                                ("suspend_line", {"customer_id": "C1001", "line_id": "L1002", "reason": "again"}),
                                ("check_status_bar", {}),
                                ("resume_line", {"customer_id": "C1001", "line_id": "L1002"}),
                                ("resume_line", {"customer_id": "C1001", "line_id": "L1002"}),
                                ("enable_roaming", {"customer_id": "C1001", "line_id": "L1002"}),
                                ("disable_roaming", {"customer_id": "C1001", "line_id": "L1002"}),
                                ("disable_roaming", {"customer_id": "C1001", "line_id": "L1002"}),
                                ("enable_roaming", {"customer_id": "C1001", "line_id": "L9999"}),
                                ("refuel_data", {"customer_id": "C1001", "line_id": "L1002", "gb_amount": 0}),
                                ("refuel_data", {"customer_id": "C1001", "line_id": "L1002", "gb_amount": "2"}),
                                ("send_payment_request", {"customer_id": "C1001", "bill_id": SENTINEL}),
                                ("transfer_to_human_agents", {"summary": "help"})):
            add(name, arguments, "user" if name == "check_status_bar" else "assistant")
        yield task["id"], calls


def tasks_raw() -> list[dict[str, Any]]:
    """The packaged telecom tasks, in the task file's order."""
    return list(tasks(DOMAIN).values())


def fresh_vpn_default() -> None:
    """Reset the user toolkit's shared VPN default (``break_vpn`` degrades it in place, as upstream's class
    attribute): each task starts as in a process of its own."""
    from taubench_runner.domains.telecom import TelecomUserTools, VpnDetails

    TelecomUserTools.default_vpn_details = VpnDetails(server_address="192.168.1.1", protocol="OpenVPN",
                                                      server_performance="excellent")



def env_calls() -> list[dict[str, Any]]:
    """Every function the tasks may name that is not a tool (initialization actions, assertions), on the side
    it belongs to, with arguments that take each through its branches; in an order that changes the state as
    it goes (a line suspended for an overdue bill, the phone broken in every way and set right again)."""
    calls: list[tuple[str, str, dict[str, Any]]] = [
        ("assistant", "get_available_plan_ids", {}),
        ("assistant", "assert_line_status", {"customer_id": "C1001", "line_id": "L1002", "expected_status": "Active"}),
        ("assistant", "assert_data_refueling_amount", {"customer_id": "C1001", "line_id": "L1002",
                                                       "expected_amount": 0.0}),
        ("assistant", "assert_no_overdue_bill", {"overdue_bill_id": SENTINEL}),
        ("assistant", "assert_overdue_bill_exists", {"customer_id": "C1001", "overdue_bill_id": SENTINEL}),
        ("assistant", "set_data_usage", {"customer_id": "C1001", "line_id": "L1002", "data_used_gb": 15}),
        ("user", "assert_mobile_data_usage_exceeded", {"expected_status": True}),
        ("assistant", "set_data_usage", {"customer_id": "C1001", "line_id": "L1002", "data_used_gb": 1.5}),
        ("user", "assert_mobile_data_usage_exceeded", {"expected_status": True}),
        ("user", "set_user_location", {"abroad": True}),
        ("user", "assert_mobile_data_status", {"expected_status": False}),
        ("user", "turn_roaming_on", {}), ("user", "turn_roaming_on", {}),
        ("user", "assert_mobile_roaming_status", {"expected_status": True}),
        ("user", "assert_internet_speed", {"expected_speed": 100}),
        ("user", "turn_roaming_off", {}), ("user", "set_user_location", {"abroad": False}),
        ("user", "turn_airplane_mode_on", {}), ("user", "turn_airplane_mode_on", {}),
        ("user", "assert_airplane_mode_status", {"expected_status": True}),
        ("user", "assert_service_status", {"expected_status": "no_service"}),
        ("user", "assert_service_status", {"expected_status": "offline"}),
        ("user", "assert_internet_not_excellent", {}),
        ("user", "turn_airplane_mode_off", {}), ("user", "turn_airplane_mode_off", {}),
        ("user", "assert_internet_speed", {"expected_speed": 100, "expected_desc": "EXCELLENT"}),
        ("user", "turn_data_saver_mode_on", {}), ("user", "turn_data_saver_mode_on", {}),
        ("user", "assert_mobile_data_saver_mode_status", {"expected_status": True}),
        ("user", "assert_internet_speed", {"expected_speed": 50, "expected_desc": "good"}),
        ("user", "turn_data_saver_mode_off", {}), ("user", "turn_data_saver_mode_off", {}),
        ("user", "turn_data_off", {}), ("user", "turn_data_off", {}),
        ("user", "assert_mobile_data_status", {"expected_status": False}),
        ("user", "turn_data_on", {}), ("user", "simulate_network_search", {}),
        ("user", "break_vpn", {}), ("user", "assert_internet_not_excellent", {}),
        ("user", "break_apn_mms_setting", {}), ("user", "assert_can_send_mms", {"expected_status": False}),
        ("user", "set_wifi_calling", {"enabled": True, "mms_over_wifi": True}),
        ("user", "set_wifi_calling", {"enabled": True}),
        ("user", "set_wifi_calling", {"enabled": False, "mms_over_wifi": False}),
        ("user", "remove_app_permission", {"app_name": "messaging", "permission": "SMS"}),
        ("user", "remove_app_permission", {"app_name": "messaging", "permission": "camera"}),
        ("user", "remove_app_permission", {"app_name": "camera", "permission": "sms"}),
        ("user", "unseat_sim_card", {}), ("user", "assert_service_status", {"expected_status": "no_service"}),
        ("user", "lock_sim_card", {"mode": "puk"}), ("user", "lock_sim_card", {"mode": "pin"}),
        ("user", "lock_sim_card", {"mode": "other"}),
        ("user", "break_apn_settings", {}),
        ("assistant", "suspend_line_for_overdue_bill", {"customer_id": "C1001", "line_id": "L1002",
                                                        "new_bill_id": "B_overdue", "contract_ended": True}),
        ("assistant", "suspend_line_for_overdue_bill", {"customer_id": "C1001", "line_id": "L1002",
                                                        "new_bill_id": "B_again", "contract_ended": False}),
        ("assistant", "assert_overdue_bill_exists", {"customer_id": "C1001", "overdue_bill_id": "B_overdue"}),
        ("assistant", "assert_no_overdue_bill", {"overdue_bill_id": "B_overdue"}),
        ("assistant", "assert_line_status", {"customer_id": "C1001", "line_id": "L1002",
                                             "expected_status": "Suspended"}),
        ("user", "set_user_info", {"name": "Someone Else", "phone_number": "555-000-0000"}),
    ]
    return [{"env_type": t, "func_name": f, "arguments": a} for t, f, a in calls]


def outcome(run: Any) -> list[Any]:
    """What a snapshot keeps of one env function call: ``["ok", repr(result)]`` or ``["error", "Type: text"]``."""
    try:
        return ["ok", repr(run())]
    except Exception as exc:
        return ["error", f"{type(exc).__name__}: {exc}"]
