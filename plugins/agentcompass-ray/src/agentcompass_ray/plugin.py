"""Entry point of agentcompass-ray (hooks are added as the plugin is built)."""
