"""Which image an instance runs in, and making sure the Docker engine has it before any task starts.

The image is the instance's own ``image`` field (``swebench/sweb.eval.x86_64.<id>:latest`` for the published
datasets). ``-b image_namespace=NS`` swaps its namespace for a mirror (``NS/sweb.eval.x86_64.<id>:latest``);
``-b image_template=`` names it outright, with ``{image}`` (the dataset's name), ``{name}`` (that name without
its namespace), ``{instance_id}`` and ``{id}`` (the id as image names spell it: lower case, ``__`` as
``_1776_``).

Before the run, every image the selected instances need is looked up on the engine (one ``docker image ls``);
a missing one is pulled (``-b pull=true``, the default) or built with swebench's own image builder from a task
repository (``-b build=local -b task_repo=DIR``). An image still missing is reported per task as a
``PREPARE_ERROR`` that says how to get it; the rest of the run goes on.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from agentcompass.errors import UsageError
from agentcompass.runtime.logs import get_logger

from agentcompass_swebench.dataset import Instance

log = get_logger(plugin="swebench")

#: Parallel ``docker pull`` calls.
PULL_WORKERS = 4
PULL_TIMEOUT = 3600.0


def image_id(instance_id: str) -> str:
    """The instance id as the published image names spell it."""
    return instance_id.lower().replace("__", "_1776_")


@dataclass(frozen=True)
class ImageNaming:
    """``-b image_namespace=`` / ``-b image_template=``."""

    namespace: str | None = None
    template: str | None = None

    def __post_init__(self) -> None:
        if self.namespace is not None and self.template is not None:
            raise UsageError("swebench: give -b image_namespace= or -b image_template=, not both")
        if self.template is not None:
            try:
                self.template.format(image="x", name="x", instance_id="x", id="x")
            except (KeyError, IndexError, ValueError) as exc:
                raise UsageError(
                    f"swebench: -b image_template={self.template!r} is not a valid template ({exc}); fields: "
                    "{image}, {name}, {instance_id}, {id}"
                ) from None

    def ref(self, instance: Instance) -> str:
        image = str(instance.row["image"])
        name = image.split("/", 1)[1] if "/" in image.split(":", 1)[0] else image
        if self.template is not None:
            return self.template.format(image=image, name=name, instance_id=instance.instance_id,
                                        id=image_id(instance.instance_id))
        if self.namespace is not None:
            return f"{self.namespace.rstrip('/')}/{name}" if self.namespace else name
        return image


def _docker(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=False)


def local_images() -> set[str]:
    """``repository:tag`` of every image on the engine (and ``repository`` alone for ``:latest``)."""
    try:
        done = _docker(["image", "ls", "--format", "{{.Repository}}:{{.Tag}}"], 120)
    except (OSError, subprocess.TimeoutExpired):
        return set()
    names: set[str] = set()
    for line in done.stdout.splitlines():
        line = line.strip()
        if line and "<none>" not in line:
            names.add(line)
            if line.endswith(":latest"):
                names.add(line[: -len(":latest")])
    return names


def _pull(ref: str) -> str | None:
    try:
        done = _docker(["pull", "--quiet", ref], PULL_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"docker pull failed: {exc}"
    if done.returncode == 0:
        log.info("swebench.image_pulled", image=ref)
        return None
    lines = (done.stderr or done.stdout).strip().splitlines()
    return f"docker pull failed: {lines[-1] if lines else f'exit {done.returncode}'}"


def build_images(instances: list[Instance], refs: dict[str, str], task_repo: str) -> dict[str, str]:
    """Build the instances' images with swebench's image builder from the task repository's Dockerfiles
    (``swebench.image_builder``), tagged with the names ``refs`` gives. Returns what failed, by instance id."""
    import docker
    from swebench.image_builder.docker_build import build_instance_images
    from swebench.image_builder.image_spec import ImageSpec
    from swebench.task.repo import load_dockerfiles, task_paths

    ids = [i.instance_id for i in instances]
    try:
        dockerfiles = load_dockerfiles(task_repo, ids)
        contexts = task_paths(task_repo, ids)
    except (OSError, ValueError) as exc:
        return {i: f"cannot read the task repository {task_repo}: {exc}" for i in ids}
    failed = {i: f"{task_repo} has no tasks/{i}/Dockerfile" for i in ids if i not in dockerfiles}
    specs: list[tuple[Any, str]] = []  # (the builder's spec, the name the run wants)
    for instance_id in ids:
        if instance_id in dockerfiles:
            ref = refs[instance_id]
            namespace = ref.rpartition("/")[0] or None
            specs.append((ImageSpec(instance_id=instance_id, dockerfile=dockerfiles[instance_id],
                                    namespace=namespace, context_dir=str(contexts[instance_id])), ref))
    if specs:
        client = docker.from_env(timeout=600)
        # the builder logs to stdout: keep it off ours (the CLI's --json summary goes there)
        with contextlib.redirect_stdout(sys.stderr):
            build_instance_images(client=client, image_specs=[s for s, _ in specs], force_rebuild=False,
                                  max_workers=PULL_WORKERS)
        for spec, ref in specs:
            # The builder names the image by the convention; a name from a template is tagged from it.
            if spec.name != ref:
                _docker(["tag", spec.name, ref], 60)
    have = local_images()
    for spec, ref in specs:
        if ref not in have:
            failed[spec.instance_id] = (f"swebench's image builder did not produce {ref} (its build log is "
                                        f"under logs/image_builder/)")
    return failed


@dataclass(frozen=True)
class ImagePolicy:
    """How missing images are got: ``pull`` them, and/or ``build`` them (``"local"``) from ``task_repo``."""

    pull: bool = True
    build: str = "no"
    task_repo: str | None = None

    def __post_init__(self) -> None:
        if self.build not in ("no", "local"):
            raise UsageError(f"swebench: -b build={self.build!r}: expected no or local")
        if self.build == "local" and not self.task_repo:
            raise UsageError(
                "swebench: -b build=local builds each image from its Dockerfile in a SWE-bench task repository: "
                "give -b task_repo=DIR (a clone of the dataset's task repository, with tasks/<id>/Dockerfile)"
            )

    def how_to_get(self, ref: str, instance: Instance) -> str:
        return (f"pull it (docker pull {ref}; the published images are swebench/sweb.eval.x86_64.*), point "
                f"-b image_namespace= / -b image_template= at a mirror that has it, or build it with "
                f"-b build=local -b task_repo=DIR (a SWE-bench task repository holding "
                f"tasks/{instance.instance_id}/Dockerfile)")

    def ensure(self, instances: Iterable[Instance], refs: dict[str, str]) -> dict[str, str]:
        """Make the engine hold each instance's image where it can. Returns, by instance id, why an image is
        still missing (a one-line message saying how to get it)."""
        todo = list(instances)
        have = local_images()
        missing = [i for i in todo if refs[i.instance_id] not in have]
        problems: dict[str, str] = {}
        if missing and self.build == "local" and self.task_repo:
            log.info("swebench.images_building", count=len(missing))
            problems.update(build_images(missing, refs, self.task_repo))
            have = local_images()
            missing = [i for i in missing if refs[i.instance_id] not in have]
        if missing and self.pull:
            with ThreadPoolExecutor(PULL_WORKERS) as pool:
                pulled = dict(zip((i.instance_id for i in missing),
                                  pool.map(lambda i: _pull(refs[i.instance_id]), missing), strict=True))
            problems.update({k: v for k, v in pulled.items() if v is not None})
            missing = [i for i in missing if pulled[i.instance_id] is not None]
        messages: dict[str, str] = {}
        for instance in missing:
            ref = refs[instance.instance_id]
            why = problems.get(instance.instance_id)
            messages[instance.instance_id] = (
                f"image {ref} is not on this Docker engine{f' ({why})' if why else ''}: "
                f"{self.how_to_get(ref, instance)}"
            )
        return messages
