"""``agentcompass new``: a pip-installable plugin package of one kind (benchmark, harness, environment) written
from a template — its ``pyproject.toml`` with the ``agentcompass`` entry point, a minimal working
implementation that imports only the public API, a README and a test that uses the testing kit."""

from agentcompass.scaffold.writer import KINDS, PluginNames, plugin_names, write_plugin

__all__ = ["KINDS", "PluginNames", "plugin_names", "write_plugin"]
