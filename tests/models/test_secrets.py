"""Credentials never leak: random key values never appear in any file of the run directory, in the CLI's
output, in the structured logs, or in the task's environment — not even when the server echoes the key in
an error, or the model repeats it in its replies."""

from __future__ import annotations

import shutil
import string
import tempfile
from pathlib import Path

from agentcompass.cli.main import cli as agentcompass_cli
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers.examples import examples
from tests.models.fake_server import FakeModelServer
from tests.models.models_support import MODEL, ProbeBenchmark, plugin_host

secret_values = st.text(alphabet=string.ascii_letters + string.digits + "-_.~+/=\"\\\\", min_size=6, max_size=48).map(
    lambda s: "sk-" + s)


def files_text(root: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in root.rglob("*") if p.is_file())


def invoke(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    result = CliRunner().invoke(agentcompass_cli, args, obj={"plugin_host": plugin_host()}, env=env,
                                catch_exceptions=False)
    return result.exit_code, result.output + (result.stderr if result.stderr_bytes is not None else "")


@settings(max_examples=examples(20), deadline=None, suppress_health_check=list(HealthCheck))
@given(good=secret_values, wrong=secret_values, via=st.sampled_from(["gateway", "client"]))
def test_random_keys_never_reach_the_run_directory_logs_or_environments(good: str, wrong: str, via: str) -> None:
    if good == wrong:
        wrong += "-x"
    server = FakeModelServer(api_keys={good}, models={MODEL}, leak_key=True).start_in_thread()
    work = Path(tempfile.mkdtemp(prefix="ac-secrets-"))
    ProbeBenchmark.environment_dumps.clear()
    try:
        common = ["run", "model_probe", "none", f"openai/{MODEL}", "-b", "n_tasks=3", "-b", f"via={via}",
                  "-b", "dump_env=1", "-c", "2", "--json", "--max-retries", "0"]
        env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": good}
        code, output = invoke([*common, "-o", str(work / "ok")], env)
        assert code == 0, output
        # The model repeated the key in its answers; the record masks it.
        assert "***" in (work / "ok" / "trajectories.jsonl").read_text()

        # A wrong key: the server echoes it in its 401; the run stops early and says why, without the key.
        code, bad_output = invoke([*common, "-o", str(work / "bad")], {**env, "OPENAI_API_KEY": wrong})
        assert code == 1
        assert "authentication failed" in (work / "bad" / "summary.json").read_text()

        for value in (good, wrong):
            assert value not in files_text(work)
            assert value not in output + bad_output
            assert all(value not in dump for dump in ProbeBenchmark.environment_dumps)
        assert ProbeBenchmark.environment_dumps and all(
            "OPENAI_API_KEY=acgw-" in dump for dump in ProbeBenchmark.environment_dumps)
    finally:
        server.stop_thread()
        shutil.rmtree(work, ignore_errors=True)
