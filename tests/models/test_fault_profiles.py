"""Fault profiles (``--faults``): built-ins and TOML files load, a bad one names its key, and which fault a call
gets is a pure function of the seed and the call's position."""

from __future__ import annotations

from pathlib import Path

import pytest
from agentcompass.errors import UsageError
from agentcompass.models.fault_profiles import (
    BUILTIN_PROFILES,
    FAULT_KINDS,
    FaultRates,
    fault_for,
    load_profile,
    profile_from,
)
from hypothesis import given, settings
from hypothesis import strategies as st

rates_st = st.builds(
    FaultRates, rate_limit=st.floats(0, 0.2), server_error=st.floats(0, 0.2), connection_reset=st.floats(0, 0.1),
    timeout=st.floats(0, 0.1), stream_cut=st.floats(0, 0.1), bad_tool_json=st.floats(0, 0.1),
    empty_answer=st.floats(0, 0.1), latency=st.floats(0, 3), latency_rate=st.floats(0, 1),
    latency_tail=st.sampled_from(["fixed", "pareto"]))
position_st = st.tuples(st.integers(0, 2**63), st.text(max_size=12), st.integers(1, 5),
                        st.sampled_from(["agent", "user", "judge"]), st.integers(1, 500))


@settings(max_examples=300, deadline=None)
@given(rates_st, position_st)
def test_the_same_seed_and_position_give_the_same_fault(rates: FaultRates, position: tuple) -> None:
    assert fault_for(rates, *position) == fault_for(rates, *position)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(sorted(BUILTIN_PROFILES)), st.integers(0, 2**32), st.lists(st.integers(1, 200), max_size=20))
def test_a_builtin_profile_faults_a_run_the_same_way_twice(name: str, seed: int, indexes: list[int]) -> None:
    rates = load_profile(name).rates("agent")
    first = [fault_for(rates, seed, "task", 1, "agent", i) for i in indexes]
    assert first == [fault_for(load_profile(name).rates("agent"), seed, "task", 1, "agent", i) for i in indexes]


@settings(max_examples=50, deadline=None)
@given(position_st)
def test_zero_rates_fault_nothing(position: tuple) -> None:
    assert not fault_for(FaultRates(), *position)


def test_each_kind_comes_at_about_its_rate() -> None:
    rates = FaultRates(rate_limit=0.1, server_error=0.05, stream_cut=0.2, empty_answer=0.05)
    kinds = [fault_for(rates, 11, "t", 1, "agent", i).kind for i in range(1, 20_001)]
    for kind, rate in (("rate_limit", 0.1), ("server_error", 0.05), ("stream_cut", 0.2), ("empty_answer", 0.05)):
        assert abs(kinds.count(kind) / len(kinds) - rate) < 0.01, kind
    assert kinds.count("") / len(kinds) == pytest.approx(0.6, abs=0.015)


def test_heavy_tailed_latency_has_a_tail() -> None:
    rates = FaultRates(latency=1.0, latency_tail="pareto")
    delays = sorted(fault_for(rates, 3, "t", 1, "agent", i).latency_s for i in range(1, 5001))
    assert delays[0] >= 1.0 and delays[len(delays) // 2] < 3 and delays[int(len(delays) * 0.95)] > 10


def test_a_role_table_overrides_the_default() -> None:
    profile = profile_from("p", {"default": {"rate_limit": 0.1, "retry_after": 3}, "agent": {"rate_limit": 0.5}})
    assert profile.rates("agent") == FaultRates(rate_limit=0.5, retry_after=3)
    assert profile.rates("user") == FaultRates(rate_limit=0.1, retry_after=3)


def test_every_builtin_profile_loads() -> None:
    assert {"flaky-api", "slow-api", "cut-streams", "bad-tool-json"} <= set(BUILTIN_PROFILES)
    for name in BUILTIN_PROFILES:
        assert load_profile(name).name == name
    assert load_profile("none").inert and not load_profile("flaky-api").inert


@pytest.mark.parametrize(("text", "said"), [
    ("[default]\nrate_limt = 0.1\n", "unknown key default.rate_limt; use one of rate_limit,"),
    ("[default]\nrate_limit = 'x'\n", "default.rate_limit = 'x': must be a number"),
    ("[agent]\nstream_cut = 1.5\n", "agent.stream_cut = 1.5: a rate is a share of the calls, from 0 to 1"),
    ("[default]\ncut_after = -1\n", "default.cut_after = -1: must be 0 or more"),
    ("[default]\nrate_limit = 0.7\nserver_error = 0.7\n", "[default] rates add up to 1.4"),
    ("agent = 0.5\n", "agent = 0.5 is not a table"),
    ("[default\n", "not a readable TOML file"),
])
def test_a_bad_profile_names_what_is_wrong(tmp_path: Path, text: str, said: str) -> None:
    path = tmp_path / "p.toml"
    path.write_text(text)
    with pytest.raises(UsageError, match=r"^--faults ") as caught:
        load_profile(str(path))
    assert said in str(caught.value) and "\n" not in str(caught.value)


def test_an_unknown_name_lists_the_builtins() -> None:
    with pytest.raises(UsageError, match="not a built-in profile; use a TOML file or one of flaky-api"):
        load_profile("flakey-api")


def test_the_kinds_are_the_issues() -> None:
    assert FAULT_KINDS == ("rate_limit", "server_error", "connection_reset", "timeout", "stream_cut",
                           "bad_tool_json", "empty_answer")
