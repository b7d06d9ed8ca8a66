"""Every tool of the three domains against the domain data: what it returns, what it changes, how it fails.

(The exact result text of each tool, for the gold actions and ~8000 variants of them, is compared with
upstream's in ``test_tb_upstream_fidelity.py``; here each tool's behaviour is spelt out.)
"""

from __future__ import annotations

import json

import pytest
import tb_support as s
from taubench_runner import records
from taubench_runner.domains import module


def test_every_tool_is_covered_here():
    """Guard: a tool added to a domain needs a test in this file."""
    covered = {
        "mock": {"create_task", "get_users", "update_task_status", "transfer_to_human_agents",
                 "check_notifications", "dismiss_notification"},
        "airline": {"book_reservation", "calculate", "cancel_reservation", "get_reservation_details",
                    "get_user_details", "list_all_airports", "search_direct_flight", "search_onestop_flight",
                    "send_certificate", "transfer_to_human_agents", "update_reservation_baggages",
                    "update_reservation_flights", "update_reservation_passengers", "get_flight_status"},
        "retail": {"calculate", "cancel_pending_order", "exchange_delivered_order_items",
                   "find_user_id_by_name_zip", "find_user_id_by_email", "get_order_details",
                   "get_product_details", "get_item_details", "get_user_details", "list_all_product_types",
                   "modify_pending_order_address", "modify_pending_order_items", "modify_pending_order_payment",
                   "modify_user_address", "return_delivered_order_items", "transfer_to_human_agents"},
    }
    for domain, names in covered.items():
        mod = module(domain)
        tools = set(mod.AGENT_TOOLS.tool_specs) | set(mod.USER_TOOLS.tool_specs if mod.USER_TOOLS else ())
        assert tools == names, domain


def test_a_call_that_fails_is_an_error_tool_message_never_an_exception():
    env = s.environment("retail")
    assert s.error(env, "no_such_tool") == "Error: Tool 'no_such_tool' not found."
    assert s.error(env, "get_user_details") == \
        "Error: RetailTools.get_user_details() missing 1 required positional argument: 'user_id'"
    assert s.error(env, "get_user_details", user_id="x", verbose=True) == \
        "Error: RetailTools.get_user_details() got an unexpected keyword argument 'verbose'"
    assert s.error(env, "check_notifications", "user") == "Error: User tools not available"
    message = s.call(env, "get_user_details", user_id="nobody")
    assert message == {"id": "t1", "role": "tool", "content": "Error: User not found", "requestor": "assistant",
                       "error": True}


# -- mock ------------------------------------------------------------------------------------------------


def test_mock_create_task_and_its_errors():
    env = s.environment("mock")
    task = s.content(env, "create_task", user_id="user_1", title="Write report")
    assert task == {"task_id": "task_2", "title": "Write report", "description": None, "status": "pending"}
    assert env.tools.db["users"]["user_1"]["tasks"] == ["task_1", "task_2"]
    assert s.error(env, "create_task", user_id="user_9", title="x") == "Error: User user_9 not found"
    text = s.error(env, "create_task", user_id="user_1", title=3)
    assert text.startswith("Error: 1 validation error for Task\ntitle\n  Input should be a valid string "
                           "[type=string_type, input_value=3, input_type=int]")
    assert text.endswith("https://errors.pydantic.dev/2.12/v/string_type")


def test_mock_get_users_and_update_task_status():
    env = s.environment("mock")
    assert s.content(env, "get_users") == [{"user_id": "user_1", "name": "Test User", "tasks": ["task_1"]}]
    assert s.content(env, "update_task_status", task_id="task_1", status="completed")["status"] == "completed"
    assert env.tools.assert_task_status("task_1", "completed") is True
    assert s.error(env, "update_task_status", task_id="task_7", status="completed") == "Error: Task task_7 not found"
    # as upstream, an assignment is not validated: any status is stored
    assert s.content(env, "update_task_status", task_id="task_1", status="archived")["status"] == "archived"


def test_mock_transfer_and_env_functions():
    env = s.environment("mock")
    assert s.raw(env, "transfer_to_human_agents", summary="x") == "Transfer successful"
    assert env.tools.assert_number_of_tasks("user_1", 1) is True
    with pytest.raises(ValueError, match="User nobody not found"):
        env.tools.assert_number_of_tasks("nobody", 1)


