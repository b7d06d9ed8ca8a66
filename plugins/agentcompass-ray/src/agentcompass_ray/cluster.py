"""Joining (or starting) a Ray cluster, and planning how many attempts each of its nodes holds at once.

A local instance started for the run listens on loopback, has no dashboard and sends no usage statistics;
it is started from an environment without the run's provider secrets (Ray's processes inherit the caller's
environment), so no credential reaches a Ray process, its logs or its temp directory.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from secrets import token_hex
from typing import Any

import attrs
from agentcompass.errors import UsageError

from agentcompass_ray.options import RayOptions

#: The address of a local instance: loopback (Ray turns 127.0.0.1 itself into the machine's network address).
LOCAL_NODE_IP = "127.0.10.1"


@contextlib.contextmanager
def environment_without(secrets: Iterable[str]) -> Iterator[None]:
    """``os.environ`` without the variables whose value holds a secret, for as long as the block runs."""
    values = [s for s in secrets if s]
    removed = {k: v for k, v in os.environ.items() if any(s in v for s in values)}
    for key in removed:
        del os.environ[key]
    try:
        yield
    finally:
        os.environ.update(removed)


@attrs.define
class Connection:
    """This process's membership of a Ray cluster: :meth:`close` leaves it (a local instance stops)."""

    #: This process called ``ray.init`` (and so shuts it down).
    joined: bool
    #: Variables set for a local instance (its private token), restored on close.
    saved_env: dict[str, str | None] = attrs.field(factory=dict)
    token_dir: str | None = None
    #: Runs of this process using it (a suite's cells share one): the last to close leaves.
    users: int = 1
    #: The ``address`` option it was made for (None: a local instance).
    address: str | None = None

    def close(self) -> None:
        import ray

        self.users -= 1
        if self.users > 0:
            return
        if _shared and _shared[0] is self:
            _shared.clear()
        if self.joined:
            ray.shutdown()
            self.joined = False
        for key, value in self.saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self.saved_env = {}
        if self.token_dir:
            shutil.rmtree(self.token_dir, ignore_errors=True)
            self.token_dir = None


#: The connection this process made, while some run uses it.
_shared: list[Connection] = []


def _private_token(connection: Connection) -> None:
    """Token authentication for a local instance, with a token of its own in a private directory (otherwise
    Ray writes one to ``~/.ray/auth_token``, which later ``ray start --head`` runs would pick up)."""
    if "RAY_AUTH_MODE" in os.environ:
        return  # the user's choice
    connection.token_dir = tempfile.mkdtemp(prefix="agentcompass-ray-")
    token = Path(connection.token_dir) / "auth_token"
    token.write_text(token_hex(32))
    token.chmod(0o600)
    for key, value in (("RAY_AUTH_MODE", "token"), ("RAY_AUTH_TOKEN_PATH", str(token))):
        connection.saved_env[key] = os.environ.get(key)
        os.environ[key] = value


def _where(address: str | None) -> str:
    return f"the Ray cluster at {address}" if address else "a local Ray instance"


