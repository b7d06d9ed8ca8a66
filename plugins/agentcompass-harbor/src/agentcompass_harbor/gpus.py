"""``[environment] gpus`` and ``gpu_types``: the GPUs a task needs, checked in its environment before the agent
starts (the environment is asked for them with ``EnvironmentSpec.gpus``, a device request). Too few — none at
all on a machine without GPUs — is the task's ``PREPARE_ERROR``, saying so, never a run on the CPU."""

from __future__ import annotations

from collections.abc import Sequence

from agentcompass.runtime import EnvironmentSession

#: Lists the GPUs an environment sees, one name a line (nothing, and a non-zero status, without any).
LIST_GPUS = "nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null"


class MissingGpus(RuntimeError):
    """The environment has fewer GPUs (of the accepted types) than the task needs."""


def matching(names: Sequence[str], types: Sequence[str]) -> list[str]:
    """The GPUs of ``names`` that are of one of ``types`` (a type is a part of the name, any case: ``H100``
    matches ``NVIDIA H100 80GB HBM3``); all of them when no type is asked for."""
    if not types:
        return list(names)
    return [n for n in names if any(t.lower() in n.lower() for t in types)]


async def require(env: EnvironmentSession, count: int, types: Sequence[str] = ()) -> list[str]:
    """The GPUs of ``env`` the task may use; :class:`MissingGpus` when there are fewer than ``count``."""
    listed = await env.exec(["sh", "-c", LIST_GPUS], timeout=60)
    names = [line.strip() for line in listed.stdout.splitlines() if line.strip()] if listed.returncode == 0 else []
    usable = matching(names, types)
    if len(usable) >= count:
        return usable
    kinds = f" of type {' or '.join(types)}" if types else ""
    asked = f"the task needs {count} GPU(s){kinds} ([environment] gpus = {count})"
    if not names:
        raise MissingGpus(f"{asked} and its environment has none (nvidia-smi lists no GPU): run it on a machine "
                          "with GPUs (docker with the NVIDIA container toolkit)")
    raise MissingGpus(f"{asked} and its environment has {len(usable)} such: it has {', '.join(names)}")