def test_mock_user_tools_notifications():
    env = s.environment("mock")
    # the agent cannot reach the user's tools, the user can
    assert s.error(env, "check_notifications") == "Error: Tool 'check_notifications' not found."
    inbox = json.loads(s.call(env, "check_notifications", "user")["content"])
    assert inbox == [{"notification_id": "notif_1", "message": "Task 'Test task' has been assigned to you.",
                      "status": "unread", "task_id": "task_1"}]
    assert s.call(env, "dismiss_notification", "user", notification_id="notif_1")["content"] == \
        "Notification notif_1 dismissed"
    assert env.user_tools.assert_notification_status("notif_1", "read") is True
    assert s.error(env, "dismiss_notification", "user", notification_id="n9") == "Error: Notification n9 not found"
    env.user_tools.add_notification("n2", "hello")
    assert env.user_tools.db["notifications"]["n2"] == {"notification_id": "n2", "message": "hello",
                                                        "status": "unread", "task_id": None}


# -- airline -----------------------------------------------------------------------------------------------


def test_airline_reads():
    env = s.environment("airline")
    user = s.content(env, "get_user_details", user_id="mia_li_3668")
    assert user["reservations"] == ["NO6JO3", "AIXC49", "HKEG34"] and user["membership"] == "gold"
    assert list(user) == ["user_id", "name", "address", "email", "dob", "payment_methods", "saved_passengers",
                          "membership", "reservations"]
    reservation = s.content(env, "get_reservation_details", reservation_id="NO6JO3")
    assert reservation["status"] is None and reservation["payment_history"] == [
        {"payment_id": "credit_card_1955700", "amount": 2504}]
    assert s.error(env, "get_reservation_details", reservation_id="ZZZZZZ") == "Error: Reservation ZZZZZZ not found"
    assert s.error(env, "get_user_details", user_id="x") == "Error: User x not found"
    airports = s.content(env, "list_all_airports")
    assert len(airports) == 20 and airports[0] == {"iata": "SFO", "city": "San Francisco"}
    assert s.content(env, "get_flight_status", flight_number="HAT001", date="2024-05-03") == "cancelled"
    assert s.error(env, "get_flight_status", flight_number="HAT001", date="2023-01-01") == \
        "Error: Flight HAT001 not found on date 2023-01-01"
    assert s.error(env, "get_flight_status", flight_number="XX1", date="2024-05-03") == "Error: Flight XX1 not found"
    assert s.raw(env, "calculate", expression="(2 + 3) * 4 / 3") == "6.67"
    assert s.error(env, "calculate", expression="2 ** 8; import os") == "Error: Invalid characters in expression"
    assert s.raw(env, "transfer_to_human_agents", summary="x") == "Transfer successful"


def test_airline_searches():
    env = s.environment("airline")
    direct = s.content(env, "search_direct_flight", origin="ORD", destination="PHL", date="2024-05-26")
    assert direct and all(f["origin"] == "ORD" and f["destination"] == "PHL" and f["status"] == "available"
                          and f["date"] is None for f in direct)
    assert list(direct[0]) == ["flight_number", "origin", "destination", "status", "scheduled_departure_time_est",
                               "scheduled_arrival_time_est", "date", "available_seats", "prices"]
    assert s.content(env, "search_direct_flight", origin="ORD", destination="PHL", date="2023-05-26") == []
    pairs = s.content(env, "search_onestop_flight", origin="JFK", destination="SEA", date="2024-05-20")
    assert pairs
    for first, second in pairs:
        assert first["origin"] == "JFK" and second["destination"] == "SEA"
        assert first["destination"] == second["origin"] and first["date"] == "2024-05-20"
        assert second["scheduled_departure_time_est"] >= first["scheduled_arrival_time_est"] or "+1" in \
            first["scheduled_arrival_time_est"]


