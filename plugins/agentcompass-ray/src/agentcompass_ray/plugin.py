"""Entry point of agentcompass-ray: registers the executor ``ray`` (Ray is imported only when it is used)."""

from __future__ import annotations

from typing import Any

from agentcompass import hookimpl


def _ray_executor(**options: Any) -> Any:
    from agentcompass_ray.executor import RayExecutor

    return RayExecutor(**options)


@hookimpl
def register_executors(register):
    register("ray", _ray_executor)
