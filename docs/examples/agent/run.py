"""A minimal agent for the ``command`` harness (the README's example): standard library only.

It reads the task's instruction, asks the model once through the run's OpenAI-compatible gateway
(``OPENAI_BASE_URL``, ``OPENAI_API_KEY``, ``AGENTCOMPASS_MODEL``, set by the harness), and writes the reply
to ``AGENTCOMPASS_ANSWER_FILE``. Upload it with ``--harness-arg upload=docs/examples/agent:/opt/agent``.
"""

from __future__ import annotations

import argparse
import json
import os
import urllib.request


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--task", required=True, help="the instruction file")
    args = parser.parse_args()
    with open(args.task, encoding="utf-8") as f:
        instruction = f.read()
    body = json.dumps({
        "model": os.environ["AGENTCOMPASS_MODEL"],
        "messages": [{"role": "user", "content": instruction}],
    }).encode()
    request = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"].rstrip("/") + "/chat/completions", data=body,
        headers={"Content-Type": "application/json", "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
    with urllib.request.urlopen(request, timeout=300) as response:
        reply = json.load(response)["choices"][0]["message"].get("content") or ""
    with open(os.environ["AGENTCOMPASS_ANSWER_FILE"], "w", encoding="utf-8") as f:
        f.write(reply)
    print(f"answered {len(reply)} characters")


if __name__ == "__main__":
    main()
