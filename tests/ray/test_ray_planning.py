"""How the ray executor spreads a run's concurrency over a cluster's nodes, and reads its options (no Ray)."""

from __future__ import annotations

import pytest
from agentcompass.errors import UsageError
from agentcompass_ray.cluster import attempt_demand, capacity, plan_slots
from agentcompass_ray.options import RayOptions
from hypothesis import given
from hypothesis import strategies as st

nodes_strategy = st.lists(
    st.fixed_dictionaries({"CPU": st.integers(0, 16), "docker": st.integers(0, 4)}), min_size=1, max_size=5,
).map(lambda rs: [{"NodeID": f"n{i}", "NodeManagerAddress": f"127.0.0.{i + 2}", "Resources": dict(r)}
                  for i, r in enumerate(rs)])


@given(nodes_strategy, st.sampled_from([0.25, 0.5, 1.0, 2.0]), st.booleans(), st.integers(1, 64))
def test_slots_never_exceed_what_a_node_holds_nor_what_was_asked(nodes, cpus, docker, wanted) -> None:
    demand = attempt_demand(RayOptions(num_cpus=cpus), docker=docker, nodes=nodes)
    plan = plan_slots(nodes, demand, wanted)
    room = {n["NodeID"]: capacity(n["Resources"], demand) for n in nodes}
    assert all(0 < p.slots <= room[p.node_id] for p in plan)
    assert sum(p.slots for p in plan) == min(wanted, sum(room.values()))
    # Spread evenly: a node gets one more slot than another only when that other is full.
    for a in plan:
        for b in plan:
            assert a.slots <= b.slots + 1 or b.slots == room[b.node_id]


def test_docker_attempts_need_the_marker_only_when_some_node_has_it() -> None:
    with_marker = [{"NodeID": "a", "Resources": {"CPU": 4}}, {"NodeID": "b", "Resources": {"CPU": 4, "docker": 2}}]
    assert attempt_demand(RayOptions(), docker=True, nodes=with_marker) == {"CPU": 1.0, "docker": 1.0}
    assert [p.node_id for p in plan_slots(with_marker, {"CPU": 1.0, "docker": 1.0}, 8)] == ["b"]
    without = [{"NodeID": "a", "Resources": {"CPU": 4}}]
    assert attempt_demand(RayOptions(), docker=True, nodes=without) == {"CPU": 1.0}
    assert attempt_demand(RayOptions(num_cpus=0), docker=False, nodes=without) == {}


@pytest.mark.parametrize(("options", "message"), [
    ({"adress": "auto"}, "has no option(s) adress"),
    ({"num_cpus": "-1"}, "must be a positive number"),
    ({"resources": "{"}, "not JSON"),
    ({"resources": '{"gpu_box": "many"}'}, "not a number"),
    ({"startup_timeout": "0"}, "must be a positive number"),
])
def test_bad_options_are_usage_errors_that_say_what_to_write(options, message) -> None:
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        RayOptions.parse(options)


def test_options_parse() -> None:
    parsed = RayOptions.parse({"address": "auto", "num_cpus": "0.5", "resources": '{"gpu_box": 1}',
                               "node_ip": "127.0.0.2"})
    assert (parsed.address, parsed.num_cpus, dict(parsed.resources), parsed.node_ip) == (
        "auto", 0.5, {"gpu_box": 1.0}, "127.0.0.2")
    assert RayOptions.parse({"address": "local"}).address is None


def test_a_suite_cell_naming_another_cluster_than_the_one_joined_is_a_usage_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The cells of one suite share this process's Ray membership: one naming another cluster is refused (it
    would otherwise run on the first cell's cluster); one naming the same shares it."""
    import sys
    import types

    from agentcompass_ray import cluster

    monkeypatch.setitem(sys.modules, "ray", types.SimpleNamespace(is_initialized=lambda: True))
    joined = cluster.Connection(joined=False, address="127.0.0.2:6390")
    monkeypatch.setattr(cluster, "_shared", [joined])
    same = cluster.connect(RayOptions.parse({"address": "127.0.0.2:6390"}), local_cpus=1, secrets=())
    assert same is joined and joined.users == 2
    for other, named in (("10.0.0.9:6379", "the Ray cluster at 10.0.0.9:6379"), (None, "a local Ray instance")):
        with pytest.raises(UsageError) as caught:
            cluster.connect(RayOptions.parse({"address": other} if other else {}), local_cpus=1, secrets=())
        message = str(caught.value)
        assert message.startswith("this process already runs on the Ray cluster at 127.0.0.2:6390, not " + named)
        assert "same --executor-arg address" in message and "\n" not in message
