"""A one-shot coding agent on the OpenAI SDK: asks the run's model (through the gateway, streamed) for
``solution.py`` and writes it. The SDK's own retries (4, honouring Retry-After) ride out rate limits, server
errors and reset connections; a stream cut in the middle is retried here, as an agent would."""

import os
import sys

import openai

client = openai.OpenAI(max_retries=4, timeout=30)
task = open(sys.argv[1]).read()
for attempt in range(3):
    try:
        stream = client.chat.completions.create(model=os.environ["AGENTCOMPASS_MODEL"], stream=True,
                                                messages=[{"role": "user", "content": task}])
        text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
        break
    except (openai.APIConnectionError, openai.APIError) as exc:  # a cut stream: ask again
        print(f"attempt {attempt + 1}: {exc}", file=sys.stderr)
else:
    sys.exit("the model could not be reached")
open("solution.py", "w").write(text)
open(os.environ["AGENTCOMPASS_ANSWER_FILE"], "w").write("wrote solution.py\n")
