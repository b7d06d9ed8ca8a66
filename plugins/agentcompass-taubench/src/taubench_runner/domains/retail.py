"""tau2's ``retail`` domain: products, users and orders; agent tools only.

Every tool follows upstream's steps in upstream's order, including its quirks (``modify_pending_order_items``
gives every modified item the price and options of the *last* new item, as upstream does).
"""

from __future__ import annotations

import json
from typing import Any

from taubench_runner import records as r
from taubench_runner.toolkit import (
    CALCULATE_DESCRIPTION,
    CALCULATE_PARAM,
    TRANSFER_DESCRIPTION,
    TRANSFER_PARAM,
    ModelOut,
    Param,
    ToolKit,
    calculate,
    tool,
)

Variant = r.Model("Variant", {
    "item_id": r.STR, "options": r.DictOf(r.STR), "available": r.BOOL, "price": r.FLOAT,
})
Product = r.Model("Product", {"name": r.STR, "product_id": r.STR, "variants": r.DictOf(Variant)})
UserName = r.Model("UserName", {"first_name": r.STR, "last_name": r.STR})
UserAddress = r.Model("UserAddress", {
    "address1": r.STR, "address2": r.STR, "city": r.STR, "country": r.STR, "state": r.STR, "zip": r.STR,
})
PaymentMethodBase = r.Model("PaymentMethodBase", {"source": r.STR, "id": r.STR})
CreditCard = PaymentMethodBase.extend("CreditCard", {
    "source": r.Literal("credit_card"), "brand": r.STR, "last_four": r.STR,
})
Paypal = PaymentMethodBase.extend("Paypal", {"source": r.Literal("paypal")})
GiftCard = PaymentMethodBase.extend("GiftCard", {"source": r.Literal("gift_card"), "balance": r.FLOAT, "id": r.STR})
PaymentMethod = r.Union(CreditCard, GiftCard, Paypal)
User = r.Model("User", {
    "user_id": r.STR, "name": UserName, "address": UserAddress, "email": r.STR,
    "payment_methods": r.DictOf(PaymentMethod), "orders": r.ListOf(r.STR),
})
OrderFullfilment = r.Model("OrderFullfilment", {"tracking_id": r.ListOf(r.STR), "item_ids": r.ListOf(r.STR)})
OrderItem = r.Model("OrderItem", {
    "name": r.STR, "product_id": r.STR, "item_id": r.STR, "price": r.FLOAT, "options": r.DictOf(r.STR),
})
OrderPayment = r.Model("OrderPayment", {
    "transaction_type": r.Literal("payment", "refund"), "amount": r.FLOAT, "payment_method_id": r.STR,
})
OrderStatus = r.Literal(
    "processed", "pending", "pending (item modified)", "delivered", "cancelled", "exchange requested",
    "return requested",
)
Order = r.Model("Order", {
    "order_id": r.STR, "user_id": r.STR, "address": UserAddress, "items": r.ListOf(OrderItem),
    "status": OrderStatus, "fulfillments": r.ListOf(OrderFullfilment), "payment_history": r.ListOf(OrderPayment),
    "cancel_reason": r.Field(r.Optional(r.Literal("no longer needed", "ordered by mistake")), None),
    "exchange_items": r.Field(r.Optional(r.ListOf(r.STR)), None),
    "exchange_new_items": r.Field(r.Optional(r.ListOf(r.STR)), None),
    "exchange_payment_method_id": r.Field(r.Optional(r.STR), None),
    "exchange_price_difference": r.Field(r.Optional(r.FLOAT), None),
    "return_items": r.Field(r.Optional(r.ListOf(r.STR)), None),
    "return_payment_method_id": r.Field(r.Optional(r.STR), None),
})
RetailDB = r.Model("RetailDB", {
    "products": r.DictOf(Product), "users": r.DictOf(User), "orders": r.DictOf(Order),
}, forbid_extra=True)

_ORDER_ID = ("The order id, such as '#W0000000'. Be careful there is a '#' symbol at the beginning of the "
             "order id.")
_USER_ID = "The user id, such as 'sara_doe_496'."
_PAYMENT_METHOD_ID = ("The payment method id to pay or receive refund for the item price difference, such as "
                      "'gift_card_0000000' or 'credit_card_0000000'. These can be looked up from the user or order "
                      "details.")


