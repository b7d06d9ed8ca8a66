"""SWE-bench for agentcompass."""
