"""``-b dataset=OWNER/NAME[:SPLIT]``: a SWE-bench dataset by its Hugging Face name, read offline from the datasets
cache. The cache is written by the ``datasets`` library itself, as a first (online) load leaves it: its builder
prepares the rows under ``HF_DATASETS_CACHE/OWNER___NAME/default/0.0.0/REVISION``; then the real CLI, in a
child process with ``HF_DATASETS_OFFLINE=1``, resolves the name from there."""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from agentcompass.errors import UsageError
from agentcompass_swebench.benchmark import SWEBench
from agentcompass_swebench.hub import HubDataset, parse_hub_name
from agentcompass_swebench.options import Options
from hypothesis import given
from hypothesis import strategies as st

from tests.helpers.cli_processes import run_cli_subprocess
from tests.swebench.instances import Suite

#: Writes ROWS (a JSON file) into the datasets cache as the dataset NAME's split "test", with datasets' builder.
CACHE_WRITER = """
import json, sys
import datasets

rows_file, name = sys.argv[1], sys.argv[2]
rows = json.load(open(rows_file))


class Rows(datasets.GeneratorBasedBuilder):
    def _info(self):
        return datasets.DatasetInfo()

    def _split_generators(self, dl_manager):
        return [datasets.SplitGenerator(name="test")]

    def _generate_examples(self):
        yield from enumerate(rows)


builder = Rows(dataset_name=name.split("/")[1], repo_id=name, config_name="default", hash="0" * 40)
builder.download_and_prepare()
print(builder.cache_dir)
"""

NAME = "acme/tiny-swebench"


def offline(home: Path) -> dict[str, str]:
    return {"HF_HOME": str(home), "HF_DATASETS_CACHE": str(home / "datasets"), "HF_HUB_CACHE": str(home / "hub"),
            "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}


@pytest.fixture(scope="module")
def hub_home(swebench_rows: Suite, tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("hf-home")
    rows = home / "rows.json"
    rows.write_text(json.dumps(list(swebench_rows.rows.values())))
    written = subprocess.run([sys.executable, "-c", CACHE_WRITER, str(rows), NAME], capture_output=True, text=True,
                             timeout=300, env={**_base_env(), **offline(home)})
    assert written.returncode == 0, written.stderr
    assert Path(written.stdout.strip()) == home / "datasets" / "acme___tiny-swebench" / "default" / "0.0.0" / ("0" * 40)
    return home


def _base_env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("HF_")}


def tasks(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli_subprocess("tasks", "list", "swebench", *args, env=offline(home), testing=False, timeout=300)


@pytest.mark.slow  # two child processes that import swebench and datasets: about 20 s each on a busy machine
def test_a_cached_dataset_resolves_by_name_offline(hub_home: Path, swebench_rows: Suite) -> None:
    listed = tasks(hub_home, "-b", f"dataset={NAME}", "--json")  # the real CLI
    assert listed.returncode == 0, listed.stderr
    assert [t["task_id"] for t in json.loads(listed.stdout)] == list(swebench_rows.rows)
    # More loads in one child (each new process pays the imports again): the errors are one line each.
    outcomes = json.loads(_child(hub_home, LOADS).stdout)
    assert outcomes[f"{NAME}:test"] == ["acme__calc-1"]
    assert outcomes[f"{NAME}:dev"] == (f"swebench: -b dataset={NAME}: no split 'dev' (Unknown split \"dev\". "
                                       "Should be one of ['test'].)")
    missing = outcomes["acme/not-cached"]
    assert "\n" not in missing and missing.startswith(
        f"swebench: -b dataset=acme/not-cached: not in the datasets cache ({hub_home / 'datasets'}) and the "
        "Hugging Face Hub is unreachable")
    assert missing.endswith("or give a file (-b dataset=FILE)")


#: Loads SWEBench by each name of argv and prints {name: instance ids, or the UsageError's message}.
LOADS = """
import json, sys
from agentcompass.errors import UsageError
from agentcompass_swebench.benchmark import SWEBench

out = {}
for name, ids in (("NAME:test", "acme__calc-1"), ("NAME:dev", ""), ("acme/not-cached", "")):
    try:
        out[name] = list(SWEBench(dataset=name, instance_ids=ids).instances)
    except UsageError as exc:
        out[name] = str(exc)
print(json.dumps(out))
""".replace("NAME", NAME)


def _child(home: Path, code: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**_base_env(), **offline(home)})
    assert done.returncode == 0, done.stderr
    return done


class NoSuchRepo(http.server.BaseHTTPRequestHandler):
    """The Hub's answer to a dataset it does not have: 404 with ``X-Error-Code: RepoNotFound``."""

    def _not_found(self) -> None:
        body = json.dumps({"error": "Repository not found"}).encode()
        self.send_response(404)
        self.send_header("X-Error-Code", "RepoNotFound")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_GET = do_HEAD = _not_found

    def log_message(self, format, *args):  # quiet
        pass


@pytest.mark.slow  # a child process that imports swebench and datasets
def test_a_name_the_hub_does_not_know_is_one_line(tmp_path: Path) -> None:
    hub = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NoSuchRepo)  # the Hub, on loopback
    threading.Thread(target=hub.serve_forever, daemon=True).start()
    try:
        code = ("from agentcompass.errors import UsageError\n"
                "from agentcompass_swebench.benchmark import SWEBench\n"
                "try:\n    SWEBench(dataset='acme/nope')\n"
                "except UsageError as exc:\n    print(exc)\n")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                              env={**_base_env(), "HF_HOME": str(tmp_path),
                                   "HF_ENDPOINT": f"http://127.0.0.1:{hub.server_address[1]}"})
    finally:
        hub.shutdown()
        hub.server_close()
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "swebench: -b dataset=acme/nope: no such dataset on the Hugging Face Hub, or you may not read it (Dataset "
        "'acme/nope' doesn't exist on the Hub or cannot be accessed.); check the name, or log in (hf auth login)")