def _address_params() -> tuple[Param, ...]:
    return (
        Param("address1", "string", "The first line of the address, such as '123 Main St'."),
        Param("address2", "string", "The second line of the address, such as 'Apt 1' or ''."),
        Param("city", "string", "The city, such as 'San Francisco'."),
        Param("state", "string", "The state, such as 'CA'."),
        Param("country", "string", "The country, such as 'USA'."),
        Param("zip", "string", "The zip code, such as '12345'."),
    )


def _is_gift_card(payment_method: dict[str, Any]) -> bool:
    return payment_method["source"] == "gift_card"


class RetailTools(ToolKit):
    """The agent's tools (upstream's ``RetailTools``)."""

    @classmethod
    def db_model(cls) -> r.Model:
        return RetailDB

    # -- helpers (not tools) -------------------------------------------------------------------------

    def _get_order(self, order_id: Any) -> dict[str, Any]:
        if order_id not in self.db["orders"]:
            raise ValueError("Order not found")
        return self.db["orders"][order_id]

    def _get_user(self, user_id: Any) -> dict[str, Any]:
        if user_id not in self.db["users"]:
            raise ValueError("User not found")
        return self.db["users"][user_id]

    def _get_product(self, product_id: Any) -> dict[str, Any]:
        if product_id not in self.db["products"]:
            raise ValueError("Product not found")
        return self.db["products"][product_id]

    def _get_item(self, item_id: Any) -> dict[str, Any]:
        for product in self.db["products"].values():
            if item_id in product["variants"]:
                return product["variants"][item_id]
        raise ValueError("Item not found")

    def _get_variant(self, product_id: Any, variant_id: Any) -> dict[str, Any]:
        product = self._get_product(product_id)
        if variant_id not in product["variants"]:
            raise ValueError("Variant not found")
        return product["variants"][variant_id]

    def _get_payment_method(self, user_id: Any, payment_method_id: Any) -> dict[str, Any]:
        user = self._get_user(user_id)
        if payment_method_id not in user["payment_methods"]:
            raise ValueError("Payment method not found")
        return user["payment_methods"][payment_method_id]

    @staticmethod
    def _is_pending_order(order: dict[str, Any]) -> bool:
        return "pending" in order["status"]

    # -- tools ---------------------------------------------------------------------------------------

    @tool("generic", CALCULATE_DESCRIPTION, CALCULATE_PARAM)
    def calculate(self, expression: Any) -> Any:
        return calculate(expression)

    @tool(
        "write",
        "Cancel a pending order. If the order is already processed or delivered,\n\nit cannot be cancelled. The "
        "agent needs to explain the cancellation detail\nand ask for explicit user confirmation (yes/no) to proceed. "
        "If the user confirms,\nthe order status will be changed to 'cancelled' and the payment will be refunded.\n"
        "The refund will be added to the user's gift card balance immediately if the payment\nwas made using a gift "
        "card, otherwise the refund would take 5-7 business days to process.\nThe function returns the order "
        "details after the cancellation.",
        Param("order_id", "string", _ORDER_ID),
        Param("reason", "string",
              "The reason for cancellation, which should be either 'no longer needed' or 'ordered by mistake'."),
    )
    def cancel_pending_order(self, order_id: Any, reason: Any) -> Any:
        order = self._get_order(order_id)
        if order["status"] != "pending":
            raise ValueError("Non-pending order cannot be cancelled")
        if reason not in {"no longer needed", "ordered by mistake"}:
            raise ValueError("Invalid reason")
        refunds = []
        for payment in order["payment_history"]:
            payment_id = payment["payment_method_id"]
            refunds.append(OrderPayment(transaction_type="refund", amount=payment["amount"],
                                        payment_method_id=payment_id))
            user = self._get_user(order["user_id"])
            payment_method = self._get_payment_method(user["user_id"], payment_id)
            if _is_gift_card(payment_method):
                payment_method["balance"] += payment["amount"]
                payment_method["balance"] = round(payment_method["balance"], 2)
        order["status"] = "cancelled"
        order["cancel_reason"] = reason
        order["payment_history"].extend(refunds)
        return ModelOut(order)

    @tool(
        "write",
        "Exchange items in a delivered order to new items of the same product type.\n\nFor a delivered order, "
        "return or exchange can be only done once by the agent.\nThe agent needs to explain the exchange detail "
        "and ask for explicit user confirmation (yes/no) to proceed.",
        Param("order_id", "string", _ORDER_ID),
        Param("item_ids", "string_list",
              "The item ids to be exchanged, each such as '1008292230'. There could be duplicate items in the list."),
        Param("new_item_ids", "string_list",
              "The item ids to be exchanged for, each such as '1008292230'.\nThere could be duplicate items in the "
              "list. Each new item id should match the item id\nin the same position and be of the same product."),
        Param("payment_method_id", "string",
              "The payment method id to pay or receive refund for the item price difference,\nsuch as "
              "'gift_card_0000000' or 'credit_card_0000000'. These can be looked up\nfrom the user or order details."),
    )
    def exchange_delivered_order_items(
        self, order_id: Any, item_ids: Any, new_item_ids: Any, payment_method_id: Any
    ) -> Any:
        order = self._get_order(order_id)
        if order["status"] != "delivered":
            raise ValueError("Non-delivered order cannot be exchanged")
        all_item_ids = [item["item_id"] for item in order["items"]]
        for item_id in item_ids:
            if item_ids.count(item_id) > all_item_ids.count(item_id):
                raise ValueError(f"Number of {item_id} not found.")
        if len(item_ids) != len(new_item_ids):
            raise ValueError("The number of items to be exchanged should match.")
        diff_price = 0
        for item_id, new_item_id in zip(item_ids, new_item_ids):  # noqa: B905 - upstream's zip
            item = next((item for item in order["items"] if item["item_id"] == item_id), None)
            if item is None:
                raise ValueError(f"Item {item_id} not found")
            variant = self._get_variant(item["product_id"], new_item_id)
            if not variant["available"]:
                raise ValueError(f"New item {new_item_id} not found or available")
            diff_price += variant["price"] - item["price"]
        diff_price = round(diff_price, 2)
        payment_method = self._get_payment_method(order["user_id"], payment_method_id)
        if _is_gift_card(payment_method) and payment_method["balance"] < diff_price:
            raise ValueError("Insufficient gift card balance to pay for the price difference")
        order["status"] = "exchange requested"
        order["exchange_items"] = sorted(item_ids)
        order["exchange_new_items"] = sorted(new_item_ids)
        order["exchange_payment_method_id"] = payment_method_id
        order["exchange_price_difference"] = diff_price
        return ModelOut(order)

    @tool(
        "read",
        "Find user id by first name, last name, and zip code. If the user is not found, the function\n\nwill "
        "return an error message. By default, find user id by email, and only call this function\nif the user is "
        "not found by email or cannot remember email.",
        Param("first_name", "string", "The first name of the customer, such as 'John'."),
        Param("last_name", "string", "The last name of the customer, such as 'Doe'."),
        Param("zip", "string", "The zip code of the customer, such as '12345'."),
    )
    def find_user_id_by_name_zip(self, first_name: Any, last_name: Any, zip: Any) -> Any:
        for user_id, user in self.db["users"].items():
            if (
                user["name"]["first_name"].lower() == first_name.lower()
                and user["name"]["last_name"].lower() == last_name.lower()
                and user["address"]["zip"] == zip
            ):
                return user_id
        raise ValueError("User not found")

    @tool(
        "read",
        "Find user id by email. If the user is not found, the function will return an error message.",
        Param("email", "string", "The email of the user, such as 'something@example.com'."),
    )
    def find_user_id_by_email(self, email: Any) -> Any:
        for user_id, user in self.db["users"].items():
            if user["email"].lower() == email.lower():
                return user_id
        raise ValueError("User not found")

    @tool("read", "Get the status and details of an order.", Param("order_id", "string", _ORDER_ID))
    def get_order_details(self, order_id: Any) -> Any:
        return ModelOut(self._get_order(order_id))

    @tool(
        "read", "Get the inventory details of a product.",
        Param("product_id", "string",
              "The product id, such as '6086499569'. Be careful the product id is different from the item id."),
    )
    def get_product_details(self, product_id: Any) -> Any:
        return ModelOut(self._get_product(product_id))

    @tool(
        "read", "Get the inventory details of an item.",
        Param("item_id", "string",
              "The item id, such as '6086499569'. Be careful the item id is different from the product id."),
    )
    def get_item_details(self, item_id: Any) -> Any:
        return ModelOut(self._get_item(item_id))

    @tool("read", "Get the details of a user, including their orders.", Param("user_id", "string", _USER_ID))
    def get_user_details(self, user_id: Any) -> Any:
        return ModelOut(self._get_user(user_id))

    @tool(
        "read",
        "List the name and product id of all product types.\n\nEach product type has a variety of different items "
        "with unique item ids and options.\nThere are only 50 product types in the store.",
    )
    def list_all_product_types(self) -> Any:
        product_dict = {product["name"]: product["product_id"] for product in self.db["products"].values()}
        return json.dumps(product_dict, sort_keys=True)

    @tool(
        "write",
        "Modify the shipping address of a pending order. The agent needs to explain the modification detail and ask "
        "for explicit user confirmation (yes/no) to proceed.",
        Param("order_id", "string", _ORDER_ID),
        *_address_params(),
    )
    def modify_pending_order_address(
        self, order_id: Any, address1: Any, address2: Any, city: Any, state: Any, country: Any, zip: Any
    ) -> Any:
        order = self._get_order(order_id)
        if not self._is_pending_order(order):
            raise ValueError("Non-pending order cannot be modified")
        order["address"] = UserAddress(address1=address1, address2=address2, city=city, state=state,
                                       country=country, zip=zip)
        return ModelOut(order)

    @tool(
        "write",
        "Modify items in a pending order to new items of the same product type. For a pending order, this function "
        "can only be called once. The agent needs to explain the exchange detail and ask for explicit user "
        "confirmation (yes/no) to proceed.",
        Param("order_id", "string", _ORDER_ID),
        Param("item_ids", "string_list",
              "The item ids to be modified, each such as '1008292230'. There could be duplicate items in the list."),
        Param("new_item_ids", "string_list",
              "The item ids to be modified for, each such as '1008292230'. There could be duplicate items in the "
              "list. Each new item id should match the item id in the same position and be of the same product."),
        Param("payment_method_id", "string", _PAYMENT_METHOD_ID),
    )
    def modify_pending_order_items(
        self, order_id: Any, item_ids: Any, new_item_ids: Any, payment_method_id: Any
    ) -> Any:
        order = self._get_order(order_id)
        if order["status"] != "pending":
            raise ValueError("Non-pending order cannot be modified")
        all_item_ids = [item["item_id"] for item in order["items"]]
        for item_id in item_ids:
            if item_ids.count(item_id) > all_item_ids.count(item_id):
                raise ValueError(f"{item_id} not found")
        if len(item_ids) != len(new_item_ids):
            raise ValueError("The number of items to be exchanged should match")
        diff_price = 0
        variant: Any = None  # after the loop: the last new item, whose price and options upstream gives every item
        for item_id, new_item_id in zip(item_ids, new_item_ids):  # noqa: B905 - upstream's zip
            if item_id == new_item_id:
                raise ValueError("The new item id should be different from the old item id")
            item = next((item for item in order["items"] if item["item_id"] == item_id), None)
            if item is None:
                raise ValueError(f"Item {item_id} not found")
            variant = self._get_variant(item["product_id"], new_item_id)
            if not variant["available"]:
                raise ValueError(f"New item {new_item_id} not found or available")
            diff_price += variant["price"] - item["price"]
        payment_method = self._get_payment_method(order["user_id"], payment_method_id)
        if _is_gift_card(payment_method) and payment_method["balance"] < diff_price:
            raise ValueError("Insufficient gift card balance to pay for the new item")
        order["payment_history"].append(OrderPayment(
            transaction_type="payment" if diff_price > 0 else "refund", amount=abs(diff_price),
            payment_method_id=payment_method_id,
        ))
        if _is_gift_card(payment_method):
            payment_method["balance"] -= diff_price
            payment_method["balance"] = round(payment_method["balance"], 2)
        for item_id, new_item_id in zip(item_ids, new_item_ids):  # noqa: B905 - upstream's zip
            item = next((item for item in order["items"] if item["item_id"] == item_id), None)
            if item is None:
                raise ValueError(f"Item {item_id} not found")
            item["item_id"] = new_item_id
            item["price"] = variant["price"]
            item["options"] = variant["options"]
        order["status"] = "pending (item modified)"
        return ModelOut(order)

    @tool(
        "write",
        "Modify the payment method of a pending order. The agent needs to explain the modification detail and ask "
        "for explicit user confirmation (yes/no) to proceed.",
        Param("order_id", "string", _ORDER_ID),
        Param("payment_method_id", "string", _PAYMENT_METHOD_ID),
    )
    def modify_pending_order_payment(self, order_id: Any, payment_method_id: Any) -> Any:
        order = self._get_order(order_id)
        if not self._is_pending_order(order):
            raise ValueError("Non-pending order cannot be modified")
        payment_method = self._get_payment_method(order["user_id"], payment_method_id)
        history = order["payment_history"]
        if len(history) != 1 or history[0]["transaction_type"] != "payment":
            raise ValueError("There should be exactly one payment for a pending order")
        if history[0]["payment_method_id"] == payment_method_id:
            raise ValueError("The new payment method should be different from the current one")
        amount = history[0]["amount"]
        if _is_gift_card(payment_method) and payment_method["balance"] < amount:
            raise ValueError("Insufficient gift card balance to pay for the order")
        history.extend([
            OrderPayment(transaction_type="payment", amount=amount, payment_method_id=payment_method_id),
            OrderPayment(transaction_type="refund", amount=amount, payment_method_id=history[0]["payment_method_id"]),
        ])
        if _is_gift_card(payment_method):
            payment_method["balance"] -= amount
            payment_method["balance"] = round(payment_method["balance"], 2)
        old_payment_method = self._get_payment_method(order["user_id"], history[0]["payment_method_id"])
        if _is_gift_card(old_payment_method):
            old_payment_method["balance"] += amount
            old_payment_method["balance"] = round(old_payment_method["balance"], 2)
        return ModelOut(order)

    @tool(
        "write",
        "Modify the default address of a user. The agent needs to explain the modification detail and ask for "
        "explicit user confirmation (yes/no) to proceed.",
        Param("user_id", "string", _USER_ID),
        *_address_params(),
    )
    def modify_user_address(
        self, user_id: Any, address1: Any, address2: Any, city: Any, state: Any, country: Any, zip: Any
    ) -> Any:
        user = self._get_user(user_id)
        user["address"] = UserAddress(address1=address1, address2=address2, city=city, state=state,
                                      country=country, zip=zip)
        return ModelOut(user)

    @tool(
        "write",
        "Return some items of a delivered order.\n\nThe order status will be changed to 'return requested'.\nThe "
        "agent needs to explain the return detail and ask for explicit user confirmation (yes/no) to proceed.\nThe "
        "user will receive follow-up email for how and where to return the item.",
        Param("order_id", "string", _ORDER_ID),
        Param("item_ids", "string_list",
              "The item ids to be returned, each such as '1008292230'. There could be duplicate items in the list."),
        Param("payment_method_id", "string",
              "The payment method id to pay or receive refund for the item price difference, such as "
              "'gift_card_0000000' or 'credit_card_0000000'.\nThese can be looked up from the user or order details."),
    )
    def return_delivered_order_items(self, order_id: Any, item_ids: Any, payment_method_id: Any) -> Any:
        order = self._get_order(order_id)
        if order["status"] != "delivered":
            raise ValueError("Non-delivered order cannot be returned")
        user = self._get_user(order["user_id"])
        payment_method = self._get_payment_method(user["user_id"], payment_method_id)
        if not _is_gift_card(payment_method) and payment_method_id != order["payment_history"][0]["payment_method_id"]:
            raise ValueError("Payment method should be the original payment method")
        all_item_ids = [item["item_id"] for item in order["items"]]
        for item_id in item_ids:
            if item_ids.count(item_id) > all_item_ids.count(item_id):
                raise ValueError("Some item not found")
        order["status"] = "return requested"
        order["return_items"] = sorted(item_ids)
        order["return_payment_method_id"] = payment_method_id
        return ModelOut(order)

    @tool("generic", TRANSFER_DESCRIPTION, TRANSFER_PARAM)
    def transfer_to_human_agents(self, summary: Any) -> Any:
        return "Transfer successful"


AGENT_TOOLS = RetailTools
USER_TOOLS = None
DB_FILE = "db.json"
USER_DB_FILE = None
