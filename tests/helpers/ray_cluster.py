"""A real Ray cluster on this machine for tests and benchmarks: each node a ``ray start --block`` process of its
own, on a loopback address of its own (127.0.0.2, 127.0.0.3, ...) with its own ``--temp-dir``, and stopped by
its process group, never with ``ray stop`` (which stops every Ray on the machine)."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import attrs

RAY = str(Path(sys.executable).with_name("ray"))

#: What every node's processes run with: no usage statistics, no uv runtime env, quick death detection.
NODE_ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0",
    "RAY_health_check_period_ms": "500",
    "RAY_health_check_timeout_ms": "1000",
    "RAY_health_check_failure_threshold": "3",
    # A busy 2-core machine: a raylet may take longer than the default 10 s to register.
    "RAY_raylet_start_wait_time_s": "120",
}


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@attrs.define
class Node:
    ip: str
    temp_dir: Path
    process: subprocess.Popen[bytes]
    log: Path
    argv: list[str] = attrs.field(factory=list)
    env: dict[str, str] = attrs.field(factory=dict)
    restarts: int = 0

    def restart(self) -> None:
        """Start the node again, the same way (Ray gives a node 30 s to register, which a loaded machine may
        take longer than)."""
        self.kill()
        self.restarts += 1
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, env=self.env,
                                            start_new_session=True, cwd=self.temp_dir.parent)

    def pids(self) -> set[int]:
        """This node's processes: its ``ray start`` and every descendant (raylet, workers, ...)."""
        return descendants(self.process.pid) | {self.process.pid}

    def kill(self) -> None:
        """Kill the node's processes by pid: its ``ray start``, every descendant, and any process that left
        the tree but names this node's temp directory (Ray's daemons). SIGKILL: a drained stop takes 30 s."""
        for _ in range(3):
            pids = {p for p in self.pids() | self.strays() if _alive(p)}
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=10)
            time.sleep(0.3)

    def strays(self) -> set[int]:
        marker = str(self.temp_dir)
        return {int(e.name) for e in Path("/proc").iterdir() if e.name.isdigit() and marker in cmdline(int(e.name))}


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state != "Z"


def descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except (FileNotFoundError, ProcessLookupError):
        return ""


@attrs.define
class LocalCluster:
    """A head node and worker nodes, each a separate process tree. ``stop()`` kills only these."""

    root: Path = attrs.field(factory=lambda: Path(tempfile.mkdtemp(prefix="acray", dir="/tmp")))
    nodes: list[Node] = attrs.field(factory=list)
    port: int = 0
    env: dict[str, str] = attrs.field(factory=dict)

    def __attrs_post_init__(self) -> None:
        # Ray's token authentication, with a token of this cluster's own (not the one in ~/.ray).
        token = self.root / "auth_token"
        token.write_text(secrets.token_hex(32))
        token.chmod(0o600)
        self.env = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token), **self.env}

    def driver_env(self) -> dict[str, str]:
        """What a driver (``agentcompass run --executor ray``) needs to join: Ray's settings and the token."""
        return {**NODE_ENV, **self.env}

    @property
    def head(self) -> Node:
        return self.nodes[0]

    @property
    def address(self) -> str:
        return f"{self.head.ip}:{self.port}"

    def _ports(self, ip: str) -> list[str]:
        return ["--node-manager-port", str(free_port(ip)), "--object-manager-port", str(free_port(ip)),
                "--dashboard-agent-listen-port", str(free_port(ip)), "--dashboard-agent-grpc-port",
                str(free_port(ip)), "--metrics-export-port", str(free_port(ip)), "--runtime-env-agent-port",
                str(free_port(ip))]

    def _start(self, name: str, ip: str, args: list[str], cpus: int, resources: dict[str, float],
               env: dict[str, str] | None = None) -> Node:
        temp = self.root / name
        temp.mkdir(parents=True, exist_ok=True)
        log = self.root / f"{name}.out"
        env = {**os.environ, **NODE_ENV, **self.env, **(env or {})}
        argv = [RAY, "start", "--block", "--node-ip-address", ip, "--temp-dir", str(temp), "--num-cpus", str(cpus),
                "--resources", json.dumps(resources), "--disable-usage-stats", *self._ports(ip), *args]
        with log.open("wb") as out:
            process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env,
                                       start_new_session=True, cwd=self.root)
        node = Node(ip, temp, process, log, argv, env)
        self.nodes.append(node)
        return node

    def start_head(self, ip: str = "127.0.0.2", cpus: int = 4, resources: dict[str, float] | None = None,
                   env: dict[str, str] | None = None) -> Node:
        self.port = free_port(ip)
        return self._start("head", ip, ["--head", "--port", str(self.port), "--include-dashboard=false"],
                           cpus, resources or {}, env)

    def add_worker(self, ip: str, cpus: int = 4, resources: dict[str, float] | None = None,
                   env: dict[str, str] | None = None) -> Node:
        """A worker node; ``env``: variables its processes get besides (e.g. ``DOCKER_HOST``: its own engine)."""
        return self._start(f"worker-{ip}", ip, ["--address", self.address], cpus, resources or {}, env)

    def wait_for(self, n_nodes: int, timeout: float = 180.0) -> None:
        """Wait until ``n_nodes`` nodes are alive (asked through a throw-away driver process)."""
        script = ("import ray, sys; ray.init(address=sys.argv[1], _node_ip_address=sys.argv[2], "
                  "log_to_driver=False, logging_level='ERROR'); print(sum(n['Alive'] for n in ray.nodes()))")
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            for node in self.nodes:
                if node.process.poll() is not None:
                    said = node.log.read_text()[-3000:]
                    if node.restarts < 2 and ("timed out during startup" in said or "No node info" in said):
                        node.restart()
                        continue
                    raise RuntimeError(f"ray node {node.ip} exited: {node.log.read_text()[-2000:]}")
            try:
                probe = subprocess.run([sys.executable, "-c", script, self.address, self.head.ip],
                                       capture_output=True, text=True, env={**os.environ, **self.driver_env()}, timeout=30)
            except subprocess.TimeoutExpired:
                continue
            lines = probe.stdout.strip().splitlines()
            last = lines[-1] if lines else probe.stderr
            if probe.returncode == 0 and last.isdigit() and int(last) >= n_nodes:
                return
            time.sleep(1)
        raise RuntimeError(f"the Ray cluster did not reach {n_nodes} nodes: {last[-2000:]}")

    def stop(self, *, remove: bool = True) -> None:
        """Kill every node (by pid) and, unless ``remove`` is false, remove the cluster's directory."""
        for node in reversed(self.nodes):
            node.kill()
        if remove:
            shutil.rmtree(self.root, ignore_errors=True)

    def files(self) -> list[Path]:
        """Every file under the nodes' temp directories (logs, session directories, spilled objects)."""
        return [p for node in self.nodes for p in node.temp_dir.rglob("*") if p.is_file()]
