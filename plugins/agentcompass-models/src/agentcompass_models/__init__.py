"""Model providers for agentcompass (see plugin.py)."""
