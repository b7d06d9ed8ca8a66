"""example_interactive: the spec's benchmark-driven example.

A small task-management domain (users and tasks, tau2-bench "mock" style), a rule-based user simulator and
the interaction loop that runs an agent model against them.

The modules ``domain``, ``user_sim``, ``runner`` and ``chat_client`` (and ``tasks.json``) are the *upstream
runner*: standard library only, copied into the task environment and run there with ``python3 -m
example_interactive.runner``. ``chat_client`` is a link to the core's public stdlib client,
:mod:`agentcompass.runtime.chat_client`, not a copy.
``benchmark`` and ``plugin`` are the agentcompass side and are never copied. Keep this file free of imports.
"""

#: Files copied into the task environment, relative to this package.
RUNNER_FILES = ("__init__.py", "domain.py", "user_sim.py", "runner.py", "chat_client.py", "tasks.json")
