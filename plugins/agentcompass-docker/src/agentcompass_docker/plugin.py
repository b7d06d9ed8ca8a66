"""Entry point ``docker``: registers the docker environment. Importing this stays cheap: python-on-whales
(and pydantic with it) is imported only when a docker provider is made."""

from __future__ import annotations

from typing import Any

from agentcompass import hookimpl


def make_docker_provider(**options: Any) -> Any:
    """``--env docker``: a :class:`~agentcompass_docker.provider.DockerProvider` for one run.
    ``options`` are the ``--env-arg key=value`` strings."""
    from agentcompass_docker.provider import DockerProvider

    return DockerProvider(**options)


@hookimpl
def register_environments(register):
    register("docker", make_docker_provider)

