"""What a session needs from the provider that opened it: :class:`SessionHost`, which
:class:`~agentcompass_docker.provider.DockerProvider` implements.

The sessions (:mod:`~agentcompass_docker.session`, :mod:`~agentcompass_docker.server_session`) import this
protocol, never the provider: the provider sits above them and hands itself to each session it opens.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, Protocol

from agentcompass_docker.containers import Containers
from agentcompass_docker.engine import Engine
from agentcompass_docker.options import DockerOptions


class SessionHost(Protocol):
    """The provider as its sessions see it."""

    @property
    def engine(self) -> Engine:
        """The engine client and its worker threads (every docker call of a session goes through it)."""

    @property
    def containers(self) -> Containers:
        """The run's containers: a session asks it what happened to its own (``gone_reason``)."""

    @property
    def options(self) -> DockerOptions:
        """The environment's options (``write_delay``, ...)."""

    def background(self, work: Coroutine[Any, Any, Any]) -> None:
        """Run ``work`` past the call that started it (the host's ``drain`` and ``teardown`` wait for it)."""
