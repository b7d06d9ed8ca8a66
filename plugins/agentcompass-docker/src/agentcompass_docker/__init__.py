"""The ``docker`` environment for agentcompass: one isolated container per task attempt, driven through
python-on-whales. Registered by the ``docker`` entry point (:mod:`agentcompass_docker.plugin`)."""
