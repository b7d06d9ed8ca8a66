"""Extra Docker engines and a Docker registry on this machine, for tests and benchmarks of multi-node runs.

* :class:`ExtraEngine`: a ``dockerd`` of its own (``--data-root``, ``--exec-root``, ``--pidfile``, a Unix
  socket and a bridge of its own, made with ``ip link add NAME type bridge``), so an image one node built is
  not on another's engine. :meth:`ExtraEngine.load` copies an image from the main engine into it.
* :class:`Registry`: Debian's ``docker-registry`` (``apt-get install docker-registry``) serving a temp
  directory on a loopback port (dockerd treats 127.0.0.0/8 registries as insecure by default: plain HTTP).

Both are stopped by their own process (never ``pkill``), their directories and bridges removed.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import attrs

from tests.helpers.ray_cluster import free_port

REGISTRY = shutil.which("docker-registry") or "/usr/bin/docker-registry"


def can_run_engines() -> str | None:
    """Why extra engines cannot run here (None: they can): root, ``dockerd``, ``ip``, ``docker-registry``."""
    if os.geteuid() != 0:
        return "extra dockerds need root"
    for tool in ("dockerd", "ip", "docker"):
        if shutil.which(tool) is None:
            return f"no {tool} on PATH"
    if not Path(REGISTRY).exists():
        return "no docker-registry (apt-get install docker-registry)"
    return None


def _stop(process: subprocess.Popen[bytes], seconds: float = 20) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(seconds)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


@attrs.define
class ExtraEngine:
    """A second (third, ...) dockerd, reachable at :attr:`host` (``unix://.../docker.sock``)."""

    root: Path
    bridge: str
    process: subprocess.Popen[bytes]

    @property
    def host(self) -> str:
        return f"unix://{self.root}/docker.sock"

    @classmethod
    def start(cls, name: str, timeout: float = 60) -> ExtraEngine:
        # Short paths: the exec root holds Unix sockets (108 bytes at most).
        root = Path(tempfile.mkdtemp(prefix=f"acde-{name}-", dir="/tmp"))
        bridge = f"acbr{secrets.token_hex(3)}"
        subprocess.run(["ip", "link", "add", bridge, "type", "bridge"], check=True, capture_output=True)
        subprocess.run(["ip", "link", "set", bridge, "up"], check=True, capture_output=True)
        driver = "overlay2" if "overlay" in Path("/proc/filesystems").read_text() else "vfs"
        argv = ["dockerd", "--data-root", str(root / "data"), "--exec-root", str(root / "exec"),
                "--pidfile", str(root / "docker.pid"), "-H", f"unix://{root}/docker.sock", "--bridge", bridge,
                "--iptables=false", "--ip-masq=false", "--storage-driver", driver]
        with (root / "dockerd.log").open("wb") as out:
            process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       start_new_session=True)
        engine = cls(root, bridge, process)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                log = (root / "dockerd.log").read_text()[-2000:]
                engine.stop()
                raise RuntimeError(f"dockerd {name} exited: {log}")
            if engine.docker("info", check=False).returncode == 0:
                return engine
            time.sleep(0.5)
        engine.stop()
        raise RuntimeError(f"dockerd {name} did not answer within {timeout:g}s")

    def docker(self, *args: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["docker", "-H", self.host, *args], capture_output=True, text=True, check=check,
                              timeout=timeout)

    def load(self, image: str) -> None:
        """Copy ``image`` from the main engine into this one (``docker save | docker load``)."""
        save = subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE)
        subprocess.run(["docker", "-H", self.host, "load", "--quiet"], stdin=save.stdout, check=True,
                       capture_output=True, timeout=600)
        assert save.stdout is not None
        save.stdout.close()
        if save.wait() != 0:
            raise RuntimeError(f"docker save {image} failed")

    def images(self, repository: str) -> set[str]:
        """The tags of ``repository`` this engine holds (``REPO:TAG``)."""
        out = self.docker("image", "ls", "--format", "{{.Repository}}:{{.Tag}}", repository).stdout
        return {line for line in out.split() if line}

    def stop(self) -> None:
        # Containers of its own first (a task's container outliving its run), then the daemon.
        if self.process.poll() is None:
            ids = self.docker("ps", "-aq", check=False, timeout=60).stdout.split()
            if ids:
                self.docker("rm", "-f", *ids, check=False, timeout=120)
        _stop(self.process)
        subprocess.run(["ip", "link", "delete", self.bridge], capture_output=True)
        with contextlib.suppress(OSError):
            subprocess.run(["umount", "-R", str(self.root / "exec")], capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)


@attrs.define
class Registry:
    """``docker-registry serve`` on a loopback port, storing into a temp directory."""

    root: Path
    address: str
    process: subprocess.Popen[bytes]

    @classmethod
    def start(cls, host: str = "127.0.0.1", timeout: float = 30) -> Registry:
        root = Path(tempfile.mkdtemp(prefix="acreg-", dir="/tmp"))
        address = f"{host}:{free_port(host)}"
        (root / "config.yml").write_text(
            "version: 0.1\n"
            "log:\n  level: warn\n"
            f"storage:\n  filesystem:\n    rootdirectory: {root / 'data'}\n  delete:\n    enabled: true\n"
            f"http:\n  addr: {address}\n"
        )
        with (root / "registry.log").open("wb") as out:
            process = subprocess.Popen([REGISTRY, "serve", str(root / "config.yml")], stdout=out,
                                       stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        registry = cls(root, address, process)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"docker-registry exited: {(root / 'registry.log').read_text()[-2000:]}")
            with contextlib.suppress(OSError):
                urllib.request.urlopen(f"http://{address}/v2/", timeout=2).close()
                return registry
            time.sleep(0.3)
        registry.stop()
        raise RuntimeError(f"docker-registry did not answer on {address} within {timeout:g}s")

    def repositories(self) -> list[str]:
        import json

        with urllib.request.urlopen(f"http://{self.address}/v2/_catalog", timeout=10) as answer:
            return list(json.load(answer)["repositories"])

    def stop(self) -> None:
        _stop(self.process)
        shutil.rmtree(self.root, ignore_errors=True)
