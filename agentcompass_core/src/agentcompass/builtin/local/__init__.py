"""The ``local`` environment: a working directory per task and real subprocesses on the host.

It isolates files (every path is confined to the task's working directory) and the process environment (a
child sees an explicit, small set of variables, never the host's wholesale), not the machine: use ``docker``
for untrusted code.

Modules: :mod:`~agentcompass.builtin.local.options` (``--env-arg``), :mod:`~agentcompass.builtin.local.files`
(confined paths and copies), :mod:`~agentcompass.builtin.local.processes` (finding and killing every process
a command started), :mod:`~agentcompass.builtin.local.session` (``exec`` and files of one task),
:mod:`~agentcompass.builtin.local.provider` (run roots, close, teardown, prune).
"""

from agentcompass.builtin.local.files import PathEscapeError
from agentcompass.builtin.local.options import LocalOptions
from agentcompass.builtin.local.provider import INHERITED_VARIABLES, LocalProvider
from agentcompass.builtin.local.session import OUTPUT_GRACE, LocalSession

__all__ = ["INHERITED_VARIABLES", "OUTPUT_GRACE", "LocalOptions", "LocalProvider", "LocalSession", "PathEscapeError"]
