"""tau2's ``airline`` domain: flights, users and reservations; agent tools only.

Every tool follows upstream's steps in upstream's order (so the same input fails with the same message at the
same point). The database holds records (see :mod:`taubench_runner.records`); values the agent passes are
validated only where upstream builds a pydantic model from them, and stored raw where upstream assigns them.
"""

from __future__ import annotations

from copy import deepcopy
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

FlightType = r.Literal("round_trip", "one_way")
CabinClass = r.Literal("business", "economy", "basic_economy")
Insurance = r.Literal("yes", "no")

AirportCode = r.Model("AirportCode", {"iata": r.STR, "city": r.STR})
Name = r.Model("Name", {"first_name": r.STR, "last_name": r.STR})
Address = r.Model("Address", {
    "address1": r.STR, "address2": r.Field(r.Optional(r.STR), None), "city": r.STR, "country": r.STR,
    "state": r.STR, "zip": r.STR,
})
Payment = r.Model("Payment", {
    "payment_id": r.Field(r.STR, description="Unique identifier for the payment"),
    "amount": r.Field(r.INT, description="Payment amount in dollars"),
})
PaymentMethodBase = r.Model("PaymentMethodBase", {"source": r.STR, "id": r.STR})
CreditCard = PaymentMethodBase.extend("CreditCard", {
    "source": r.Literal("credit_card"), "brand": r.STR, "last_four": r.STR,
})
GiftCard = PaymentMethodBase.extend("GiftCard", {"source": r.Literal("gift_card"), "amount": r.FLOAT, "id": r.STR})
Certificate = PaymentMethodBase.extend("Certificate", {"source": r.Literal("certificate"), "amount": r.FLOAT})
PaymentMethod = r.Union(CreditCard, GiftCard, Certificate)
Passenger = r.Model("Passenger", {
    "first_name": r.Field(r.STR, description="Passenger's first name"),
    "last_name": r.Field(r.STR, description="Passenger's last name"),
    "dob": r.Field(r.STR, description="Date of birth in YYYY-MM-DD format"),
})
Seats = r.DictOf(r.INT, keys=CabinClass)
FlightDateStatusAvailable = r.Model("FlightDateStatusAvailable", {
    "status": r.Literal("available"), "available_seats": Seats, "prices": Seats,
})
FlightDataStatusOnTime = r.Model("FlightDataStatusOnTime", {
    "status": r.Literal("on time"), "estimated_departure_time_est": r.STR, "estimated_arrival_time_est": r.STR,
})
FlightDataStatusFlying = r.Model("FlightDataStatusFlying", {
    "status": r.Literal("flying"), "actual_departure_time_est": r.STR, "estimated_arrival_time_est": r.STR,
})
FlightDateStatusLanded = r.Model("FlightDateStatusLanded", {
    "status": r.Literal("landed"), "actual_departure_time_est": r.STR, "actual_arrival_time_est": r.STR,
})
FlightDateStatusCancelled = r.Model("FlightDateStatusCancelled", {"status": r.Literal("cancelled")})
FlightDateStatusDelayed = r.Model("FlightDateStatusDelayed", {
    "status": r.Literal("delayed"), "estimated_departure_time_est": r.STR, "estimated_arrival_time_est": r.STR,
})
FlightDateStatus = r.Union(
    FlightDateStatusAvailable, FlightDateStatusLanded, FlightDateStatusCancelled, FlightDateStatusDelayed,
    FlightDataStatusFlying, FlightDataStatusOnTime,
)
FlightBase = r.Model("FlightBase", {"flight_number": r.STR, "origin": r.STR, "destination": r.STR})
Flight = FlightBase.extend("Flight", {
    "scheduled_departure_time_est": r.STR, "scheduled_arrival_time_est": r.STR,
    "dates": r.DictOf(FlightDateStatus),
})
DirectFlight = FlightBase.extend("DirectFlight", {
    "status": r.Literal("available"), "scheduled_departure_time_est": r.STR, "scheduled_arrival_time_est": r.STR,
    "date": r.Field(r.Optional(r.STR), None), "available_seats": Seats, "prices": Seats,
})
ReservationFlight = FlightBase.extend("ReservationFlight", {"date": r.STR, "price": r.INT})
FlightInfo = r.Model("FlightInfo", {
    "flight_number": r.Field(r.STR, description="Flight number, such as 'HAT001'."),
    "date": r.Field(r.STR, description="The date for the flight in the format 'YYYY-MM-DD', such as '2024-05-01'."),
})
User = r.Model("User", {
    "user_id": r.STR, "name": Name, "address": Address, "email": r.STR, "dob": r.STR,
    "payment_methods": r.DictOf(PaymentMethod), "saved_passengers": r.ListOf(Passenger),
    "membership": r.Literal("gold", "silver", "regular"), "reservations": r.ListOf(r.STR),
})
Reservation = r.Model("Reservation", {
    "reservation_id": r.STR, "user_id": r.STR, "origin": r.STR, "destination": r.STR, "flight_type": FlightType,
    "cabin": CabinClass, "flights": r.ListOf(ReservationFlight), "passengers": r.ListOf(Passenger),
    "payment_history": r.ListOf(Payment), "created_at": r.STR, "total_baggages": r.INT,
    "nonfree_baggages": r.INT, "insurance": Insurance,
    "status": r.Field(r.Optional(r.Literal("cancelled")), None),
})
FlightDB = r.Model("FlightDB", {
    "flights": r.DictOf(Flight), "users": r.DictOf(User), "reservations": r.DictOf(Reservation),
}, forbid_extra=True)

