"""Terminal-Bench-style Harbor tasks under the ``oracle`` agent: agentcompass against Harbor 0.25, warm.

Workload: the same ``--tasks`` (11) Harbor task directories, run with the oracle agent at concurrency
``--concurrency`` (4) on Docker, images already built (a warm-up run of each side builds them first), through

- ``agentcompass run harbor oracle mock -b path=DIR --env docker -c 4`` (this checkout; with ``--before
  /work/main`` also the same command from another checkout, as ``before``), and
- ``harbor run -p DIR -a oracle -n 4`` (Harbor 0.25 from ``--harbor``, its ``docker`` environment: docker
  compose),

interleaved (the order of the sides turns each repetition), ``--repeat`` times. Harbor runs as its users run it,
with its defaults: ``--delete`` among them, so each trial ends with ``docker compose down --rmi local`` and the
next run builds its image again from the layer cache (``--harbor-arg=--no-delete`` keeps them).

Prints per repetition and side the wall time of the whole command, the CPU time of the command's own processes
(children of this script; the Docker daemon's and containers' CPU is not in it), the ratio Harbor /
agentcompass, the machine's load average, and whether both sides scored the same rewards (every task must
score 1 under the oracle).

The tasks are written by this script into ``--cache`` (default ``~/.cache/agentcompass-bench/terminal-bench``);
they behave like Terminal-Bench 2 tasks (no third-party content is copied): each task's image is built ``FROM``
a shared base (``python:3.11-slim`` plus git, jq, sqlite3, bc and Debian's pytest, from Debian's mirror at build
time; the host's CA bundle is copied in for builds that reach further), adds its own files in ``RUN``
steps, and ships ``solution/solve.sh`` (the oracle) and ``tests/test.sh`` that runs ``pytest`` on
``tests/test_outputs.py`` and writes ``/logs/verifier/reward.txt`` from its exit status, as Terminal-Bench 2's
verifiers do (theirs install pytest with ``uvx`` at verify time, which needs a network the bench has not).
The tasks: {TASK_NAMES}.

With ``--timeline``, each repetition's per-phase timeline is printed too: for agentcompass, the median seconds
per task in each phase (from ``logs.jsonl``: PREPARING = taking a started container and preparing it, RUNNING =
solve.sh, COLLECTING, EVALUATING = test.sh) and the tasks' own work (solve.sh + test.sh summed over the tasks,
over the concurrency: the wall time they need however little the runtime adds); for Harbor, the median seconds
per trial in its phases (its result.json: environment set-up, agent, between agent and verifier, verifier,
after the verifier, the whole trial).

Usage: uv run python bench/terminal_bench.py [--tasks 11] [--concurrency 4] [--repeat 3]
       [--before /work/main] [--harbor ~/.cache/agentcompass-tests/harbor-0.25.0-venv/bin/harbor] [--timeline]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import shutil
import statistics
import subprocess
import tempfile
import textwrap
import time
from datetime import datetime
from pathlib import Path

BASE_IMAGE = "agentcompass-bench-tb2-base:1"
BASE_DOCKERFILE = """\
FROM python:3.11-slim
COPY host-ca.crt /usr/local/share/ca-certificates/host-ca.crt
RUN apt-get update && apt-get install -y --no-install-recommends git jq sqlite3 bc procps python3-pytest \\
 && rm -rf /var/lib/apt/lists/*
"""
HARBOR = Path.home() / ".cache" / "agentcompass-tests" / "harbor-0.25.0-venv" / "bin" / "harbor"
CACHE = Path.home() / ".cache" / "agentcompass-bench" / "terminal-bench"

TASK_TOML = """\
version = "1.0"

[metadata]
author_name = "agentcompass bench"
difficulty = "easy"
category = "{category}"

[verifier]
timeout_sec = 900.0

[agent]
timeout_sec = 900.0

[environment]
build_timeout_sec = 600.0
cpus = 1
memory_mb = 2048
storage_mb = 10240
"""

TEST_SH = """\
#!/bin/bash
# As Terminal-Bench 2's verifiers: pytest on the task's checks, the reward from its exit status.
cd /app
python3 -m pytest /tests/test_outputs.py -rA -p no:cacheprovider --junitxml=/logs/verifier/junit.xml
if [ $? -eq 0 ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""

#: name -> (category, Dockerfile RUN steps after the base, instruction, solve.sh body, test_outputs.py body)
TASKS: dict[str, tuple[str, str, str, str, str]] = {
    "csv-column-totals": (
        "data-processing",
        "RUN python3 -c \"import random; r=random.Random(7); open('/app/sales.csv','w').write('region,amount\\n'"
        "+''.join(f'{r.choice(\\\"nesw\\\")},{r.randint(1,999)}\\n' for _ in range(20000)))\"",
        "Sum the `amount` column of /app/sales.csv per region into /app/totals.json ({region: total}).",
        "python3 - <<'EOF'\nimport csv, json, collections\nt = collections.Counter()\n"
        "for row in csv.DictReader(open('/app/sales.csv')):\n    t[row['region']] += int(row['amount'])\n"
        "json.dump(dict(t), open('/app/totals.json', 'w'))\nEOF",
        "import csv, json, collections\n\ndef test_totals():\n    t = collections.Counter()\n"
        "    for row in csv.DictReader(open('/app/sales.csv')):\n        t[row['region']] += int(row['amount'])\n"
        "    assert json.load(open('/app/totals.json')) == dict(t)\n"),
    "git-recover-lost-commit": (
        "software-engineering",
        "RUN git config --global user.email a@b.c && git config --global user.name bench && mkdir /app/repo "
        "&& cd /app/repo && git init -q && echo v1 > notes.txt && git add . && git commit -qm one "
        "&& echo 'the secret is 4242' > notes.txt && git commit -qam two && git reset -q --hard HEAD~1",
        "A commit in /app/repo was lost by a hard reset. Restore notes.txt to its content in that commit.",
        "cd /app/repo && git reset -q --hard 'HEAD@{1}'",
        "def test_restored():\n    assert open('/app/repo/notes.txt').read().strip() == 'the secret is 4242'\n"),
    "sqlite-top-customers": (
        "data-querying",
        "RUN python3 -c \"import sqlite3, random; r=random.Random(3); c=sqlite3.connect('/app/shop.db'); "
        "c.execute('create table orders(customer text, total integer)'); "
        "c.executemany('insert into orders values(?,?)', [(f'c{r.randint(1,300)}', r.randint(1,500)) "
        "for _ in range(30000)]); c.commit()\"",
        "Write the 5 customers with the largest summed order total in /app/shop.db, one per line, to /app/top.txt.",
        "sqlite3 /app/shop.db 'select customer from orders group by customer order by sum(total) desc, customer "
        "limit 5' > /app/top.txt",
        "import sqlite3\n\ndef test_top():\n    c = sqlite3.connect('/app/shop.db')\n"
        "    rows = [r[0] for r in c.execute('select customer from orders group by customer '\n"
        "            'order by sum(total) desc, customer limit 5')]\n"
        "    assert open('/app/top.txt').read().split() == rows\n"),
    "word-frequency": (
        "text-processing",
        "RUN python3 -c \"import random; r=random.Random(5); w=['alpha','beta','gamma','delta','eps']; "
        "open('/app/book.txt','w').write(' '.join(r.choice(w) for _ in range(100000)))\"",
        "Write the most frequent word of /app/book.txt to /app/word.txt.",
        "tr ' ' '\\n' < /app/book.txt | sort | uniq -c | sort -rn | head -1 | awk '{print $2}' > /app/word.txt",
        "import collections\n\ndef test_word():\n    c = collections.Counter(open('/app/book.txt').read().split())\n"
        "    assert open('/app/word.txt').read().strip() == c.most_common(1)[0][0]\n"),
    "log-error-summary": (
        "system-administration",
        "RUN mkdir -p /var/log/app && python3 -c \"import random; r=random.Random(9); "
        "open('/var/log/app/server.log','w').write(''.join(f'2024-01-01 {r.choice([\\\"INFO\\\",\\\"WARN\\\","
        "\\\"ERROR\\\"])} code={r.randint(100,110)}\\n' for _ in range(50000)))\"",
        "Count the ERROR lines of /var/log/app/server.log per code into /app/errors.txt as `code count` lines, "
        "sorted by code.",
        "grep ERROR /var/log/app/server.log | sed 's/.*code=//' | sort -n | uniq -c | awk '{print $2, $1}' "
        "> /app/errors.txt",
        "import collections\n\ndef test_errors():\n    c = collections.Counter(l.split('code=')[1].strip() "
        "for l in open('/var/log/app/server.log') if ' ERROR ' in l)\n"
        "    want = [f'{k} {c[k]}' for k in sorted(c, key=int)]\n"
        "    assert open('/app/errors.txt').read().splitlines() == want\n"),
    "jq-flatten-config": (
        "data-processing",
        "RUN python3 -c \"import json; json.dump({'services': [{'name': f's{i}', 'port': 8000+i, "
        "'enabled': i % 3 != 0} for i in range(200)]}, open('/app/config.json','w'))\"",
        "Write the names of the enabled services of /app/config.json, one per line, to /app/enabled.txt.",
        "jq -r '.services[] | select(.enabled) | .name' /app/config.json > /app/enabled.txt",
        "import json\n\ndef test_enabled():\n    s = json.load(open('/app/config.json'))['services']\n"
        "    assert open('/app/enabled.txt').read().split() == [x['name'] for x in s if x['enabled']]\n"),
    "fix-python-bug": (
        "debugging",
        "RUN mkdir -p /app/pkg && printf 'def mean(xs):\\n    return sum(xs) / (len(xs) - 1)\\n' > /app/pkg/stats.py "
        "&& touch /app/pkg/__init__.py",
        "pkg.stats.mean in /app is wrong. Fix it.",
        "sed -i 's|(len(xs) - 1)|len(xs)|' /app/pkg/stats.py",
        "import sys\nsys.path.insert(0, '/app')\nfrom pkg.stats import mean\n\n"
        "def test_mean():\n    assert mean([1, 2, 3, 4]) == 2.5\n\ndef test_single():\n    assert mean([7]) == 7\n"),
    "sort-large-file": (
        "data-processing",
        "RUN python3 -c \"import random; r=random.Random(11); "
        "open('/app/numbers.txt','w').write(''.join(f'{r.randint(0,10**9)}\\n' for _ in range(300000)))\"",
        "Sort /app/numbers.txt numerically into /app/sorted.txt, without duplicates.",
        "sort -n -u /app/numbers.txt > /app/sorted.txt",
        "def test_sorted():\n    want = sorted({int(x) for x in open('/app/numbers.txt')})\n"
        "    assert [int(x) for x in open('/app/sorted.txt')] == want\n"),
    "extract-archive": (
        "file-operations",
        "RUN mkdir -p /tmp/src/a/b && for i in $(seq 1 200); do echo file $i > /tmp/src/a/b/f$i.txt; done "
        "&& tar -czf /app/backup.tar.gz -C /tmp src && rm -rf /tmp/src",
        "Extract /app/backup.tar.gz into /app/restored and write the number of files in it to /app/count.txt.",
        "mkdir -p /app/restored && tar -xzf /app/backup.tar.gz -C /app/restored "
        "&& find /app/restored -type f | wc -l > /app/count.txt",
        "import os\n\ndef test_count():\n    n = sum(len(f) for _, _, f in os.walk('/app/restored'))\n"
        "    assert n == 200 and int(open('/app/count.txt').read()) == 200\n"),
    "prime-sieve": (
        "algorithms",
        "RUN echo 'Compute primes' > /app/README",
        "Write the number of primes below 2,000,000 to /app/primes.txt.",
        "python3 -c \"n=2000000; s=bytearray([1])*n; s[0]=s[1]=0\n"
        "for i in range(2,int(n**.5)+1):\n    if s[i]: s[i*i::i]=bytearray(len(range(i*i,n,i)))\n"
        "open('/app/primes.txt','w').write(str(sum(s)))\"",
        "def test_primes():\n    assert int(open('/app/primes.txt').read()) == 148933\n"),
    "checksum-manifest": (
        "security",
        "RUN mkdir -p /app/files && for i in $(seq 1 50); do head -c 20000 /dev/urandom > /app/files/blob$i; done",
        "Write a sha256sum manifest of /app/files (paths relative to /app/files, sorted) to /app/SHA256SUMS.",
        "cd /app/files && sha256sum $(ls | sort) > /app/SHA256SUMS",
        "import hashlib, os\n\ndef test_manifest():\n"
        "    want = [f\"{hashlib.sha256(open(os.path.join('/app/files', n), 'rb').read()).hexdigest()}  {n}\"\n"
        "            for n in sorted(os.listdir('/app/files'))]\n"
        "    assert open('/app/SHA256SUMS').read().splitlines() == want\n"),
}
TASK_NAMES = ", ".join(TASKS)
__doc__ = (__doc__ or "").replace("{TASK_NAMES}", TASK_NAMES)


def write_tasks(root: Path, names: list[str]) -> None:
    """The task directories (rewritten each time: their content is this script's)."""
    if root.exists():
        shutil.rmtree(root)
    for name in names:
        category, run, instruction, solve, test = TASKS[name]
        task = root / name
        for sub in ("environment", "solution", "tests"):
            (task / sub).mkdir(parents=True)
        (task / "task.toml").write_text(TASK_TOML.format(category=category))
        (task / "instruction.md").write_text(instruction + "\n")
        (task / "environment" / "Dockerfile").write_text(f"FROM {BASE_IMAGE}\nWORKDIR /app\n{run}\n")
        (task / "solution" / "solve.sh").write_text("#!/bin/bash\nset -e\n" + solve + "\n")
        (task / "tests" / "test.sh").write_text(TEST_SH)
        (task / "tests" / "test_outputs.py").write_text(textwrap.dedent(test))


def build_base() -> None:
    present = subprocess.run(["docker", "image", "inspect", BASE_IMAGE], capture_output=True).returncode == 0
    if present:
        return
    with tempfile.TemporaryDirectory(prefix="tb-base-") as context:
        shutil.copy("/etc/ssl/certs/ca-certificates.crt", Path(context) / "host-ca.crt")
        (Path(context) / "Dockerfile").write_text(BASE_DOCKERFILE)
        print(f"building {BASE_IMAGE} ...", flush=True)
        subprocess.run(["docker", "build", "-q", "-t", BASE_IMAGE, context], check=True)


def timed(cmd: list[str], cwd: Path | None = None) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """Wall seconds, CPU seconds of the command's processes (user + system of waited-for children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done


def run_agentcompass(checkout: Path, tasks: Path, out: Path, concurrency: int) -> tuple[float, float, dict[str, float]]:
    cmd = ["uv", "run", "--frozen", "agentcompass", "run", "harbor", "oracle", "mock", "-b", f"path={tasks}",
           "--env", "docker", "-c", str(concurrency), "-o", str(out), "--json"]
    wall, cpu, done = timed(cmd, cwd=checkout)
    if not (out / "results.jsonl").exists():
        raise SystemExit(f"agentcompass ({checkout}) failed: {done.stderr[-3000:]}")
    rewards = {}
    for line in (out / "results.jsonl").read_text().splitlines():
        record = json.loads(line)
        rewards[record["task_id"]] = (record.get("metrics") or {}).get("reward")
    return wall, cpu, rewards


def run_harbor(harbor: Path, tasks: Path, jobs: Path, name: str, concurrency: int,
               extra: list[str]) -> tuple[float, float, dict]:
    cmd = [str(harbor), "run", "-p", str(tasks), "-a", "oracle", "-n", str(concurrency), "-o", str(jobs),
           "--job-name", name, "-q", "-y", *extra]
    wall, cpu, done = timed(cmd)
    rewards = {}
    for result in sorted((jobs / name).glob("*/result.json")):
        record = json.loads(result.read_text())
        verifier = record.get("verifier_result") or {}
        reward = (verifier.get("rewards") or {}).get("reward")
        rewards[record.get("task_name") or result.parent.name.rsplit("__", 1)[0]] = reward
    if not rewards:
        raise SystemExit(f"harbor failed: {done.stdout[-2000:]} {done.stderr[-3000:]}")
    return wall, cpu, rewards


