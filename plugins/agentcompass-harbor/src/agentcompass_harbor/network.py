"""A task's network policy per phase, as Harbor 0.25 resolves it (``harbor.trial.network_policy``) and validates
it (``harbor.models.task.config``).

``[environment] network_mode`` (``public`` by default, legacy ``allow_internet``) with its ``allowed_hosts`` is
the baseline; ``[agent]`` and ``[verifier]`` may each give their own ``network_mode`` (and ``allowed_hosts``),
which then holds for that phase. ``allowed_hosts`` entries are host names, leading ``*.`` wildcards, IP addresses
or CIDR ranges — never URLs, ports or paths — and are valid only with ``network_mode = "allowlist"``.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass

from agentcompass.runtime.types import NetworkPolicy

_LABEL = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
INVALID = "allowed_hosts entries must be hostnames, IP addresses, or IP CIDR ranges, not URLs, ports, or paths"


class NetworkConfigError(ValueError):
    """An invalid ``network_mode`` / ``allowed_hosts``."""


def normalize_hosts(hosts: Sequence[str]) -> tuple[str, ...]:
    """Harbor's ``normalize_allowed_hosts``: each entry lower-cased, without a trailing dot, checked."""
    out = []
    for raw in hosts:
        host = raw.strip().lower().rstrip(".")
        if not host:
            raise NetworkConfigError("allowed_hosts entries must be non-empty hostnames")
        if "/" in host:
            if "%" in host:
                raise NetworkConfigError(f"{INVALID}: {raw!r}")
            try:
                out.append(ipaddress.ip_network(host, strict=True).compressed)
            except ValueError:
                raise NetworkConfigError(f"{INVALID}: {raw!r}") from None
            continue
        if ":" in host:
            try:
                address = ipaddress.ip_address(host) if "%" not in host else None
            except ValueError:
                address = None
            if address is None or address.version != 6:
                raise NetworkConfigError(f"{INVALID}: {raw!r}")
            out.append(address.compressed)
            continue
        if "[" in host or "]" in host:
            raise NetworkConfigError(f"{INVALID}: {raw!r}")
        name = host
        if host.startswith("*."):
            name = host[2:]
            if not name:
                raise NetworkConfigError("allowed_hosts wildcard entries must include a hostname suffix")
            try:
                ipaddress.ip_address(name)
            except ValueError:
                pass
            else:
                raise NetworkConfigError(f"allowed_hosts wildcard entries must target hostnames, not IP address "
                                         f"literals: {raw!r}")
        elif "*" in host:
            raise NetworkConfigError(f"allowed_hosts wildcard entries must use a leading '*.' prefix: {raw!r}")
        if not all(_LABEL.match(label) for label in name.split(".")):
            raise NetworkConfigError(
                "allowed_hosts entries must be IP addresses, IP CIDR ranges, or valid hostnames or leading "
                f"wildcard host patterns containing only letters, digits, hyphens, and dots: {raw!r}")
        out.append(host)
    return tuple(out)


def policy(mode: str, hosts: Sequence[str] | None) -> NetworkPolicy:
    """A checked policy: ``allowed_hosts`` only with ``allowlist``."""
    if hosts and mode != "allowlist":
        raise NetworkConfigError("allowed_hosts is only valid when network_mode='allowlist'")
    return NetworkPolicy(mode=mode, allowed_hosts=normalize_hosts(hosts or ()))


@dataclass(frozen=True)
class PhasePolicies:
    """What the agent and the verifier may reach."""

    agent: NetworkPolicy
    verifier: NetworkPolicy

    @property
    def switches(self) -> bool:
        """Whether the environment's network changes after it starts (an allowlist, or phases that differ)."""
        return self.agent.mode == "allowlist" or self.agent != self.verifier


def phases(baseline: NetworkPolicy, agent: NetworkPolicy | None, verifier: NetworkPolicy | None) -> PhasePolicies:
    """Harbor's resolution: a phase's own policy when it gives one, else the environment's."""
    return PhasePolicies(agent=agent or baseline, verifier=verifier or baseline)
