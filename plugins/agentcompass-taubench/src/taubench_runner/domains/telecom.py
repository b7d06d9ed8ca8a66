"""tau2's ``telecom`` domain: customers, lines, plans, bills and devices (agent side), and the customer's own
phone and surroundings (user side), kept consistent by :class:`TelecomEnvironment`.

A port of upstream's ``src/tau2/domains/telecom/`` (``data_model.py``, ``tools.py``, ``user_data_model.py``,
``user_tools.py``, ``environment.py``): every tool follows upstream's steps in upstream's order, and every
public method that a task may name (initialization actions such as ``break_apn_settings``, assertions such
as ``assert_mobile_data_status``) is there too. The databases hold records (see :mod:`taubench_runner.records`):
enum values as their strings, dates and datetimes as ``str()`` of the value, which is what upstream's
``json.dumps(..., default=str)`` writes for them.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from taubench_runner import records as r
from taubench_runner.environment import Environment
from taubench_runner.toolkit import TRANSFER_DESCRIPTION, TRANSFER_PARAM, ModelOut, Param, ToolKit, env_function, tool

#: Upstream's fixed "today" (``tau2.domains.telecom.utils.get_today``).
TODAY = dt.date(2025, 2, 25)
DEFAULT_START_DATE = "2025-01-01"  # a ``date`` default of a datetime field: pydantic does not validate defaults


def _today() -> str:
    return str(TODAY)


# -- the agent's database ------------------------------------------------------------------------------

_NO_EXTRA = {"forbid_extra": True}


def _f(type_: r.Type, description: str, default: Any = r._MISSING, default_factory: Any = None) -> r.Field:
    return r.Field(type_, default, default_factory, description=description)


Address = r.Model("Address", {
    "street": _f(r.STR, "Street address including house/apartment number"),
    "city": _f(r.STR, "City name"),
    "state": _f(r.STR, "State or province code (e.g., CA, NY)"),
    "zip_code": _f(r.STR, "Postal/ZIP code"),
}, **_NO_EXTRA)
Plan = r.Model("Plan", {
    "plan_id": _f(r.STR, "Unique identifier for the plan"),
    "name": _f(r.STR, "Display name of the plan"),
    "data_limit_gb": _f(r.FLOAT, "Monthly data allowance in gigabytes (GB)"),
    "price_per_month": _f(r.FLOAT, "Monthly price of the plan in USD"),
    "data_refueling_price_per_gb": _f(r.FLOAT, "Price per gigabyte for data refueling"),
}, **_NO_EXTRA)
DeviceType = r.Enum("DeviceType", {"PHONE": "phone", "ROUTER": "router", "TABLET": "tablet", "WATCH": "watch",
                                   "OTHER": "other"})
Device = r.Model("Device", {
    "device_id": _f(r.STR, "Unique identifier for the device"),
    "device_type": _f(DeviceType, "Type/category of the device"),
    "model": _f(r.STR, "Model name/number of the device"),
    "imei": _f(r.Optional(r.STR), "International Mobile Equipment Identity number", None),
    "is_esim_capable": _f(r.BOOL, "Whether the device supports eSIM technology"),
    "activated": _f(r.BOOL, "Whether the device has been activated on the network", False),
    "activation_date": _f(r.Optional(r.DATETIME), "Date and time when the device was activated", None),
    "last_esim_transfer_date": _f(r.Optional(r.DATETIME), "Last date an eSIM profile was transferred", None),
}, **_NO_EXTRA)
LineStatus = r.Enum("LineStatus", {"ACTIVE": "Active", "SUSPENDED": "Suspended",
                                   "PENDING_ACTIVATION": "Pending Activation", "CLOSED": "Closed"})
Line = r.Model("Line", {
    "line_id": _f(r.STR, "Unique identifier for the line"),
    "phone_number": _f(r.STR, "Phone number associated with the line"),
    "status": _f(LineStatus, "Current status of the line", "Pending Activation"),
    "plan_id": _f(r.STR, "Plan associated with this line"),
    "device_id": _f(r.Optional(r.STR), "Device associated with this line", None),
    "data_used_gb": _f(r.FLOAT, "Data used in the current billing cycle in gigabytes (GB)", 0.0),
    "data_refueling_gb": _f(r.FLOAT, "Data refueled in the current billing cycle in gigabytes (GB)", 0.0),
    "roaming_enabled": _f(r.BOOL, "Whether international roaming is enabled for this line", False),
    "contract_end_date": _f(r.Optional(r.DATE), "End date of the current contract", None),
    "last_plan_change_date": _f(r.Optional(r.DATE), "Date of the most recent plan change", None),
    "last_sim_replacement_date": _f(r.Optional(r.DATE), "Date of the most recent SIM card replacement", None),
    "suspension_start_date": _f(r.Optional(r.DATE), "Start date of the current suspension period", None),
}, **_NO_EXTRA)
LineItem = r.Model("LineItem", {
    "description": _f(r.STR, "Descriptive text for the line item"),
    "amount": _f(r.FLOAT, "Monetary amount in USD (positive for charges, negative for credits)"),
    "date": _f(r.DATE, "Date the line item was applied"),
    "item_type": _f(r.STR, "Category of the line item (e.g., Plan Charge, Overage, Fee, Credit, Payment)"),
}, **_NO_EXTRA)
BillStatus = r.Enum("BillStatus", {"DRAFT": "Draft", "ISSUED": "Issued", "AWAITING_PAYMENT": "Awaiting Payment",
                                   "PAID": "Paid", "OVERDUE": "Overdue", "DISPUTED": "Disputed"})
Bill = r.Model("Bill", {
    "bill_id": _f(r.STR, "Unique identifier for the bill"),
    "customer_id": _f(r.STR, "ID of the customer this bill belongs to"),
    "period_start": _f(r.DATE, "Start date of the billing period"),
    "period_end": _f(r.DATE, "End date of the billing period"),
    "issue_date": _f(r.DATE, "Date the bill was issued/generated"),
    "total_due": _f(r.FLOAT, "Total amount due in USD"),
    "due_date": _f(r.DATE, "Date by which payment is due"),
    "line_items": _f(r.ListOf(LineItem), "Individual charges, credits, and payments on this bill",
                     default_factory=list),
    "status": _f(BillStatus, "Current status of the bill", "Draft"),
}, **_NO_EXTRA)
AccountStatus = r.Enum("AccountStatus", {"ACTIVE": "Active", "SUSPENDED": "Suspended",
                                         "PENDING_VERIFICATION": "Pending Verification", "CLOSED": "Closed"})
PaymentMethodType = r.Enum("PaymentMethodType", {"CREDIT_CARD": "Credit Card", "DEBIT_CARD": "Debit Card",
                                                 "PAYPAL": "PayPal"})
PaymentMethod = r.Model("PaymentMethod", {
    "method_type": _f(PaymentMethodType, "Type of payment method"),
    "account_number_last_4": _f(r.STR, "Last 4 digits of the account number"),
    "expiration_date": _f(r.STR, "The expiration date of the payment method in the format MM/YYYY"),
}, **_NO_EXTRA)
Customer = r.Model("Customer", {
    "customer_id": _f(r.STR, "Unique identifier for the customer"),
    "full_name": _f(r.STR, "Customer's full name"),
    "date_of_birth": _f(r.STR, "Customer's date of birth for identity verification (format: YYYY-MM-DD)"),
    "email": _f(r.STR, "Customer's email address"),
    "phone_number": _f(r.STR, "Customer's primary contact phone number"),
    "address": _f(Address, "Customer's billing address"),
    "account_status": _f(AccountStatus, "Current status of the customer account", "Pending Verification"),
    "payment_methods": _f(r.ListOf(PaymentMethod), "Stored payment methods for this customer", default_factory=list),
    "line_ids": _f(r.ListOf(r.STR), "Phone/data lines owned by this customer", default_factory=list),
    "bill_ids": _f(r.ListOf(r.STR), "Bills associated with this customer", default_factory=list),
    "created_at": _f(r.DATETIME, "Date and time when the customer account was created", DEFAULT_START_DATE),
    "last_extension_date": _f(r.Optional(r.DATE), "Date of the most recent payment extension", None),
    "goodwill_credit_used_this_year": _f(r.FLOAT, "Amount of goodwill credit used in the current calendar year", 0.0),
}, **_NO_EXTRA)
TelecomDB = r.Model("TelecomDB", {
    "plans": _f(r.ListOf(Plan), "Available service plans", default_factory=list),
    "customers": _f(r.ListOf(Customer), "All customers in the system", default_factory=list),
    "lines": _f(r.ListOf(Line), "All lines in the system", default_factory=list),
    "bills": _f(r.ListOf(Bill), "All bills in the system", default_factory=list),
    "devices": _f(r.ListOf(Device), "All devices in the system", default_factory=list),
}, **_NO_EXTRA)


# -- the user's phone and surroundings -----------------------------------------------------------------

SimStatus = r.Enum("SimStatus", {"ACTIVE": "active", "MISSING": "missing", "LOCKED_PIN": "locked_pin",
                                 "LOCKED_PUK": "locked_puk"})
NetworkTechnology = r.Enum("NetworkTechnology", {"NONE": "none", "TWO_G": "2G", "THREE_G": "3G", "FOUR_G": "4G",
                                                 "FIVE_G": "5G"})
NetworkModePreference = r.Enum("NetworkModePreference", {
    "FOUR_G_5G_PREFERRED": "4g_5g_preferred", "FOUR_G_ONLY": "4g_only", "THREE_G_ONLY": "3g_only",
    "TWO_G_ONLY": "2g_only"})
SignalStrength = r.Enum("SignalStrength", {"NONE": "none", "POOR": "poor", "FAIR": "fair", "GOOD": "good",
                                           "EXCELLENT": "excellent"})
PerformanceLevel = r.Enum("PerformanceLevel", {"UNKNOWN": "unknown", "POOR": "poor", "FAIR": "fair", "GOOD": "good",
                                               "EXCELLENT": "excellent"})
NetworkStatus = r.Enum("NetworkStatus", {"CONNECTED": "connected", "SEARCHING": "searching",
                                         "NO_SERVICE": "no_service", "EMERGENCY_ONLY": "emergency_only"})
APNNames = r.Enum("APNNames", {"INTERNET": "internet", "BROKEN": "broken"})

APNSettings = r.Model("APNSettings", {
    "apn_name": _f(APNNames, "The name identifier for the APN connection.", "internet"),
    "reset_at_reboot": _f(r.BOOL, "Whether the APN settings will be reset at the next reboot.", False),
    "mms_apn": _f(r.Optional(r.STR), "Specific APN name used for MMS traffic, if different from general data.", "mms"),
    "mmsc_url": _f(r.Optional(r.STR), "The URL of the Multimedia Messaging Service Center (MMSC). Crucial for MMS.",
                   "http://mms.carrier.com/mms/wapenc"),
    "mms_proxy": _f(r.Optional(r.STR), "The proxy server address required for MMS traffic on some networks.", None),
    "mms_port": _f(r.Optional(r.INT), "The proxy server port required for MMS traffic on some networks.", None),
}, **_NO_EXTRA)
VpnDetails = r.Model("VpnDetails", {
    "server_address": _f(r.Optional(r.STR), "Address of the connected VPN server.", None),
    "protocol": _f(r.Optional(r.STR), "VPN protocol being used (e.g., WireGuard, OpenVPN).", None),
    "server_performance": _f(PerformanceLevel, "Estimated performance/latency of the VPN connection.", "unknown"),
}, **_NO_EXTRA)
AppPermissions = r.Model("AppPermissions", {
    "sms": _f(r.BOOL, "Permission to send/read SMS/MMS.", False),
    "storage": _f(r.BOOL, "Permission to access device storage.", False),
    "phone": _f(r.BOOL, "Permission to make/manage phone calls.", False),
    "network": _f(r.BOOL, "Permission to access network state/internet.", False),
}, **_NO_EXTRA)
AppStatus = r.Model("AppStatus", {
    "app_name": r.STR,
    "permissions": _f(AppPermissions, "Structured permissions relevant to the application.",
                      default_factory=lambda: AppPermissions()),
}, **_NO_EXTRA)


def _default_apps() -> dict[str, Any]:
    return {
        "messaging": AppStatus(app_name="messaging", permissions=AppPermissions(sms=True, storage=True, phone=True)),
        "browser": AppStatus(app_name="browser", permissions=AppPermissions(network=True, storage=True)),
    }


MockPhoneAttributes = r.Model("MockPhoneAttributes", {
    "sim_card_status": _f(SimStatus, "Current status of the physical or eSIM card.", "active"),
    "sim_card_missing": _f(r.BOOL, "Whether the SIM card is missing.", False),
    "airplane_mode": _f(r.BOOL, "Whether Airplane Mode, which disables all radios, is currently enabled.", False),
    "network_signal_strength": _f(SignalStrength, "Current strength of the cellular network signal.", "good"),
    "network_technology_connected": _f(NetworkTechnology, "The type of cellular network technology connected.", "5G"),
    "network_connection_status": _f(NetworkStatus, "High-level network status description.", "connected"),
    "battery_level": _f(r.INT, "The current battery level, from 0 to 100 percent.", 80),
    "data_enabled": _f(r.BOOL, "Whether the master switch for Mobile/Cellular Data usage is enabled.", True),
    "roaming_enabled": _f(r.BOOL, "Whether the user setting to allow data usage while roaming is enabled.", False),
    "network_mode_preference": _f(NetworkModePreference, "User's preferred network type.", "4g_5g_preferred"),
    "active_apn_settings": _f(APNSettings, "The currently active Access Point Name configuration.",
                              default_factory=lambda: APNSettings()),
    "wifi_enabled": _f(r.BOOL, "Whether the Wi-Fi radio is enabled.", False),
    "wifi_connected": _f(r.BOOL, "Whether the device is currently connected to a Wi-Fi network.", False),
    "wifi_ssid": _f(r.Optional(r.STR), "The name (SSID) of the connected Wi-Fi network, if any.", None),
    "wifi_signal_strength": _f(SignalStrength, "Strength of the connected Wi-Fi signal.", "none"),
    "wifi_calling_enabled": _f(r.BOOL, "Whether the Wi-Fi Calling feature is enabled.", False),
    "wifi_calling_mms_over_wifi": _f(r.BOOL, "Preference/capability to send/receive MMS over Wi-Fi.", False),
    "data_saver_mode": _f(r.BOOL, "Whether the system-wide Data Saver mode is enabled.", False),
    "vpn_enabled_setting": _f(r.BOOL, "Whether a VPN profile is configured.", False),
    "vpn_connected": _f(r.BOOL, "Whether there currently is an active VPN connection tunnel.", False),
    "vpn_details": _f(r.Optional(VpnDetails), "Details about the active VPN connection, if connected.", None),
    "app_statuses": _f(r.DictOf(AppStatus), "Status of specific applications relevant to troubleshooting.",
                       default_factory=_default_apps),
}, **_NO_EXTRA)
PaymentRequest = r.Model("PaymentRequest", {
    "bill_id": _f(r.STR, "The ID of the bill."),
    "amount_due": _f(r.FLOAT, "The amount of the payment in USD."),
    "paid": _f(r.BOOL, "Whether the payment has been made.", False),
}, **_NO_EXTRA)
UserSurroundings = r.Model("UserSurroundings", {
    "name": _f(r.Optional(r.STR), "The name of the user.", None),
    "phone_number": _f(r.Optional(r.STR), "The phone number of the user.", None),
    "is_abroad": _f(r.BOOL, "Whether the user is currently abroad.", False),
    "roaming_allowed": _f(r.BOOL, "Whether the user is allowed to roam.", False),
    "signal_strength": _f(r.DictOf(SignalStrength, keys=NetworkTechnology),
                          "Signal strength for each network technology where the user is located.",
                          default_factory=lambda: {"2G": "poor", "3G": "fair", "4G": "good", "5G": "excellent"}),
    "mobile_data_usage_exceeded": _f(r.BOOL, "Whether the user has exceeded their data usage limit.", False),
    "line_active": _f(r.BOOL, "Whether the user has an active line.", True),
    "payment_request": _f(r.Optional(PaymentRequest), "The payment that the agent has requested.", None),
}, **_NO_EXTRA)
TelecomUserDB = r.Model("TelecomUserDB", {
    "device": _f(MockPhoneAttributes, "Mock phone device", default_factory=lambda: MockPhoneAttributes()),
    "surroundings": _f(UserSurroundings, "User's physical surroundings", default_factory=lambda: UserSurroundings()),
}, **_NO_EXTRA)


# -- the agent's tools ---------------------------------------------------------------------------------

def _ids(*pairs: tuple[str, str]) -> tuple[Param, ...]:
    return tuple(Param(name, "string", description) for name, description in pairs)


_OWNER_OF_LINE = ("customer_id", "ID of the customer who owns the line.")


class TelecomTools(ToolKit):
    """The agent's tools (upstream's ``TelecomTools``)."""

    @classmethod
    def db_model(cls) -> r.Model:
        return TelecomDB

    # -- look-ups --------------------------------------------------------------------------------

    @tool("read", "Finds a customer by their primary contact or line phone number.",
          Param("phone_number", "string", "The phone number to search for."))
    def get_customer_by_phone(self, phone_number: Any) -> Any:
        for customer in self.db["customers"]:
            if customer["phone_number"] == phone_number:
                return ModelOut(customer)
            for line_id in customer["line_ids"]:
                line = self._get_line_by_id(line_id)
                if line and line["phone_number"] == phone_number:
                    return ModelOut(customer)
        raise ValueError(f"Customer with phone number {phone_number} not found")

    @tool("read", "Retrieves a customer directly by their unique ID.",
          Param("customer_id", "string", "The unique identifier of the customer."))
    def get_customer_by_id(self, customer_id: Any) -> Any:
        return ModelOut(self._customer(customer_id))

    def _customer(self, customer_id: Any) -> dict[str, Any]:
        for customer in self.db["customers"]:
            if customer["customer_id"] == customer_id:
                return customer
        raise ValueError(f"Customer with ID {customer_id} not found")

    @tool("read", "Searches for customers by name and DOB. May return multiple matches if names are similar,\n\n"
          "DOB helps disambiguate.",
          Param("full_name", "string", "The full name of the customer."),
          Param("dob", "string", "Date of birth for verification, in the format YYYY-MM-DD."))
    def get_customer_by_name(self, full_name: Any, dob: Any) -> Any:
        return [ModelOut(c) for c in self.db["customers"]
                if c["full_name"].lower() == full_name.lower() and c["date_of_birth"] == dob]

    def _find(self, table: str, key: str, value: Any, what: str) -> dict[str, Any]:
        for item in self.db[table]:
            if item[key] == value:
                return item
        raise ValueError(f"{what} {value} not found")

    def _get_line_by_phone(self, phone_number: Any) -> dict[str, Any]:
        return self._find("lines", "phone_number", phone_number, "Line with phone number")

    def _get_line_by_id(self, line_id: Any) -> dict[str, Any]:
        return self._find("lines", "line_id", line_id, "Line with ID")

    def _get_plan_by_id(self, plan_id: Any) -> dict[str, Any]:
        return self._find("plans", "plan_id", plan_id, "Plan with ID")

    def _get_device_by_id(self, device_id: Any) -> dict[str, Any]:
        return self._find("devices", "device_id", device_id, "Device with ID")

    def _get_bill_by_id(self, bill_id: Any) -> dict[str, Any]:
        return self._find("bills", "bill_id", bill_id, "Bill with ID")

    def _get_target_line(self, customer_id: Any, line_id: Any) -> dict[str, Any]:
        customer = self._customer(customer_id)
        if line_id not in customer["line_ids"]:
            raise ValueError(f"Line {line_id} not found for customer {customer_id}")
        return self._get_line_by_id(line_id)

    @env_function
    def get_available_plan_ids(self) -> list[str]:
        return [plan["plan_id"] for plan in self.db["plans"]]

    @tool("read", "Retrieves the details for a given ID.\n\nThe ID must be a valid ID for a Customer, Line, Device, "
          "Bill, or Plan.",
          Param("id", "string", "The ID of the object to retrieve."))
    def get_details_by_id(self, id: Any) -> Any:
        if id.startswith("L"):
            return ModelOut(self._get_line_by_id(id))
        if id.startswith("D"):
            return ModelOut(self._get_device_by_id(id))
        if id.startswith("B"):
            return ModelOut(self._get_bill_by_id(id))
        if id.startswith("C"):
            return ModelOut(self._customer(id))
        if id.startswith("P"):
            return ModelOut(self._get_plan_by_id(id))
        raise ValueError(f"Unknown ID format or type: {id}")

    # -- lines -----------------------------------------------------------------------------------

    @tool("write", "Suspends a specific line (max 6 months).\n\nChecks: Line status must be Active.\n"
          "Logic: Sets line status to Suspended, records suspension_start_date.",
          *_ids(_OWNER_OF_LINE, ("line_id", "ID of the line to suspend."), ("reason", "Reason for suspension.")))
    def suspend_line(self, customer_id: Any, line_id: Any, reason: Any) -> Any:
        target_line = self._get_target_line(customer_id, line_id)
        if target_line["status"] != "Active":
            raise ValueError("Line must be active to suspend")
        target_line["status"] = "Suspended"
        target_line["suspension_start_date"] = _today()
        return {"message": "Line suspended successfully. $5/month holding fee will apply.",
                "line": ModelOut(target_line)}

    @tool("write", "Resumes a suspended line.\n\nChecks: Line status must be Suspended or Pending Activation.\n"
          "Logic: Sets line status to Active, clears suspension_start_date.",
          *_ids(_OWNER_OF_LINE, ("line_id", "ID of the line to resume.")))
    def resume_line(self, customer_id: Any, line_id: Any) -> Any:
        target_line = self._get_target_line(customer_id, line_id)
        if target_line["status"] not in ("Suspended", "Pending Activation"):
            raise ValueError("Line must be suspended to resume")
        target_line["status"] = "Active"
        target_line["suspension_start_date"] = None
        return {"message": "Line resumed successfully", "line": ModelOut(target_line)}

    # -- bills -----------------------------------------------------------------------------------

    @tool("read", "Retrieves a list of the customer's bills, most recent first.",
          Param("customer_id", "string", "ID of the customer."),
          Param("limit", "integer", "Maximum number of bills to return.", default=12))
    def get_bills_for_customer(self, customer_id: Any, limit: Any = 12) -> Any:
        customer = self._customer(customer_id)
        bills = [self._get_bill_by_id(bill_id) for bill_id in customer["bill_ids"]]
        ordered = sorted(bills, key=lambda bill: bill["issue_date"], reverse=True)
        return [ModelOut(b) for b in ordered[:limit]]

    @tool("write", "Sends a payment request to the customer for a specific bill.\n\nChecks:\n    - Customer exists\n"
          "    - Bill exists and belongs to the customer\n    - No other bills are already awaiting payment for this "
          "customer\nLogic: Sets bill status to AWAITING_PAYMENT and notifies customer.\nWarning: This method does "
          "not check if the bill is already PAID.\nAlways check the bill status before calling this method.",
          *_ids(("customer_id", "ID of the customer who owns the bill."),
                ("bill_id", "ID of the bill to send payment request for.")))
    def send_payment_request(self, customer_id: Any, bill_id: Any) -> Any:
        customer = self._customer(customer_id)
        if self._get_bills_awaiting_payment(customer):
            raise ValueError("A bill is already awaiting payment for this customer")
        if bill_id not in customer["bill_ids"]:
            raise ValueError(f"Bill {bill_id} not found for customer {customer_id}")
        bill = self._get_bill_by_id(bill_id)
        bill["status"] = "Awaiting Payment"
        return f"Payment request sent to the customer for bill {bill['bill_id']}"

    def _get_bills_awaiting_payment(self, customer: dict[str, Any]) -> list[dict[str, Any]]:
        bills = []
        for bill_id in customer["bill_ids"]:
            bill = self._get_bill_by_id(bill_id)
            if bill and bill["status"] == "Awaiting Payment":
                bills.append(bill)
        return bills

    def _set_bill_to_paid(self, bill_id: Any) -> None:
        self._get_bill_by_id(bill_id)["status"] = "Paid"

    def _apply_one_time_charge(self, customer_id: Any, amount: Any, description: str) -> None:
        customer = self._customer(customer_id)
        draft_bill = None
        for bill_id in customer["bill_ids"]:
            bill = self._get_bill_by_id(bill_id)
            if bill and bill["status"] == "Draft":
                draft_bill = bill
                break
        if not draft_bill:
            next_month = (TODAY.replace(day=1) + dt.timedelta(days=32)).replace(day=1)
            period_end = next_month.replace(
                month=next_month.month + 1 if next_month.month < 12 else 1,
                year=next_month.year if next_month.month < 12 else next_month.year + 1,
            ) - dt.timedelta(days=1)
            new_bill_id = f"B{uuid.uuid4().hex[:8]}"  # upstream's id: random, as there
            draft_bill = Bill(bill_id=new_bill_id, customer_id=customer_id, period_start=next_month,
                              period_end=period_end, issue_date=next_month, total_due=0,
                              due_date=next_month + dt.timedelta(days=14), status="Draft")
            self.db["bills"].append(draft_bill)
            customer["bill_ids"].append(new_bill_id)
        draft_bill["line_items"].append(LineItem(description=description, amount=amount, date=TODAY,
                                                 item_type="Credit" if amount < 0 else "Charge"))
        draft_bill["total_due"] += amount

    # -- usage and roaming -----------------------------------------------------------------------

    @tool("read", "Retrieves current billing cycle data usage for a line, including data\n\n"
          "refueling amount, data limit, and cycle end date.",
          *_ids(_OWNER_OF_LINE, ("line_id", "ID of the line to check usage for.")))
    def get_data_usage(self, customer_id: Any, line_id: Any) -> Any:
        target_line = self._get_target_line(customer_id, line_id)
        plan = self._get_plan_by_id(target_line["plan_id"])
        cycle_end = dt.date(TODAY.year, TODAY.month + 1 if TODAY.month < 12 else 1, 1) - dt.timedelta(days=1)
        return {
            "line_id": line_id,
            "data_used_gb": target_line["data_used_gb"],
            "data_limit_gb": plan["data_limit_gb"],
            "data_refueling_gb": target_line["data_refueling_gb"],
            "cycle_end_date": cycle_end.isoformat(),
        }

    @env_function
    def set_data_usage(self, customer_id: Any, line_id: Any, data_used_gb: Any) -> str:
        target_line = self._get_target_line(customer_id, line_id)
        target_line["data_used_gb"] = data_used_gb
        return f"Data usage set to {data_used_gb} GB for line {line_id}"

    @tool("write", "Enables international roaming on a line.",
          *_ids(_OWNER_OF_LINE, ("line_id", "ID of the line to enable roaming for.")))
    def enable_roaming(self, customer_id: Any, line_id: Any) -> Any:
        target_line = self._get_target_line(customer_id, line_id)
        if target_line["roaming_enabled"]:
            return "Roaming was already enabled"
        target_line["roaming_enabled"] = True
        return "Roaming enabled successfully"

    @tool("write", "Disables international roaming on a line.",
          *_ids(_OWNER_OF_LINE, ("line_id", "ID of the line to disable roaming for.")))
    def disable_roaming(self, customer_id: Any, line_id: Any) -> Any:
        target_line = self._get_target_line(customer_id, line_id)
        if not target_line["roaming_enabled"]:
            return "Roaming was already disabled"
        target_line["roaming_enabled"] = False
        return "Roaming disabled successfully"

    @tool("generic", TRANSFER_DESCRIPTION, TRANSFER_PARAM)
    def transfer_to_human_agents(self, summary: Any) -> Any:
        return "Transfer successful"

    @tool("write", "Refuels data for a specific line, adding to the customer's bill.\n\n"
          "Checks: Line status must be Active, Customer owns the line.\n"
          "Logic: Adds data to the line and charges customer based on the plan's refueling rate.",
          *_ids(_OWNER_OF_LINE, ("line_id", "ID of the line to refuel data for.")),
          Param("gb_amount", "number", "Amount of data to add in gigabytes."))
    def refuel_data(self, customer_id: Any, line_id: Any, gb_amount: Any) -> Any:
        target_line = self._get_target_line(customer_id, line_id)
        if gb_amount <= 0:
            raise ValueError("Refuel amount must be positive")
        plan = self._get_plan_by_id(target_line["plan_id"])
        if not plan:
            raise ValueError("Plan not found for this line")
        charge_amount = gb_amount * plan["data_refueling_price_per_gb"]
        target_line["data_refueling_gb"] += gb_amount
        self._apply_one_time_charge(
            customer_id, charge_amount,
            f"Data refueling: {gb_amount} GB at ${plan['data_refueling_price_per_gb']}/GB",
        )
        return {
            "message": f"Successfully added {gb_amount} GB of data for line {line_id} for ${charge_amount:.2f}",
            "new_data_refueling_gb": target_line["data_refueling_gb"],
            "charge": charge_amount,
        }

    # -- what tasks set up and assert ------------------------------------------------------------

    @env_function
    def suspend_line_for_overdue_bill(self, customer_id: Any, line_id: Any, new_bill_id: Any,
                                      contract_ended: Any) -> str:
        line = self._get_line_by_id(line_id)
        if line["status"] != "Active":
            raise ValueError("Line must be active to suspend for unpaid bill")
        plan = self._get_plan_by_id(line["plan_id"])
        amount = plan["price_per_month"]
        description = f"Charge for line {line['line_id']}"
        if amount <= 0:
            raise ValueError("Amount must be positive for overdue bill")
        customer = self._customer(customer_id)
        for bill_id in customer["bill_ids"]:
            if self._get_bill_by_id(bill_id)["status"] == "Overdue":
                raise ValueError("Customer already has an overdue bill")
        last_day_of_last_month = TODAY.replace(day=1) - dt.timedelta(days=1)
        first_day_of_last_month = last_day_of_last_month.replace(day=1)
        overdue_bill = Bill(bill_id=new_bill_id, customer_id=customer_id, period_start=first_day_of_last_month,
                            period_end=last_day_of_last_month, issue_date=first_day_of_last_month, total_due=0,
                            due_date=first_day_of_last_month + dt.timedelta(days=14), status="Overdue")
        overdue_bill["line_items"].append(LineItem(description=description, amount=amount, date=TODAY,
                                                   item_type="Charge" if amount > 0 else "Credit"))
        overdue_bill["total_due"] += amount
        self.db["bills"].append(overdue_bill)
        customer["bill_ids"].append(new_bill_id)
        line["status"] = "Suspended"
        line["suspension_start_date"] = _today()
        if contract_ended:
            line["contract_end_date"] = str(last_day_of_last_month)
        return f"Line {line_id} suspended for unpaid bill {new_bill_id}. Contract ended: {contract_ended}"

    @env_function
    def assert_data_refueling_amount(self, customer_id: Any, line_id: Any, expected_amount: Any) -> bool:
        return bool(abs(self._get_target_line(customer_id, line_id)["data_refueling_gb"] - expected_amount) < 1e-6)

    @env_function
    def assert_line_status(self, customer_id: Any, line_id: Any, expected_status: Any) -> bool:
        return bool(self._get_target_line(customer_id, line_id)["status"] == expected_status)

    @env_function
    def assert_overdue_bill_exists(self, customer_id: Any, overdue_bill_id: Any) -> bool:
        customer = self._customer(customer_id)
        if overdue_bill_id not in customer["bill_ids"]:
            raise ValueError(f"Overdue bill {overdue_bill_id} not found")
        if self._get_bill_by_id(overdue_bill_id)["status"] != "Overdue":
            raise ValueError(f"Overdue bill {overdue_bill_id} is not overdue")
        return True

    @env_function
    def assert_no_overdue_bill(self, overdue_bill_id: Any) -> bool:
        try:
            bill = self._get_bill_by_id(overdue_bill_id)
            if bill["status"] == "Paid":
                return True
        except ValueError:
            return True
        return False


# -- the user's tools ----------------------------------------------------------------------------------

_SIGNAL_BARS = {"none": "📵 No Signal", "poor": "📶¹ Poor", "fair": "📶² Fair", "good": "📶³ Good",
                "excellent": "📶⁴ Excellent"}
_SPEEDS = {"2G": (0.1, 0.4), "3G": (1.0, 5.0), "4G": (10.0, 100.0), "5G": (50.0, 500.0), "none": (0.0, 0.0)}
_SIGNAL_FACTORS = {"poor": 0.2, "fair": 0.5, "good": 0.8, "excellent": 1.0, "none": 0.0}
_SPEED_ADVICE = {
    "Very Poor": "Connection is very slow. Basic web browsing might be difficult.",
    "Poor": "Connection is slow. Web browsing may be sluggish, streaming difficult.",
    "Fair": "Connection is okay for web browsing and some standard definition streaming.",
    "Good": "Connection is good for most activities, including HD streaming.",
    "Excellent": "Connection is very fast.",
}
_SIM_TEXT = {
    "active": "Your SIM card is active and working.",
    "missing": "No SIM card detected in the phone.",
    "locked_pin": "The SIM card is locked with a PIN code.",
    "locked_puk": "The SIM card is locked with a PUK code.",
}
_NO_SERVICE = {"network_connection_status": "no_service", "network_technology_connected": "none",
               "network_signal_strength": "none"}

#: ``set_network_mode_preference``'s parameter: ``Union[NetworkModePreference, str]``, as pydantic renders it.
MODE_PARAM = Param(
    "mode", "raw", None,
    raw=(("anyOf", [{"$ref": "#/$defs/NetworkModePreference"}, {"type": "string"}]), ("title", "Mode")),
    raw_defs=(("NetworkModePreference", {"enum": list(NetworkModePreference.values), "title": "NetworkModePreference",
                                         "type": "string"}),),
)


def _optional(json_type: str, default: Any, description: str, title: str) -> dict[str, Any]:
    return {"anyOf": [{"type": json_type}, {"type": "null"}], "default": default, "description": description,
            "title": title}


#: ``set_apn_settings``'s parameter: ``Union[APNSettings, dict]``, as pydantic renders it.
APN_PARAM = Param(
    "apn_settings", "raw", None,
    raw=(("anyOf", [{"$ref": "#/$defs/APNSettings"}, {"additionalProperties": True, "type": "object"}]),
         ("title", "Apn Settings")),
    raw_defs=(
        ("APNNames", {"enum": list(APNNames.values), "title": "APNNames", "type": "string"}),
        ("APNSettings", {
            "additionalProperties": False,
            "description": "Represents the configuration for a single Access Point Name (APN).",
            "properties": {
                "apn_name": {"$ref": "#/$defs/APNNames", "default": "internet",
                             "description": "The name identifier for the APN connection."},
                "reset_at_reboot": {"default": False,
                                    "description": "Whether the APN settings will be reset at the next reboot.",
                                    "title": "Reset At Reboot", "type": "boolean"},
                "mms_apn": _optional("string", "mms", "Specific APN name used for MMS traffic, if different from "
                                     "general data.", "Mms Apn"),
                "mmsc_url": _optional("string", "http://mms.carrier.com/mms/wapenc", "The URL of the Multimedia "
                                      "Messaging Service Center (MMSC). Crucial for MMS.", "Mmsc Url"),
                "mms_proxy": _optional("string", None, "The proxy server address required for MMS traffic on some "
                                       "networks.", "Mms Proxy"),
                "mms_port": _optional("integer", None, "The proxy server port required for MMS traffic on some "
                                      "networks.", "Mms Port"),
            },
            "title": "APNSettings",
            "type": "object",
        }),
    ),
)


class TelecomUserTools(ToolKit):
    """The user's tools: their phone (upstream's ``TelecomUserTools``)."""

    #: Upstream's class attribute ``default_vpn_details``: one object, which ``connect_vpn`` puts on the phone
    #: and ``break_vpn`` then degrades in place, so a later connection in the same process is degraded too.
    default_vpn_details: dict[str, Any] = VpnDetails(server_address="192.168.1.1", protocol="OpenVPN",
                                                     server_performance="excellent")

    @classmethod
    def db_model(cls) -> r.Model:
        return TelecomUserDB

    @property
    def device(self) -> dict[str, Any]:
        return self.field("device")

    @property
    def surroundings(self) -> dict[str, Any]:
        return self.field("surroundings")

    # -- user info -------------------------------------------------------------------------------

    @env_function
    def set_user_info(self, name: Any, phone_number: Any) -> None:
        self.surroundings["name"] = name
        self.surroundings["phone_number"] = phone_number

    @env_function
    def set_user_location(self, abroad: Any) -> None:
        self.surroundings["is_abroad"] = abroad

    # -- status bar and network ------------------------------------------------------------------

    @tool("read", "Shows what icons are currently visible in your phone's status bar (the area at the top of the "
          "screen). Displays network signal strength, mobile data status (enabled, disabled, data saver), Wi-Fi "
          "status, and battery level.")
    def check_status_bar(self) -> Any:
        return f"Status Bar: {self._check_status_bar()}"

    def _check_status_bar(self) -> str:
        device = self.device
        indicators = []
        if device["airplane_mode"]:
            indicators.append("✈️ Airplane Mode")
        else:
            indicators.append(_SIGNAL_BARS.get(device["network_signal_strength"], "📵 No Signal"))
            if device["network_technology_connected"] != "none":
                indicators.append(device["network_technology_connected"])
            if device["data_enabled"] and device["network_technology_connected"] != "none":
                indicators.append("📱 Data Enabled")
                if device["data_saver_mode"]:
                    indicators.append("🔽 Data Saver")
            else:
                indicators.append("📵 Data Disabled")
        if device["wifi_enabled"] and device["wifi_connected"]:
            indicators.append(f"📡 Connected to {device['wifi_ssid']}" if device["wifi_ssid"] else "📡 Enabled")
        if device["vpn_connected"]:
            indicators.append("🔒 VPN Connected")
        indicators.append(f"🔋 {device['battery_level']}%")
        return " | ".join(indicators)

    def _status(self, update: str) -> str:
        return f"{update}\nStatus Bar: {self._check_status_bar()}"

    @tool("read", "Checks your phone's connection status to cellular networks and Wi-Fi. Shows airplane mode "
          "status, signal strength, network type, whether mobile data is enabled, and whether data roaming is "
          "enabled.")
    def check_network_status(self) -> Any:
        device = self.device
        lines = [
            f"Airplane Mode: {'ON' if device['airplane_mode'] else 'OFF'}",
            f"SIM Card Status: {self._check_sim_status()}",
            f"Cellular Connection: {device['network_connection_status']}",
            f"Cellular Signal: {device['network_signal_strength']}",
            f"Cellular Network Type: {device['network_technology_connected']}",
            f"Mobile Data Enabled: {'Yes' if device['data_enabled'] else 'No'}",
            f"Data Roaming Enabled: {'Yes' if device['roaming_enabled'] else 'No'}",
            f"Wi-Fi Radio: {'ON' if device['wifi_enabled'] else 'OFF'}",
            f"Wi-Fi Connected: {'Yes' if device['wifi_connected'] else 'No'}",
        ]
        if device["wifi_connected"]:
            lines.append(f"Connected Wi-Fi Network: {device['wifi_ssid']}")
        return "\n".join(lines)

    @tool("read", "Shows the current network mode preference.")
    def check_network_mode_preference(self) -> Any:
        return f"Network Mode Preference: {self.device['network_mode_preference']}"

    @tool("write", "Changes the type of cellular network your phone prefers to connect to (e.g., 5G, LTE/4G, 3G). "
          "Higher-speed networks (LTE/5G) provide faster data but may use more battery.", MODE_PARAM)
    def set_network_mode_preference(self, mode: Any) -> Any:
        if isinstance(mode, str) and mode not in NetworkModePreference.values:
            return (f"Failed to set network mode: '{mode}' is not a valid option. Please use one of: "
                    f"{', '.join(NetworkModePreference.values)}\nStatus Bar: {self._check_status_bar()}")
        self.device["network_mode_preference"] = mode
        self.simulate_network_search()
        if not isinstance(mode, str):  # upstream stores it, then fails reading its ``.value``
            raise AttributeError(f"'{type(mode).__name__}' object has no attribute 'value'")
        return self._status(f"Preferred Network Mode set to: {mode}")

    def _get_mobile_data_working(self) -> bool:
        device, surroundings = self.device, self.surroundings
        if device["airplane_mode"] or device["network_signal_strength"] == "none":
            return False
        if device["network_connection_status"] == "no_service":
            return False
        if surroundings["is_abroad"] and (not device["roaming_enabled"] or not surroundings["roaming_allowed"]):
            return False
        if not device["data_enabled"]:
            return False
        return not surroundings["mobile_data_usage_exceeded"]

    @tool("read", "Measures your current internet connection speed (download speed). Provides information about "
          "connection quality and what activities it can support.")
    def run_speed_test(self) -> Any:
        speed, description = self._run_speed_test()
        if speed is None:
            return f"Speed test failed: {description or 'Could not determine speed'}."
        return f"Speed Test Result: {speed:.2f} Mbps ({description}). {_SPEED_ADVICE.get(description or '', '')}"

    def _run_speed_test(self) -> tuple[float | None, str | None]:
        if not self._get_mobile_data_working():
            return None, "No Connection"
        device = self.device
        vpn = device["vpn_details"]
        base_speed_factor = 0.1 if device["vpn_connected"] and vpn and vpn["server_performance"] == "poor" else 1.0
        if device["data_saver_mode"]:
            base_speed_factor *= 0.2
        min_speed, max_speed = _SPEEDS.get(device["network_technology_connected"], (0.0, 0.0))
        signal_factor = _SIGNAL_FACTORS.get(device["network_signal_strength"], 0.0)
        speed = round((min_speed + max_speed) / 2.0 * signal_factor * base_speed_factor, 2)
        if speed < 1:
            return speed, "Very Poor"
        if speed < 5:
            return speed, "Poor"
        if speed < 25:
            return speed, "Fair"
        if speed < 100:
            return speed, "Good"
        return speed, "Excellent"

    # -- airplane mode ---------------------------------------------------------------------------

    @tool("write", "Toggles Airplane Mode ON or OFF. When ON, it disconnects all wireless communications including "
          "cellular, Wi-Fi, and Bluetooth.\n\nReturns the new state of airplane_mode.")
    def toggle_airplane_mode(self) -> Any:
        new_state = self._toggle_airplane_mode()
        return self._status(f"Airplane Mode is now {'ON' if new_state else 'OFF'}.")

    def _toggle_airplane_mode(self) -> Any:
        device = self.device
        was_on = device["airplane_mode"]
        device["airplane_mode"] = not was_on
        if was_on:
            device["network_connection_status"] = "searching"
            if device["wifi_enabled"]:
                device.update(wifi_connected=False, wifi_ssid=None, wifi_signal_strength="none")
        else:
            device.update(wifi_connected=False, wifi_ssid=None, wifi_signal_strength="none")
            if device["vpn_connected"]:
                self._disconnect_vpn()
        self.simulate_network_search()
        return device["airplane_mode"]

    @env_function
    def turn_airplane_mode_on(self) -> str:
        if not self._toggle_airplane_mode():
            self._toggle_airplane_mode()
        return "Airplane Mode is now ON."

    @env_function
    def turn_airplane_mode_off(self) -> str:
        if self._toggle_airplane_mode():
            self._toggle_airplane_mode()
        return "Airplane Mode is now OFF."

    # -- SIM card --------------------------------------------------------------------------------

    @tool("read", "Checks if your SIM card is working correctly and displays its current status. Shows if the SIM "
          "is active, missing, or locked with a PIN or PUK code.")
    def check_sim_status(self) -> Any:
        status = self._check_sim_status()
        return _SIM_TEXT.get(status, f"Unknown SIM status: {status}")

    def _check_sim_status(self) -> Any:
        return "missing" if self.device["sim_card_missing"] else self.device["sim_card_status"]

    @tool("write", "Simulates removing and reinserting your SIM card. This can help resolve recognition issues.")
    def reseat_sim_card(self) -> Any:
        self.device["sim_card_missing"] = False
        self.simulate_network_search()
        assert self._check_sim_status() != "missing"
        return self._status("SIM card re-seated successfully.")

    @env_function
    def unseat_sim_card(self) -> str:
        self.device["sim_card_missing"] = True
        self.simulate_network_search()
        return "SIM card un-seated successfully."

    @env_function
    def lock_sim_card(self, mode: Any) -> str:
        if mode == "pin":
            self.device["sim_card_status"] = "locked_pin"
        elif mode == "puk":
            self.device["sim_card_status"] = "locked_puk"
        self.simulate_network_search()
        return f"SIM card locked successfully in {mode} mode."

    # -- mobile data and roaming -----------------------------------------------------------------

    @tool("write", "Toggles your phone's mobile data connection ON or OFF. Controls whether your phone can use "
          "cellular data for internet access when Wi-Fi is unavailable.\n\nReturns the new data connection status.")
    def toggle_data(self) -> Any:
        return self._status(f"Mobile Data is now {'ON' if self._toggle_data() else 'OFF'}.")

    def _toggle_data(self) -> bool:
        new_state = not self.device["data_enabled"]
        self.device["data_enabled"] = new_state
        self.simulate_network_search()
        return new_state

    @env_function
    def turn_data_on(self) -> str:
        self.device["data_enabled"] = True
        return "Data connection restored."

    @env_function
    def turn_data_off(self) -> str:
        if self._toggle_data():
            self._toggle_data()
        return "Data connection broken."

    @tool("write", "Toggles Data Roaming ON or OFF. When ON, your phone can use data networks in areas outside your "
          "carrier's coverage.\n\nReturns the new data roaming status.")
    def toggle_roaming(self) -> Any:
        return self._status(f"Data Roaming is now {'ON' if self._toggle_roaming() else 'OFF'}.")

    def _toggle_roaming(self) -> bool:
        new_state = not self.device["roaming_enabled"]
        self.device["roaming_enabled"] = new_state
        self.simulate_network_search()
        return new_state

    @env_function
    def turn_roaming_on(self) -> str:
        if not self._toggle_roaming():
            self._toggle_roaming()
        return "Data Roaming is now ON."

    @env_function
    def turn_roaming_off(self) -> str:
        if self._toggle_roaming():
            self._toggle_roaming()
        return "Data Roaming is now OFF."

    @tool("read", "Checks if your phone has any data-limiting features active. Shows if Data Saver mode is on.")
    def check_data_restriction_status(self) -> Any:
        if self.device["data_saver_mode"]:
            return "Data Saver mode is ON (limits data usage)."
        return "Data Saver mode is OFF."

    @tool("write", "Toggles Data Saver mode ON or OFF. When ON, it reduces data usage, which may affect data speed."
          "\n\nReturns the new data saver mode status.")
    def toggle_data_saver_mode(self) -> Any:
        return self._status(f"Data Saver Mode is now {'ON' if self._toggle_data_saver_mode() else 'OFF'}.")

    def _toggle_data_saver_mode(self) -> bool:
        new_state = not self.device["data_saver_mode"]
        self.device["data_saver_mode"] = new_state
        return new_state

    @env_function
    def turn_data_saver_mode_on(self) -> str:
        if not self._toggle_data_saver_mode():
            self._toggle_data_saver_mode()
        return "Data Saver Mode is now ON."

    @env_function
    def turn_data_saver_mode_off(self) -> str:
        if self._toggle_data_saver_mode():
            self._toggle_data_saver_mode()
        return "Data Saver Mode is now OFF."

    # -- APN settings ----------------------------------------------------------------------------

    @tool("read", "Checks the technical APN settings your phone uses to connect to your carrier's mobile data "
          "network. Shows current APN name and MMSC URL for picture messaging.")
    def check_apn_settings(self) -> Any:
        settings = self.device["active_apn_settings"]
        return (f"Current APN Name: {settings['apn_name'] or 'Not Set'}\nMMSC URL (for picture messages): "
                f"{settings['mmsc_url'] or 'Not Set'}\n(These are technical settings, usually best left unchanged.)")

    @tool("write", "Sets the APN settings for the phone.", APN_PARAM)
    def set_apn_settings(self, apn_settings: Any) -> Any:
        if isinstance(apn_settings, dict):
            if not all(isinstance(k, str) for k in apn_settings):
                raise TypeError("keywords must be strings")
            apn_settings = APNSettings.validate(apn_settings)
        self.device["active_apn_settings"] = apn_settings
        if not isinstance(apn_settings, dict):  # upstream stores it, then fails reading its ``.apn_name``
            raise AttributeError(f"'{type(apn_settings).__name__}' object has no attribute 'apn_name'")
        update = f"APN settings set to: {apn_settings['apn_name']}"
        self.simulate_network_search()
        return self._status(update)

    @tool("write", "Resets your APN settings to the default settings.")
    def reset_apn_settings(self) -> Any:
        self.device["active_apn_settings"]["reset_at_reboot"] = True
        self.simulate_network_search()
        return self._status("APN settings will reset at reboot.")

    @env_function
    def break_apn_settings(self) -> str:
        self.device["active_apn_settings"]["apn_name"] = "broken"
        self.simulate_network_search()
        return "APN settings broken. Please call reset_apn_settings() to fix."

    @env_function
    def break_apn_mms_setting(self) -> str:
        self.device["active_apn_settings"]["mmsc_url"] = None
        return "APN MMS setting broken. Please call reset_apn_settings() to fix."

    # -- Wi-Fi and Wi-Fi calling -----------------------------------------------------------------

    @tool("read", "Checks your Wi-Fi connection status. Shows if Wi-Fi is turned on, which network you're connected "
          "to (if any), and the signal strength.")
    def check_wifi_status(self) -> Any:
        device = self.device
        if not device["wifi_enabled"]:
            return "Wi-Fi is turned OFF."
        if device["wifi_connected"]:
            return (f"Wi-Fi is ON and connected to '{device['wifi_ssid']}'. Signal strength: "
                    f"{device['wifi_signal_strength']}.")
        return "Wi-Fi is ON but not connected to any network."

    @tool("write", "Toggles your phone's Wi-Fi radio ON or OFF. Controls whether your phone can discover and connect "
          "to wireless networks for internet access.\n\nReturns the new Wi-Fi status.")
    def toggle_wifi(self) -> Any:
        device = self.device
        if device["airplane_mode"]:
            return self._status("Cannot change Wi-Fi settings while Airplane Mode is ON.")
        new_state = not device["wifi_enabled"]
        device["wifi_enabled"] = new_state
        if not new_state:
            device.update(wifi_connected=False, wifi_ssid=None, wifi_signal_strength="none")
        return self._status(f"Wi-Fi is now {'ON' if new_state else 'OFF'}.")

    @tool("read", "Checks if Wi-Fi Calling is enabled on your device. This feature allows you to make and receive "
          "calls over a Wi-Fi network instead of using the cellular network.")
    def check_wifi_calling_status(self) -> Any:
        return f"Wi-Fi Calling is currently turned {'ON' if self.device['wifi_calling_enabled'] else 'OFF'}."

    @tool("write", "Toggles Wi-Fi Calling ON or OFF. This feature allows you to make and receive calls over Wi-Fi "
          "instead of the cellular network, which can help in areas with weak cellular signal.\n\n"
          "Returns the new Wi-Fi Calling status.")
    def toggle_wifi_calling(self) -> Any:
        return self._status(f"Wi-Fi Calling is now {'ON' if self._toggle_wifi_calling() else 'OFF'}.")

    def _toggle_wifi_calling(self) -> bool:
        new_state = not self.device["wifi_calling_enabled"]
        self.device["wifi_calling_enabled"] = new_state
        return new_state

    @env_function
    def set_wifi_calling(self, enabled: Any, mms_over_wifi: Any = None) -> str:
        if self.device["wifi_calling_enabled"] != enabled:
            self._toggle_wifi_calling()
        msg = f"Wi-Fi Calling is now {'ON' if enabled else 'OFF'}."
        if mms_over_wifi is not None:
            self.device["wifi_calling_mms_over_wifi"] = mms_over_wifi
            msg += f"\nMMS over Wi-Fi is now {'ON' if mms_over_wifi else 'OFF'}."
        return msg

    # -- VPN -------------------------------------------------------------------------------------

    @tool("read", "Checks if you're using a VPN (Virtual Private Network) connection. Shows if a VPN is active, "
          "connected, and displays any available connection details.")
    def check_vpn_status(self) -> Any:
        device = self.device
        if device["vpn_connected"]:
            details = device["vpn_details"]
            if details:
                return f"VPN is ON and connected. Details: {_vpn_repr(details)}"
            return "VPN is ON and connected (no specific details available)."
        if device["vpn_enabled_setting"]:
            return "VPN is turned ON in settings, but currently not connected."
        return "VPN is turned OFF."

    @tool("write", "Connects to your VPN (Virtual Private Network).")
    def connect_vpn(self) -> Any:
        if self.device["vpn_connected"]:
            return "VPN already connected."
        self.device["vpn_connected"] = True
        self.device["vpn_details"] = self.default_vpn_details  # the shared object, as upstream
        return self._status("VPN connected successfully.")

    @tool("write", "Disconnects any active VPN (Virtual Private Network) connection. Stops routing your internet "
          "traffic through a VPN server, which might affect connection speed or access to content.")
    def disconnect_vpn(self) -> Any:
        done = self._disconnect_vpn()
        return self._status("VPN disconnected successfully." if done else "No active VPN connection to disconnect.")

    def _disconnect_vpn(self) -> bool:
        if not self.device["vpn_connected"]:
            return False
        self.device["vpn_connected"] = False
        self.device["vpn_details"] = None
        return True

    @env_function
    def break_vpn(self) -> str:
        self.connect_vpn()
        self.device["vpn_details"]["server_performance"] = "poor"
        return "VPN connection broken."

    # -- apps ------------------------------------------------------------------------------------

    @tool("read", "Returns the name of all installed apps on the phone.")
    def check_installed_apps(self) -> Any:
        return f"The following apps are installed on the phone: {', '.join(self.device['app_statuses'])}"

    @tool("read", "Checks detailed information about a specific app. Shows its permissions and background data usage "
          "settings.", Param("app_name", "string", None))
    def check_app_status(self, app_name: Any) -> Any:
        app_status = self.device["app_statuses"].get(app_name)
        if not app_status:
            return f"App '{app_name}' not found on this phone."
        lines = [f"Status for App: {app_name}"]
        allowed = [name.replace("_", " ").lower() for name, on in app_status["permissions"].items() if on]
        if not allowed:
            lines.append(" - Permissions: None granted.")
        else:
            lines.append(" - Permissions Granted:")
            lines.extend(f"   - {perm}" for perm in allowed)
        return "\n".join(lines)

    @tool("read", "Checks what permissions a specific app currently has. Shows if the app has access to features "
          "like storage, camera, location, etc.", Param("app_name", "string", None))
    def check_app_permissions(self, app_name: Any) -> Any:
        app_status = self.device["app_statuses"].get(app_name)
        if not app_status:
            return f"App '{app_name}' not found on this phone."
        allowed = [name.replace("_", " ").lower() for name, on in app_status["permissions"].items() if on]
        if not allowed:
            return f"App '{app_name}' currently has no permissions granted."
        return f"App '{app_name}' has permission for: {', '.join(allowed)}."

    @tool("write", "Gives a specific permission to an app (like access to storage, camera, or location). Required "
          "for some app functions to work properly.",
          Param("app_name", "string", "The name of the app to grant the permission to."),
          Param("permission", "string", "The permission to grant, should be lowercase."))
    def grant_app_permission(self, app_name: Any, permission: Any) -> Any:
        app_status = self.device["app_statuses"].get(app_name)
        permission = permission.lower()
        if app_status:
            available = list(app_status["permissions"])
            if permission not in available:
                success, message = False, (f"Permission '{permission}' not tracked for app '{app_name}', available "
                                           f"permissions: {available}")
            else:
                app_status["permissions"][permission] = True
                success, message = True, f"Permission '{permission}' granted to app '{app_name}'."
        else:
            success, message = False, f"App '{app_name}' not found. Cannot grant permission."
        return self._status(f"{'Success. ' if success else 'Error. '}{message}")

    @env_function
    def remove_app_permission(self, app_name: Any, permission: Any) -> tuple[bool, str]:
        app_status = self.device["app_statuses"].get(app_name)
        permission = permission.lower()
        if app_status:
            if permission not in app_status["permissions"]:
                return False, f"Permission '{permission}' not tracked for app '{app_name}'."
            app_status["permissions"][permission] = False
            return True, f"Permission '{permission}' removed from app '{app_name}'."
        return False, f"App '{app_name}' not found. Cannot remove permission."

    # -- MMS -------------------------------------------------------------------------------------

    @tool("read", "Checks if the default messaging app can send MMS messages.")
    def can_send_mms(self) -> Any:
        if self._can_send_mms():
            return "Your messaging app can send MMS messages."
        return "Your messaging app cannot send MMS messages."

    def _can_send_mms(self) -> bool:
        device = self.device
        if not self._get_mobile_data_working():
            return False
        if device["network_technology_connected"] == "2G":
            return False
        if device["wifi_calling_enabled"] and device["wifi_calling_mms_over_wifi"]:
            return False
        if device["active_apn_settings"]["mmsc_url"] is None:
            return False
        messaging = device["app_statuses"].get("messaging")
        if messaging is None:
            return False
        return bool(messaging["permissions"]["storage"] and messaging["permissions"]["sms"])

    # -- the device ------------------------------------------------------------------------------

    @tool("write", "Restarts your phone completely. This can help resolve many temporary software glitches by "
          "refreshing all running services and connections.")
    def reboot_device(self) -> Any:
        lines = []
        if self.device["active_apn_settings"]["reset_at_reboot"]:
            lines.append("Resetting APN settings...")
            self.device["active_apn_settings"] = APNSettings()
        lines.append("Restarting network services...")
        self.device["network_connection_status"] = "searching"
        self.simulate_network_search()
        return self._status("\n".join(lines))

    @env_function
    def simulate_network_search(self) -> None:
        """Upstream's network search: the connection follows the SIM, the preferred mode and the signal where
        the user is; airplane mode, a broken APN or an inactive line leave no service."""
        device, surroundings = self.device, self.surroundings
        sim_status = self._check_sim_status()
        if sim_status == "active":
            device["network_connection_status"] = "connected"
            signal = surroundings["signal_strength"]
            pref = device["network_mode_preference"]
            if pref == "4g_5g_preferred":
                five_g = signal.get("5G", "none")
                if five_g == "none":
                    device["network_technology_connected"] = "4G"
                    device["network_signal_strength"] = signal.get("4G", "none")
                else:
                    device["network_technology_connected"] = "5G"
                    device["network_signal_strength"] = five_g
            else:
                technology = {"3g_only": "3G", "2g_only": "2G"}.get(pref, "4G") if isinstance(pref, str) else "4G"
                device["network_technology_connected"] = technology
                device["network_signal_strength"] = signal.get(technology, "none")
        else:
            device.update(_NO_SERVICE)
        if device["airplane_mode"]:
            device.update(_NO_SERVICE)
        if device["active_apn_settings"]["apn_name"] == "broken":
            device.update(_NO_SERVICE)
        if not surroundings["line_active"]:
            device.update(_NO_SERVICE)

    # -- payments --------------------------------------------------------------------------------

    @tool("read", "Checks if the agent has sent you a payment request.")
    def check_payment_request(self) -> Any:
        request = self.surroundings["payment_request"]
        if request is None:
            return "No payment request has been made."
        return f"You have a payment request for bill {request['bill_id']} of {request['amount_due']} USD."

    @tool("write", "Makes a payment for the bill that the agent has sent you.")
    def make_payment(self) -> Any:
        request = self.surroundings["payment_request"]
        if request is None:
            return "You do not have a payment request."
        request["paid"] = True
        return f"Payment of {request['amount_due']} USD has been made for bill {request['bill_id']}."

    # -- assertions ------------------------------------------------------------------------------

    @env_function
    def assert_airplane_mode_status(self, expected_status: Any) -> bool:
        return bool(self.device["airplane_mode"] == expected_status)

    @env_function
    def assert_service_status(self, expected_status: Any) -> bool:
        if expected_status not in NetworkStatus.values:
            raise ValueError(f"{expected_status!r} is not a valid NetworkStatus")
        return bool(self.device["network_connection_status"] == expected_status)

    @env_function
    def assert_mobile_data_status(self, expected_status: Any) -> bool:
        return bool(self._get_mobile_data_working() == expected_status)

    @env_function
    def assert_mobile_roaming_status(self, expected_status: Any) -> bool:
        return bool(self.device["roaming_enabled"] == expected_status)

    @env_function
    def assert_mobile_data_saver_mode_status(self, expected_status: Any) -> bool:
        return bool(self.device["data_saver_mode"] == expected_status)

    @env_function
    def assert_internet_speed(self, expected_speed: Any, expected_desc: Any = None) -> bool:
        speed, desc = self._run_speed_test()
        speed = speed or 0.0
        if expected_desc is None:
            return bool(speed >= expected_speed)
        return bool(speed >= expected_speed and str(desc).lower() == expected_desc.lower())

    @env_function
    def assert_internet_not_excellent(self) -> bool:
        _, desc = self._run_speed_test()
        return str(desc).lower() != "excellent"

    @env_function
    def assert_can_send_mms(self, expected_status: Any) -> bool:
        return bool(self._can_send_mms() == expected_status)

    @env_function
    def assert_mobile_data_usage_exceeded(self, expected_status: Any) -> bool:
        return bool(self.surroundings["mobile_data_usage_exceeded"] == expected_status)


def _vpn_repr(details: dict[str, Any]) -> str:
    """``str(vpn_details.model_dump())``: a dict's repr with the performance shown as the enum member."""
    parts = [f"{key!r}: {PerformanceLevel.member_repr(value) if key == 'server_performance' else repr(value)}"
             for key, value in details.items()]
    return "{" + ", ".join(parts) + "}"


