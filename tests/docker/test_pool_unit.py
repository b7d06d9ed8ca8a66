"""The warm pool's bookkeeping for recycled containers (no engine): a container given back is wanted only by a
predicted open that has none yet, and the next open of its spec takes it."""

from __future__ import annotations

import asyncio

from agentcompass_docker.pool import WarmPool
from hypothesis import given
from hypothesis import strategies as st


async def _never(key: object) -> str:
    raise AssertionError("the pool must not start a container here")


@given(opens=st.lists(st.sampled_from("ab"), max_size=8), given_back=st.integers(0, 4))
def test_a_spec_wants_a_container_back_only_while_a_predicted_open_has_none(opens: list[str], given_back: int):
    async def check() -> None:
        pool: WarmPool[str] = WarmPool(_never, lambda: True)  # size 0: it starts nothing itself
        pool.predict(opens)
        for i in range(given_back):
            if pool.wants("a"):
                done = asyncio.get_running_loop().create_future()
                done.set_result(f"c{i}")
                pool.give("a", asyncio.ensure_future(done))
        ready = min(given_back, opens.count("a"))
        assert pool.pending == ready
        assert pool.wants("a") is (opens.count("a") > ready)
        assert pool.wants("b") is (opens.count("b") > 0)
        if "a" in opens and ready:
            taken = pool.take("a")
            assert taken is not None and (await taken).startswith("c")
        pool.close()
        assert not pool.wants("a") and not pool.wants("b")

    asyncio.run(check())
