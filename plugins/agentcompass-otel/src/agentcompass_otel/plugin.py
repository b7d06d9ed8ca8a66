"""Entry point of agentcompass-otel: the observer that traces runs while ``--otel`` (``AGENTCOMPASS_OTEL=1``) is
on. Nothing of OpenTelemetry is imported until a traced run starts; while tracing is off each observer call
returns at once (see :mod:`agentcompass_otel.tracing`)."""

from __future__ import annotations

from agentcompass_otel.tracing import RunTracing

#: The plugin object the ``agentcompass`` entry point names.
tracing = RunTracing()
