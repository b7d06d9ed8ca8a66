"""Entry point of agentcompass-report (hooks are added as the plugin is built)."""
