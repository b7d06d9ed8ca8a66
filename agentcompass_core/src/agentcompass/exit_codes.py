"""Exit statuses of the ``agentcompass`` command."""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    """Exit statuses of ``agentcompass``."""

    #: Every task completed (whatever its score).
    OK = 0
    #: Some task ended in an error status (``PREPARE_ERROR``, ``RUN_ERROR``, ``EVAL_ERROR``, ``LIMIT_REACHED``,
    #: ``CANCELLED``).
    TASK_ERRORS = 1
    #: Bad input: an unknown name, a bad option, a damaged or foreign run directory. Nothing was run.
    USAGE = 2
    #: The run could not be set up on this machine (no Docker engine, an unwritable run directory, a plugin
    #: that fails before any task). Nothing was run.
    SETUP = 3
    #: Interrupted (Ctrl-C, SIGTERM); finished results are kept and ``--resume`` goes on.
    INTERRUPTED = 130