AIRPORTS = (
    ("SFO", "San Francisco"), ("JFK", "New York"), ("LAX", "Los Angeles"), ("ORD", "Chicago"), ("DFW", "Dallas"),
    ("DEN", "Denver"), ("SEA", "Seattle"), ("ATL", "Atlanta"), ("MIA", "Miami"), ("BOS", "Boston"),
    ("PHX", "Phoenix"), ("IAH", "Houston"), ("LAS", "Las Vegas"), ("MCO", "Orlando"), ("EWR", "Newark"),
    ("CLT", "Charlotte"), ("MSP", "Minneapolis"), ("DTW", "Detroit"), ("PHL", "Philadelphia"), ("LGA", "LaGuardia"),
)

_RESERVATION_ID = "The reservation ID, such as 'ZFA04Y'."
_PAYMENT_ID = ("The payment id stored in user profile, such as 'credit_card_7815826', 'gift_card_7815826', "
               "'certificate_7815826'.")
_PASSENGERS = "An array of objects containing details about each passenger."
_CABINS = ("business", "economy", "basic_economy")
_ORIGIN = "The origin city airport in three letters, such as 'JFK'."
_DESTINATION = "The destination city airport in three letters, such as 'LAX'."


def _no_attribute(obj: Any, name: str) -> AttributeError:
    return AttributeError(f"'{type(obj).__name__}' object has no attribute '{name}'")


