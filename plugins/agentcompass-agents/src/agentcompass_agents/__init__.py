"""Installed agents as agentcompass harnesses: ``claude-code``, ``codex``, ``opencode``, ``qwen-code``,
``gemini-cli``, ``mini-swe-agent`` and ``aider``.

Each installs once per (task image, agent, version) under ``--env docker`` (:mod:`agentcompass_agents.install`),
runs headless in the task's network-less container against the run's model gateway in its own protocol, and
keeps its own trajectory (:mod:`agentcompass_agents.harness`). The agents and their pinned versions:
:mod:`agentcompass_agents.catalog`.
"""

from agentcompass_agents.catalog import AGENTS, AgentSpec

__all__ = ["AGENTS", "AgentSpec"]
