"""The ``registry`` options (ray executor, docker environment) and the bases the head publishes: unit level."""

from __future__ import annotations

from pathlib import Path

import pytest
from agentcompass.errors import UsageError
from agentcompass.runtime.types import EnvironmentSpec
from agentcompass_docker.options import DockerOptions
from agentcompass_docker.registry import remote_ref
from agentcompass_ray.images import local_bases
from agentcompass_ray.options import RayOptions
from hypothesis import given
from hypothesis import strategies as st

HOSTS = st.from_regex(r"[a-z0-9]{1,12}(\.[a-z0-9]{1,8}){0,3}", fullmatch=True)


@given(host=HOSTS, port=st.integers(1, 65535))
def test_a_host_and_port_is_a_registry(host: str, port: int) -> None:
    assert RayOptions.parse({"registry": f"{host}:{port}"}).registry == f"{host}:{port}"
    assert DockerOptions.parse({"registry": f"{host}:{port}"}).registry == f"{host}:{port}"


@pytest.mark.parametrize("bad", ["http://127.0.0.1:5000", "127.0.0.1:5000/path", "a b:1", "host:port"])
def test_a_registry_with_a_scheme_or_path_is_a_one_line_usage_error(bad: str) -> None:
    with pytest.raises(UsageError, match=r"registry=.*HOST:PORT") as caught:
        RayOptions.parse({"registry": bad})
    assert "\n" not in str(caught.value)
    with pytest.raises(UsageError, match=r"registry=.*HOST:PORT"):
        DockerOptions.parse({"registry": bad})


def test_no_registry_by_default() -> None:
    assert RayOptions.parse({}).registry is None and DockerOptions.parse({}).registry is None


def test_remote_names_keep_digests_as_they_are() -> None:
    assert remote_ref("127.0.0.1:5000", "agentcompass-build:ab") == "127.0.0.1:5000/agentcompass-build:ab"
    assert remote_ref("r:1", "python@sha256:00") == "python@sha256:00"


def test_the_bases_of_the_builds_are_their_froms_and_copy_froms_not_their_stages(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text(
        "FROM python:3.11-slim AS build\nRUN true\nFROM --platform=linux/amd64 build\n"
        "COPY --from=agentcompass-agent:aider-1-abc /opt/x /opt/x\nCOPY --from=build /a /a\nFROM scratch\n")
    specs = [EnvironmentSpec(build_context=str(tmp_path)), EnvironmentSpec(image="python:3.11-slim")]
    assert local_bases(specs) == ["python:3.11-slim", "agentcompass-agent:aider-1-abc"]
