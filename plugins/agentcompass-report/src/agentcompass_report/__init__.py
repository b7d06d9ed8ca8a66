"""agentcompass-report."""
