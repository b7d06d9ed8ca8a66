"""Steering a live run from a tool (what ``agentcompass ctl`` and ``agentcompass view``'s buttons use): :func:`send`
one request (``{"action": "pause"}``, ...: :mod:`agentcompass.control.steering` lists them) to the run in a
directory and get its reply, or a :class:`~agentcompass.errors.UsageError` saying why not. Hands on the engine's
client under a public name."""

from agentcompass.control.client import send

__all__ = ["send"]
