"""``EnvironmentProvider.plan``: a provider learns, before any attempt opens a session, every open the run will
ask for, in order (what a warm pool of started environments sizes itself by)."""

from __future__ import annotations

from agentcompass.builtin.local.provider import LocalProvider
from agentcompass.runtime import EnvironmentDemand, EnvironmentSpec

from tests.helpers.squares_plugin import SquaresBenchmark

SHARED = EnvironmentSpec(image="python:3.11-slim")


class OneSpec(SquaresBenchmark):
    """Every task returns the same spec object, as many benchmarks do."""

    def environment_spec(self, task, req):
        return SHARED


class Recording(LocalProvider):
    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, object]] = []

    async def setup(self, specs, *, run_id):
        self.events.append(("setup", list(specs)))
        await super().setup(specs, run_id=run_id)

    async def plan(self, demand: EnvironmentDemand) -> None:
        self.events.append(("plan", demand))

    async def open(self, spec, **kwargs):
        self.events.append(("open", kwargs["task_id"]))
        return await super().open(spec, **kwargs)


async def test_plan_comes_after_setup_before_any_open_with_every_open_in_order(agentcompass_run):
    provider = Recording()
    run = await agentcompass_run(OneSpec(), environment=provider, trials=2, concurrency=3, max_environments=2)
    assert run.exit_code == 0
    kinds = [kind for kind, _ in provider.events]
    assert kinds[:2] == ["setup", "plan"] and kinds[2:] == ["open"] * 8
    assert provider.events[0][1] == [SHARED]  # setup: each distinct spec once
    demand = provider.events[1][1]
    assert isinstance(demand, EnvironmentDemand)
    assert len(demand.opens) == 8 and all(spec is SHARED for spec in demand.opens)  # 4 tasks, 2 trials each
    assert (demand.concurrency, demand.max_environments) == (3, 2)