def test_a_file_still_works_and_wins_over_a_name(swebench_rows: Suite, tmp_path: Path, monkeypatch) -> None:
    assert list(SWEBench(dataset=str(swebench_rows.dataset)).instances) == list(swebench_rows.rows)
    # A relative path shaped like OWNER/NAME that exists is the path, not a Hub name.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "acme").mkdir()
    swebench_rows.write(tmp_path / "acme" / "test.jsonl", ["acme__calc-1"])
    assert list(SWEBench(dataset="acme").instances) == ["acme__calc-1"]
    assert Options.parse({"dataset": "acme"}).dataset == Path("acme")
    with pytest.raises(UsageError, match=r"no such file or directory .*OWNER/NAME"):
        SWEBench(dataset="acme/missing.jsonl")


def test_the_split_comes_from_the_name_or_the_option_and_they_must_agree() -> None:
    assert Options.parse({"dataset": "SWE-bench/SWE-bench_Verified"}).split == "test"
    assert Options.parse({"dataset": "SWE-bench/SWE-bench_Lite:dev"}).split == "dev"
    parsed = Options.parse({"dataset": "SWE-bench/SWE-bench_Lite", "split": "dev"})
    assert (parsed.dataset, parsed.split) == (HubDataset("SWE-bench/SWE-bench_Lite"), "dev")
    with pytest.raises(UsageError, match="names split 'dev' but -b split=test: give one"):
        Options.parse({"dataset": "SWE-bench/SWE-bench_Lite:dev", "split": "test"})


WORD = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,12}", fullmatch=True)


@given(owner=WORD, name=WORD, split=st.none() | WORD)
def test_hub_names_parse(owner: str, name: str, split: str | None) -> None:
    value = f"{owner}/{name}" + (f":{split}" if split else "")
    parsed = parse_hub_name(value)
    if name.lower().endswith((".jsonl", ".json", ".parquet")):
        assert parsed is None
    else:
        assert parsed == HubDataset(f"{owner}/{name}", split) and str(parsed) == value


@pytest.mark.parametrize("value", ["/data/verified", "./acme/x", "a/b/c", "verified", "acme/x.parquet",
                                   "acme/x:", "acme/x:a b", "~/x"])
def test_paths_are_not_hub_names(value: str) -> None:
    assert parse_hub_name(value) is None
