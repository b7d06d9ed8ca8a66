"""Per-phase network policy under real ``docker``: a task whose agent may reach only the Debian mirror
(``allowlist``, through the egress proxy the run starts) — ``apt-get update`` works, ``pip download`` from the
package index is refused, a connection around the proxy has no route — and whose verifier runs with
``no-network`` (no route at all, no proxy). Plus Harbor's validation of ``allowed_hosts`` and the proxy's
matching of hosts, wildcards, addresses and ranges."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest
from agentcompass.errors import UsageError
from agentcompass.runtime import RunRequest
from agentcompass.runtime.types import NetworkPolicy
from agentcompass.testing import run_benchmark
from agentcompass_docker.egress_proxy import allowed, name_allowed
from agentcompass_harbor.benchmark import HarborBenchmark
from agentcompass_harbor.network import NetworkConfigError, normalize_hosts
from hypothesis import given
from hypothesis import strategies as st

from tests.harbor.taskdirs import write_task
from tests.helpers.docker_engine import require_engine

DOCKERFILE = "FROM python:3.11-slim\nWORKDIR /app\n"

SOLVE = """\
set -u
cd /app
if apt-get update > apt.log 2>&1; then echo ok > apt.txt; else echo failed > apt.txt; fi
if pip download --no-deps --disable-pip-version-check --retries 0 --timeout 10 -d /tmp/wheels six \\
    > pip.log 2>&1; then echo ok > pip.txt; else echo refused > pip.txt; fi
python3 - <<'EOF'
import socket
try:
    socket.create_connection(("deb.debian.org", 80), timeout=5).close()
    result = "connected"
except OSError as exc:
    result = f"no route: {exc}"
open("/app/direct.txt", "w").write(result)
EOF
env | grep -i '^https\\?_proxy=' > proxy.txt || true
"""

TEST = """\
cd /app
route_lines=$(wc -l < /proc/net/route)
{
  echo "apt=$(cat apt.txt) pip=$(cat pip.txt) direct=$(cat direct.txt)"
  echo "route_lines=$route_lines proxy_env=$(env | grep -ci '^https\\?_proxy=')"
} > /logs/verifier/seen.txt
if grep -qx ok apt.txt && grep -qx refused pip.txt && grep -q '^no route' direct.txt \\
   && grep -q 'agentcompass-egress-proxy' proxy.txt \\
   && [ "$route_lines" -le 1 ] && ! env | grep -qi '^https\\?_proxy='; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""

PHASES = """\
[environment]
network_mode = "public"
[agent]
network_mode = "allowlist"
allowed_hosts = ["deb.debian.org"]
[verifier]
network_mode = "no-network"
"""


@pytest.mark.docker
async def test_the_agent_reaches_only_its_allowlist_and_the_verifier_nothing(tmp_path: Path) -> None:
    require_engine()
    write_task(tmp_path / "tasks", "phases", instruction="Update the package lists.", test=TEST, solve=SOLVE,
               toml=PHASES, dockerfile=DOCKERFILE)
    run = await run_benchmark("harbor", "oracle", environment="docker",
                              benchmark_args={"path": str(tmp_path / "tasks")}, run_dir=tmp_path / "run")
    result = run.result("phases")
    seen = (run.run_dir / "artifacts" / "phases" / "attempt-1" / "verifier" / "seen.txt")
    assert result.metrics.get("reward") == 1.0, (result.error, seen.read_text() if seen.exists() else None)
    assert "apt=ok pip=refused direct=no route" in seen.read_text()


@pytest.mark.docker
async def test_a_public_verifier_after_an_allowlisted_agent_has_the_network_back(tmp_path: Path) -> None:
    require_engine()
    write_task(tmp_path / "tasks", "back", instruction="Nothing.", dockerfile=DOCKERFILE,
               toml='[agent]\nnetwork_mode = "no-network"\n',
               solve="test $(wc -l < /proc/net/route) -le 1 && echo isolated > /app/agent.txt\n",
               test="""\
cd /app
if grep -qx isolated agent.txt && [ "$(wc -l < /proc/net/route)" -gt 1 ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
""")
    run = await run_benchmark("harbor", "oracle", environment="docker",
                              benchmark_args={"path": str(tmp_path / "tasks")}, run_dir=tmp_path / "run")
    assert run.result("back").metrics.get("reward") == 1.0, run.result("back").error


