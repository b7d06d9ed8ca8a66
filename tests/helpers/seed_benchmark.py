"""The spec's benchmark, with ``run_task`` and ``evaluate`` copied verbatim from
``shared/seeds/benchmark-driven-execution.en.md``. Only ``load_tasks``, ``prepare_task`` and the tiny upstream
runner it places into the environment are ours; they are what the seed says "depend on the actual protocol".
"""

import json

from agentcompass.runtime import (
    EnvironmentSession,
    ExecutionPlan,
    HarnessFreeBenchmark,
    PreparedTask,
    RunRequest,
    RunResult,
    TaskSpec,
    TaskStatus,
)
from agentcompass.runtime.metrics import make_metric_contract

# ---- verbatim from the seed -------------------------------------------------------------------------------


class ExampleInteractiveBenchmark(HarnessFreeBenchmark):
    evaluation_environment_mode = "reuse"
    metric_contract = make_metric_contract(
        primary="score",
        scalar=("score",),
        labels={"score": "Reward"},
    )

    async def run_task(
        self,
        task: TaskSpec,
        prepared: PreparedTask,
        req: RunRequest,
        plan: ExecutionPlan,
        env: EnvironmentSession | None = None,
    ) -> RunResult:
        _ = req, plan
        if env is None:
            raise RuntimeError(
                "example_interactive requires an EnvironmentSession"
            )

        runner = prepared.metadata["official_runner"]
        execution = await env.exec(
            [
                "python3",
                "-m",
                "example_interactive.runner",
                "run",
                "--request",
                runner["request_path"],
                "--output",
                runner["result_path"],
            ],
            timeout=runner["timeout_seconds"],
        )
        if execution.returncode != 0 or execution.timed_out:
            detail = (execution.stderr or execution.stdout).strip()
            return RunResult(
                task_id=task.task_id,
                category=task.category,
                status=TaskStatus.RUN_ERROR,
                error=detail or "official runner failed",
            )

        payload = json.loads(
            await env.read_text(runner["result_path"])
        )
        return RunResult(
            task_id=task.task_id,
            category=task.category,
            status=TaskStatus.COMPLETED,
            final_answer=payload.get("final_answer"),
            artifacts={"official_result": payload},
        )


from dataclasses import replace  # noqa: E402


async def evaluate(
    self,
    task: TaskSpec,
    prepared: PreparedTask,
    result: RunResult,
    req: RunRequest,
    plan: ExecutionPlan,
    env: EnvironmentSession | None = None,
) -> RunResult:
    _ = task, prepared, req, plan
    if result.status != TaskStatus.COMPLETED or result.error:
        return replace(result, metrics={})
    if env is None:
        raise RuntimeError("evaluation requires the task Environment")

    payload = result.artifacts["official_result"]
    reward = float(payload["reward"])
    return replace(
        result,
        metrics={"score": reward},
    )

# ---- end of the seed's code ---------------------------------------------------------------------------------

ExampleInteractiveBenchmark.evaluate = evaluate  # type: ignore[method-assign]

# The upstream runner this test benchmark places in the environment: it asks the run's agent model (through
# the gateway, with the OPENAI_* variables the runtime sets) whether to say "yes", and rewards a "yes". The
# task "crash" makes it fail, "hang" makes it sleep past its timeout.
RUNNER_SOURCE = r'''
import argparse, json, os, sys, time, urllib.request

def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("command")
    parser.add_argument("--request", required=True)
    parser.add_argument("--output", required=True)
    args = parser.parse_args()
    request = json.load(open(args.request))
    if request["mode"] == "crash":
        print("upstream runner crashed on purpose", file=sys.stderr)
        sys.exit(3)
    if request["mode"] == "hang":
        time.sleep(60)
    body = json.dumps({"model": os.environ["AGENTCOMPASS_MODEL"],
                       "messages": [{"role": "user", "content": request["question"]}]}).encode()
    http = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body,
                                  headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
                                           "Content-Type": "application/json"})
    reply = json.load(urllib.request.urlopen(http, timeout=30))
    answer = reply["choices"][0]["message"]["content"]
    reward = 1.0 if request["expect"] in answer else 0.0
    json.dump({"final_answer": answer, "reward": reward}, open(args.output, "w"))

main()
'''

TASKS = {
    "echo-yes": {"mode": "ok", "question": "please say yes", "expect": "yes"},
    "echo-no": {"mode": "ok", "question": "please say something", "expect": "banana"},
    "crash": {"mode": "crash", "question": "", "expect": ""},
    "hang": {"mode": "hang", "question": "", "expect": ""},
}


async def load_tasks_impl(self, req):
    only = self.options.get("tasks")
    for task_id, data in TASKS.items():
        if only and task_id not in only.split(","):
            continue
        yield TaskSpec(task_id=task_id, category=data["mode"], data=data)


async def prepare_task_impl(self, task, req, plan, env=None):
    await env.write_text("example_interactive/__init__.py", "")
    await env.write_text("example_interactive/runner.py", RUNNER_SOURCE)
    await env.write_text("request.json", json.dumps(dict(task.data)))
    return PreparedTask(
        task_id=task.task_id,
        metadata={"official_runner": {"request_path": "request.json", "result_path": "result.json",
                                      "timeout_seconds": float(self.options.get("runner_timeout", 20))}},
    )


ExampleInteractiveBenchmark.load_tasks = load_tasks_impl  # type: ignore[method-assign]
ExampleInteractiveBenchmark.prepare_task = prepare_task_impl  # type: ignore[method-assign]