def test_airline_book_reservation_pays_and_takes_seats():
    task = s.tasks("airline")["8"]
    action = next(a for a in task["evaluation_criteria"]["actions"] if a["name"] == "book_reservation")
    env = s.environment("airline")
    args = action["arguments"]
    flight = env.tools.db["flights"][args["flights"][0]["flight_number"]]["dates"][args["flights"][0]["date"]]
    seats_before = flight["available_seats"][args["cabin"]]
    reservation = s.content(env, "book_reservation", **args)
    assert reservation["reservation_id"] == "HATHAT" and reservation["created_at"] == "2024-05-15T15:00:00"
    assert reservation["payment_history"] == args["payment_methods"]
    assert flight["available_seats"][args["cabin"]] == seats_before - len(args["passengers"])
    assert "HATHAT" in env.tools.db["users"][args["user_id"]]["reservations"]
    # a wrong total is refused before anything changes
    env = s.environment("airline")
    wrong = {**args, "payment_methods": [{**args["payment_methods"][0], "amount": 1}]}
    assert s.error(env, "book_reservation", **wrong).startswith("Error: Payment amount does not add up, total price")
    assert "HATHAT" not in env.tools.db["reservations"]
    bad = {**args, "flights": [{"flight_number": "HAT271"}]}
    assert s.error(env, "book_reservation", **bad).startswith("Error: 1 validation error for FlightInfo\ndate\n"
                                                             "  Field required [type=missing")
    assert s.error(env, "book_reservation", **{**args, "flights": [args["flights"][0], "HAT271"]}) == \
        "Error: 'dict' object has no attribute 'flight_number'"


def test_airline_cancel_reservation_refunds_every_payment():
    env = s.environment("airline")
    reservation = s.content(env, "cancel_reservation", reservation_id="NO6JO3")
    assert reservation["status"] == "cancelled"
    assert reservation["payment_history"] == [{"payment_id": "credit_card_1955700", "amount": 2504},
                                              {"payment_id": "credit_card_1955700", "amount": -2504}]


def test_airline_send_certificate():
    env = s.environment("airline")
    assert s.raw(env, "send_certificate", user_id="mia_li_3668", amount=150) == \
        "Certificate certificate_3221322 added to user mia_li_3668 with amount 150."
    assert env.tools.db["users"]["mia_li_3668"]["payment_methods"]["certificate_3221322"] == \
        {"source": "certificate", "id": "certificate_3221322", "amount": 150.0}
    for _ in range(2):
        s.raw(env, "send_certificate", user_id="mia_li_3668", amount=1)
    assert s.error(env, "send_certificate", user_id="mia_li_3668", amount=1) == "Error: Too many certificates"


def test_airline_update_baggages_charges_new_nonfree_bags():
    env = s.environment("airline")
    reservation = s.content(env, "update_reservation_baggages", reservation_id="NO6JO3", total_baggages=4,
                            nonfree_baggages=2, payment_id="credit_card_1955700")
    assert (reservation["total_baggages"], reservation["nonfree_baggages"]) == (4, 2)
    assert reservation["payment_history"][-1] == {"payment_id": "credit_card_1955700", "amount": 100}
    assert s.error(env, "update_reservation_baggages", reservation_id="NO6JO3", total_baggages=5,
                   nonfree_baggages=3, payment_id="certificate_4856383") == \
        "Error: Certificate cannot be used to update reservation"
    assert s.error(env, "update_reservation_baggages", reservation_id="NO6JO3", total_baggages=5,
                   nonfree_baggages=3, payment_id="nope") == "Error: Payment method not found"


def test_airline_update_flights_and_passengers():
    task = s.tasks("airline")["7"]
    action = next(a for a in task["evaluation_criteria"]["actions"] if a["name"] == "update_reservation_flights")
    env = s.environment("airline")
    reservation = s.content(env, "update_reservation_flights", **action["arguments"])
    assert [f["flight_number"] for f in reservation["flights"]] == \
        [f["flight_number"] for f in action["arguments"]["flights"]]
    assert reservation["cabin"] == action["arguments"]["cabin"]
    assert s.error(env, "update_reservation_flights", reservation_id="NO6JO3", cabin="first",
                   flights=[{"flight_number": "HAT001", "date": "2024-05-20"}], payment_id="x") == "Error: 'first'"
    passengers = [{"first_name": "Ann", "last_name": "Lee", "dob": "1990-01-01"}]
    assert s.content(env, "update_reservation_passengers", reservation_id="NO6JO3",
                     passengers=passengers)["passengers"] == passengers
    assert s.error(env, "update_reservation_passengers", reservation_id="NO6JO3", passengers=passengers * 2) == \
        "Error: Number of passengers does not match"


