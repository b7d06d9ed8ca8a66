"""The agent's patch out of ``/testbed``, and a patch into it the way the official harness applies one.

Collecting: every change of the working tree against the instance's base commit — edits, deletions, new
(untracked) files, commits the agent made — as ``git diff --binary`` of the whole tree staged, so binary files
survive. Files the repository's ``.gitignore`` excludes are left out, as ``git add -A`` leaves them.

Applying: ``swebench.harness.run_evaluation``'s sequence — ``git apply --verbose``, then ``--3way``, then
``--reject``, then ``patch --fuzz=5``, the tree reset between tries, and a patch that reverse-applies counted as
applied — from ``/tmp/patch.diff``.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from agentcompass.runtime import EnvironmentSession
from swebench.harness.constants import CONTAINER_PATCH_FILE

from agentcompass_swebench.grading import GIT_APPLY_CMDS

TESTBED = "/testbed"
COLLECTED = "/tmp/agentcompass-model.patch"
#: Runs in the repository; ``$1`` is the base commit. ``safe.directory``: the agent may have run as another user.
COLLECT = (
    'set -e; export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=safe.directory GIT_CONFIG_VALUE_0="*"; '
    'git add -A; git diff --cached --binary "$1" > "$2"'
)
RESET = ["/bin/bash", "-c", "git checkout -- . ; git clean -fd"]


class CollectError(RuntimeError):
    """The repository's change could not be read (no git repository, the base commit missing)."""


async def collect_patch(env: EnvironmentSession, base_commit: str, timeout: float | None = None) -> bytes:
    """The change of ``/testbed`` against ``base_commit``, as bytes (empty: no change)."""
    done = await env.exec(["bash", "-c", COLLECT, "collect", base_commit, COLLECTED], cwd=TESTBED, timeout=timeout)
    if done.timed_out or done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        raise CollectError(f"git diff of {TESTBED} against {base_commit[:12]} failed: {tail[0]}")
    return await env.read_bytes(COLLECTED)


@dataclass(frozen=True)
class Applied:
    """Whether the patch applied, by which command, and every command's output (each under a ``$ command``
    line)."""

    applied: bool
    command: str | None
    output: str


async def apply_patch(env: EnvironmentSession, patch: bytes, timeout: float | None = None) -> Applied:
    """Apply ``patch`` in ``/testbed`` with the official harness's commands, in its order."""
    await env.write_bytes(CONTAINER_PATCH_FILE, patch)
    output = ""
    for attempt, command in enumerate(GIT_APPLY_CMDS):
        if attempt:
            await env.exec(RESET, cwd=TESTBED, timeout=timeout)
        done = await env.exec(shlex.split(f"{command} {CONTAINER_PATCH_FILE}"), cwd=TESTBED, timeout=timeout)
        output += f"$ {command} {CONTAINER_PATCH_FILE}\n{done.stdout}{done.stderr}"
        if done.returncode == 0 and not done.timed_out:
            return Applied(True, command, output)
    reverse = await env.exec(["git", "apply", "--check", "--reverse", CONTAINER_PATCH_FILE], cwd=TESTBED,
                             timeout=timeout)
    if reverse.returncode == 0 and not reverse.timed_out:
        return Applied(True, "git apply --check --reverse (already applied)", output)
    return Applied(False, None, output)
