"""agentcompass-otel: OpenTelemetry traces of agentcompass runs (``agentcompass run --otel``)."""

__version__ = "0.1.0"
