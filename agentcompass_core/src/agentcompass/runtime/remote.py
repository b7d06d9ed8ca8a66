"""Attempts that run on another machine: the two halves a remote executor joins (``--executor ray``).

The data that crosses over is :mod:`agentcompass.runtime.remote_attempts`; the worker that runs it is the
engine's :mod:`agentcompass.remote_worker`. This module only hands both on, under the import path executors use.
"""

from agentcompass.remote_worker import AttemptWorker, sendable
from agentcompass.runtime.remote_attempts import (
    RemoteAttempt,
    RemoteGrant,
    RemoteLog,
    RemoteOutcome,
    pack_dir,
    scrub_request,
    unpack_dir,
)

__all__ = ["AttemptWorker", "RemoteAttempt", "RemoteGrant", "RemoteLog", "RemoteOutcome", "pack_dir", "scrub_request",
           "sendable", "unpack_dir"]
