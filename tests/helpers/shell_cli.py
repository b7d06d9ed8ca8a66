"""The real ``agentcompass`` CLI with the testing plugin and the ``shell`` benchmark added.

    python -m tests.helpers.shell_cli run shell none mock -b command='sleep 1' ...
"""

from agentcompass.cli.main import cli
from agentcompass.plugins import load_plugins

from tests.helpers import shell_benchmark, testing_plugin

if __name__ == "__main__":
    host = load_plugins()
    host.add_plugin(testing_plugin, "testing")
    host.add_plugin(shell_benchmark, "shell")
    cli(prog_name="agentcompass", obj={"plugin_host": host})
