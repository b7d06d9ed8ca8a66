"""Run the real ``agentcompass`` CLI in this process with the testing plugin added (for subprocess tests).

    python -m tests.helpers.cli run scripted none mock ...
"""

from agentcompass.cli.main import cli
from agentcompass.plugins import load_plugins

from tests.helpers import testing_plugin

if __name__ == "__main__":
    host = load_plugins()
    host.add_plugin(testing_plugin, "testing")
    host.add_commands(cli)
    cli(prog_name="agentcompass", obj={"plugin_host": host})
