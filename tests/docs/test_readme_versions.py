"""The agents README's table names each agent's pinned version and package, as the catalog pins them."""

from __future__ import annotations

import re

from agentcompass_agents.catalog import AGENTS

from tests.docs.readme_commands import ROOT


def test_the_agents_readme_table_gives_the_pinned_versions() -> None:
    text = (ROOT / "plugins" / "agentcompass-agents" / "README.md").read_text()
    rows = {m[0]: (m[1], m[2]) for m in re.findall(r"^\| `([a-z-]+)` \| `([^`]+)` \([a-zA-Z]+\) \| ([^ |]+) \|", text,
                                                      re.M)}
    assert rows == {name: (spec.package, spec.version) for name, spec in AGENTS.items()}