# -- retail --------------------------------------------------------------------------------------------------


def test_retail_lookups():
    env = s.environment("retail")
    assert s.raw(env, "find_user_id_by_name_zip", first_name="yusuf", last_name="ROSSI", zip="19122") == \
        "yusuf_rossi_9620"
    assert s.error(env, "find_user_id_by_name_zip", first_name="Y", last_name="R", zip="1") == "Error: User not found"
    assert s.raw(env, "find_user_id_by_email", email="MIA.GARCIA2723@example.com") == "mia_garcia_4516"
    user = s.content(env, "get_user_details", user_id="yusuf_rossi_9620")
    assert list(user) == ["user_id", "name", "address", "email", "payment_methods", "orders"]
    order = s.content(env, "get_order_details", order_id="#W2378156")
    assert order["status"] == "delivered" and order["cancel_reason"] is None and order["return_items"] is None
    assert s.error(env, "get_order_details", order_id="W2378156") == "Error: Order not found"
    product = s.content(env, "get_product_details", product_id="1656367028")
    assert product["product_id"] == "1656367028" and product["variants"]
    item = s.content(env, "get_item_details", item_id="4107812777")
    assert set(item) == {"item_id", "options", "available", "price"} and isinstance(item["price"], float)
    assert s.error(env, "get_item_details", item_id="0") == "Error: Item not found"
    assert s.error(env, "get_product_details", product_id="0") == "Error: Product not found"
    text = s.raw(env, "list_all_product_types")
    types = json.loads(text)
    assert len(types) == 50 and list(types) == sorted(types) and text == json.dumps(types, sort_keys=True)
    assert s.raw(env, "calculate", expression="3131.1 + 4777.75 + 367.38") == "8276.23"
    assert s.raw(env, "transfer_to_human_agents", summary="x") == "Transfer successful"


def test_retail_cancel_pending_order_refunds_gift_cards_at_once():
    env = s.environment("retail")
    order = env.tools.db["orders"]["#W5199551"]
    assert order["status"] == "pending"
    result = s.content(env, "cancel_pending_order", order_id="#W5199551", reason="no longer needed")
    assert result["status"] == "cancelled" and result["cancel_reason"] == "no longer needed"
    refunds = [p for p in result["payment_history"] if p["transaction_type"] == "refund"]
    assert [r["amount"] for r in refunds] == [p["amount"] for p in result["payment_history"]
                                              if p["transaction_type"] == "payment"]
    assert s.error(env, "cancel_pending_order", order_id="#W5199551", reason="no longer needed") == \
        "Error: Non-pending order cannot be cancelled"
    pending = next(o for o in env.tools.db["orders"].values() if o["status"] == "pending")
    assert s.error(env, "cancel_pending_order", order_id=pending["order_id"], reason="changed my mind") == \
        "Error: Invalid reason"


def test_retail_exchange_and_return_delivered_orders():
    env = s.environment("retail")
    args = {"order_id": "#W2378156", "item_ids": ["1151293680", "4983901480"],
            "new_item_ids": ["7706410293", "7747408585"], "payment_method_id": "credit_card_9513926"}
    order = s.content(env, "exchange_delivered_order_items", **args)
    assert order["status"] == "exchange requested"
    assert order["exchange_items"] == sorted(args["item_ids"]) and order["exchange_new_items"] == \
        sorted(args["new_item_ids"])
    assert isinstance(order["exchange_price_difference"], float)
    assert s.error(env, "exchange_delivered_order_items", **args) == "Error: Non-delivered order cannot be exchanged"
    env = s.environment("retail")
    assert s.error(env, "exchange_delivered_order_items", **{**args, "item_ids": ["1151293680"]}) == \
        "Error: The number of items to be exchanged should match."
    order = s.content(env, "return_delivered_order_items", order_id="#W2378156",
                      item_ids=["4602305039", "4202497723"], payment_method_id="credit_card_9513926")
    assert order["status"] == "return requested" and order["return_items"] == ["4202497723", "4602305039"]
    env = s.environment("retail")
    assert s.error(env, "return_delivered_order_items", order_id="#W2378156", item_ids=["0"],
                   payment_method_id="credit_card_9513926") == "Error: Some item not found"


