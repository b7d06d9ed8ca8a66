"""agentcompass-ray."""