class TelecomEnvironment(Environment):
    """Upstream's ``TelecomEnvironment``: after every change the phone's surroundings follow the customer's
    line (active, roaming allowed, data used up) and a payment request follows the bills awaiting payment."""

    tools: TelecomTools
    user_tools: TelecomUserTools

    def sync_tools(self) -> None:
        if self.user_tools is None or self.user_tools.db is None:
            return
        surroundings = self.user_tools.surroundings
        phone_number = surroundings["phone_number"]
        if phone_number is None:
            return
        tools = self.tools
        assert isinstance(tools, TelecomTools)
        line = tools._get_line_by_phone(phone_number)
        surroundings["line_active"] = line["status"] == "Active"
        surroundings["roaming_allowed"] = bool(line["roaming_enabled"])
        plan = tools._get_plan_by_id(line["plan_id"])
        surroundings["mobile_data_usage_exceeded"] = bool(
            line["data_used_gb"] >= plan["data_limit_gb"] + line["data_refueling_gb"])
        request = surroundings["payment_request"]
        if request is not None and request["paid"]:
            tools._set_bill_to_paid(request["bill_id"])
            surroundings["payment_request"] = None
        if surroundings["payment_request"] is None:
            customer = tools.get_customer_by_phone(phone_number).value
            bills = tools._get_bills_awaiting_payment(customer)
            if bills:
                surroundings["payment_request"] = PaymentRequest(bill_id=bills[0]["bill_id"],
                                                                 amount_due=bills[0]["total_due"])


def compose_policy(main_policy: str, tech_support_policy: str) -> str:
    """The agent's policy as upstream's ``get_environment`` builds it."""
    return (f"<main_policy>\n{main_policy}\n</main_policy>\n"
            f"<tech_support_policy>\n{tech_support_policy}\n</tech_support_policy>")


AGENT_TOOLS = TelecomTools
USER_TOOLS = TelecomUserTools
ENVIRONMENT = TelecomEnvironment
DB_FILE = "db.toml"
USER_DB_FILE = "user_db.toml"
TASKS_FILE = "tasks_small.json"
#: The policy's parts per variant, composed by :func:`compose_policy`: upstream's default ``telecom`` domain
#: (the tech-support manual) and its ``telecom-workflow`` (the workflow).
POLICY_VARIANTS = {
    "manual": ("main_policy.md", "tech_support_manual.md"),
    "workflow": ("main_policy.md", "tech_support_workflow.md"),
}
