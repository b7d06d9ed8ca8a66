"""Agent harnesses for agentcompass.

* ``react`` (:class:`~agentcompass_harnesses.react.ReactHarness`): a tool-calling loop over the run's agent
  model (``plan.models["agent"]``) acting in the task's environment through ``bash``, ``read_file``,
  ``write_file`` and ``submit``;
* ``command`` (:class:`~agentcompass_harnesses.command.CommandHarness`): runs the user's own agent program
  inside the environment, pointed at the run's model gateway;
* ``terminus-2`` (:class:`~agentcompass_harnesses.terminus2.harness.Terminus2Harness`): Harbor's Terminus 2,
  a tmux session in the task's environment driven by keystrokes and screen captures.

All take the task's instruction from ``BaseBenchmark.instruction(task, prepared)`` and honour a task's own
time limit, ``task.data["agent_timeout_sec"]`` (see :mod:`agentcompass_harnesses.common`).
"""

__all__ = ["CommandHarness", "ReactHarness"]


def __getattr__(name: str) -> object:  # keep `import agentcompass_harnesses` free of work
    if name == "ReactHarness":
        from agentcompass_harnesses.react import ReactHarness

        return ReactHarness
    if name == "CommandHarness":
        from agentcompass_harnesses.command import CommandHarness

        return CommandHarness
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
