"""The shell scripts the ``harbor`` benchmark runs in a task's environment (with ``sh -c``), one ``exec`` per
step, so that a task costs few round trips to a container:

* :func:`move_in_and_run` — put an uploaded directory in place (``/solution``) and run a script of it;
* :func:`verify` — put the collected outputs back (fresh verification), clear ``/logs/verifier`` and
  ``/tests``, move the tests in, run ``test.sh`` from the working directory, then report the reward files on
  stderr (:func:`parse_report`), so reading them costs no further call.

A failure of the set-up steps (not of the task's scripts) exits with :data:`SETUP_FAILED`.
"""

from __future__ import annotations

import base64
import binascii
import shlex
from dataclasses import dataclass, field

from agentcompass_harbor.layout import Layout

#: The exit status of a script whose set-up (not the task's own script) failed.
SETUP_FAILED = 197
#: The reward files reported on stderr after the verifier ran.
REPORTED = ("reward.json", "reward.txt")
_MARK = "@@agentcompass-harbor"

_FAIL = f'fail() {{ echo "agentcompass-harbor: $1" >&2; exit {SETUP_FAILED}; }}'
#: Runs the script ``$1``: made executable and run directly (its ``#!`` line decides), else with bash, else sh.
_RUN = ('chmod +x "$1" 2>/dev/null; if [ -x "$1" ]; then "$1"; '
        'elif command -v bash >/dev/null 2>&1; then bash "$1"; else sh "$1"; fi')

#: Prints ``f PATH`` or ``d PATH`` for each argument that is a file or a non-empty directory.
LIST = ('for p in "$@"; do if [ -f "$p" ]; then echo "f $p"; '
        'elif [ -d "$p" ] && [ -n "$(ls -A "$p" 2>/dev/null)" ]; then echo "d $p"; fi; done')


def _q(text: str) -> str:
    return shlex.quote(text)


def _chmods(staging: str, executables: list[str]) -> list[str]:
    return [f"chmod +x {_q(staging + '/' + name)} 2>/dev/null" for name in executables]


def move_in_and_run(staging: str, target: str, script: str, executables: list[str] = ()) -> str:  # type: ignore[assignment]
    """Replace ``target`` with the uploaded ``staging`` directory, then run ``target/script`` (its output,
    stderr included, on stdout; its exit status the script's)."""
    return "\n".join([
        _FAIL,
        *_chmods(staging, list(executables)),
        f'rm -rf {_q(target)} && mkdir -p "$(dirname {_q(target)})" && mv {_q(staging)} {_q(target)} '
        f"|| fail 'cannot move it to {target}'",
        f"set -- {_q(target + '/' + script)}",
        "exec 2>&1",
        _RUN,
    ])


def verify(layout: Layout, staging: str, placed_back: list[tuple[str, str]], remove: list[str],
           executables: list[str] = ()) -> str:  # type: ignore[assignment]
    """The verification, as one script (see the module's documentation)."""
    verifier = layout.verifier_dir
    lines = [_FAIL, *_chmods(staging, list(executables))]
    for source, target in placed_back:
        lines.append(f'mkdir -p "$(dirname {_q(target)})" && rm -rf {_q(target)} && cp -a {_q(source)} {_q(target)} '
                     f"|| fail 'cannot put back {target}'")
    for path in remove:  # what the runtime placed under artifacts/: no part of the agent's working directory
        lines.append(f"rm -rf {_q(path)}")
    if remove:
        lines.append("rmdir artifacts 2>/dev/null || true")
    lines += [
        f"rm -rf {_q(verifier)} {_q(layout.tests)} || fail 'cannot clear {verifier}'",
        f"mkdir -p {_q(verifier)} {_q(layout.agent_dir)} {_q(layout.artifacts_dir)} || fail 'cannot create {verifier}'",
        f'mkdir -p "$(dirname {_q(layout.tests)})" && mv {_q(staging)} {_q(layout.tests)} '
        f"|| fail 'cannot move the tests to {layout.tests}'",
        f"set -- {_q(layout.tests + '/test.sh')}",
        f"( {_RUN} ) 2>&1",
        "rc=$?",
        # The report: each reward file (base64), and whether the verifier left anything else.
        f'V={_q(verifier)}',
        "{",
        f'  for f in {" ".join(REPORTED)}; do if [ -f "$V/$f" ]; then echo "{_MARK} file $f"; base64 "$V/$f" || '
        f'echo "{_MARK} unreadable $f"; fi; done',
        f'  for f in $(ls -A "$V" 2>/dev/null); do case "$f" in {"|".join(REPORTED)}) ;; *) echo "{_MARK} other"; '
        "break;; esac; done",
        f'  echo "{_MARK} end"',
        "} >&2",
        "exit $rc",
    ]
    return "\n".join(lines)


@dataclass
class Report:
    """What :func:`verify` reported on stderr."""

    complete: bool = False
    files: dict[str, bytes] = field(default_factory=dict)
    #: The verifier left files besides the reward files in ``/logs/verifier``.
    others: bool = False
    #: stderr without the report (set-up messages).
    stderr: str = ""


def parse_report(stderr: str) -> Report:
    """The report at the end of the verification's stderr. ``complete`` is False when it is missing or cut
    (an image without ``base64``, a truncated stream): the caller then reads ``/logs/verifier`` itself."""
    report = Report()
    lines = stderr.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.startswith(_MARK + " "))
    except StopIteration:
        report.stderr = stderr
        return report
    report.stderr = "\n".join(lines[:start])
    current: str | None = None
    chunks: list[str] = []

    def close() -> bool:
        if current is None:
            return True
        try:
            report.files[current] = base64.b64decode("".join(chunks), validate=True)
        except (binascii.Error, ValueError):
            return False
        return True

    for line in lines[start:]:
        if line.startswith(_MARK + " "):
            if not close():
                return report
            current, chunks = None, []
            word, _, name = line[len(_MARK) + 1:].partition(" ")
            if word == "file" and name in REPORTED:
                current = name
            elif word == "unreadable":
                return report
            elif word == "other":
                report.others = True
            elif word == "end":
                report.complete = True
                return report
        elif current is not None:
            chunks.append(line.strip())
    return report