def connect(options: RayOptions, *, local_cpus: float, secrets: Iterable[str]) -> Connection:
    """Connect to the cluster ``options.address`` names, or start a local instance with ``local_cpus``
    logical CPUs."""
    import sys

    if "ray" in sys.modules and sys.modules["ray"].is_initialized():
        if _shared:  # another run of this process (a suite's cell) joined: share its membership
            if _shared[0].address != options.address:
                raise UsageError(
                    f"this process already runs on {_where(_shared[0].address)}, not {_where(options.address)}: the "
                    "cells of a suite with --executor ray share one cluster; give them all the same "
                    "--executor-arg address")
            _shared[0].users += 1
            return _shared[0]
        return Connection(joined=False)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # Under ``uv run`` Ray would ship the working directory to every worker and run them through uv; the
    # workers use the Python their node runs instead, with the plugins installed there.
    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    connection = Connection(joined=False, address=options.address)
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.WARNING,
                              "namespace": "agentcompass"}
    if options.address is None:
        # "local": a new instance even when this machine has a cluster (`ray start`, RAY_ADDRESS, or one that
        # died and left /tmp/ray/ray_current_cluster): ray.init would join that instead, and refuse num_cpus.
        kwargs.update(address="local", num_cpus=max(1, math.ceil(local_cpus)),
                      _node_ip_address=options.node_ip or LOCAL_NODE_IP)
        _private_token(connection)
    else:
        kwargs["address"] = options.address
        if options.node_ip:
            kwargs["_node_ip_address"] = options.node_ip
        kwargs.pop("include_dashboard")
    if options.temp_dir:  # a local instance's, or where 'auto' finds the cluster 'ray start --temp-dir' began
        kwargs["_temp_dir"] = options.temp_dir
    import ray  # after the token's variables are set: Ray reads them as it loads

    try:
        with environment_without(secrets):
            ray.init(**kwargs)
    except Exception as exc:
        connection.close()
        if isinstance(exc, ConnectionError):
            raise UsageError(f"cannot reach the Ray cluster at {options.address}: {exc}. Start one with 'ray "
                             "start --head', or leave --executor-arg address out for a local instance") from None
        where = f"the Ray cluster at {options.address}" if options.address else "a local Ray instance"
        raise UsageError(f"cannot start or join {where}: {type(exc).__name__}: {exc}") from None
    connection.joined = True
    _shared[:] = [connection]
    return connection


@dataclass(frozen=True)
class NodeSlots:
    """One node and how many attempts it runs at once."""

    node_id: str
    address: str
    slots: int


def attempt_demand(options: RayOptions, *, docker: bool, nodes: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """What one attempt reserves: its CPUs, the extra resources, and one unit of the docker marker when the
    run uses docker and some node advertises it (otherwise every node is taken to have docker)."""
    demand: dict[str, float] = {"CPU": options.num_cpus, **options.resources}
    if docker and options.docker_resource and any(options.docker_resource in n["Resources"] for n in nodes):
        demand[options.docker_resource] = 1.0
    return {k: v for k, v in demand.items() if v > 0}


def alive_nodes() -> list[dict[str, Any]]:
    import ray

    return [n for n in ray.nodes() if n.get("Alive")]


def capacity(resources: Mapping[str, float], demand: Mapping[str, float]) -> int:
    """How many attempts of ``demand`` fit in ``resources`` (no bound when the demand is empty)."""
    fits = [math.floor(resources.get(k, 0.0) / v + 1e-9) for k, v in demand.items()]
    return min(fits) if fits else 1 << 30


def plan_slots(nodes: Sequence[Mapping[str, Any]], demand: Mapping[str, float], wanted: int) -> list[NodeSlots]:
    """Spread ``wanted`` concurrent attempts over the nodes, one at a time round the nodes that have room."""
    room = {n["NodeID"]: capacity(n["Resources"], demand) for n in nodes}
    given = dict.fromkeys(room, 0)
    total = 0
    while total < wanted:
        progressed = False
        for node_id in room:
            if total < wanted and given[node_id] < room[node_id]:
                given[node_id] += 1
                total += 1
                progressed = True
        if not progressed:
            break
    by_id = {n["NodeID"]: n for n in nodes}
    return [NodeSlots(i, str(by_id[i].get("NodeManagerAddress", "?")), s) for i, s in given.items() if s > 0]


def describe_shortage(nodes: Sequence[Mapping[str, Any]], demand: Mapping[str, float]) -> str:
    have = "; ".join(f"{n.get('NodeManagerAddress')}: " + ", ".join(
        f"{k}={v:g}" for k, v in sorted(n["Resources"].items()) if not k.startswith("node:"))
        for n in nodes) or "no node is alive"
    need = ", ".join(f"{k}={v:g}" for k, v in demand.items())
    return (f"no node of the Ray cluster has room for one attempt ({need}); the nodes have {have}. Lower "
            "--executor-arg num_cpus= or start nodes with more resources (ray start --num-cpus N "
            "--resources '{\"docker\": N}')")
