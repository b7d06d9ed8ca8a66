"""The ``local`` environment (kept importable here; the code lives in :mod:`agentcompass.builtin.local`)."""

from agentcompass.builtin.local import (
    INHERITED_VARIABLES,
    OUTPUT_GRACE,
    LocalOptions,
    LocalProvider,
    LocalSession,
    PathEscapeError,
)
from agentcompass.runtime.environment import OUTPUT_LIMIT

__all__ = [
    "INHERITED_VARIABLES",
    "OUTPUT_GRACE",
    "OUTPUT_LIMIT",
    "LocalOptions",
    "LocalProvider",
    "LocalSession",
    "PathEscapeError",
]
