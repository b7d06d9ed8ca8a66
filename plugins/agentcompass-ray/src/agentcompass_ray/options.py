"""The ``--executor-arg`` options of the ``ray`` executor, checked into one frozen value."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agentcompass.errors import UsageError

#: The option names, each with what it means (shown when an unknown one is given).
OPTIONS = {
    "address": "the cluster: auto (the one 'ray start' runs here), HOST:PORT or ray://HOST:PORT; "
               "default: a local Ray instance for this run",
    "num_cpus": "CPUs each attempt reserves (default 1)",
    "resources": 'other resources each attempt reserves, as JSON: {"gpu_box": 1}',
    "docker_resource": "the custom resource that marks docker-capable nodes (default docker); with --env "
                       "docker each attempt takes one unit of it, on nodes that advertise it",
    "node_ip": "this machine's address in the cluster, when Ray would guess another (e.g. 127.0.0.2)",
    "temp_dir": "Ray's temp directory: a local instance's, or the --temp-dir the cluster was started with "
                "(where address=auto finds it)",
    "startup_timeout": "seconds to wait for the workers to be ready (default 120)",
    "registry": "a Docker registry HOST:PORT every node reaches (with --env docker): each image is built once, "
                "pushed there and pulled by the other nodes; default: each node builds for itself",
}
_REGISTRY = re.compile(r"(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:]+\])(?::[0-9]{1,5})?")


def _float(name: str, value: str, *, positive: bool = True) -> float:
    try:
        number = float(value)
    except ValueError:
        raise UsageError(f"--executor-arg {name}={value!r}: not a number") from None
    if not math.isfinite(number) or number < 0 or (positive and number == 0):
        raise UsageError(f"--executor-arg {name}={value!r}: must be a positive number")
    return number


@dataclass(frozen=True)
class RayOptions:
    """Where the cluster is and what each attempt reserves there."""

    address: str | None = None
    num_cpus: float = 1.0
    resources: Mapping[str, float] = field(default_factory=dict)
    docker_resource: str = "docker"
    node_ip: str | None = None
    temp_dir: str | None = None
    startup_timeout: float = 120.0
    registry: str | None = None

    @classmethod
    def parse(cls, options: Mapping[str, Any]) -> RayOptions:
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            known = "; ".join(f"{k}: {v}" for k, v in OPTIONS.items())
            raise UsageError(f"executor 'ray' has no option(s) {', '.join(unknown)}. Options — {known}")
        values = {k: str(v) for k, v in options.items()}
        resources: dict[str, float] = {}
        if "resources" in values:
            try:
                raw = json.loads(values["resources"])
            except json.JSONDecodeError as exc:
                raise UsageError(f"--executor-arg resources=: not JSON ({exc.msg}); write e.g. "
                                 "resources='{\"gpu_box\": 1}'") from None
            if not isinstance(raw, dict):
                raise UsageError("--executor-arg resources= must be a JSON object of NAME: AMOUNT")
            resources = {str(k): _float(f"resources {k}", str(v)) for k, v in raw.items()}
        registry = values.get("registry") or None
        if registry is not None and not _REGISTRY.fullmatch(registry):
            raise UsageError(f"--executor-arg registry={registry!r}: expected HOST:PORT of a Docker registry "
                             "every node reaches, e.g. registry=10.0.0.5:5000 (no scheme, no path)")
        address = values.get("address") or None
        return cls(
            address=None if address in (None, "local") else address,
            num_cpus=_float("num_cpus", values.get("num_cpus", "1"), positive=False),
            resources=resources,
            docker_resource=values.get("docker_resource", "docker"),
            node_ip=values.get("node_ip") or None,
            temp_dir=values.get("temp_dir") or None,
            startup_timeout=_float("startup_timeout", values.get("startup_timeout", "120")),
            registry=registry,
        )
