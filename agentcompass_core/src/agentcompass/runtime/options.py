"""Parsing plugin options (``-b/--harness-arg/--env-arg KEY=VALUE``): each value arrives as a string, and a bad
one is a :class:`~agentcompass.errors.UsageError` naming the option, what it must be and what it got.

``what`` says whose option it is, as the message should begin: ``"taubench option"``, ``"harness 'react':
option"``.
"""

from __future__ import annotations

from typing import Any

from agentcompass.errors import UsageError

TRUE = frozenset({"1", "true", "yes", "on"})
FALSE = frozenset({"0", "false", "no", "off"})


def positive_int(what: str, name: str, value: Any) -> int:
    """``value`` as a whole number of 1 or more."""
    try:
        number = int(str(value).strip())
    except ValueError:
        raise UsageError(f"{what} {name!r} must be a positive integer, got {value!r}") from None
    if number < 1:
        raise UsageError(f"{what} {name!r} must be a positive integer, got {value!r}")
    return number


def boolean(what: str, name: str, value: Any) -> bool:
    """``value`` as true (``1 true yes on``) or false (``0 false no off``), in any case."""
    text = str(value).strip().lower()
    if text in TRUE:
        return True
    if text in FALSE:
        return False
    raise UsageError(f"{what} {name!r} must be true or false, got {value!r}")
