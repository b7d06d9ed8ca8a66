"""Runs inside the bundle builder beside ``bundle.py`` (``python3 cpython_bundle.py STEP ...``), stdlib only,
for a Python agent whose interpreter ``cpython.sh`` built (an agent that needs a newer Python than the
builder's 3.11). The same steps as ``bundle.py``'s ``python`` ones, with that interpreter:

* ``runtime DEST`` — copies the built CPython (:data:`CPYTHON`) into ``DEST/runtime``;
* ``install DEST [--constraint=FILE] PACKAGE VERSION [PACKAGE...]`` — installs the agent and the other packages
  named, at the same version, into ``DEST/pkg`` with that interpreter's pip (their dependencies pinned by
  ``FILE``);
* ``finish DEST NAME PACKAGE [MODULE:FUNCTION]`` — ``bundle.py``'s ``finish`` (launcher, supervisor, shared
  libraries relinked) with that interpreter, the launcher calling ``MODULE:FUNCTION`` (a driver shipped in
  ``DEST/pkg``) instead of a console script when one is named.

``bundle.py`` itself is left as it is, so that the other agents' bundles (tagged by a hash of their build
files) stay valid.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import bundle

#: Where ``cpython.sh`` installed the Python it built.
CPYTHON = Path("/opt/agentcompass/cpython")


def _python(dest: Path) -> Path:
    return dest / "runtime" / "bin" / "python3"


def runtime(dest: Path) -> None:
    shutil.copytree(CPYTHON, dest / "runtime", symlinks=True)
    bundle.run(str(_python(dest)), "--version")


def install(dest: Path, package: str, version: str, *others: str, constraint: str = "") -> None:
    pkg = dest / "pkg"
    pkg.mkdir(parents=True, exist_ok=True)
    bundle.run(str(_python(dest)), "-m", "pip", "install", "--no-cache-dir", "--disable-pip-version-check",
               *([constraint] if constraint else []), "--target", str(pkg),
               *(f"{p}=={version}" for p in (package, *others)))


def finish(dest: Path, name: str, package: str, entry: str = "") -> None:
    # bundle.finish names the interpreter runtime/bin/python{PY_VERSION}: here runtime/bin/python3.
    bundle.PY_VERSION = "3"
    if entry:
        bundle._console_script = lambda pkg, script: entry
    bundle.finish("python", dest, name, package)


def main(argv: list[str]) -> None:
    command, dest = argv[0], Path(argv[1])
    if command == "runtime":
        runtime(dest)
    elif command == "install":
        rest = argv[2:]
        constraint = rest.pop(0) if rest and rest[0].startswith("--constraint=") else ""
        install(dest, rest[0], rest[1], *rest[2:], constraint=constraint)
    elif command == "finish":
        finish(dest, argv[2], argv[3], *argv[4:5])
    else:
        raise SystemExit(f"unknown step {command!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
