"""Run the real ``agentcompass`` CLI in this process with the testing plugin added (for subprocess tests).

    python -m tests.helpers.cli run scripted none mock ...
"""

import os

from agentcompass.cli.main import cli
from agentcompass.plugins import load_plugins

from tests.helpers import event_recorder, testing_plugin

if __name__ == "__main__":
    host = load_plugins()
    host.add_plugin(testing_plugin, "testing")
    if os.environ.get(event_recorder.VARIABLE):
        host.add_plugin(event_recorder, "event-recorder")
    host.add_commands(cli)
    cli(prog_name="agentcompass", obj={"plugin_host": host})