def test_the_phases_are_resolved_as_harbor_resolves_them(tmp_path: Path) -> None:
    write_task(tmp_path / "t", "phases", instruction="x", test="true\n", toml=PHASES)
    write_task(tmp_path / "t", "plain", instruction="x", test="true\n", toml='[environment]\nnetwork_mode = "no-network"\n')
    bench = HarborBenchmark(path=str(tmp_path / "t"))
    phases = bench._tasks["phases"].task.config.network
    assert phases.agent == NetworkPolicy("allowlist", ("deb.debian.org",))
    assert phases.verifier == NetworkPolicy("no-network")
    plain = bench._tasks["plain"].task.config.network
    assert plain.agent == plain.verifier == NetworkPolicy("no-network") and not plain.switches
    req = RunRequest(benchmark="harbor", harness="nop", model="mock", environment="docker")
    specs = {t.task_id: bench.environment_spec(t, req) for t in bench.load_tasks(req)}
    assert specs["phases"].network is False  # the allowlist's proxy is put in front before the agent starts


@pytest.mark.parametrize(("toml", "words"), [
    ('[environment]\nnetwork_mode = "allowlist"\nallowed_hosts = ["https://pypi.org"]\n', "not URLs"),
    ('[environment]\nnetwork_mode = "allowlist"\nallowed_hosts = ["pypi.org:443"]\n', "not URLs"),
    ('[environment]\nnetwork_mode = "allowlist"\nallowed_hosts = ["a.*.org"]\n', "leading"),
    ('[environment]\nnetwork_mode = "allowlist"\nallowed_hosts = ["*.10.0.0.1"]\n', "not IP address"),
    ('[environment]\nnetwork_mode = "allowlist"\nallowed_hosts = ["10.0.0.1/8"]\n', "not URLs"),
    ('[environment]\nallowed_hosts = ["pypi.org"]\n', "only valid when network_mode='allowlist'"),
    ('[agent]\nallowed_hosts = ["pypi.org"]\n', "agent.allowed_hosts is only valid"),
    ('[verifier]\nnetwork_mode = "sometimes"\n', "verifier.network_mode must be one of"),
])
def test_allowed_hosts_are_validated_as_harbor_validates_them(tmp_path: Path, toml: str, words: str) -> None:
    write_task(tmp_path / "t", "bad", instruction="x", test="true\n", toml=toml)
    with pytest.raises(UsageError, match=words.replace("*", r"\*").replace("(", r"\(")):
        HarborBenchmark(path=str(tmp_path / "t"))


def test_hosts_are_normalized_as_harbor_normalizes_them() -> None:
    assert normalize_hosts(["PyPI.org.", "*.Debian.org", "10.0.0.0/8", "2001:DB8::1", "192.0.2.1"]) == \
        ("pypi.org", "*.debian.org", "10.0.0.0/8", "2001:db8::1", "192.0.2.1")
    with pytest.raises(NetworkConfigError):
        normalize_hosts([" "])


labels = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?", fullmatch=True)
tlds = st.from_regex(r"[a-z]{2,6}", fullmatch=True)  # a name, never an IP address literal
names = st.tuples(st.lists(labels, min_size=1, max_size=3), tlds).map(lambda p: ".".join([*p[0], p[1]]))


@given(names, labels)
def test_the_proxy_allows_names_and_subdomains_of_wildcards(name: str, sub: str) -> None:
    assert name_allowed(name, [name]) and name_allowed(name.upper() + ".", [name])
    assert name_allowed(f"{sub}.{name}", [f"*.{name}"])
    assert not name_allowed(name, [f"*.{name}"])  # a wildcard is its subdomains only
    assert not name_allowed(f"{sub}x.{name}x", [name, f"*.{name}"])


@given(st.ip_addresses(v=4), st.integers(8, 32))
def test_the_proxy_allows_addresses_in_ranges(address: ipaddress.IPv4Address, prefix: int) -> None:
    network = ipaddress.ip_network(f"{address}/{prefix}", strict=False)
    assert allowed(str(address), [str(network)]) == []
    assert allowed("mirror.example", [str(network)], [str(address)]) == [str(address)]
    assert allowed("mirror.example", ["other.example"], [str(address)]) is None
