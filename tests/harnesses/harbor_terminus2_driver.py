"""Runs Harbor's own Terminus 2 agent (``harbor.agents.terminus_2.Terminus2``, from an installed ``harbor``)
on one task, in a running container, against the OpenAI-style server in ``OPENAI_BASE_URL``.

Harbor's ``harbor run`` needs docker compose; this drives the agent class directly, with an environment that
runs each command as Harbor's docker environment does (``bash -c COMMAND`` in the container), so the agent's
own tmux session, loop, prompts and parsers make every request.

    python harbor_terminus2_driver.py CONTAINER INSTRUCTION_FILE LOGS_DIR [OPTIONS_JSON]

OPTIONS_JSON: more keyword arguments of ``Terminus2`` (``model_info``, ``proactive_summarization_threshold``).
"""

import asyncio
import json
import sys
from pathlib import Path

from harbor.agents.terminus_2.terminus_2 import Terminus2
from harbor.environments.base import ExecResult
from harbor.models.agent.context import AgentContext


class ContainerExec:
    """The part of Harbor's ``BaseEnvironment`` that Terminus 2 uses (without session recording)."""

    default_user = None
    session_id = "agentcompass-fidelity"

    def __init__(self, container: str) -> None:
        self.container = container

    async def exec(self, command, cwd=None, env=None, timeout_sec=None, user=None):
        argv = ["docker", "exec", self.container, "bash", "-c", command]
        proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.PIPE)
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout_sec)
        except TimeoutError:
            proc.kill()
            raise
        return ExecResult(stdout=out.decode(), stderr=err.decode(), return_code=proc.returncode)

    async def is_dir(self, path, user=None):
        return False


async def main(container: str, instruction_file: str, logs_dir: str, options: str = "{}") -> None:
    env = ContainerExec(container)
    agent = Terminus2(logs_dir=Path(logs_dir), model_name="openai/scripted", record_terminal_session=False,
                      **json.loads(options))
    await agent.setup(env)
    await agent.run(Path(instruction_file).read_text(), env, AgentContext())
    print(agent._n_episodes)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