def test_retail_modify_pending_order_items_uses_the_last_new_item_for_every_item():
    """Upstream's quirk, kept: each modified item gets the new id, but the price and options of the *last*
    new item of the call."""
    env = s.environment("retail")
    order = next(o for o in env.tools.db["orders"].values() if o["status"] == "pending" and len(o["items"]) >= 2
                 and len({i["product_id"] for i in o["items"]}) >= 2)
    user = env.tools.db["users"][order["user_id"]]
    pay = next(iter(user["payment_methods"]))
    old, new = [], []
    for item in order["items"][:2]:
        variants = env.tools.db["products"][item["product_id"]]["variants"]
        other = next(v for v in variants.values() if v["item_id"] != item["item_id"] and v["available"])
        old.append(item["item_id"])
        new.append(other["item_id"])
    last = next(v for p in env.tools.db["products"].values() for v in p["variants"].values() if v["item_id"] == new[-1])
    if env.tools.db["users"][order["user_id"]]["payment_methods"][pay]["source"] == "gift_card":
        env.tools.db["users"][order["user_id"]]["payment_methods"][pay]["balance"] = 1e6
    result = s.content(env, "modify_pending_order_items", order_id=order["order_id"], item_ids=old,
                       new_item_ids=new, payment_method_id=pay)
    assert result["status"] == "pending (item modified)"
    modified = [i for i in result["items"] if i["item_id"] in new]
    assert [i["item_id"] for i in modified] == new
    assert all(i["price"] == last["price"] and i["options"] == last["options"] for i in modified)
    assert s.error(env, "modify_pending_order_items", order_id=order["order_id"], item_ids=new, new_item_ids=old,
                   payment_method_id=pay) == "Error: Non-pending order cannot be modified"


def test_retail_modify_pending_order_payment_and_addresses():
    env = s.environment("retail")
    order = s.content(env, "modify_pending_order_payment", order_id="#W4923227", payment_method_id="credit_card_8897086")
    assert [p["transaction_type"] for p in order["payment_history"]] == ["payment", "payment", "refund"]
    assert s.error(env, "modify_pending_order_payment", order_id="#W4923227",
                   payment_method_id="credit_card_8897086") == \
        "Error: There should be exactly one payment for a pending order"
    address = {"address1": "1 A St", "address2": "", "city": "B", "state": "CA", "country": "USA", "zip": "90001"}
    assert s.content(env, "modify_pending_order_address", order_id="#W8665881", **address)["address"] == address
    assert s.content(env, "modify_user_address", user_id="ethan_garcia_1261", **address)["address"] == address
    delivered = next(o["order_id"] for o in env.tools.db["orders"].values() if o["status"] == "delivered")
    assert s.error(env, "modify_pending_order_address", order_id=delivered, **address) == \
        "Error: Non-pending order cannot be modified"
    assert s.error(env, "modify_user_address", user_id="ethan_garcia_1261", **{**address, "zip": 90001}).startswith(
        "Error: 1 validation error for UserAddress\nzip\n  Input should be a valid string")


# -- records (pydantic's rules) ------------------------------------------------------------------------------


def test_records_validate_as_pydantic_lax_mode():
    from taubench_runner.domains.airline import Payment, Reservation

    assert Payment(payment_id="p", amount=12.0) == {"payment_id": "p", "amount": 12}
    assert Payment(payment_id="p", amount="7") == {"payment_id": "p", "amount": 7}
    with pytest.raises(records.ValidationError) as raised:
        Payment(payment_id=1, amount=1.5)
    assert str(raised.value).splitlines()[0] == "2 validation errors for Payment"
    assert "got a number with a fractional part [type=int_from_float, input_value=1.5, input_type=float]" in \
        str(raised.value)
    with pytest.raises(records.ValidationError, match="Input should be 'round_trip' or 'one_way'"):
        Reservation.validate({"flight_type": "x"})
    long = "abcdefghij" * 10
    with pytest.raises(records.ValidationError, match=r"input_value='abcdefghijabcdefghijabcd\.\.\.hijabcdefghij"):
        Payment(payment_id="p", amount=long)
