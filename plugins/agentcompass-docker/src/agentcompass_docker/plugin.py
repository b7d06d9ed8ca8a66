"""Entry point ``docker``: registers the docker environment. Importing this stays cheap: python-on-whales
(and pydantic with it) is imported only when a docker provider is made."""

from __future__ import annotations

import sys
from typing import Any

from agentcompass import hookimpl


def make_docker_provider(**options: Any) -> Any:
    """``--env docker``: a :class:`~agentcompass_docker.provider.DockerProvider` for one run.
    ``options`` are the ``--env-arg key=value`` strings."""
    from agentcompass_docker.provider import DockerProvider

    return DockerProvider(**options)


@hookimpl
def register_environments(register):  # type: ignore[no-untyped-def]
    register("docker", make_docker_provider)


@hookimpl
def agentcompass_run_started(run_id, request, run_dir):  # type: ignore[no-untyped-def]
    """Tell the run's docker provider (if this run has one) its concurrency, trials and
    ``--max-environments``: what the warm pool sizes itself by."""
    provider = sys.modules.get("agentcompass_docker.provider")
    if provider is not None:
        provider.run_started(run_id, request)
