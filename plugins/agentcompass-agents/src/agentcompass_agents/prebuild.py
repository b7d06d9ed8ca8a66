"""Build installed agents' bundles ahead of the runs that need them: ``python -m agentcompass_agents.prebuild
[NAME ...]`` (default: every agent of the catalog, at its pinned version), a few at once.

A run builds a missing bundle itself, when it starts; this only moves that wait earlier — to a machine's set-up,
or (CI) beside other work. A build already running in another process is waited for, not repeated
(:func:`~agentcompass_agents.install.machine_lock`). Exits non-zero, naming each agent whose build failed.
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ThreadPoolExecutor

from agentcompass_agents.catalog import AGENTS
from agentcompass_agents.install import Installer, InstallError


def prebuild(names: list[str], at_once: int = 3) -> list[str]:
    """Build (or find) each named agent's bundle, ``at_once`` at a time; the failures, one line each."""
    unknown = [n for n in names if n not in AGENTS]
    if unknown:
        return [f"unknown agent {n!r} (agents: {', '.join(sorted(AGENTS))})" for n in unknown]

    def one(name: str) -> str | None:
        try:
            Installer().ensure_bundle(AGENTS[name], AGENTS[name].version)
        except InstallError as exc:
            return f"{name}: {str(exc).splitlines()[0]}"
        return None

    with ThreadPoolExecutor(max_workers=max(1, at_once)) as pool:
        return [failure for failure in pool.map(one, names) if failure]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agentcompass_agents.prebuild",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="agents to build (default: all)")
    parser.add_argument("--at-once", type=int, default=3, help="builds at the same time (default 3)")
    args = parser.parse_args(argv)
    failures = prebuild(args.names or list(AGENTS), args.at_once)
    for line in failures:
        print(f"agentcompass-agents prebuild: {line}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