def timeline(run_dir: Path) -> dict[str, float]:
    """Median seconds per task in each phase, from the run's task.phase events."""
    per_task: dict[str, list[tuple[float, str]]] = {}
    for line in (run_dir / "logs.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event.get("event") != "task.phase":
            continue
        stamp = datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00")).timestamp()
        per_task.setdefault(str(event.get("task_id")), []).append((stamp, str(event.get("phase"))))
    spans: dict[str, list[float]] = {}
    for events in per_task.values():
        events.sort()
        for (t0, phase), (t1, _) in itertools.pairwise(events):
            spans.setdefault(phase, []).append(t1 - t0)
    return {phase: statistics.median(values) for phase, values in spans.items()}


def _stamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def harbor_timeline(job: Path) -> dict[str, float]:
    """Median seconds per trial in Harbor's phases (its result.json): environment set-up, the agent (solve.sh),
    between the agent and the verifier, the verifier (test.sh), after the verifier (teardown), the whole trial."""
    spans: dict[str, list[float]] = {}
    for result in job.glob("*/result.json"):
        r = json.loads(result.read_text())
        try:
            marks = [("environment", r["environment_setup"]["started_at"], r["environment_setup"]["finished_at"]),
                     ("agent", r["agent_execution"]["started_at"], r["agent_execution"]["finished_at"]),
                     ("to-verifier", r["agent_execution"]["finished_at"], r["verifier"]["started_at"]),
                     ("verifier", r["verifier"]["started_at"], r["verifier"]["finished_at"]),
                     ("after", r["verifier"]["finished_at"], r["finished_at"]),
                     ("trial", r["started_at"], r["finished_at"])]
        except (KeyError, TypeError):
            continue
        for name, start, end in marks:
            spans.setdefault(name, []).append(_stamp(end) - _stamp(start))
    return {name: statistics.median(values) for name, values in spans.items()}


def in_task_seconds(run_dir: Path, concurrency: int) -> float:
    """The tasks' own work in an agentcompass run: the sum over tasks of the time solve.sh (RUNNING) and test.sh
    (EVALUATING) took, over the concurrency — the wall time they need however little the runtime adds."""
    phases = {}
    for line in (run_dir / "logs.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event.get("event") == "task.phase":
            phases.setdefault(str(event.get("task_id")), []).append((_stamp(event["timestamp"]), event["phase"]))
    total = 0.0
    for events in phases.values():
        events.sort()
        for (t0, phase), (t1, _) in itertools.pairwise(events):
            if phase in ("RUNNING", "EVALUATING"):
                total += t1 - t0
    return total / concurrency


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=11)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--before", type=Path, default=None, help="another checkout to run as 'before'")
    parser.add_argument("--harbor", type=Path, default=HARBOR)
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument("--timeline", action="store_true")
    parser.add_argument("--no-harbor", action="store_true", help="agentcompass side(s) only")
    parser.add_argument("--harbor-arg", action="append", default=[],
                        help="an extra argument for harbor run (repeatable), e.g. --harbor-arg=--no-delete")
    args = parser.parse_args()
    names = list(TASKS)[: args.tasks]
    here = Path(__file__).resolve().parent.parent
    build_base()
    tasks = args.cache / "tasks"
    write_tasks(tasks, names)
    sides = ["agentcompass"] + (["before"] if args.before else []) + ([] if args.no_harbor else ["harbor"])
    print(f"{len(names)} tasks ({', '.join(names)}), oracle, concurrency {args.concurrency}, warm; "
          f"sides {', '.join(sides)}", flush=True)
    with tempfile.TemporaryDirectory(prefix="tb-bench-") as scratch_dir:
        scratch = Path(scratch_dir)

        def one(side: str, label: str) -> tuple[float, float, dict]:
            if side == "harbor":
                return run_harbor(args.harbor, tasks, scratch / "jobs", label, args.concurrency, args.harbor_arg)
            checkout = here if side == "agentcompass" else args.before
            return run_agentcompass(checkout, tasks, scratch / label, args.concurrency)

        for side in sides:  # warm-up: builds every image (not measured)
            wall, _, rewards = one(side, f"warmup-{side}")
            print(f"warm-up {side}: {wall:.1f} s, rewards {sorted(map(str, rewards.values()))}", flush=True)
        print(f"{'rep':>3} {'side':>12} {'wall s':>7} {'cpu s':>6} {'ratio':>6} {'load1':>5} {'same rewards':>12}")
        figures: dict[str, list[float]] = {side: [] for side in sides}
        for rep in range(1, args.repeat + 1):
            order = sides[rep % len(sides):] + sides[: rep % len(sides)]
            results: dict[str, tuple[float, float, dict]] = {}
            loads: dict[str, float] = {}
            for side in order:
                loads[side] = os.getloadavg()[0]
                results[side] = one(side, f"r{rep}-{side}")
            expected = {name: 1.0 for name in names}
            for side in sides:
                wall, cpu, rewards = results[side]
                figures[side].append(wall)
                same = rewards == expected and all(r[2] == rewards for r in results.values())
                ratio = results["harbor"][0] / wall if "harbor" in results and side != "harbor" else float("nan")
                print(f"{rep:>3} {side:>12} {wall:>7.1f} {cpu:>6.1f} {ratio:>6.2f} {loads[side]:>5.2f} "
                      f"{'yes' if same else 'NO: ' + json.dumps(rewards):>12}", flush=True)
            if args.timeline:
                for side in sides:
                    if side != "harbor":
                        phases = timeline(scratch / f"r{rep}-{side}")
                        own = in_task_seconds(scratch / f"r{rep}-{side}", args.concurrency)
                        print(f"    {side} median s/task: "
                              + ", ".join(f"{k} {v:.2f}" for k, v in phases.items())
                              + f"; tasks' own scripts / c = {own:.1f} s of the {results[side][0]:.1f} s",
                              flush=True)
                    else:
                        phases = harbor_timeline(scratch / "jobs" / f"r{rep}-harbor")
                        print("    harbor median s/trial: "
                              + ", ".join(f"{k} {v:.2f}" for k, v in phases.items()), flush=True)
        summary = {side: {"min": min(v), "median": statistics.median(v), "max": max(v)} for side, v in figures.items()}
        if "harbor" in figures:
            for side in sides:
                if side != "harbor":
                    summary[side]["ratio_median"] = statistics.median(figures["harbor"]) / summary[side]["median"]
        print(json.dumps(summary))


if __name__ == "__main__":
    main()
