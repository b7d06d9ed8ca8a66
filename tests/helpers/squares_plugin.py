"""The README's third-party benchmark plugin ("Writing a plugin"), as one module: the third-party test
installs exactly this file into a fresh virtual environment, and the testing-kit tests import it."""

import json
from dataclasses import replace

from agentcompass import hookimpl
from agentcompass.runtime import HarnessFreeBenchmark, PreparedTask, RunResult, TaskSpec, TaskStatus
from agentcompass.runtime.metrics import make_metric_contract

# The upstream runner: placed into the task's environment by prepare_task, run by run_task.
RUNNER = """
import argparse, json
p = argparse.ArgumentParser(); p.add_argument("cmd"); p.add_argument("--request"); p.add_argument("--output")
a = p.parse_args()
n = json.load(open(a.request))["n"]
json.dump({"final_answer": str(n * n), "reward": 1.0 if n % 2 == 0 else 0.0}, open(a.output, "w"))
"""


class SquaresBenchmark(HarnessFreeBenchmark):
    name = "squares"
    evaluation_environment_mode = "reuse"      # evaluate in the task's own environment
    metric_contract = make_metric_contract(primary="score", scalar=("score",), labels={"score": "Reward"})

    def load_tasks(self, req):
        return [TaskSpec(task_id=f"sq{n}", category="even" if n % 2 == 0 else "odd", data={"n": n})
                for n in range(4)]

    async def prepare_task(self, task, req, plan, env=None):
        # Idempotent: a retry calls it again. Relative paths resolve against the environment's workdir.
        await env.write_text("squares_runner/__init__.py", "")
        await env.write_text("squares_runner/runner.py", RUNNER)
        await env.write_text("request.json", json.dumps(dict(task.data)))
        return PreparedTask(task_id=task.task_id, metadata={"official_runner": {
            "request_path": "request.json", "result_path": "result.json", "timeout_seconds": 30}})

    async def run_task(self, task, prepared, req, plan, env=None):
        runner = prepared.metadata["official_runner"]
        execution = await env.exec(["python3", "-m", "squares_runner.runner", "run", "--request",
                                    runner["request_path"], "--output", runner["result_path"]],
                                   timeout=runner["timeout_seconds"])
        if execution.returncode != 0 or execution.timed_out:
            return RunResult(task_id=task.task_id, category=task.category, status=TaskStatus.RUN_ERROR,
                             error=(execution.stderr or execution.stdout).strip() or "runner failed")
        payload = json.loads(await env.read_text(runner["result_path"]))
        return RunResult(task_id=task.task_id, category=task.category, status=TaskStatus.COMPLETED,
                         final_answer=payload.get("final_answer"), artifacts={"official_result": payload})

    async def evaluate(self, task, prepared, result, req, plan, env=None):
        # Scoring lives here, not in run_task: a failed run keeps its status and error.
        if result.status != TaskStatus.COMPLETED or result.error:
            return replace(result, metrics={})
        return replace(result, metrics={"score": float(result.artifacts["official_result"]["reward"])})


@hookimpl
def register_benchmarks(register):
    register("squares", SquaresBenchmark)
