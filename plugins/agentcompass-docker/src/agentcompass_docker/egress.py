"""A session's network policy, switched while its container runs (:meth:`DockerSession.set_network`).

* ``no-network``: the container is disconnected from every network — no route at all.
* ``public``: connected to the provider's network (``--env-arg network=``, default ``bridge``).
* ``allowlist``: connected only to an internal network of its own (``--internal``: no route out), shared with
  an egress proxy container (:mod:`agentcompass_docker.egress_proxy`, in ``--env-arg egress_image=``) that is
  also on the provider's network and reaches only the allowed hosts. The session's commands get
  ``HTTP_PROXY``/``HTTPS_PROXY`` (and the lower-case spellings) pointing at it, ``NO_PROXY`` for loopback (the
  model gateway's forwarder). A program that ignores the proxy variables reaches nothing.

Everything here runs in the engine's worker threads (``docker`` CLI calls); the proxy and its network carry the
run's labels and are removed with the session.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from agentcompass_docker.engine import Engine

PROXY_PORT = 3128
PROXY_ALIAS = "agentcompass-egress-proxy"
PROXY_SOURCE = (Path(__file__).parent / "egress_proxy.py").read_text(encoding="utf-8")
LOOPBACK = "localhost,127.0.0.1,::1"


@dataclass(frozen=True)
class Egress:
    """The proxy container and internal network of one session's ``allowlist``."""

    network: str
    proxy: str

    @property
    def env(self) -> dict[str, str]:
        url = f"http://{PROXY_ALIAS}:{PROXY_PORT}"
        return {"HTTP_PROXY": url, "HTTPS_PROXY": url, "http_proxy": url, "https_proxy": url,
                "NO_PROXY": LOOPBACK, "no_proxy": LOOPBACK}


def networks_of(engine: Engine, container: str, timeout: float) -> list[str]:
    out = engine.cli(["inspect", "--format", "{{json .NetworkSettings.Networks}}", container], timeout)
    return sorted(json.loads(out.strip() or "{}") or {})


def isolate(engine: Engine, container: str, timeout: float) -> None:
    """Disconnected from every network: only loopback is left."""
    for network in networks_of(engine, container, timeout):
        engine.cli(["network", "disconnect", "--force", network, container], timeout)


def connect(engine: Engine, container: str, network: str, timeout: float, alias: str | None = None) -> None:
    engine.cli(["network", "connect", *(["--alias", alias] if alias else []), network, container], timeout)


def start_egress(engine: Engine, container: str, hosts: list[str], *, image: str, outside: str,
                 labels: dict[str, str], timeout: float) -> Egress:
    """The proxy and internal network of ``container``'s allowlist (the container is not moved here)."""
    egress = Egress(network=f"{container}-egress", proxy=f"{container}-egress-proxy")
    label_args = [arg for key, value in labels.items() for arg in ("--label", f"{key}={value}")]
    engine.cli(["network", "create", "--internal", *label_args, egress.network], timeout)
    engine.cli(["run", "--detach", "--name", egress.proxy, *label_args, "--network", egress.network,
                "--network-alias", PROXY_ALIAS, "--pull", "never", image,
                "python3", "-c", PROXY_SOURCE, json.dumps(hosts), str(PROXY_PORT)], timeout)
    connect(engine, egress.proxy, outside, timeout)
    deadline = time.monotonic() + timeout
    while "listening" not in engine.cli(["logs", egress.proxy], timeout):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the egress proxy {egress.proxy} did not start within {timeout:g} s")
        time.sleep(0.1)
    return egress


def stop_egress(engine: Engine, egress: Egress, timeout: float) -> None:
    engine.cli(["rm", "--force", egress.proxy], timeout)
    engine.cli(["network", "rm", egress.network], timeout)
