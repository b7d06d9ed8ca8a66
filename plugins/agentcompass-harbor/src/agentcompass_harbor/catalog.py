"""The tasks under ``-b path=``: read, checked and resolved once, when the benchmark is constructed, so that a
bad task stops the run before anything starts (every problem listed)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentcompass.errors import UsageError
from agentcompass.runtime.benchmark import EvaluationEnvironmentMode

from agentcompass_harbor import templates
from agentcompass_harbor.config import HarborFormatError, HarborTask, dockerfile_workdir, find_task_dirs, read_task


@dataclass(frozen=True)
class Resolved:
    """What a task needs at run time beyond its TaskSpec (kept off the spec: the values may be secrets)."""

    task: HarborTask
    env: Mapping[str, str]
    verifier_env: Mapping[str, str]
    solution_env: Mapping[str, str]
    #: The working directory: ``[environment] workdir``, else the Dockerfile's, else the default.
    workdir: str


def load(path: Path, *, pass_env: Collection[str], default_workdir: str,
         builds: Callable[[HarborTask], bool]) -> dict[str, Resolved]:
    """Every task under ``path``; ``builds(task)`` says whether its image is built from its Dockerfile."""
    found = find_task_dirs(path)
    if not found:
        raise UsageError(f"harbor: no task directory (with a task.toml) at {path}")
    return load_dirs(found, str(path), pass_env=pass_env, default_workdir=default_workdir, builds=builds)


def load_dirs(found: Sequence[tuple[str, Path]], where: str, *, pass_env: Collection[str], default_workdir: str,
              builds: Callable[[HarborTask], bool]) -> dict[str, Resolved]:
    """The tasks ``(task_id, directory)`` of ``found`` (``where`` names them in errors)."""
    tasks: dict[str, Resolved] = {}
    problems: list[str] = []
    host = dict(os.environ)
    for task_id, directory in found:
        try:
            task = read_task(directory, task_id)
            for index, step in enumerate(task.config.steps):
                if task.step_test_script(index) is None:
                    raise HarborFormatError(f"{directory}: step {step.name!r} has no test script "
                                            f"(steps/{step.name}/tests/test.sh or tests/test.sh)")
            if task.config.tpu:
                raise HarborFormatError(f"{directory}: TPU tasks ([environment.tpu]) need Harbor's GKE environment")
            if task.config.os != "linux":
                raise HarborFormatError(f"{directory}: only linux tasks are supported (os = {task.config.os!r})")
            if task.test_script is None and not task.config.steps:
                raise HarborFormatError(f"{directory}: no tests/test.sh")
            tasks[task_id] = _resolve(task, pass_env, host, default_workdir, builds(task))
        except (HarborFormatError, templates.TemplateError) as exc:
            problems.append(str(exc))
    if problems:
        shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
        raise UsageError(f"harbor: {len(problems)} invalid task(s) under {where}: {shown}")
    return tasks


def _resolve(task: HarborTask, pass_env: Collection[str], host: Mapping[str, str], default_workdir: str,
             built: bool) -> Resolved:
    config = task.config

    def resolve(values: Mapping[str, str], where: str) -> dict[str, str]:
        return templates.resolve(values, allowed=pass_env, host=host, where=f"task {task.task_id!r}: {where}")

    workdir = config.workdir
    if workdir is None and built and task.dockerfile is not None:
        workdir = dockerfile_workdir(task.dockerfile)
    return Resolved(
        task=task,
        env=resolve(config.env, "[environment] env"),
        verifier_env=resolve(config.verifier_env, "[verifier] env"),
        solution_env=resolve(config.solution_env, "[solution] env"),
        workdir=workdir or default_workdir,
    )


def verification_mode(tasks: Mapping[str, Resolved], verify: str, path: Path | str) -> EvaluationEnvironmentMode:
    """``reuse`` (Harbor's shared verifier) or ``fresh`` for the whole run: as ``-b verify=`` says, else as
    every task says; a directory that mixes both is refused."""
    if verify == "shared":
        return "reuse"
    if verify == "fresh":
        return "fresh"
    separate = sorted(t for t, r in tasks.items() if r.task.config.verifier_mode == "separate")
    if not separate:
        return "reuse"
    if len(separate) == len(tasks):
        return "fresh"
    shared = sorted(set(tasks) - set(separate))
    raise UsageError(
        f"harbor: under {path} the tasks {', '.join(separate[:5])} verify in a separate environment "
        f"([verifier] environment_mode) and {', '.join(shared[:5])} in the agent's: one run verifies one "
        "way, so run them separately (point -b path= at each group) or choose with -b verify=shared|fresh"
    )


def unsupported(task: HarborTask) -> list[str]:
    """Fields of the task that are read but not honoured (recorded with the task)."""
    config, out = task.config, []
    if config.verifier_environment:
        out.append("[verifier.environment] (the verifier runs in the agent's image)")
    if config.verifier_user and config.verifier_user != config.agent_user:
        out.append(f"verifier.user={config.verifier_user} (the verifier runs as the agent's user)")
    if any(a.exclude for a in config.artifacts):
        out.append("artifacts[].exclude (the whole path is collected)")
    out.extend(config.not_honoured)
    return out


def json_safe(value: Any) -> Any:
    """``value`` as plain JSON data (TOML dates and times become strings)."""
    return json.loads(json.dumps(value, default=str))
