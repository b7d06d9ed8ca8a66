"""Small SWE-bench instances in the official 5.x shape, built here (no registry is reachable): a git repository
with a bug, the test patch that exposes it, the gold patch that fixes it, FAIL_TO_PASS / PASS_TO_PASS, an image
with the repository in ``/testbed`` at the base commit, and an eval script in the official form (the markers,
``set -uxo pipefail``, the test files reset to the base commit before and after).

Two languages, two log parsers: Python graded by ``parse_log_pytest`` and Go by ``parse_log_gotest``. Images
are built once per test session and cached by tag (the tag is a hash of the build context, so an unchanged
instance is never built twice, across sessions too).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPOSITORY = "agentcompass-test/sweb.eval.x86_64"
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_AUTHOR_DATE": "2024-01-01T00:00:00Z",
           "GIT_COMMITTER_DATE": "2024-01-01T00:00:00Z", "HOME": "/tmp"}

PY_FILES = {
    "calc/__init__.py": "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n",
    "tests/__init__.py": "",
    "tests/test_calc.py": "from calc import mul\n\n\ndef test_mul():\n    assert mul(3, 4) == 12\n",
    "README.md": "calc\n",
}
PY_TEST_FILE = "tests/test_calc.py"
PY_TEST_AFTER = ("from calc import add, mul\n\n\ndef test_mul():\n    assert mul(3, 4) == 12\n\n\n"
                 "def test_add():\n    assert add(2, 3) == 5\n")
PY_GOLD_AFTER = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"
PY_WRONG_AFTER = "def add(a, b):\n    return a + b + 1\n\n\ndef mul(a, b):\n    return a * b\n"
PY_DOCKERFILE = """FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends git python3-pytest && rm -rf /var/lib/apt/lists/*
COPY repo /testbed
WORKDIR /testbed
"""

GO_FILES = {
    "go.mod": "module example.com/gocalc\n\ngo 1.19\n",
    "calc.go": "package gocalc\n\nfunc Add(a, b int) int { return a - b }\n\nfunc Mul(a, b int) int { return a * b }\n",
    "calc_test.go": 'package gocalc\n\nimport "testing"\n\nfunc TestMul(t *testing.T) {\n\tif Mul(3, 4) != 12 {\n'
                    '\t\tt.Fatal("mul")\n\t}\n}\n',
}
GO_TEST_FILE = "calc_test.go"
GO_TEST_AFTER = GO_FILES["calc_test.go"] + ('\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n'
                                            '\t\tt.Fatal("add")\n\t}\n}\n')
GO_GOLD_AFTER = "package gocalc\n\nfunc Add(a, b int) int { return a + b }\n\nfunc Mul(a, b int) int { return a * b }\n"
GO_DOCKERFILE = """FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends git golang-go && rm -rf /var/lib/apt/lists/*
ENV GOFLAGS=-mod=mod GOCACHE=/root/.cache/go-build GOPATH=/root/go
COPY repo /testbed
WORKDIR /testbed
RUN go vet ./... >/dev/null 2>&1 || true
"""


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, env={**os.environ, **GIT_ENV}, check=True,
                          capture_output=True, text=True).stdout


def _diff(repo: Path, files: dict[str, str]) -> str:
    """The patch turning the committed ``files`` into the given contents (the tree is restored after)."""
    for name, text in files.items():
        (repo / name).write_text(text)
    patch = _git(repo, "diff")
    _git(repo, "checkout", "--", ".")
    return patch


@dataclass
class Source:
    """One repository in the making: its files, the patches against its base commit, its image."""

    key: str
    files: dict[str, str]
    dockerfile: str
    test_file: str
    test_after: str
    gold: dict[str, str]
    base_commit: str = ""
    test_patch: str = ""
    gold_patch: str = ""
    wrong_patch: str = ""
    image: str = ""
    context: Path = field(default_factory=Path)


def make_source(root: Path, source: Source, wrong: dict[str, str] | None = None) -> Source:
    """The repository (deterministic commit), its patches, and its build context under ``root``."""
    context = root / source.key
    repo = context / "repo"
    repo.mkdir(parents=True)
    for name, text in source.files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    source.base_commit = _git(repo, "rev-parse", "HEAD").strip()
    source.test_patch = _diff(repo, {source.test_file: source.test_after})
    source.gold_patch = _diff(repo, source.gold)
    if wrong:
        source.wrong_patch = _diff(repo, wrong)
    (context / "Dockerfile").write_text(source.dockerfile)
    digest = hashlib.sha256()
    for path in sorted(p for p in context.rglob("*") if p.is_file() and ".git" not in p.relative_to(context).parts):
        digest.update(str(path.relative_to(context)).encode() + b"\0" + path.read_bytes())
    # .git differs between two makings of the same repository (the index holds file times), not in content: the
    # commit's hash stands for it
    digest.update(source.base_commit.encode())
    source.image = f"{REPOSITORY}.{source.key}:{digest.hexdigest()[:16]}"
    source.context = context
    return source


def build_image(source: Source) -> str:
    """Build ``source.image`` unless the engine has it (cached by tag)."""
    have = subprocess.run(["docker", "image", "inspect", source.image], capture_output=True)
    if have.returncode != 0:
        subprocess.run(["docker", "build", "-q", "-t", source.image, str(source.context)], check=True,
                       capture_output=True, timeout=1200)
    return source.image


def eval_script(base_commit: str, test_files: list[str], test_patch: str, test_command: str) -> str:
    """An eval script in the official form (swebench's ``make_eval_script_list``, without conda)."""
    files = " ".join(test_files)
    lines = [
        "#!/bin/bash",
        "set -uxo pipefail",
        "cd /testbed",
        "git config --global --add safe.directory /testbed",
        "cd /testbed",
        "git status",
        "git show",
        f"git -c core.fileMode=false diff {base_commit}",
        f"git checkout {base_commit} {files}",
        f"git apply -v - <<'EOF_114329324912'\n{test_patch}\nEOF_114329324912",
        ": '>>>>> Start Test Output'",
        test_command,
        ": '>>>>> End Test Output'",
        f"git checkout {base_commit} {files}",
    ]
    return "\n".join(lines) + "\n"


def instance(source: Source, instance_id: str, *, repo: str, test_command: str, log_parser: str,
             fail_to_pass: list[str], pass_to_pass: list[str], script: str | None = None,
             **extra: Any) -> dict[str, Any]:
    """A dataset row as the 5.x datasets publish it (FAIL_TO_PASS / PASS_TO_PASS as JSON strings)."""
    return {
        "repo": repo,
        "instance_id": instance_id,
        "base_commit": source.base_commit,
        "patch": source.gold_patch,
        "test_patch": source.test_patch,
        "problem_statement": f"{instance_id}: add() returns the wrong sum. Fix it.",
        "hints_text": "Look at the operator in add().",
        "created_at": "2024-01-01T00:00:00Z",
        "version": "1.0",
        "FAIL_TO_PASS": json.dumps(fail_to_pass),
        "PASS_TO_PASS": json.dumps(pass_to_pass),
        "environment_setup_commit": source.base_commit,
        "image": source.image,
        "eval_script": script if script is not None else eval_script(
            source.base_commit, [source.test_file], source.test_patch, test_command),
        "log_parser": log_parser,
        "eval_type": "pass_and_fail",
        **extra,
    }


@dataclass
class Suite:
    """The local instances: their rows by id, the dataset file, and the sources they were made from."""

    rows: dict[str, dict[str, Any]]
    dataset: Path
    python: Source
    go: Source | None

    def write(self, path: Path, ids: list[str]) -> Path:
        path.write_text("".join(json.dumps(self.rows[i]) + "\n" for i in ids))
        return path


PY_TEST = "python3 -m pytest -rA tests/test_calc.py"
GO_TEST = "go test -v ./..."
#: What each instance's eval script does to go wrong.
BROKEN_SCRIPT = "#!/bin/bash\nset -uxo pipefail\ncd /testbed\nsource /opt/no-such-env/bin/activate || exit 3\n"
INFRA_SCRIPT = ("#!/bin/bash\nset -uxo pipefail\ncd /testbed\n: '>>>>> Start Test Output'\n"
                "echo 'docker: Error response from daemon: could not start the test container'\n"
                ": '>>>>> End Test Output'\n")


def suite(root: Path, *, go: bool = True, build: bool = True) -> Suite:
    """The local instances under ``root`` (images built when ``build``)."""
    root.mkdir(parents=True, exist_ok=True)
    python = make_source(root, Source("acme_calc", dict(PY_FILES), PY_DOCKERFILE, PY_TEST_FILE, PY_TEST_AFTER,
                                      {"calc/__init__.py": PY_GOLD_AFTER}),
                         wrong={"calc/__init__.py": PY_WRONG_AFTER})
    py = {"repo": "acme/calc", "test_command": PY_TEST, "log_parser": "parse_log_pytest",
          "fail_to_pass": ["tests/test_calc.py::test_add"], "pass_to_pass": ["tests/test_calc.py::test_mul"]}
    rows = {
        "acme__calc-1": instance(python, "acme__calc-1", **py),
        "acme__calc-broken": instance(python, "acme__calc-broken", script=BROKEN_SCRIPT, **py),
        "acme__calc-infra": instance(python, "acme__calc-infra", script=INFRA_SCRIPT, **py),
    }
    go_source = None
    if go:
        go_source = make_source(root, Source("acme_gocalc", dict(GO_FILES), GO_DOCKERFILE, GO_TEST_FILE,
                                             GO_TEST_AFTER, {"calc.go": GO_GOLD_AFTER}))
        rows["acme__gocalc-1"] = instance(go_source, "acme__gocalc-1", repo="acme/gocalc", test_command=GO_TEST,
                                          log_parser="parse_log_gotest", fail_to_pass=["TestAdd"],
                                          pass_to_pass=["TestMul"])
    if build:
        build_image(python)
        if go_source is not None:
            build_image(go_source)
    dataset = root / "dataset.jsonl"
    result = Suite(rows, dataset, python, go_source)
    result.write(dataset, list(rows))
    return result


#: The instances every plain run resolves with the oracle.
GOOD = ("acme__calc-1", "acme__gocalc-1")


def copy_repo(source: Source, dest: Path) -> Path:
    shutil.copytree(source.context / "repo", dest)
    return dest
