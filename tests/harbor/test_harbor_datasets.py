"""``-b dataset=``: Harbor datasets by name through a registry in Harbor's JSON format, each task fetched with
real ``git`` from local repositories (``file://``) at its pinned commit, cached by content under
``$XDG_CACHE_HOME`` and reused with the repositories gone; ``git+URL[@REV][#PATH]`` datasets; the registry
over real HTTP on loopback; ``agentcompass tasks list``."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from agentcompass.errors import UsageError
from agentcompass.testing import run_benchmark
from agentcompass_harbor import registry as registry_module
from agentcompass_harbor.benchmark import HarborBenchmark
from agentcompass_harbor.datasets import DatasetError, parse_git_ref
from agentcompass_harbor.registry import RegistryError, latest_version, parse_registry
from hypothesis import given
from hypothesis import strategies as st

from tests.harbor.taskdirs import REWARD_BY_EXIT, write_task

LOCAL_DOCKERFILE = "FROM python:3.11-slim\nWORKDIR /app\n"


def git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args], cwd=cwd,
                          capture_output=True, text=True, check=True)
    return done.stdout.strip()


def greeting_task(root: Path, name: str, word: str) -> None:
    """A task whose verifier wants ``/app/greeting.txt`` to hold ``word`` (the oracle writes it)."""
    write_task(root, name, instruction=f"Write `{word}` to /app/greeting.txt.",
               test=f'grep -qx "{word}" /app/greeting.txt\n' + REWARD_BY_EXIT,
               solve=f"echo {word} > /app/greeting.txt\n", dockerfile=LOCAL_DOCKERFILE,
               toml="[metadata]\ndifficulty = \"easy\"\n")


@dataclass
class Repos:
    tasks: Path          # repository of tasks/hello and tasks/other
    extra: Path          # a second repository with one task at its root dir "solo"
    first: str           # commit 1 of ``tasks``: hello says "hello"
    second: str          # commit 2: hello says "bonjour", other unchanged
    extra_commit: str
    registry: Path

    def url(self, repo: Path) -> str:
        return repo.as_uri()


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "xdg-cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    return home / "agentcompass" / "harbor"


@pytest.fixture
def repos(tmp_path: Path) -> Repos:
    tasks = tmp_path / "repos" / "tb-tasks"
    tasks.mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=tasks)
    greeting_task(tasks / "tasks", "hello", "hello")
    greeting_task(tasks / "tasks", "other", "other")
    (tasks / "README.md").write_text("not a task\n")
    git("add", ".", cwd=tasks)
    git("commit", "-qm", "one", cwd=tasks)
    first = git("rev-parse", "HEAD", cwd=tasks)
    greeting_task(tasks / "tasks", "hello", "bonjour")
    git("commit", "-qam", "two", cwd=tasks)
    second = git("rev-parse", "HEAD", cwd=tasks)

    extra = tmp_path / "repos" / "extra"
    extra.mkdir()
    git("init", "-q", "-b", "main", cwd=extra)
    greeting_task(extra / "sets", "solo", "solo")
    git("add", ".", cwd=extra)
    git("commit", "-qm", "solo", cwd=extra)
    extra_commit = git("rev-parse", "HEAD", cwd=extra)

    found = Repos(tasks, extra, first, second, extra_commit, tmp_path / "registry.json")
    rows = [
        {"name": "demo", "version": "1.0", "description": "the first",
         "tasks": [{"name": "hello", "git_url": found.url(tasks), "git_commit_id": first, "path": "tasks/hello"}]},
        {"name": "demo", "version": "2.0", "description": "the second",
         "tasks": [{"name": "hello", "git_url": found.url(tasks), "git_commit_id": second, "path": "tasks/hello"},
                   {"name": "other", "git_url": found.url(tasks), "git_commit_id": second, "path": "tasks/other"},
                   {"name": "solo", "git_url": found.url(extra), "git_commit_id": extra_commit,
                    "path": "sets/solo"}],
         "metrics": [{"type": "mean"}]},
        {"name": "demo", "version": "1.10", "description": "not the latest: a version older than 2.0",
         "tasks": []},
    ]
    rows[2]["version"] = "0.9"
    found.registry.write_text(json.dumps(rows))
    return found


def bench(repos: Repos, dataset: str, **options: str) -> HarborBenchmark:
    return HarborBenchmark(dataset=dataset, registry=str(repos.registry), **options)


def instruction(b: HarborBenchmark, task_id: str) -> str:
    return b._tasks[task_id].task.instruction


# -- by name, by version, cached by content ----------------------------------------------------------------


def test_a_dataset_by_name_is_its_latest_version_fetched_at_the_pinned_commits(repos: Repos, cache: Path) -> None:
    latest = bench(repos, "demo")
    assert latest.dataset is not None and latest.dataset.label == "demo@2.0"
    assert sorted(latest._tasks) == ["hello", "other", "solo"]
    assert "bonjour" in instruction(latest, "hello")
    # everything lives in the user's cache (XDG_CACHE_HOME), named by content
    for resolved in latest._tasks.values():
        assert resolved.task.directory.is_relative_to(cache / "trees")
    # the provenance of each task is kept with it
    spec = next(t for t in latest.load_tasks(None) if t.task_id == "solo")  # type: ignore[arg-type]
    source = spec.metadata["harbor"]["dataset"]
    assert source["name"] == "demo@2.0" and source["git_commit_id"] == repos.extra_commit
    assert source["path"] == "sets/solo" and source["metrics"]["honoured"] == ["mean"]


def test_a_version_is_the_task_at_that_versions_commit(repos: Repos, cache: Path) -> None:
    old = bench(repos, "demo@1.0")
    assert sorted(old._tasks) == ["hello"]
    assert "`hello`" in instruction(old, "hello") and "bonjour" not in instruction(old, "hello")
    new = bench(repos, "demo@2.0")
    assert old._tasks["hello"].task.directory != new._tasks["hello"].task.directory


def test_an_unchanged_task_at_another_commit_is_the_same_cached_copy(repos: Repos, cache: Path) -> None:
    git("commit", "-q", "--allow-empty", "-m", "three", cwd=repos.tasks)
    third = git("rev-parse", "HEAD", cwd=repos.tasks)
    first = HarborBenchmark(dataset=f"git+{repos.url(repos.tasks)}@{repos.second}#tasks/other")
    again = HarborBenchmark(dataset=f"git+{repos.url(repos.tasks)}@{third}#tasks/other")
    assert first._tasks["other"].task.directory == again._tasks["other"].task.directory


async def test_a_cached_dataset_runs_with_its_repositories_gone(repos: Repos, cache: Path, tmp_path: Path) -> None:
    bench(repos, "demo@2.0")
    shutil.rmtree(repos.tasks)
    shutil.rmtree(repos.extra)  # the network is "off": nothing to fetch from
    run = await run_benchmark("harbor", "oracle", benchmark_args={"dataset": "demo@2.0",
                                                                  "registry": str(repos.registry)},
                              run_dir=tmp_path / "run")
    assert {t: run.result(t).metrics.get("reward") for t in ("hello", "other", "solo")} == \
        {"hello": 1.0, "other": 1.0, "solo": 1.0}
    # a version never fetched cannot be had now, and the error says which repository
    with pytest.raises(UsageError, match=r"demo@1\.0.*cannot fetch .*tb-tasks"):
        bench(repos, "demo@1.0")


def test_a_commit_that_does_not_exist_is_named_in_one_error(repos: Repos, cache: Path) -> None:
    rows = json.loads(repos.registry.read_text())
    missing = "0123456789abcdef0123456789abcdef01234567"
    rows[1]["tasks"][1]["git_commit_id"] = missing
    repos.registry.write_text(json.dumps(rows))
    with pytest.raises(UsageError) as caught:
        bench(repos, "demo@2.0")
    message = str(caught.value)
    assert f"commit {missing} does not exist in {repos.url(repos.tasks)}" in message
    assert "task other" in message and "\n" not in message


def test_a_path_missing_at_the_commit_is_named(repos: Repos, cache: Path) -> None:
    rows = json.loads(repos.registry.read_text())
    rows[0]["tasks"][0]["path"] = "tasks/nowhere"
    repos.registry.write_text(json.dumps(rows))
    with pytest.raises(UsageError, match=f"no directory 'tasks/nowhere' at commit {repos.first}"):
        bench(repos, "demo@1.0")


def test_unknown_datasets_and_versions_say_what_there_is(repos: Repos, cache: Path) -> None:
    with pytest.raises(UsageError, match=r"no version '3\.0' of dataset 'demo'.*its versions: 1\.0, 2\.0, 0\.9"):
        bench(repos, "demo@3.0")
    with pytest.raises(UsageError, match=r"no dataset 'nope'.*its datasets: demo"):
        bench(repos, "nope")
    with pytest.raises(UsageError, match="not both"):
        HarborBenchmark(dataset="demo", path=str(repos.tasks))
    with pytest.raises(UsageError, match="add -b dataset="):
        HarborBenchmark(registry=str(repos.registry))


def test_a_registry_task_without_git_url_is_a_local_directory(repos: Repos, cache: Path, tmp_path: Path) -> None:
    greeting_task(tmp_path / "local", "near", "near")
    repos.registry.write_text(json.dumps([{"name": "local", "version": "1", "description": "",
                                           "tasks": [{"name": "near", "path": str(tmp_path / "local" / "near")}]}]))
    b = bench(repos, "local")
    assert b._tasks["near"].task.directory == tmp_path / "local" / "near"


# -- git+ datasets --------------------------------------------------------------------------------------


def test_a_git_dataset_is_every_task_under_its_path_at_its_revision(repos: Repos, cache: Path) -> None:
    url = repos.url(repos.tasks)
    head = HarborBenchmark(dataset=f"git+{url}#tasks")
    assert sorted(head._tasks) == ["hello", "other"] and "bonjour" in instruction(head, "hello")
    pinned = HarborBenchmark(dataset=f"git+{url}@{repos.first}#tasks")
    assert "bonjour" not in instruction(pinned, "hello")
    whole = HarborBenchmark(dataset=f"git+{url}@main")
    assert sorted(whole._tasks) == ["tasks/hello", "tasks/other"]
    one = HarborBenchmark(dataset=f"git+{url}@main#tasks/hello")
    assert sorted(one._tasks) == ["hello"]
    # a branch seen before is used offline at the commit it named then
    shutil.rmtree(repos.tasks)
    offline = HarborBenchmark(dataset=f"git+{url}#tasks")
    assert sorted(offline._tasks) == ["hello", "other"]
    with pytest.raises(UsageError, match=r"cannot reach .* to resolve 'never-seen'"):
        HarborBenchmark(dataset=f"git+{url}@never-seen#tasks")


def test_a_git_dataset_with_an_unknown_branch_says_so(repos: Repos, cache: Path) -> None:
    with pytest.raises(UsageError, match="has no branch or tag 'nope'"):
        HarborBenchmark(dataset=f"git+{repos.url(repos.tasks)}@nope")


def test_git_references_parse_as_url_revision_and_path() -> None:
    assert parse_git_ref("git+https://h/o/r.git@v2#tasks/") == ("https://h/o/r.git", "v2", "tasks")
    assert parse_git_ref("git+ssh://git@h/o/r") == ("ssh://git@h/o/r", None, "")
    assert parse_git_ref("git+file:///x/y@abc#a/b") == ("file:///x/y", "abc", "a/b")
    with pytest.raises(DatasetError, match="inside the repository"):
        parse_git_ref("git+https://h/r#../up")


# -- the registry -------------------------------------------------------------------------------------------


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def served(repos: Repos) -> Iterator[tuple[str, http.server.ThreadingHTTPServer]]:
    directory = str(repos.registry.parent)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             lambda *a: _Quiet(*a, directory=directory))  # type: ignore[misc]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/{repos.registry.name}", server
    finally:
        server.shutdown()
        server.server_close()


def test_a_registry_url_is_kept_and_read_when_it_cannot_be_reached(
        repos: Repos, cache: Path, served: tuple[str, http.server.ThreadingHTTPServer]) -> None:
    url, server = served
    assert sorted(HarborBenchmark(dataset="demo", registry=url)._tasks) == ["hello", "other", "solo"]
    server.shutdown()
    server.server_close()
    assert sorted(HarborBenchmark(dataset="demo@1.0", registry=url)._tasks) == ["hello"]
    with pytest.raises(UsageError, match=r"cannot fetch the registry http://127\.0\.0\.1:1/none\.json"):
        HarborBenchmark(dataset="demo", registry="http://127.0.0.1:1/none.json")


def test_the_default_registry_is_harbors() -> None:
    assert registry_module.DEFAULT_REGISTRY_URL == \
        "https://raw.githubusercontent.com/laude-institute/harbor/main/registry.json"


def test_registry_paths_are_normalized() -> None:
    (spec,) = parse_registry(json.dumps([{"name": "d", "version": "1", "tasks": [
        {"name": "t", "git_url": "https://h/r", "path": "./tasks/t/"}]}]), "r.json")
    assert spec.tasks[0].path == "tasks/t"


def test_registry_rows_are_checked_with_the_key_named() -> None:
    with pytest.raises(RegistryError, match=r"demo@1 task #1: 'path' must be a string"):
        parse_registry(json.dumps([{"name": "demo", "version": "1", "tasks": [{"name": "t"}]}]), "r.json")
    with pytest.raises(RegistryError, match="metric type 'median'"):
        parse_registry(json.dumps([{"name": "d", "version": "1", "tasks": [], "metrics": [{"type": "median"}]}]),
                       "r.json")
    with pytest.raises(RegistryError, match="relative to the repository"):
        parse_registry(json.dumps([{"name": "d", "version": "1", "tasks": [
            {"name": "t", "git_url": "https://h/r", "path": "../x"}]}]), "r.json")


@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 30)), min_size=1, max_size=6, unique=True))
def test_the_latest_version_is_harbors_choice(pairs: list[tuple[int, int]]) -> None:
    versions = [f"{a}.{b}" for a, b in pairs]
    assert latest_version(versions) == f"{max(pairs)[0]}.{max(pairs)[1]}"
    assert latest_version([*versions, "head"]) == "head"
    assert latest_version(["beta", "alpha"]) == "beta"
    assert latest_version(["2.0rc1", "2.0", "1.9"]) == "2.0"


# -- tasks list --------------------------------------------------------------------------------------------


def test_tasks_list_shows_a_dataset_without_running_it(repos: Repos, cache: Path, tmp_path: Path) -> None:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache.parent.parent)}
    listed = subprocess.run([sys.executable, "-m", "agentcompass.cli.main", "tasks", "list", "harbor",
                             "-b", "dataset=demo@2.0", "-b", f"registry={repos.registry}", "--json"],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == [{"task_id": "hello", "category": "easy"},
                                         {"task_id": "other", "category": "easy"},
                                         {"task_id": "solo", "category": "easy"}]
    bad = subprocess.run([sys.executable, "-m", "agentcompass.cli.main", "tasks", "list", "harbor",
                          "-b", "dataset=demo@9", "-b", f"registry={repos.registry}"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    assert "no version '9' of dataset 'demo'" in bad.stderr
