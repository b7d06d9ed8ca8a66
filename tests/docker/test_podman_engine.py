"""What ``--env-arg engine=podman`` adds to the docker environment, below the contract the provider tests
check on both engines (``test_docker_env.py``): the option itself, the engine check's message, a slow create's
probe, and the ids of a rootless engine's socket directory."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
from agentcompass.errors import EnvironmentUnavailable, UsageError
from agentcompass.runtime import EnvironmentSpec

from tests.helpers.docker_engine import require_engine


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"engine": "nerdctl"}, "engine='nerdctl': expected one of docker, podman"),
        ({"engine": "podman", "context": "remote"}, "context= is a Docker CLI context, which Podman does not have"),
    ],
)
def test_bad_engine_options_are_usage_errors(options: dict, said: str) -> None:
    from agentcompass_docker.options import DockerOptions

    with pytest.raises(UsageError, match=re.escape(said)):
        DockerOptions.parse(options)
    assert DockerOptions.parse({"engine": "podman"}).engine == "podman"
    assert DockerOptions.parse({}).engine == "docker"


async def test_an_unreachable_podman_is_environment_unavailable_naming_podman(tmp_path: Path) -> None:
    from agentcompass_docker.provider import DockerProvider

    if not __import__("shutil").which("podman"):
        pytest.skip("the podman CLI is not installed; run .ci/podman-up.sh as root")
    provider = DockerProvider(engine="podman", host=f"unix://{tmp_path}/no-podman.sock")
    with pytest.raises(EnvironmentUnavailable) as caught:
        await provider.setup([EnvironmentSpec()], run_id="no-podman")
    message = str(caught.value)
    assert message.startswith("no Podman engine answers") and "podman-up.sh" in message, message
    assert "dockerd" not in message and "\n" not in message


def test_a_probe_with_nothing_to_tell_yet_is_asked_again_and_the_cli_runs_on(monkeypatch) -> None:
    """A ``run --rm`` whose create is slow (rootless Podman on ``vfs`` copies the image per container): ``start``
    of a container not made yet says nothing about the run, so the CLI is not killed for it."""
    from agentcompass_docker import engine

    monkeypatch.setattr(engine, "PROBE_AFTER", 0.2)
    monkeypatch.setattr(engine, "PROBE_GRACE", 0.2)
    asked: list[float] = []

    def not_there_yet() -> bool:
        asked.append(0.0)
        return False

    command = [sys.executable, "-c", "import time; time.sleep(1.2); print('done')"]
    status, stdout, _ = engine._run_probed(command, 30, not_there_yet)
    assert (status, stdout) == (0, b"done\n")
    assert len(asked) >= 2  # asked again, each time with nothing to tell
    # A probe that tells the start happened still bounds a CLI that then does not end.
    status, _, stderr = engine._run_probed([sys.executable, "-c", "import time; time.sleep(30)"], 30, lambda: True)
    assert status == 125 and b"did not end after its container started" in stderr


@pytest.mark.podman
@pytest.mark.docker
async def test_a_rootless_engines_root_owns_the_socket_directory_as_this_user() -> None:
    """On a rootless engine the container's root is the host's user: its exec server's socket directory is this
    user's own (no chown, which a non-root user could not do), and the server is used, not ``podman exec``."""
    require_engine("podman")
    from agentcompass_docker.images import ImageInfo
    from agentcompass_docker.provider import DockerProvider

    provider = DockerProvider(engine="podman")
    await provider.check_engine()
    try:
        assert provider.engine.rootless == (os.geteuid() != 0)
        provider.engine.rootless = True  # as a non-root user's Podman answers
        image = ImageInfo("python:3.11-slim", "")
        assert provider._host_ids(0, 0) == (os.geteuid(), os.getegid())
        assert provider._host_ids(65534, 65534) == (65534, 65534)
        assert await provider._server_unusable(image, EnvironmentSpec(user="0")) is None
        provider.engine.rootless = False
        assert provider._host_ids(0, 0) == (0, 0)
    finally:
        provider.engine.shutdown()


def test_env_prune_takes_the_runs_env_args_and_refuses_a_bad_one_in_one_line() -> None:
    from tests.helpers.cli_processes import run_cli_subprocess

    bad = run_cli_subprocess("env", "prune", "--env-arg", "engine=nerdctl", testing=False)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.strip() == "Error: docker environment option engine='nerdctl': expected one of docker, podman"