class AirlineTools(ToolKit):
    """The agent's tools (upstream's ``AirlineTools``)."""

    @classmethod
    def db_model(cls) -> r.Model:
        return FlightDB

    # -- helpers (not tools) -------------------------------------------------------------------------

    def _get_user(self, user_id: Any) -> dict[str, Any]:
        if user_id not in self.db["users"]:
            raise ValueError(f"User {user_id} not found")
        return self.db["users"][user_id]

    def _get_reservation(self, reservation_id: Any) -> dict[str, Any]:
        if reservation_id not in self.db["reservations"]:
            raise ValueError(f"Reservation {reservation_id} not found")
        return self.db["reservations"][reservation_id]

    def _get_flight(self, flight_number: Any) -> dict[str, Any]:
        if flight_number not in self.db["flights"]:
            raise ValueError(f"Flight {flight_number} not found")
        return self.db["flights"][flight_number]

    def _get_flight_instance(self, flight_number: Any, date: Any) -> dict[str, Any]:
        flight = self._get_flight(flight_number)
        if date not in flight["dates"]:
            raise ValueError(f"Flight {flight_number} not found on date {date}")
        return flight["dates"][date]

    def _get_new_reservation_id(self) -> str:
        for reservation_id in ("HATHAT", "HATHAU", "HATHAV"):
            if reservation_id not in self.db["reservations"]:
                return reservation_id
        raise ValueError("Too many reservations")

    def _search_direct_flight(
        self, date: Any, origin: Any = None, destination: Any = None, leave_after: Any = None
    ) -> list[dict[str, Any]]:
        results = []
        for flight in self.db["flights"].values():
            check = (
                (origin is None or flight["origin"] == origin)
                and (destination is None or flight["destination"] == destination)
                and (date in flight["dates"])
                and (flight["dates"][date]["status"] == "available")
                and (leave_after is None or flight["scheduled_departure_time_est"] >= leave_after)
            )
            if check:
                instance = flight["dates"][date]
                results.append(DirectFlight(
                    flight_number=flight["flight_number"], origin=flight["origin"],
                    destination=flight["destination"], status="available",
                    scheduled_departure_time_est=flight["scheduled_departure_time_est"],
                    scheduled_arrival_time_est=flight["scheduled_arrival_time_est"],
                    available_seats=instance["available_seats"], prices=instance["prices"],
                ))
        return results

    def _payment_for_update(self, user: dict[str, Any], payment_id: Any, total_price: Any) -> dict[str, Any] | None:
        if payment_id not in user["payment_methods"]:
            raise ValueError("Payment method not found")
        payment_method = user["payment_methods"][payment_id]
        if payment_method["source"] == "certificate":
            raise ValueError("Certificate cannot be used to update reservation")
        elif payment_method["source"] == "gift_card" and payment_method["amount"] < total_price:
            raise ValueError("Gift card balance is not enough")
        if payment_method["source"] == "gift_card":
            payment_method["amount"] -= total_price
        payment = None
        if total_price != 0:
            payment = Payment(payment_id=payment_id, amount=total_price)
        return payment

    # -- tools ---------------------------------------------------------------------------------------

    @tool(
        "write", "Book a reservation.",
        Param("user_id", "string", "The ID of the user to book the reservation such as 'sara_doe_496'`."),
        Param("origin", "string", "The IATA code for the origin city such as 'SFO'."),
        Param("destination", "string", "The IATA code for the destination city such as 'JFK'."),
        Param("flight_type", "enum", "The type of flight such as 'one_way' or 'round_trip'.",
              enum=("round_trip", "one_way")),
        Param("cabin", "enum", "The cabin class such as 'basic_economy', 'economy', or 'business'.", enum=_CABINS),
        Param("flights", "model_list", "An array of objects containing details about each piece of flight.",
              model=FlightInfo),
        Param("passengers", "model_list", _PASSENGERS, model=Passenger),
        Param("payment_methods", "model_list", "An array of objects containing details about each payment method.",
              model=Payment),
        Param("total_baggages", "integer", "The total number of baggage items to book the reservation."),
        Param("nonfree_baggages", "integer", "The number of non-free baggage items to book the reservation."),
        Param("insurance", "enum", "Whether the reservation has insurance.", enum=("yes", "no")),
    )
    def book_reservation(
        self, user_id: Any, origin: Any, destination: Any, flight_type: Any, cabin: Any, flights: Any,
        passengers: Any, payment_methods: Any, total_baggages: Any, nonfree_baggages: Any, insurance: Any,
    ) -> Any:
        flights_are_models = all(isinstance(flight, dict) for flight in flights)
        if flights_are_models:
            flights = [FlightInfo(**_keywords(flight)) for flight in flights]
        if all(isinstance(passenger, dict) for passenger in passengers):
            passengers = [Passenger(**_keywords(passenger)) for passenger in passengers]
        if all(isinstance(payment_method, dict) for payment_method in payment_methods):
            payment_methods = [Payment(**_keywords(payment_method)) for payment_method in payment_methods]
        user = self._get_user(user_id)
        reservation_id = self._get_new_reservation_id()

        reservation = Reservation(
            reservation_id=reservation_id, user_id=user_id, origin=origin, destination=destination,
            flight_type=flight_type, cabin=cabin, flights=[], passengers=deepcopy(passengers),
            payment_history=deepcopy(payment_methods), created_at="2024-05-15T15:00:00",
            total_baggages=total_baggages, nonfree_baggages=nonfree_baggages, insurance=insurance,
        )

        total_price = 0
        all_flights_date_data = []
        for flight_info in flights:
            if not flights_are_models:
                raise _no_attribute(flight_info, "flight_number")
            flight_number = flight_info["flight_number"]
            flight = self._get_flight(flight_number)
            flight_date_data = self._get_flight_instance(flight_number=flight_number, date=flight_info["date"])
            if flight_date_data["status"] != "available":
                raise ValueError(f"Flight {flight_number} not available on date {flight_info['date']}")
            if flight_date_data["available_seats"][cabin] < len(passengers):
                raise ValueError(f"Not enough seats on flight {flight_number}")
            price = flight_date_data["prices"][cabin]
            reservation["flights"].append(ReservationFlight(
                origin=flight["origin"], destination=flight["destination"], flight_number=flight_number,
                date=flight_info["date"], price=price,
            ))
            all_flights_date_data.append(flight_date_data)
            total_price += price * len(passengers)

        if insurance == "yes":
            total_price += 30 * len(passengers)
        total_price += 50 * nonfree_baggages

        for payment_method in payment_methods:
            payment_id = payment_method["payment_id"]
            amount = payment_method["amount"]
            if payment_id not in user["payment_methods"]:
                raise ValueError(f"Payment method {payment_id} not found")
            user_payment_method = user["payment_methods"][payment_id]
            if user_payment_method["source"] in {"gift_card", "certificate"}:
                if user_payment_method["amount"] < amount:
                    raise ValueError(f"Not enough balance in payment method {payment_id}")

        total_payment = sum(payment["amount"] for payment in payment_methods)
        if total_payment != total_price:
            raise ValueError(
                f"Payment amount does not add up, total price is {total_price}, but paid {total_payment}"
            )

        for payment_method in payment_methods:
            payment_id = payment_method["payment_id"]
            amount = payment_method["amount"]
            user_payment_method = user["payment_methods"][payment_id]
            if user_payment_method["source"] == "gift_card":
                user_payment_method["amount"] -= amount
            elif user_payment_method["source"] == "certificate":
                user["payment_methods"].pop(payment_id)

        for flight_date_data in all_flights_date_data:
            flight_date_data["available_seats"][cabin] -= len(passengers)
        self.db["reservations"][reservation_id] = reservation
        self.db["users"][user_id]["reservations"].append(reservation_id)
        return ModelOut(reservation)

    @tool("generic", CALCULATE_DESCRIPTION, CALCULATE_PARAM)
    def calculate(self, expression: Any) -> Any:
        return calculate(expression)

    @tool("write", "Cancel the whole reservation.", Param("reservation_id", "string", _RESERVATION_ID))
    def cancel_reservation(self, reservation_id: Any) -> Any:
        reservation = self._get_reservation(reservation_id)
        refunds = [
            Payment(payment_id=payment["payment_id"], amount=-payment["amount"])
            for payment in reservation["payment_history"]
        ]
        reservation["payment_history"].extend(refunds)
        reservation["status"] = "cancelled"
        return ModelOut(reservation)

    @tool(
        "read", "Get the details of a reservation.",
        Param("reservation_id", "string", "The reservation ID, such as '8JX2WO'."),
    )
    def get_reservation_details(self, reservation_id: Any) -> Any:
        return ModelOut(self._get_reservation(reservation_id))

    @tool(
        "read", "Get the details of a user, including their reservations.",
        Param("user_id", "string", "The user ID, such as 'sara_doe_496'."),
    )
    def get_user_details(self, user_id: Any) -> Any:
        return ModelOut(self._get_user(user_id))

    @tool("read", "Returns a list of all available airports.")
    def list_all_airports(self) -> Any:
        return [ModelOut(AirportCode(iata=iata, city=city)) for iata, city in AIRPORTS]

    @tool(
        "read", "Search for direct flights between two cities on a specific date.",
        Param("origin", "string", _ORIGIN),
        Param("destination", "string", _DESTINATION),
        Param("date", "string", "The date of the flight in the format 'YYYY-MM-DD', such as '2024-01-01'."),
    )
    def search_direct_flight(self, origin: Any, destination: Any, date: Any) -> Any:
        return [ModelOut(f) for f in self._search_direct_flight(date=date, origin=origin, destination=destination)]

    @tool(
        "read", "Search for one-stop flights between two cities on a specific date.",
        Param("origin", "string", _ORIGIN),
        Param("destination", "string", _DESTINATION),
        Param("date", "string", "The date of the flight in the format 'YYYY-MM-DD', such as '2024-05-01'."),
    )
    def search_onestop_flight(self, origin: Any, destination: Any, date: Any) -> Any:
        results = []
        for result1 in self._search_direct_flight(date=date, origin=origin, destination=None):
            result1["date"] = date
            date2 = f"2024-05-{int(date[-2:]) + 1}" if "+1" in result1["scheduled_arrival_time_est"] else date
            for result2 in self._search_direct_flight(
                date=date2, origin=result1["destination"], destination=destination,
                leave_after=result1["scheduled_arrival_time_est"],
            ):
                result2["date"] = date2
                results.append([ModelOut(result1), ModelOut(result2)])
        return results

    @tool(
        "write", "Send a certificate to a user. Be careful!",
        Param("user_id", "string", "The ID of the user to book the reservation, such as 'sara_doe_496'."),
        Param("amount", "integer", "The amount of the certificate to send."),
    )
    def send_certificate(self, user_id: Any, amount: Any) -> Any:
        user = self._get_user(user_id)
        for payment_id in [f"certificate_{n}" for n in (3221322, 3221323, 3221324)]:
            if payment_id not in user["payment_methods"]:
                user["payment_methods"][payment_id] = Certificate(id=payment_id, amount=amount, source="certificate")
                return f"Certificate {payment_id} added to user {user_id} with amount {amount}."
        raise ValueError("Too many certificates")

    @tool("generic", TRANSFER_DESCRIPTION, TRANSFER_PARAM)
    def transfer_to_human_agents(self, summary: Any) -> Any:
        return "Transfer successful"

    @tool(
        "write", "Update the baggage information of a reservation.",
        Param("reservation_id", "string", "The reservation ID, such as 'ZFA04Y'"),
        Param("total_baggages", "integer", "The updated total number of baggage items included in the reservation."),
        Param("nonfree_baggages", "integer",
              "The updated number of non-free baggage items included in the reservation."),
        Param("payment_id", "string", _PAYMENT_ID),
    )
    def update_reservation_baggages(
        self, reservation_id: Any, total_baggages: Any, nonfree_baggages: Any, payment_id: Any
    ) -> Any:
        reservation = self._get_reservation(reservation_id)
        user = self._get_user(reservation["user_id"])
        total_price = 50 * max(0, nonfree_baggages - reservation["nonfree_baggages"])
        payment = self._payment_for_update(user, payment_id, total_price)
        if payment is not None:
            reservation["payment_history"].append(payment)
        reservation["total_baggages"] = total_baggages
        reservation["nonfree_baggages"] = nonfree_baggages
        return ModelOut(reservation)

    @tool(
        "write", "Update the flight information of a reservation.",
        Param("reservation_id", "string", _RESERVATION_ID),
        Param("cabin", "enum", "The cabin class of the reservation", enum=_CABINS),
        Param("flights", "model_list",
              "An array of objects containing details about each piece of flight in the ENTIRE new reservation. "
              "Even if the a flight segment is not changed, it should still be included in the array.",
              model=FlightInfo),
        Param("payment_id", "string", _PAYMENT_ID),
    )
    def update_reservation_flights(self, reservation_id: Any, cabin: Any, flights: Any, payment_id: Any) -> Any:
        flights_are_models = all(isinstance(flight, dict) for flight in flights)
        if flights_are_models:
            flights = [FlightInfo(**_keywords(flight)) for flight in flights]
        reservation = self._get_reservation(reservation_id)
        user = self._get_user(reservation["user_id"])

        total_price = 0
        reservation_flights = []
        n_passengers = len(reservation["passengers"])
        for flight_info in flights:
            if not flights_are_models:
                raise _no_attribute(flight_info, "flight_number")
            matching = next(
                (
                    rf for rf in reservation["flights"]
                    if rf["flight_number"] == flight_info["flight_number"] and rf["date"] == flight_info["date"]
                    and cabin == reservation["cabin"]
                ),
                None,
            )
            if matching:
                total_price += matching["price"] * n_passengers
                reservation_flights.append(matching)
                continue
            flight = self._get_flight(flight_info["flight_number"])
            flight_date_data = self._get_flight_instance(
                flight_number=flight_info["flight_number"], date=flight_info["date"]
            )
            if flight_date_data["status"] != "available":
                raise ValueError(
                    f"Flight {flight_info['flight_number']} not available on date {flight_info['date']}"
                )
            if flight_date_data["available_seats"][cabin] < n_passengers:
                raise ValueError(f"Not enough seats on flight {flight_info['flight_number']}")
            reservation_flight = ReservationFlight(
                flight_number=flight_info["flight_number"], date=flight_info["date"],
                price=flight_date_data["prices"][cabin], origin=flight["origin"], destination=flight["destination"],
            )
            total_price += reservation_flight["price"] * n_passengers
            reservation_flights.append(reservation_flight)

        total_price -= sum(f["price"] for f in reservation["flights"]) * n_passengers
        payment = self._payment_for_update(user, payment_id, total_price)
        if payment is not None:
            reservation["payment_history"].append(payment)
        reservation["flights"] = reservation_flights
        reservation["cabin"] = cabin
        return ModelOut(reservation)

    @tool(
        "write", "Update the passenger information of a reservation.",
        Param("reservation_id", "string", _RESERVATION_ID),
        Param("passengers", "model_list", _PASSENGERS, model=Passenger),
    )
    def update_reservation_passengers(self, reservation_id: Any, passengers: Any) -> Any:
        if all(isinstance(passenger, dict) for passenger in passengers):
            passengers = [Passenger(**_keywords(passenger)) for passenger in passengers]
        reservation = self._get_reservation(reservation_id)
        if len(passengers) != len(reservation["passengers"]):
            raise ValueError("Number of passengers does not match")
        reservation["passengers"] = deepcopy(passengers)
        return ModelOut(reservation)

    @tool(
        "read", "Get the status of a flight.",
        Param("flight_number", "string", "The flight number."),
        Param("date", "string", "The date of the flight."),
    )
    def get_flight_status(self, flight_number: Any, date: Any) -> Any:
        return self._get_flight_instance(flight_number, date)["status"]


def _keywords(value: dict[str, Any]) -> dict[str, Any]:
    """``Model(**value)``: keyword arguments must be strings (a JSON object's keys always are)."""
    for key in value:
        if not isinstance(key, str):
            raise TypeError("keywords must be strings")
    return value


AGENT_TOOLS = AirlineTools
USER_TOOLS = None
DB_FILE = "db.json"
USER_DB_FILE = None
